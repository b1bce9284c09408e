// ParamServer: one server rank of a parameter-server run. For every model-parallel position of the
// workers' grid (pp, tp) and each of its chunks, it holds one contiguous shard of the chunk's flat
// parameter buffer (PsRoles::shard) with the AdamW moments of that shard (a "unit"), and serve()
// answers the workers' pushes (param_server_protocol.h) until every live worker has completed the
// last step:
//   sync   waits for every worker's push of step t, averages each position's pushes over its dp
//          workers (in worker order, so reruns are bitwise equal), clips by the global norm (the
//          servers sum their shards' squares, each element of the model counted once:
//          counts_towards_norm) and applies one AdamW step per unit, then answers every worker:
//          all-reduce data parallelism.
//   async  applies each push as it arrives (lr of the pushing worker's step) and answers at once.
//   ssp    as async, but withholds the answer to a worker that has completed step t until the
//          slowest live worker has completed t - staleness.
// In every mode the answer to the last step waits for every live worker's last push, so all
// workers end on the same parameters (the final evaluation and checkpoint see every update).
//
// A server never blocks on one worker: one receive is posted per worker and all are polled. In the
// async modes a worker that sends nothing for dead_after_s (while not waiting for this server) is
// dropped and the others go on; in sync mode a missing worker is an error naming its world rank.
// A dropped worker's handles are released without waiting for it (release_dropped_workers()).
// Spare workers (PsRoles::spares, async modes): standby ranks with a link each. Server 0 tells every
// standby spare, before the collectives of each step where the workers meet, what to join there
// (SpareNotice). When the agreed lost set grows, the lost slots take the next spares in order (the
// same on every server): each server frees the lost worker's link, gives its slot the spare's link
// and answers it with the current parameters, and the spare trains on as that worker.
// Every answered push is logged as one JSON line (worker, step, versions, slowest step), so a test
// can check the staleness bound.
//
// It is the server rank's ParameterUpdate (no GradientReduction: a server runs no backward pass),
// so that set-up, resume and checkpoints (owned_state) and the initial parameters
// (broadcast_parameters) run the trainer's code; serve() takes the place of the steps.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "model/param_layout.h"
#include "optim/adamw.h"
#include "parallel/compression.h"
#include "parallel/parameter_update.h"
#include "parallel/param_server_protocol.h"

namespace tessera {

struct ParamServerOptions {
  PsConsistency consistency = PsConsistency::sync;
  int staleness = 0;
  float grad_clip = 0;      // sync: max global norm of the averaged gradient (0 = off)
  int64_t first_step = 0;   // steps every worker had completed when the run (or resume) began
  int64_t final_step = 0;   // the workers stop after this step
  double dead_after_s = 0;  // async modes: drop a worker silent this long; <= 0: never
  std::function<float(int64_t step)> lr;            // learning rate of (1-based) worker step `step`
  std::function<bool(int64_t step)> checkpoint_at;  // whether the workers save after completing `step`
  std::function<Status(int64_t step, bool last)> checkpoint;  // joins that (world-collective) save
  // A stop signal this server has received (0 = none). With the workers' (in their pushes), agreed
  // over the servers (param_server_protocol.h), it ends the run after one step with a checkpoint.
  std::function<int()> stop_requested;
  std::function<Status(int64_t step)> on_step;      // when the first push of worker step `step` arrives (fault injection)
  // Async modes: the steps after which the workers meet in a collective (checkpoints, evaluations,
  // the last step; null: the checkpoint steps). The answer to such a step waits for every live
  // worker's push of it; then the servers agree on the dropped workers (an all-reduce), the answers
  // carry that set (ReplyHeader::lost), and when it grew, on_lost runs (with the world ranks of
  // every worker lost so far) once every live worker has its answer: the workers do the same, so
  // all live ranks can rebuild their communicators without the lost (Communicator::without).
  std::function<bool(int64_t step)> meet_at;
  std::function<Status(const std::vector<int>& lost_world_ranks)> on_lost;
  std::string log_path;     // the push log (JSON lines; appended to); "" = none
};

class PsStopAgreement;

// What releasing one dropped worker's handles did (ParamServer::release_dropped_workers).
struct ReleasedWorker {
  int worker = 0;
  int receives_withdrawn = 0;  // its posted receives (the next push) that nothing had matched
  int handed_over = 0;  // unfinished messages handed to MPI (Work::abandon): an answer it never
                        // received, a push it died while sending ...
  int64_t bytes_kept = 0;  // ... so their buffers (its slot) stay allocated for the process's life
  int ops_left_running = 0;    // ops its link still records as running after the release (0: none)
};

class ParamServer final : public ParameterUpdate {
 public:
  // index: this server's index (0..S-1); servers: the group of server ranks (norm exchange);
  // links: every worker's link (make_ps_links). positions[p]: the chunk stores of position p
  // (roles.position_of), each laid out as that position's workers lay it out (only the shard is
  // kept up to date); one AdamW per unit covers the shard. owned_state() numbers the units
  // position-major (chunk = p * V + c): the caller's run.stores must hold them in that order.
  // compression: what the workers compress their pushes with (none: f32 gradient ranges).
  // backend: the ops of the averaging, norm and AdamW (host memory: the shards are host buffers).
  ParamServer(Backend& backend, const PsRoles& roles, int index, Communicator& servers,
              std::vector<std::unique_ptr<Communicator>> links, std::vector<std::vector<ParamStore*>> positions,
              const AdamWConfig& optim, const CompressionConfig& compression = {});
  ~ParamServer() override;

  // Sends every worker this shard's initial (or resumed) parameters.
  Status broadcast_parameters() override;
  // A server's updates happen in serve(), as the pushes arrive.
  Result<UpdateResult> update(float, float, Timeline&) override { return not_a_worker(); }
  // The servers' shards are disjoint: nothing to compare.
  Status verify_replicas(std::string_view) override { return Status::ok_status(); }
  std::vector<OwnedState> owned_state() override;
  // The updates position 0's shards have taken.
  int64_t optimizer_steps() const override { return version_of(0); }

  // Answers pushes until every live worker has completed options.final_step, or the step at which a
  // stop signal was agreed (see stop_signal()).
  Status serve(const ParamServerOptions& options);
  // After serve(): the signal that stopped the run early and the step it stopped after (0, 0: none).
  int stop_signal() const { return stop_signal_; }
  int64_t stopped_after() const { return stopped_after_; }
  int live_workers() const;
  // The ranks the servers agreed were lost (world ranks: workers, or spares that had replaced one),
  // as of the last meeting step.
  std::vector<int> lost_workers() const;
  // Spares that have taken a lost worker's place so far.
  int spares_used() const { return spares_used_; }
  // Releases the handles of every dropped worker not released yet, without waiting for it (it may
  // have died or hang): its posted receives are withdrawn; an answer it never received, or a push
  // it died while sending, is handed to MPI (Open MPI can withdraw neither; the slot holding their
  // buffers is then kept, since MPI may still use them); its link is abandoned and freed (a
  // point-to-point link shares nothing with the worker: MPI_Comm_free is local). The destructor
  // calls it; each release is logged.
  std::vector<ReleasedWorker> release_dropped_workers();
  // The error path of a server rank (TrainingRun's destructor, train/ps_error_path.h): the run
  // is over, so every worker not released yet, live or dropped, is released as a dropped one is
  // (its receives withdrawn, unfinished messages handed to MPI, its link freed), and the stop
  // agreement's messages likewise. Waits for nothing. Kept for the process's life: the slots (and
  // the stop agreement) that had a message handed over, since MPI may still use their buffers.
  // The second value: the bytes of a kept stop agreement (0: freed). Each release is logged.
  std::pair<std::vector<ReleasedWorker>, int64_t> abandon_exchange();

 private:
  struct Slot;
  struct Unit;
  static Status not_a_worker();
  std::string worker_name(int w) const;
  void post(int w);
  Result<bool> poll(int w);
  int64_t version_of(int position) const;
  void apply_push(int w, float lr);
  Status apply_sync_step();
  Status agree_on_stop(int64_t step);
  Status follow_stop_agreement(int64_t newest, int64_t* checkpointed);
  int64_t last_step() const;
  Status answer(int w);
  bool may_answer(int w) const;
  int64_t slowest() const;
  void drop(int w, const std::string& why);
  ReleasedWorker release(int w, const char* what = "dropped ");
  Status wait_sends();
  bool meets_at(int64_t step) const;
  Status agree_on_lost(int64_t step);
  std::unique_ptr<Slot> make_slot(int position) const;
  // The (slot, spare) pairs that replace the lost slots not replaced yet, while spares last.
  std::vector<std::pair<int, int>> plan_replacements() const;
  // Server 0: tells every standby spare what the live ranks do after step `step` (spare_notices_).
  Status notify_spares(int64_t step, const std::vector<std::pair<int, int>>& replacements, bool checkpoint, bool last);
  // The spares take their slots: lost links freed, the slots answered (the current parameters).
  Status activate_spares(const std::vector<std::pair<int, int>>& replacements, int64_t step);

  Backend& backend_;
  PsRoles roles_;
  int index_;
  Communicator& servers_;
  std::vector<std::unique_ptr<Communicator>> links_;        // per worker slot (a spare's once it replaced one)
  std::vector<std::unique_ptr<Communicator>> spare_links_;  // per spare, until it takes a slot
  struct SpareNotices;
  std::unique_ptr<SpareNotices> spare_notices_;             // server 0: the notices in flight
  int spares_used_ = 0;
  std::vector<std::vector<std::unique_ptr<Unit>>> units_;  // [position][chunk]
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<Compressor> compressor_;  // null: pushes arrive as f32
  std::vector<int64_t> push_bytes_;         // per position: bytes of one worker's push to this server
  double last_norm_ = 0;
  int stop_signal_ = 0;       // the agreed stop signal (0: none) ...
  int64_t stopped_after_ = 0; // ... and the step every rank stops after
  std::unique_ptr<PsStopAgreement> stop_agreement_;  // async modes
  uint64_t agreed_lost_ = 0;     // bit r: world rank r lost, agreed at the last meeting step ...
  int64_t agreed_at_ = 0;        // ... which is this one
  uint64_t announced_lost_ = 0;  // the set on_lost last ran with
  ParamServerOptions o_;
  std::FILE* log_ = nullptr;
  double t_start_ = 0;
};

}  // namespace tessera
