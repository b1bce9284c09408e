// AnomalyGuard (train.on_anomaly): before each update, every rank checks its step's loss and the
// norm of the gradients its update will read for non-finite values and -- with train.spike_loss_factor
// or train.spike_grad_factor > 0 -- for a spike against the mean of the recent steps; the ranks agree, and on an anomaly the step is replayed with a probe
// that names the first rank, micro-batch, layer, pass and op it came from (anomaly_trace.h).
// What happens next (stop, skip the step, roll back) is the trainer's (anomaly_response.cpp).
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "model/param_layout.h"
#include "observe/timeline.h"
#include "parallel/micro_batch_runner.h"
#include "parallel/parameter_update.h"
#include "train/anomaly_trace.h"

namespace tessera {

struct Anomaly {
  bool detected = false;
  std::string kind;     // "non-finite value" or "spike"
  std::string measure;  // what showed it, e.g. "loss 9.1 = 3.2x the mean of the last 20 steps"
  AnomalyOrigin origin;
};

// A loss (gradient norm) above loss (grad) times the recent mean is a spike; 0: not judged.
struct SpikeFactors {
  double loss = 0, grad = 0;
  bool any() const { return loss > 0 || grad > 0; }
};

class AnomalyGuard {
 public:
  // chunks: this rank's model chunks (their gradients are checked and, for the replay, zeroed);
  // spikes: which spikes count (none: non-finite values only); fault_probe: the probe the runner normally carries
  // (nan / spike fault injection) or nullptr. Everything outlives the guard.
  AnomalyGuard(Backend& backend, Communicator& world, std::vector<ParamStore*> chunks, MicroBatchRunner& runner,
               ParameterUpdate& update, int n_layer, SpikeFactors spikes, NumericsProbe* fault_probe);

  // After the gradient reduction, before the update; local_loss: this rank's mean loss of the
  // step. Collective over the world. On an anomaly the gradients hold the replay's local ones.
  Result<Anomaly> check(double local_loss, Timeline& timeline);

  static constexpr int kWindow = 20;  // steps in the recent mean
  static constexpr int kWarmup = 5;   // steps of history before spikes are judged
  // The trace's spike: an op output's RMS above this times the same op's smallest RMS over the
  // rank's other micro-batches (micro-batches of one step differ far less than that).
  static constexpr double kTraceFactor = 4;

 private:
  Result<AnomalyOrigin> trace(Timeline& timeline, bool non_finite);
  Backend& backend_;
  Communicator& world_;
  std::vector<ParamStore*> chunks_;
  MicroBatchRunner& runner_;
  ParameterUpdate& update_;  // where the reduced gradients are (reduced_gradients)
  int n_layer_;
  SpikeFactors spikes_;
  NumericsProbe* fault_probe_;
  std::deque<double> losses_, norms_;  // of the last kWindow steps without an anomaly
};

}  // namespace tessera
