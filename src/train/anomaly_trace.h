// Tracing a numerics anomaly to where it began: while a step is replayed, a probe records the
// RMS of every probed op's output per micro-batch; the first op (in the order the values flow:
// micro-batch, pass, layer, op) whose output is non-finite -- or, for a spike, larger than
// `factor` times the same op's smallest RMS over the rank's other micro-batches -- is this rank's
// finding, and the earliest over all ranks is the origin.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "model/numerics_probe.h"

namespace tessera {

// Where an anomaly first appeared (found = false: no op stood out on replay).
struct AnomalyOrigin {
  bool found = false;
  int rank = -1, micro_batch = -1, layer = 0, index = 0;
  ModelPass pass = ModelPass::forward;
  std::string op;
  double rms = 0;         // the op output's RMS (nan/inf: non-finite)
  double reference = 0;   // spike: the smallest RMS of the same op over the other micro-batches
};

class AnomalyTraceProbe final : public NumericsProbe {
 public:
  // n_layer: the model's layer count (orders the backward pass); inner: a probe that still runs
  // first (fault injection, so a planted fault happens again in the replay), or nullptr.
  AnomalyTraceProbe(Backend& backend, int n_layer, NumericsProbe* inner);
  void begin_micro_batch(int micro_batch) override;
  void after_op(const ProbePoint& at, float* out, int64_t n) override;
  // This rank's first anomalous op; spike_factor <= 0 looks for non-finite values only.
  AnomalyOrigin first_anomaly(double spike_factor) const;

 private:
  struct Record {
    int micro_batch;
    ProbePoint at;
    std::string op;
    double rms;
  };
  // Sorts like time within a micro-batch: forward by layer, then backward from the head down.
  int64_t order(const Record& r) const;
  Backend& backend_;
  int n_layer_;
  NumericsProbe* inner_;
  int micro_batch_ = 0;
  std::vector<Record> records_;
};

// The earliest of every rank's finding (`mine`, from first_anomaly), known to every rank:
// collective over `world`. Ties go to the lower rank.
Result<AnomalyOrigin> earliest_over_ranks(Communicator& world, AnomalyOrigin mine, int n_layer);

// One line for the log: "non-finite value first produced on rank 1, layer 1, backward op
// mlp_proj, micro-batch 2" (or that no op stood out on replay).
std::string describe_origin(const AnomalyOrigin& o, const std::string& kind);

}  // namespace tessera
