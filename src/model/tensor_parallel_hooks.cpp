// Names of the tensor-parallel hook points (for traces, tests and error messages), and the
// sequence-parallel row check.
#include "model/tensor_parallel_hooks.h"

#include <string>

namespace tessera {

const char* tp_point_name(TpPoint p) {
  switch (p) {
    case TpPoint::embedding: return "embedding";
    case TpPoint::attn_qkv: return "attn_qkv";
    case TpPoint::attn_proj: return "attn_proj";
    case TpPoint::mlp_fc: return "mlp_fc";
    case TpPoint::mlp_proj: return "mlp_proj";
    case TpPoint::lm_head: return "lm_head";
    case TpPoint::loss: return "loss";
    case TpPoint::stage_input: return "stage_input";
    case TpPoint::stage_output: return "stage_output";
  }
  return "?";
}

Status validate_sequence_parallel(int64_t rows, int tp) {
  if (tp < 1)
    return invalid_argument("sequence parallelism: tensor-parallel size " + std::to_string(tp) + " must be >= 1");
  if (rows < 1) return invalid_argument("sequence parallelism: micro_batch*seq_len = " + std::to_string(rows) +
                                        " token rows; it must be >= 1");
  if (rows % tp != 0)
    return invalid_argument("sequence parallelism splits the micro_batch*seq_len = " + std::to_string(rows) +
                            " token rows of a micro-batch over tp = " + std::to_string(tp) +
                            " ranks, but " + std::to_string(rows) + " is not divisible by " + std::to_string(tp) +
                            "; choose micro_batch and seq_len whose product is a multiple of tp, or turn "
                            "sequence parallelism off");
  return Status::ok_status();
}

}  // namespace tessera
