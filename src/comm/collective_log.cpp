// Ring buffer of recent communicator operations.
#include "comm/collective_log.h"

#include <chrono>
#include <cstdio>

namespace tessera {

std::string_view op_state_name(OpState s) {
  switch (s) {
    case OpState::running: return "running";
    case OpState::done: return "done";
    case OpState::failed: return "failed";
    case OpState::timed_out: return "timed_out";
    case OpState::cancelled: return "cancelled";
    case OpState::released: return "released";
  }
  return "?";
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

CollectiveLog::CollectiveLog(size_t capacity) : ring_(capacity ? capacity : 1), tickets_(ring_.size(), ~0ull) {}

uint64_t CollectiveLog::begin(CollectiveRecord rec) {
  uint64_t ticket = next_++;
  size_t slot = ticket % ring_.size();
  rec.start_s = steady_seconds();
  rec.end_s = 0;
  rec.state = OpState::running;
  ring_[slot] = rec;
  tickets_[slot] = ticket;
  return ticket;
}

void CollectiveLog::finish(uint64_t ticket, OpState state) {
  size_t slot = ticket % ring_.size();
  if (tickets_[slot] != ticket) return;
  ring_[slot].end_s = steady_seconds();
  ring_[slot].state = state;
}

std::vector<CollectiveRecord> CollectiveLog::recent() const {
  std::vector<CollectiveRecord> out;
  uint64_t n = next_ < ring_.size() ? next_ : ring_.size();
  for (uint64_t t = next_ - n; t < next_; ++t) out.push_back(ring_[t % ring_.size()]);
  return out;
}

std::string CollectiveLog::format() const {
  std::string s;
  double now = steady_seconds();
  char line[256];
  for (const CollectiveRecord& r : recent()) {
    double dur = (r.end_s > 0 ? r.end_s : now) - r.start_s;
    std::snprintf(line, sizeof line, "  %s #%llu%s bytes=%zu%s %s %.3f ms (started %.3f s ago)\n",
                  std::string(collective_kind_name(r.kind)).c_str(), static_cast<unsigned long long>(r.seq),
                  r.peer >= 0 ? (" peer/root=" + std::to_string(r.peer)).c_str() : "", r.bytes,
                  r.algorithm.empty() ? "" : (" alg=" + std::string(r.algorithm)).c_str(),
                  std::string(op_state_name(r.state)).c_str(), dur * 1e3, now - r.start_s);
    s += line;
  }
  return s;
}

}  // namespace tessera
