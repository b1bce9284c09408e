// Names of the activation-recomputation modes.
#include "model/recompute.h"

#include <string>

namespace tessera {

std::string_view recompute_name(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

Result<Recompute> parse_recompute(std::string_view s) {
  for (Recompute r : {Recompute::none, Recompute::selective, Recompute::full})
    if (s == recompute_name(r)) return r;
  return invalid_argument("unknown recompute mode '" + std::string(s) +
                          "' (train.recompute): use \"none\", \"selective\" or \"full\"");
}

}  // namespace tessera
