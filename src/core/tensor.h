// Tensor: a non-owning, typed, shaped, device-tagged view into a Buffer (or any memory).
// Kernels take raw pointers and sizes (llm.c style); Tensor is how code above them names memory.
#pragma once
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tessera {

enum class Device { cpu, cuda };

using Shape = std::vector<int64_t>;
inline int64_t shape_numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<int64_t>());
}
std::string shape_to_string(const Shape& s);

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  Device device = Device::cpu;

  int64_t numel() const { return shape_numel(shape); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  float* f32() const { return static_cast<float*>(data); }
};

}  // namespace tessera
