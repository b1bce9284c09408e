// Per-rank timeline of a run in Chrome trace-event JSON (loadable in Perfetto / chrome://tracing):
// complete events ("ph":"X") with pid = rank. Each rank writes <path>.rank<r>; rank 0 merges them
// into <path> at the end of the run.
#pragma once
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tessera {

class Timeline {
 public:
  Timeline(bool enabled, int rank) : enabled_(enabled), rank_(rank) {}
  bool enabled() const { return enabled_; }
  // Seconds on a clock shared by the ranks of one machine (steady_clock).
  static double now_s();
  // tid separates lanes: 0 compute, 1 communication, 2 data.
  void add(const std::string& name, const std::string& category, double t0_s, double t1_s, int tid = 0);
  // A counter sample ("ph":"C"): Perfetto draws one track per name and rank, a series per value.
  void add_counter(const std::string& name, double t_s, std::vector<std::pair<std::string, double>> values);
  Status write_rank_file(const std::string& path) const;
  // Rank 0: concatenates the rank files of ranks [0, world) into `path` and removes them.
  static Status merge(const std::string& path, int world);

 private:
  struct Event {
    std::string name, cat;
    double t0, t1;
    int tid;
  };
  bool enabled_;
  int rank_;
  std::vector<Event> events_;
  struct Counter {
    std::string name;
    double t;
    std::vector<std::pair<std::string, double>> values;
  };
  std::vector<Counter> counters_;
};

// RAII span: records [construction, destruction) when the timeline is enabled.
class TimelineSpan {
 public:
  TimelineSpan(Timeline& tl, const char* name, const char* cat, int tid = 0)
      : tl_(tl), name_(name), cat_(cat), tid_(tid), t0_(tl.enabled() ? Timeline::now_s() : 0) {}
  ~TimelineSpan() {
    if (tl_.enabled()) tl_.add(name_, cat_, t0_, Timeline::now_s(), tid_);
  }

 private:
  Timeline& tl_;
  const char* name_;
  const char* cat_;
  int tid_;
  double t0_;
};

}  // namespace tessera
