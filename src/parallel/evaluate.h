// Mean loss of a model over sequential evaluation batches: the trainer's validation and `tessera eval`.
#pragma once
#include <cstdint>

#include "core/status.h"
#include "data/loader.h"
#include "model/transformer.h"

namespace tessera {

struct EvalResult {
  double mean_loss = 0;  // nats per token, mean over batches (0 when batches == 0)
  int64_t batches = 0;
};

// Runs `model` (whose micro-batch shape matches the loader's) on up to max_batches batches from the
// loader's current position (max_batches <= 0: until the split ends). A token id outside the
// model's vocabulary is an error naming it.
// ok, or an error naming the first token id outside [0, vocab_size).
Status check_tokens_in_vocabulary(const int32_t* tokens, int64_t n, int64_t vocab_size);

Result<EvalResult> evaluate_loss(Transformer& model, EvalLoader& loader, int64_t max_batches);

}  // namespace tessera
