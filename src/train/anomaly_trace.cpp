// The anomaly trace: per-op RMS records of a replayed step, this rank's first anomalous op, and
// the earliest over all ranks.
#include "train/anomaly_trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace tessera {
namespace {

// Micro-batch first (a value of one micro-batch never reaches another's activations within a
// step), then the pass, then the layers in the order the pass visits them, then the op.
int64_t flow_order(int micro_batch, ModelPass pass, int layer, int index, int n_layer) {
  const int64_t layers = n_layer + 2;  // -1 .. n_layer
  const int64_t pos = pass == ModelPass::forward ? layer + 1 : n_layer - layer;
  return ((static_cast<int64_t>(micro_batch) * 2 + (pass == ModelPass::backward)) * layers + pos) * 64 + index;
}

// A fixed-size copy of an origin for the all-gather.
struct WireOrigin {
  int32_t found, rank, micro_batch, layer, index, pass;
  double rms, reference;
  char op[32];
};

}  // namespace

AnomalyTraceProbe::AnomalyTraceProbe(Backend& backend, int n_layer, NumericsProbe* inner)
    : backend_(backend), n_layer_(n_layer), inner_(inner) {}

void AnomalyTraceProbe::begin_micro_batch(int micro_batch) {
  micro_batch_ = micro_batch;
  if (inner_) inner_->begin_micro_batch(micro_batch);
}

void AnomalyTraceProbe::after_op(const ProbePoint& at, float* out, int64_t n) {
  if (inner_) inner_->after_op(at, out, n);
  const double rms = n > 0 ? std::sqrt(backend_.sum_of_squares(out, n) / static_cast<double>(n)) : 0.0;
  records_.push_back({micro_batch_, at, std::string(at.op), rms});
}

int64_t AnomalyTraceProbe::order(const Record& r) const {
  return flow_order(r.micro_batch, r.at.pass, r.at.layer, r.at.index, n_layer_);
}

AnomalyOrigin AnomalyTraceProbe::first_anomaly(double spike_factor) const {
  const Record* first = nullptr;
  double first_reference = 0;
  for (const Record& r : records_) {
    double reference = std::numeric_limits<double>::infinity();  // the same op's smallest RMS elsewhere
    for (const Record& o : records_)
      if (o.micro_batch != r.micro_batch && o.at.pass == r.at.pass && o.at.layer == r.at.layer &&
          o.at.index == r.at.index && std::isfinite(o.rms))
        reference = std::min(reference, o.rms);
    const bool non_finite = !std::isfinite(r.rms);
    const bool spike = spike_factor > 0 && std::isfinite(reference) && r.rms > spike_factor * reference;
    if ((non_finite || spike) && (!first || order(r) < order(*first))) {
      first = &r;
      first_reference = std::isfinite(reference) ? reference : 0;
    }
  }
  AnomalyOrigin o;
  if (!first) return o;
  o.found = true;
  o.micro_batch = first->micro_batch;
  o.layer = first->at.layer;
  o.index = first->at.index;
  o.pass = first->at.pass;
  o.op = first->op;
  o.rms = first->rms;
  o.reference = first_reference;
  return o;
}

Result<AnomalyOrigin> earliest_over_ranks(Communicator& world, AnomalyOrigin mine, int n_layer) {
  WireOrigin w{};
  w.found = mine.found;
  w.rank = world.rank();
  w.micro_batch = mine.micro_batch;
  w.layer = mine.layer;
  w.index = mine.index;
  w.pass = static_cast<int32_t>(mine.pass);
  w.rms = mine.rms;
  w.reference = mine.reference;
  std::snprintf(w.op, sizeof w.op, "%s", mine.op.c_str());
  std::vector<WireOrigin> all(static_cast<size_t>(world.size()));
  const Status s = world.all_gather_async(&w, all.data(), sizeof w, DType::u8).wait();
  if (!s.ok()) return Status(s.code(), "gathering where the anomaly began: " + s.message());
  const WireOrigin* best = nullptr;
  auto key = [&](const WireOrigin& x) {
    return flow_order(x.micro_batch, static_cast<ModelPass>(x.pass), x.layer, x.index, n_layer);
  };
  for (const WireOrigin& x : all)  // in rank order: a tie keeps the lower rank
    if (x.found && (!best || key(x) < key(*best))) best = &x;
  AnomalyOrigin o;
  if (!best) return o;
  o.found = true;
  o.rank = best->rank;
  o.micro_batch = best->micro_batch;
  o.layer = best->layer;
  o.index = best->index;
  o.pass = static_cast<ModelPass>(best->pass);
  o.op = best->op;
  o.rms = best->rms;
  o.reference = best->reference;
  return o;
}

std::string describe_origin(const AnomalyOrigin& o, const std::string& kind) {
  if (!o.found)
    return kind + ": no op stood out when the step was replayed (a transient fault, or a spike spread over every "
                  "micro-batch)";
  char buf[320];
  if (std::isfinite(o.rms))
    std::snprintf(buf, sizeof buf, "%s first produced on rank %d, layer %d, %s op %s, micro-batch %d (output RMS %.3g, "
                  "%.3g times the op's smallest over the other micro-batches)",
                  kind.c_str(), o.rank, o.layer, std::string(model_pass_name(o.pass)).c_str(), o.op.c_str(),
                  o.micro_batch, o.rms, o.reference > 0 ? o.rms / o.reference : 0.0);
  else
    std::snprintf(buf, sizeof buf, "%s first produced on rank %d, layer %d, %s op %s, micro-batch %d", kind.c_str(),
                  o.rank, o.layer, std::string(model_pass_name(o.pass)).c_str(), o.op.c_str(), o.micro_batch);
  return buf;
}

}  // namespace tessera
