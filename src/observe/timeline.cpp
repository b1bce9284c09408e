// Chrome trace-event writer and per-job merge.
#include "observe/timeline.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace tessera {

double Timeline::now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Timeline::add(const std::string& name, const std::string& category, double t0_s, double t1_s, int tid) {
  if (enabled_) events_.push_back({name, category, t0_s, t1_s, tid});
}

void Timeline::add_counter(const std::string& name, double t_s, std::vector<std::pair<std::string, double>> values) {
  if (enabled_) counters_.push_back({name, t_s, std::move(values)});
}

Status Timeline::write_rank_file(const std::string& path) const {
  const std::string file = path + ".rank" + std::to_string(rank_);
  std::ofstream out(file);
  if (!out) return io_error("cannot write timeline " + file + ": check that the directory exists and is writable");
  char buf[512];
  for (const Event& e : events_) {
    std::snprintf(buf, sizeof buf,
                  "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d},\n",
                  e.name.c_str(), e.cat.c_str(), e.t0 * 1e6, (e.t1 - e.t0) * 1e6, rank_, e.tid);
    out << buf;
  }
  for (const Counter& c : counters_) {
    std::snprintf(buf, sizeof buf, "{\"name\":\"%s\",\"ph\":\"C\",\"ts\":%.3f,\"pid\":%d,\"args\":{", c.name.c_str(),
                  c.t * 1e6, rank_);
    out << buf;
    for (size_t i = 0; i < c.values.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s\"%s\":%.6f", i ? "," : "", c.values[i].first.c_str(), c.values[i].second);
      out << buf;
    }
    out << "}},\n";
  }
  return out.good() ? Status::ok_status() : io_error("failed writing timeline " + file);
}

Status Timeline::merge(const std::string& path, int world) {
  std::ostringstream all;
  all << "{\"traceEvents\":[\n";
  for (int r = 0; r < world; ++r) {
    const std::string file = path + ".rank" + std::to_string(r);
    std::ifstream in(file);
    if (!in) return io_error("timeline part " + file + " is missing (did rank " + std::to_string(r) + " fail?)");
    all << in.rdbuf();
    in.close();
    std::remove(file.c_str());
    all << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << r << ",\"args\":{\"name\":\"rank " << r
        << "\"}}" << (r + 1 < world ? ",\n" : "\n");
  }
  all << "]}\n";
  std::ofstream out(path);
  out << all.str();
  return out.good() ? Status::ok_status() : io_error("cannot write timeline " + path);
}

}  // namespace tessera
