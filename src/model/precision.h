// Mixed precision (run config train.precision): the arithmetic of the model's matmuls.
//   fp32  everything in f32 (the default; bitwise the f32 model).
//   bf16  "autocast": every linear layer (QKV, attention projection, MLP, head) and its backward
//         rounds its operands -- activations, weights, output gradients -- to bfloat16
//         (round-to-nearest-even) and accumulates the products in f32 (ops::matmul_forward_lowp).
//         Master weights, gradients, optimizer state, embeddings, norms, attention softmax, the
//         loss and the communication stay f32.
//   fp16  the same with IEEE half operands; output gradients above 65504 overflow to inf, so fp16
//         training needs dynamic loss scaling (optim/loss_scaler.h).
#pragma once
#include <string_view>

#include "backend/ops.h"
#include "core/status.h"

namespace tessera {

using Precision = ops::MatmulPrecision;

// "fp32", "bf16", "fp16".
std::string_view precision_name(Precision p);
// The inverse of precision_name; anything else is invalid_argument naming the three choices.
Result<Precision> parse_precision(std::string_view s);

}  // namespace tessera
