// The evaluation loop.
#include "train/evaluate.h"

#include <vector>

namespace tessera {

Result<EvalResult> evaluate_loss(Transformer& model, EvalLoader& loader, int64_t max_batches) {
  const int64_t n = model.batch() * model.seq_len();
  const int64_t V = model.config().vocab_size;
  std::vector<int32_t> inputs(n), targets(n);
  EvalResult r;
  double sum = 0;
  while ((max_batches <= 0 || r.batches < max_batches) && loader.next_batch(inputs.data(), targets.data())) {
    for (int32_t t : inputs)
      if (t < 0 || t >= V)
        return invalid_argument("token id " + std::to_string(t) + " is outside the model's vocabulary (" +
                                std::to_string(V) + "): evaluate on data made with the model's tokenizer");
    sum += model.forward(inputs.data(), targets.data());
    ++r.batches;
  }
  if (r.batches > 0) r.mean_loss = sum / static_cast<double>(r.batches);
  return r;
}

}  // namespace tessera
