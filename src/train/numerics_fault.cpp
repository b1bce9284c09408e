// nan / spike fault injection at a probed op.
#include "train/numerics_fault.h"

#include <limits>
#include <string>

#include "core/log.h"

namespace tessera {

NumericsFaultProbe::NumericsFaultProbe(Backend& backend, std::vector<Fault> faults)
    : backend_(backend), faults_(std::move(faults)) {}

void NumericsFaultProbe::after_op(const ProbePoint& at, float* out, int64_t n) {
  const bool first_of_layer = micro_batch_ != last_micro_batch_ || at.layer != last_layer_ || at.pass != last_pass_;
  last_micro_batch_ = micro_batch_, last_layer_ = at.layer, last_pass_ = at.pass;
  for (const Fault& f : faults_) {
    if (f.step != step_ || f.micro_batch != micro_batch_ || f.layer != at.layer || f.pass != at.pass) continue;
    if (f.op.empty() ? !first_of_layer : f.op != at.op) continue;
    if (f.kind == FaultKind::nan) backend_.fill(out, 1, std::numeric_limits<float>::quiet_NaN());
    else backend_.scale_inplace(out, n, static_cast<float>(f.factor));
    if (logged_++ == 0)
      log_warn("injected fault: " + std::string(f.kind == FaultKind::nan ? "NaN into" : "spike (x" + std::to_string(f.factor) + ") of") +
               " the output of layer " + std::to_string(at.layer) + " " + std::string(model_pass_name(at.pass)) +
               " op " + std::string(at.op) + ", micro-batch " + std::to_string(micro_batch_) + ", step " +
               std::to_string(step_));
  }
}

}  // namespace tessera
