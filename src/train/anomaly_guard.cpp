// The per-step anomaly check and the replay that traces an anomaly to its origin.
#include "train/anomaly_guard.h"

#include <cmath>
#include <cstdio>
#include <numeric>

namespace tessera {
namespace {
double mean(const std::deque<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size()); }
}  // namespace

AnomalyGuard::AnomalyGuard(Backend& backend, Communicator& world, std::vector<ParamStore*> chunks,
                           MicroBatchRunner& runner, ParameterUpdate& update, int n_layer, SpikeFactors spikes,
                           NumericsProbe* fault_probe)
    : backend_(backend), world_(world), chunks_(std::move(chunks)), runner_(runner), update_(update), n_layer_(n_layer),
      spikes_(spikes), fault_probe_(fault_probe) {}

Result<Anomaly> AnomalyGuard::check(double local_loss, Timeline& timeline) {
  // What this rank's update will read, compared with itself over the steps (not the global norm).
  std::vector<GradSpan> grads = update_.reduced_gradients();
  if (grads.empty())
    for (ParamStore* c : chunks_) grads.push_back({c->grads(), c->numel()});
  double sum_squares = 0;
  for (const GradSpan& g : grads) sum_squares += backend_.sum_of_squares(g.data, g.n);
  const double norm = std::sqrt(sum_squares);
  const bool judged = spikes_.any() && static_cast<int>(losses_.size()) >= kWarmup;
  const double loss_ratio = judged && std::isfinite(local_loss) ? local_loss / mean(losses_) : 0;
  const double norm_ratio = judged && std::isfinite(norm) && mean(norms_) > 0 ? norm / mean(norms_) : 0;
  // [non-finite, loss ratio, norm ratio], the maximum over the ranks
  float mine[3] = {std::isfinite(local_loss) && std::isfinite(norm) ? 0.f : 1.f, static_cast<float>(loss_ratio),
                   static_cast<float>(norm_ratio)};
  float all[3] = {0, 0, 0};
  const Status s = world_.all_reduce(mine, all, 3, DType::f32, ReduceOp::max);
  if (!s.ok()) return Status(s.code(), "agreeing on the step's numerics: " + s.message());
  Anomaly a;
  const bool non_finite = all[0] > 0;
  const bool loss_spike = spikes_.loss > 0 && all[1] > spikes_.loss;
  const bool grad_spike = spikes_.grad > 0 && all[2] > spikes_.grad;
  const bool spike = loss_spike || grad_spike;
  if (!non_finite && !spike) {
    losses_.push_back(local_loss);
    norms_.push_back(norm);
    if (static_cast<int>(losses_.size()) > kWindow) losses_.pop_front(), norms_.pop_front();
    return a;
  }
  a.detected = true;
  a.kind = non_finite ? "non-finite value" : "spike";
  char buf[200];
  if (non_finite) std::snprintf(buf, sizeof buf, "a rank's loss or gradients are not finite");
  else
    std::snprintf(buf, sizeof buf, "%s %.3gx the mean of the last %zu steps (train.spike_%s_factor = %g)",
                  loss_spike ? "loss" : "gradient norm", loss_spike ? all[1] : all[2], losses_.size(),
                  loss_spike ? "loss" : "grad", loss_spike ? spikes_.loss : spikes_.grad);
  a.measure = buf;
  TS_ASSIGN_OR_RETURN(a.origin, trace(timeline, non_finite));
  return a;
}

Result<AnomalyOrigin> AnomalyGuard::trace(Timeline& timeline, bool non_finite) {
  for (ParamStore* c : chunks_) c->zero_grads();
  AnomalyTraceProbe probe(backend_, n_layer_, fault_probe_);
  runner_.set_numerics_probe(&probe);
  const Status replayed = [&] {
    TimelineSpan span(timeline, "anomaly replay", "compute");
    return runner_.replay(timeline);
  }();
  runner_.set_numerics_probe(fault_probe_);
  if (!replayed.ok()) return Status(replayed.code(), "replaying the step to trace the anomaly: " + replayed.message());
  // A non-finite value is traced to the first non-finite op; spikes before it count too when judged.
  const AnomalyOrigin mine = probe.first_anomaly(spikes_.any() || !non_finite ? kTraceFactor : 0);
  return earliest_over_ranks(world_, mine, n_layer_);
}

}  // namespace tessera
