// ParamServerWorker: the GradientSync of a worker rank in a parameter-server run. It owns no
// optimizer state: finish() pushes each server its range of each of this rank's chunk gradients,
// update() waits for the answers, which land straight in the parameter buffers (the servers'
// updated ranges). In the asynchronous modes the worker clips its own gradient by its replica's norm before
// pushing (no server sees the whole of it); in sync mode the servers clip by the norm of the
// averaged gradient.
// A replica may span tp x pp ranks (one chunk per pipeline stage, V under the interleaved
// schedule): before pushing, the worker adds the sequence-parallel and tied-embedding sums
// (param_server_replica.h), so every push is the chunk's whole gradient of its batch slice and the
// servers only average over dp, as the all-reduce path does.
// With a compressor (bf16, topk, onebit: compression.h) each push is compressed with error feedback,
// one residual per server range and chunk; the answers (parameters) always travel in f32.
#pragma once
#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/param_layout.h"
#include "optim/adamw.h"
#include "parallel/compression.h"
#include "parallel/gradient_sync.h"
#include "parallel/model_parallel_sync.h"
#include "parallel/param_server.h"
#include "parallel/param_server_protocol.h"

namespace tessera {

class ParamServerWorker final : public GradientSync {
 public:
  // link: this worker's link (it is rank 0, server s rank 1 + s); groups.dp: the workers of this
  // position (the loss average and the replica check in sync mode); groups.tp / pp / embedding /
  // sequence_parallel: the replica's own ranks (size 1 each for whole replicas). chunks: this
  // rank's chunk stores in chunk order. grad_clip: max norm for the async modes' local clipping
  // (0 = off). solo: a group of this rank alone (async modes; see solo()), may be null.
  // compression: none, bf16, topk or onebit (PowerSGD needs matrix shapes: not for pushes).
  // backend: the run's, for the replica corrections and norm.
  ParamServerWorker(Backend& backend, const PsRoles& roles, PsConsistency consistency, std::unique_ptr<Communicator> link,
                    const ModelParallelGroups& groups, std::unique_ptr<Communicator> solo,
                    std::vector<ParamStore*> chunks, float grad_clip,
                    const CompressionConfig& compression = {});

  std::string_view name() const override { return "param_server_worker"; }
  // Receives the initial (or resumed) parameters from every server (a standby spare: nothing yet).
  Status broadcast_parameters() override;
  // A spare worker (PsRoles::spares) stands by: no parameters, no pushes, only server 0's notices
  // (SpareNotice) until one names the worker it replaces; then set_standby(false) and
  // broadcast_parameters() receive the servers' current parameters, and it trains as that worker.
  void set_standby(bool standby) { standby_ = standby; }
  bool standby() const { return standby_; }
  // Standby: server 0's next notice. Polls with no timeout (a spare may wait a whole run), calling
  // `idle` between polls.
  Result<SpareNotice> next_notice(const std::function<void()>& idle);
  void begin_micro_batch(bool) override {}
  void on_layer_ready(int) override {}
  // Pushes the gradient ranges (clipped here first in the async modes) and posts the receives of the answers.
  Status finish() override;
  // The servers update: waits for every server's answer (the updated parameters); the norm before
  // clipping is the servers' global norm of the averaged gradient (sync) or this worker's own (async,
  // clipped in finish()). lr and max_norm are the servers' business.
  Result<UpdateResult> update(float lr, float max_norm, Timeline& timeline) override;
  // sync: mean over the workers; async modes: this worker's own value (no collective: workers drift apart).
  Status average_over_replicas(float* values, int64_t n) override;
  // sync: every worker must hold the parameters the servers sent; async modes: they differ by design.
  Status verify_replicas(std::string_view what) override;
  // No optimizer state (the servers own it): one empty part, so checkpoints carry the run's state.
  std::vector<OwnedState> owned_state() override { return {{0, nullptr, FlatRange{0, 0}}}; }
  // The servers' step count, from their last answer.
  int64_t optimizer_steps() const override { return server_steps_; }
  double exposed_wait_s() const override { return exposed_wait_s_; }
  void set_trace(TraceFn fn) override { trace_ = std::move(fn); }

  // Async modes: a group of this rank alone, for per-step bookkeeping that would otherwise be a
  // collective over the workers (it would hold them in lockstep); null in sync mode.
  Communicator* solo() const { return solo_.get(); }
  // Where this worker's received stop signal is read (preemption; null: none). Each push carries it;
  // the servers agree on the step every rank stops after (param_server_protocol.h).
  void set_stop_signal_source(const volatile std::sig_atomic_t* received) { stop_source_ = received; }
  // After update(): the signal on which every rank stops after this step (0: go on).
  int agreed_stop_signal() const;
  // After update(), async modes: the world ranks of the workers the servers agreed were lost (as
  // of the last step where the workers meet; ParamServerOptions::meet_at).
  std::vector<int> lost_workers() const;
  // Its compressed pushes' error-feedback residuals, "ps_residual/server<s>.chunk<c>" (empty
  // without an error-feedback compressor), for checkpoints.
  std::vector<CompressionState> compression_state();
  // Payload bytes this worker has pushed and pulled (headers excluded).
  // The error path of a worker rank (TrainingRun's destructor, train/ps_error_path.h): waits for
  // nothing. Posted receives are withdrawn, unfinished messages handed to MPI (Work::abandon), the
  // link and solo group abandoned (the destructor frees them without their peers). With a message
  // handed over, MPI may still write the answers' buffers (this worker's headers and the chunks'
  // parameters) or read the pushes' (the chunks' gradients, the compressed pushes): the worker
  // keeps its own for the process's life, and the caller must keep the chunk stores. bytes_kept
  // counts both (worker: left 0, the caller knows its world rank).
  ReleasedWorker abandon_exchange();
  uint64_t pushed_bytes() const { return pushed_bytes_; }
  uint64_t pulled_bytes() const { return pulled_bytes_; }

 private:
  Status wait_replies(const char* what);
  void post_replies(int s);
  Status clip_locally();
  std::string server_name(int s) const;
  Backend& backend_;
  PsRoles roles_;
  PsConsistency consistency_;
  std::unique_ptr<Communicator> link_owner_;
  Communicator& link_;
  ModelParallelGroups groups_;
  bool model_parallel_;  // the replica spans more than this rank (tp or pp > 1)
  std::unique_ptr<Communicator> solo_;
  std::vector<ParamStore*> chunks_;
  int64_t server_steps_ = 0;
  const volatile std::sig_atomic_t* stop_source_ = nullptr;
  float grad_clip_;
  std::vector<std::vector<FlatRange>> ranges_;        // [server][chunk]
  std::unique_ptr<Compressor> compressor_;            // null: pushes are the f32 gradient ranges
  std::vector<std::vector<std::vector<float>>> residual_;  // [server][chunk]: what compression dropped so far
  std::vector<std::vector<std::vector<uint8_t>>> wire_;    // [server][chunk]: the compressed push
  std::vector<PushHeader> push_;
  std::vector<ReplyHeader> reply_;
  std::vector<std::pair<int, Work>> pending_;  // (server, send or receive) of this exchange, in posting order
  int64_t version_ = 0;  // the lowest server version this worker's parameters come from
  float local_norm_ = 0;
  double exposed_wait_s_ = 0, t_push_ = 0;
  uint64_t pushed_bytes_ = 0, pulled_bytes_ = 0;
  TraceFn trace_;
  bool standby_ = false;
  SpareNotice notice_;
};

}  // namespace tessera
