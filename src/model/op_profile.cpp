// Names of the op groups.
#include "model/op_profile.h"

namespace tessera {

std::string_view op_group_name(OpGroup g) {
  switch (g) {
    case OpGroup::matmul: return "matmul";
    case OpGroup::attention: return "attention";
    case OpGroup::norm: return "norm";
    case OpGroup::activation: return "activation";
    case OpGroup::embedding: return "embedding";
    case OpGroup::loss: return "softmax+loss";
    case OpGroup::residual: return "residual/scale";
    case OpGroup::count: break;
  }
  return "?";
}

}  // namespace tessera
