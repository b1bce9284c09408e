// safetensors reader (bounds-checked: every offset, size and shape of an untrusted file is
// validated before use) and an atomic f32 writer.
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets:
// [begin, end)}, optional "__metadata__": {str: str}}, then the data section the offsets index.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace tessera {

// Element types a safetensors file may hold that Tessera reads. Floats convert to f32 on read;
// integers read as i32 (token ids).
enum class StDType { f32, f16, bf16, f64, i32, i64 };
std::string_view st_dtype_name(StDType t);  // "F32", "F16", ...
size_t st_dtype_size(StDType t);

struct StTensorInfo {
  StDType dtype = StDType::f32;
  Shape shape;
  uint64_t begin = 0;  // byte offsets into the data section, [begin, end)
  uint64_t end = 0;
  int64_t numel() const { return shape_numel(shape); }
};

// An opened, fully validated file held in memory. Reads never touch the disk again.
class SafetensorsFile {
 public:
  const std::string& path() const { return path_; }
  // Tensor names in data order (ascending begin offset).
  const std::vector<std::string>& names() const { return names_; }
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const StTensorInfo* find(const std::string& name) const;
  // not_found (naming the file and tensor) when absent.
  Result<StTensorInfo> info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // F32/F16/BF16/F64 tensors converted to f32; integer tensors are refused (use read_i32).
  Result<std::vector<float>> read_f32(const std::string& name) const;
  // Same into caller memory; `n` must equal the tensor's element count.
  Status read_f32_into(const std::string& name, float* dst, int64_t n) const;
  // I32 tensors, or I64 tensors whose values all fit in 32 bits.
  Result<std::vector<int32_t>> read_i32(const std::string& name) const;

 private:
  friend Result<SafetensorsFile> parse_safetensors(std::vector<uint8_t> bytes, std::string path);
  std::string path_;
  std::vector<uint8_t> bytes_;
  uint64_t data_start_ = 0;  // 8 + header length
  std::vector<std::string> names_;
  std::unordered_map<std::string, StTensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  const uint8_t* data(const StTensorInfo& t) const { return bytes_.data() + data_start_ + t.begin; }
};

// Reads and validates the whole file. Any structural problem is a corrupt_data error naming the
// file, the tensor (where there is one) and what is wrong; a missing file is io_error.
Result<SafetensorsFile> open_safetensors(const std::string& path);
// The same validation over bytes already in memory; `path` only labels error messages.
Result<SafetensorsFile> parse_safetensors(std::vector<uint8_t> bytes, std::string path);

// A tensor to write: f32 data the caller keeps alive during the call.
struct TensorRef {
  std::string name;
  Shape shape;
  const float* data = nullptr;
};
// An f32 tensor that owns its data (what to_hf_tensors returns).
struct NamedTensor {
  std::string name;
  Shape shape;
  std::vector<float> data;
};

// Writes F32 tensors in the given order plus string metadata. Atomic: writes `path`.tmp.<pid>,
// fsyncs it, renames it over `path` and fsyncs the directory, so a crash leaves either the old
// file or the complete new one. Names must be unique, non-empty and not "__metadata__".
Status write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                         const std::map<std::string, std::string>& metadata = {});
Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

}  // namespace tessera
