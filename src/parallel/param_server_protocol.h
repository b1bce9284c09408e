// The parameter server's roles, shards and wire messages, shared by the server (param_server.h) and
// the worker (param_server_worker.h). World = W worker ranks [0, W) then S server ranks [W, W + S):
// world rank 0 stays a worker, so it keeps printing, writing metrics and the checkpoint manifest.
// The workers form a dp x pp x tp grid (comm/grid.h order over worker ranks); each model-parallel
// position (pp, tp) holds its own chunks' flat buffers (V chunks under the interleaved schedule),
// and server s holds elements [numel * s / S, numel * (s + 1) / S) of every position's every
// chunk buffer, so a worker talks to each server about its own position's ranges only.
//
// Each worker w talks to the servers over its own communicator ("link" w: the worker is rank 0,
// server s is rank 1 + s). A worker that dies breaks only its own link: a server can drop it and
// keep serving the others (a timed-out op leaves its communicator unusable, see communicator.h).
// Links carry point-to-point messages only (Communicator::split_point_to_point): a server frees a
// dropped worker's link without it.
//
// One step of worker w, per server s (the messages of one push go out before any reply is awaited):
//   worker -> server  PushHeader (tag kPushHeaderTag), then its gradient range of each chunk in
//                     chunk order (f32, kPushDataTag: MPI keeps their order)
//   server -> worker  ReplyHeader (kReplyHeaderTag), then the server's parameter range of each
//                     chunk (kReplyDataTag)
// The reply's parameters are what the worker computes its next step on. At start-up every server
// sends each worker a ReplyHeader + range without a push (the initial or resumed parameters).
//
// Preemption: every rank must stop after the same step S and save it together; a worker stops
// after the step whose answer (from any server) names it. sync: the servers agree each step (one
// all-reduce) on the largest signal pushed or received, and S is that step. async and ssp, where the
// workers are at different steps: server 0 decides. On the first signal it learns of (its own, one
// in a push, one another server sent it, tag kStopRequestTag) S is one past the newest step any
// worker has pushed to it -- so every worker's push of S, and every later answer, finds the
// decision made -- and it sends {S, signal} to the other servers (kStopDecisionTag), which
// withdraw any receive they posted for a push after S.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/grid.h"
#include "core/status.h"
#include "parallel/gradient_sync.h"

namespace tessera {

// sync: every worker's push of step t is averaged and applied once (= all-reduce data parallelism);
// async: each push is applied as it arrives and answered at once; ssp (stale-synchronous parallel):
// as async, but a worker that has completed step t gets its answer only once the slowest live
// worker has completed step t - staleness.
enum class PsConsistency : uint8_t { sync, async, ssp };
std::string_view ps_consistency_name(PsConsistency c);
Result<PsConsistency> parse_ps_consistency(std::string_view name);

struct PsRoles {
  int workers = 1, servers = 1;
  int spares = 0;  // standby workers, world ranks [W + S, W + S + K) (ParamServerOptions, "Spare workers")
  GridShape grid;  // the workers' grid: workers == grid.world_size()
  PsRoles() = default;
  PsRoles(int w, int s, int k = 0) : workers(w), servers(s), spares(k), grid{w, 1, 1} {}
  PsRoles(const GridShape& g, int s, int k = 0) : workers(g.world_size()), servers(s), spares(k), grid(g) {}
  // Model-parallel positions (pp, tp) and the one worker w occupies: index pp * tp_size + tp.
  int positions() const { return grid.pp * grid.tp; }
  int position_of(int worker) const {
    const GridCoord c = grid_coord(grid, worker);
    return c.pp * grid.tp + c.tp;
  }
  bool is_server(int world_rank) const { return world_rank >= workers && world_rank < workers + servers; }
  int server_index(int world_rank) const { return world_rank - workers; }
  int server_world_rank(int s) const { return workers + s; }
  bool is_spare(int world_rank) const { return world_rank >= workers + servers; }
  int spare_world_rank(int k) const { return workers + servers + k; }
  // Links (make_ps_links): one per worker, then one per spare.
  int links() const { return workers + spares; }
  int link_of(int world_rank) const { return is_spare(world_rank) ? workers + (world_rank - workers - servers) : world_rank; }
  // The flat range server s owns of a numel-element buffer.
  FlatRange shard(int s, int64_t numel) const {
    return {numel * s / servers, numel * (s + 1) / servers};
  }
};

inline constexpr int kPushHeaderTag = 711, kPushDataTag = 712, kReplyHeaderTag = 721, kReplyDataTag = 722;
inline constexpr int kStopRequestTag = 731, kStopDecisionTag = 732;  // between servers (async modes)
inline constexpr int kSpareNoticeTag = 741;  // server 0 -> a standby spare

// Server 0 to each standby spare, before the live ranks' collectives at a step where the workers
// meet: what the spare must join there (it joins no other collective while it stands by).
struct SpareNotice {
  int64_t step = 0;        // the workers all completed this step
  uint64_t lost = 0;       // bit r: world rank r lost (as ReplyHeader::lost)
  int64_t replaces = -1;   // >= 0: from here on this spare is that worker (its slot, data and link)
  int64_t checkpoint = 0;  // 1: the live ranks save this step
  int64_t last = 0;        // 1: the run ends after this step
};
static_assert(sizeof(SpareNotice) == 5 * sizeof(int64_t));

// Sent as kPushHeaderWords int64s.
struct PushHeader {
  int64_t read_version = 0;  // server version of the parameters this gradient was computed on
  int64_t clipped = 0;       // 1: the worker clipped its gradient itself (async modes)
  int64_t payload_bytes = 0; // bytes of the data messages that follow (f32: 4 x ranges; compressed: less)
  int64_t stop_signal = 0;   // a stop signal (SIGTERM, ...) this worker has received, 0 = none
};
struct ReplyHeader {
  int64_t version = 0;     // updates this server has applied (its AdamW step count)
  int64_t step = 0;        // the worker's step this answers (the resumed step for the first message)
  double grad_norm = 0;    // sync: global norm of the averaged gradient before clipping; async: 0
  int64_t stop_signal = 0; // preemption: every rank stops after step stop_after on this signal
  int64_t stop_after = 0;  // (0, 0: go on; this server may not know yet, see below)
  uint64_t lost = 0;       // async modes: bit r = world rank r was lost (a worker, or a spare that
                           // had replaced one), as the servers agreed at the last step where the
                           // workers meet (ParamServerOptions::meet_at)
};
static_assert(sizeof(PushHeader) == 4 * sizeof(int64_t) && sizeof(ReplyHeader) == 6 * sizeof(int64_t));
// World ranks a lost set can name (ReplyHeader::lost); beyond, a dropped worker ends the run.
inline constexpr int kMaxLosableWorkers = 64;
// The world ranks of a lost set, ascending.
inline std::vector<int> lost_ranks(uint64_t lost) {
  std::vector<int> out;
  for (int r = 0; r < kMaxLosableWorkers; ++r)
    if (lost >> r & 1) out.push_back(r);
  return out;
}

// Collective over `world`: one link communicator per worker ({worker w, servers 0..S-1}), then one
// per spare. A worker or spare gets a vector with only its own link non-null; a server gets all W + K.
Result<std::vector<std::unique_ptr<Communicator>>> make_ps_links(Communicator& world, const PsRoles& roles);

}  // namespace tessera
