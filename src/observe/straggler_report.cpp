// Gathering the ranks' step-time split and naming the straggler.
#include "observe/straggler_report.h"

#include <algorithm>
#include <cstdio>

namespace tessera {

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}
}  // namespace

Result<std::vector<RankStepTime>> gather_step_times(Communicator& world, const RankStepTime& mine) {
  constexpr size_t kFields = 5;
  const double send[kFields] = {mine.compute_s, mine.wait_s, mine.data_s, mine.pipeline_wait_s, mine.update_s};
  std::vector<double> all(kFields * static_cast<size_t>(world.size()));
  if (world.size() == 1) {
    std::copy_n(send, kFields, all.begin());
  } else {
    const Status st = world.all_gather_async(send, all.data(), sizeof send, DType::u8).wait();  // times out
    if (!st.ok()) return Status(st.code(), "gathering the ranks' step times: " + st.message());
  }
  std::vector<RankStepTime> out(static_cast<size_t>(world.size()));
  for (size_t r = 0; r < out.size(); ++r) {
    const double* f = all.data() + kFields * r;
    out[r] = {f[0], f[1], f[2], f[3], f[4]};
  }
  return out;
}

nlohmann::json step_times_json(const std::vector<RankStepTime>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankStepTime& t : ranks)
    out.push_back({{"compute_s", t.compute_s}, {"wait_s", t.wait_s}, {"data_s", t.data_s},
                   {"pipeline_wait_s", t.pipeline_wait_s}, {"update_s", t.update_s}});
  return out;
}

StragglerReport analyse_stragglers(const std::vector<RankStepTime>& ranks) {
  StragglerReport r;
  if (ranks.empty()) return r;
  std::vector<double> compute, others_wait;
  for (size_t i = 0; i < ranks.size(); ++i) {
    compute.push_back(ranks[i].compute_s);
    r.step_s += ranks[i].step_s() / static_cast<double>(ranks.size());
    if (ranks[i].compute_s > ranks[static_cast<size_t>(r.slowest_rank)].compute_s) r.slowest_rank = static_cast<int>(i);
  }
  const RankStepTime& slow = ranks[static_cast<size_t>(r.slowest_rank)];
  for (size_t i = 0; i < ranks.size(); ++i)
    if (static_cast<int>(i) != r.slowest_rank) others_wait.push_back(std::max(0.0, ranks[i].wait_s - slow.wait_s));
  r.slowest_compute_s = slow.compute_s;
  r.median_compute_s = median(compute);
  r.lost_s = median(others_wait);
  r.lost_fraction = r.step_s > 0 ? r.lost_s / r.step_s : 0;
  return r;
}

std::string describe(const StragglerReport& r) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "slowest rank %d: compute %.3g s/step vs median %.3g; the others waited %.3g s/step for it "
                "(%.0f%% of step time)",
                r.slowest_rank, r.slowest_compute_s, r.median_compute_s, r.lost_s, 100 * r.lost_fraction);
  return buf;
}

nlohmann::json to_json(const StragglerReport& r) {
  return {{"slowest_rank", r.slowest_rank}, {"slowest_compute_s", r.slowest_compute_s},
          {"median_compute_s", r.median_compute_s}, {"lost_s", r.lost_s}, {"step_s", r.step_s},
          {"lost_fraction", r.lost_fraction}};
}

}  // namespace tessera
