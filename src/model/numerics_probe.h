// NumericsProbe: an observer the transformer calls after each op of its forward and backward with
// the op's output, so numerics can be checked (anomaly tracing) or disturbed (nan / spike fault
// injection) at named points without the model knowing why. Unset (every normal step): no calls.
#pragma once
#include <cstdint>
#include <string_view>

namespace tessera {

enum class ModelPass : uint8_t { forward, backward };
std::string_view model_pass_name(ModelPass pass);

// Where an op ran: layer -1 = embeddings, n_layer = final norm, head and loss. `index` numbers the
// probed ops of one layer's pass in execution order (0 = the first), so positions order like time.
struct ProbePoint {
  ModelPass pass = ModelPass::forward;
  int layer = 0;
  int index = 0;
  std::string_view op;  // e.g. "ln1", "qkv", "attention", "attn_proj", "mlp_fc", "activation"
};

class NumericsProbe {
 public:
  virtual ~NumericsProbe() = default;
  // Before each forward or backward of a micro-batch (its index within the step), from the runner.
  virtual void begin_micro_batch(int micro_batch) { (void)micro_batch; }
  // After the op at `at` wrote `out` (n floats, device memory). May change it (fault injection).
  virtual void after_op(const ProbePoint& at, float* out, int64_t n) = 0;
};

}  // namespace tessera
