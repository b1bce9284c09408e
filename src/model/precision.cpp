// Names of the matmul precisions.
#include "model/precision.h"

#include <string>

namespace tessera {

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
  }
  return "?";
}

Result<Precision> parse_precision(std::string_view s) {
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp16})
    if (s == precision_name(p)) return p;
  return invalid_argument("unknown precision '" + std::string(s) +
                          "' (train.precision): use \"fp32\", \"bf16\" or \"fp16\"");
}

}  // namespace tessera
