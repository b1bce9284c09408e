// The parameter server's private state (param_server.h): one Unit per shard it owns, one Slot per
// worker. Shared by the files that implement ParamServer (param_server.cpp, param_server_lost.cpp).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "parallel/param_server.h"

namespace tessera {

inline double ps_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One shard: a server's range of one chunk buffer of one model-parallel position, and its AdamW.
struct ParamServer::Unit {
  Unit(Backend& backend, ParamStore& s, FlatRange r, const AdamWConfig& optim)
      : store(s), range(r), opt(s.layout(), optim, r.begin, r.end, &backend) {}
  ParamStore& store;
  FlatRange range;
  AdamW opt;
  std::vector<FlatRange> counted;  // the parts of `range` (relative to its begin) the norm counts
  std::vector<float> sum;          // sync: the averaged gradient of the shard
};

// What the server keeps per worker; [c]: chunk c of its position.
struct ParamServer::Slot {
  int position = 0;
  int world_rank = 0;    // the worker's, or the spare's that took its place
  bool live = true;
  bool posted = false;   // the receives of the next push are posted
  bool arrived = false;  // sync: its push of the current step is in `grads`
  bool pending = false;  // its push is applied (sync: averaged) but not yet answered
  int64_t step = 0;      // steps it has completed (pushed)
  PushHeader push;
  std::vector<std::vector<float>> grads;   // the received gradient ranges
  std::vector<std::vector<uint8_t>> wire;  // the received compressed pushes (with a compressor)
  std::unique_ptr<Work> recv_header;
  std::vector<std::unique_ptr<Work>> recv_data;
  int64_t applied_version = 0;  // this server's version once its push was applied
  double last_heard = 0;
  ReplyHeader reply;
  std::vector<std::vector<float>> out;  // the parameters of the answer (a copy: later pushes change the shard)
  std::unique_ptr<Work> send_header;
  std::vector<std::unique_ptr<Work>> send_data;
};

// Server 0's notices to the standby spares (kept until sent: MPI reads them).
struct ParamServer::SpareNotices {
  std::vector<SpareNotice> message;            // per spare
  std::vector<std::unique_ptr<Work>> sending;  // per spare
};

}  // namespace tessera
