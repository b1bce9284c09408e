// Activation recomputation (run config train.recompute): which per-layer activations the
// Transformer keeps from forward to backward, and which it recomputes in backward instead.
//   none       every layer keeps all its activations (the fastest; the most memory).
//   selective  attention's output and softmax statistics (atty (N, NH*HS) and lse (B, NH, T)) are
//              not kept: backward re-runs the attention kernel from the kept q/k/v (after RoPE)
//              into one buffer shared by all layers. Costs one attention forward per layer.
//   full       a layer keeps only its output (the next layer's input; the first layer's input is
//              the embedding output / stage input): backward re-runs the layer's forward from its
//              input into one shared set of layer activations, then its backward. Costs about one
//              extra forward (and, under tensor parallelism, the forward's collectives again).
// Gradients and losses are bitwise those of none (the same ops on the same inputs).
#pragma once
#include <string_view>

#include "core/status.h"

namespace tessera {

enum class Recompute { none, selective, full };

// "none", "selective", "full".
std::string_view recompute_name(Recompute r);
// The inverse of recompute_name; anything else is invalid_argument naming the three choices.
Result<Recompute> parse_recompute(std::string_view s);

}  // namespace tessera
