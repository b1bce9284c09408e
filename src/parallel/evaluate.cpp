// The evaluation loop.
#include "parallel/evaluate.h"

#include <vector>

namespace tessera {

Status check_tokens_in_vocabulary(const int32_t* tokens, int64_t n, int64_t vocab_size) {
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      return invalid_argument("token id " + std::to_string(tokens[i]) + " is outside the model's vocabulary (" +
                              std::to_string(vocab_size) + "): evaluate on data made with the model's tokenizer");
  return Status::ok_status();
}

Result<EvalResult> evaluate_loss(Transformer& model, EvalLoader& loader, int64_t max_batches) {
  const int64_t n = model.batch() * model.seq_len();
  const int64_t V = model.config().vocab_size;
  std::vector<int32_t> inputs(n), targets(n);
  EvalResult r;
  double sum = 0;
  while ((max_batches <= 0 || r.batches < max_batches) && loader.next_batch(inputs.data(), targets.data())) {
    TS_RETURN_IF_ERROR(check_tokens_in_vocabulary(inputs.data(), n, V));
    sum += model.forward(inputs.data(), targets.data());
    ++r.batches;
  }
  if (r.batches > 0) r.mean_loss = sum / static_cast<double>(r.batches);
  return r;
}

}  // namespace tessera
