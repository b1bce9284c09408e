// Box-Muller normal samples.
#include "core/rng.h"

#include <cmath>

namespace tessera {

float Rng::normal(float mean, float stddev) {
  double u1 = uniform_double(), u2 = uniform_double();
  if (u1 < 1e-300) u1 = 1e-300;
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  return mean + stddev * static_cast<float>(z);
}

}  // namespace tessera
