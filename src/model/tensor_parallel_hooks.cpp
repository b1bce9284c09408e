// Names of the tensor-parallel hook points (for traces, tests and error messages).
#include "model/tensor_parallel_hooks.h"

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
  }
  return "?";
}

}  // namespace tessera
