// safetensors reading with full validation of untrusted headers, and atomic f32 writing.
#include "model/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/file_util.h"

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace tessera {

namespace {

using json = nlohmann::json;

// A header larger than this is treated as corruption rather than read (a real header with ~10k
// tensors is a few MB).
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

struct DTypeEntry {
  const char* name;
  StDType type;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {"F32", StDType::f32, 4},  {"F16", StDType::f16, 2}, {"BF16", StDType::bf16, 2},
    {"F64", StDType::f64, 8},  {"I32", StDType::i32, 4}, {"I64", StDType::i64, 8},
};

bool parse_dtype(const std::string& s, StDType* out) {
  for (const auto& e : kDTypes)
    if (s == e.name) { *out = e.type; return true; }
  return false;
}

std::string squote(const std::string& s) { return "'" + s + "'"; }

template <typename T>
T load(const uint8_t* p) {  // unaligned little-endian load
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Validates one header entry and fills `out`; the returned message (empty when fine) says what
// is wrong with the entry, without the file/tensor prefix.
std::string parse_entry(const json& e, uint64_t data_size, StTensorInfo* out) {
  if (!e.is_object()) return "entry is not a JSON object";
  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) return "missing string field \"dtype\"";
  if (!parse_dtype(dt->get<std::string>(), &out->dtype))
    return "unsupported dtype '" + dt->get<std::string>() + "' (supported: F32, F16, BF16, F64, I32, I64)";
  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) return "missing array field \"shape\"";
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) return "shape " + sh->dump() + " must hold non-negative integers";
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, v, &numel) ||
        numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return "shape " + sh->dump() + " overflows 64-bit element counts";
    out->shape.push_back(static_cast<int64_t>(v));
  }
  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    return "missing or malformed \"data_offsets\" (need [begin, end] non-negative integers)";
  out->begin = (*off)[0].get<uint64_t>();
  out->end = (*off)[1].get<uint64_t>();
  if (out->end < out->begin)
    return "data_offsets [" + std::to_string(out->begin) + ", " + std::to_string(out->end) + "] end before begin";
  if (out->end > data_size)
    return "data_offsets [" + std::to_string(out->begin) + ", " + std::to_string(out->end) +
           "] run past the data section (" + std::to_string(data_size) + " bytes)";
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(numel, st_dtype_size(out->dtype), &bytes))
    return "shape " + sh->dump() + " overflows 64-bit byte counts";
  if (bytes != out->end - out->begin)
    return "holds " + std::to_string(out->end - out->begin) + " bytes but shape " + sh->dump() + " of " +
           std::string(st_dtype_name(out->dtype)) + " needs " + std::to_string(bytes);
  return {};
}

}  // namespace

std::string_view st_dtype_name(StDType t) {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.name;
  return "?";
}

size_t st_dtype_size(StDType t) {
  for (const auto& e : kDTypes)
    if (e.type == t) return e.size;
  return 0;
}

const StTensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Result<StTensorInfo> SafetensorsFile::info(const std::string& name) const {
  const StTensorInfo* t = find(name);
  if (!t) return not_found("safetensors file " + squote(path_) + " has no tensor " + squote(name));
  return *t;
}

Status SafetensorsFile::read_f32_into(const std::string& name, float* dst, int64_t n) const {
  const StTensorInfo* t = find(name);
  if (!t) return not_found("safetensors file " + squote(path_) + " has no tensor " + squote(name));
  if (t->numel() != n)
    return invalid_argument("tensor " + squote(name) + " in " + squote(path_) + " has " + std::to_string(t->numel()) +
                            " elements, caller expected " + std::to_string(n));
  const uint8_t* p = data(*t);
  switch (t->dtype) {
    case StDType::f32:
      if (n > 0) std::memcpy(dst, p, static_cast<size_t>(n) * 4);
      return Status::ok_status();
    case StDType::f16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load<uint16_t>(p + 2 * i));
      return Status::ok_status();
    case StDType::bf16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load<uint16_t>(p + 2 * i));
      return Status::ok_status();
    case StDType::f64:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<double>(p + 8 * i));
      return Status::ok_status();
    case StDType::i32:
    case StDType::i64:
      break;
  }
  return invalid_argument("tensor " + squote(name) + " in " + squote(path_) + " is " +
                          std::string(st_dtype_name(t->dtype)) + ", not a floating-point type; read it with read_i32");
}

Result<std::vector<float>> SafetensorsFile::read_f32(const std::string& name) const {
  const StTensorInfo* t = find(name);
  if (!t) return not_found("safetensors file " + squote(path_) + " has no tensor " + squote(name));
  std::vector<float> out(static_cast<size_t>(t->numel()));
  TS_RETURN_IF_ERROR(read_f32_into(name, out.data(), t->numel()));
  return out;
}

Result<std::vector<int32_t>> SafetensorsFile::read_i32(const std::string& name) const {
  const StTensorInfo* t = find(name);
  if (!t) return not_found("safetensors file " + squote(path_) + " has no tensor " + squote(name));
  const int64_t n = t->numel();
  std::vector<int32_t> out(static_cast<size_t>(n));
  const uint8_t* p = data(*t);
  if (t->dtype == StDType::i32) {
    if (n > 0) std::memcpy(out.data(), p, static_cast<size_t>(n) * 4);
    return out;
  }
  if (t->dtype == StDType::i64) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t v = load<int64_t>(p + 8 * i);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        return corrupt_data("tensor " + squote(name) + " in " + squote(path_) + ": I64 value " + std::to_string(v) +
                            " at index " + std::to_string(i) + " does not fit in 32 bits");
      out[static_cast<size_t>(i)] = static_cast<int32_t>(v);
    }
    return out;
  }
  return invalid_argument("tensor " + squote(name) + " in " + squote(path_) + " is " +
                          std::string(st_dtype_name(t->dtype)) + ", not an integer type; read it with read_f32");
}

Result<SafetensorsFile> parse_safetensors(std::vector<uint8_t> bytes, std::string path) {
  auto bad = [&](const std::string& m) { return corrupt_data("safetensors file " + squote(path) + ": " + m); };
  const uint64_t size = bytes.size();
  if (size < 8) return bad("file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  const uint64_t n = load<uint64_t>(bytes.data());
  if (n > kMaxHeaderBytes)
    return bad("header length " + std::to_string(n) + " exceeds the " + std::to_string(kMaxHeaderBytes) +
               "-byte limit (not a safetensors file, or corrupt)");
  if (n > size - 8)
    return bad("header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(size) +
               " bytes); the file is truncated or not safetensors");

  // Duplicate top-level keys would silently replace each other in the parsed object.
  std::set<std::string> keys;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (depth == 1 && ev == json::parse_event_t::key && parsed.is_string()) {
      if (!keys.insert(parsed.get<std::string>()).second && duplicate.empty()) duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n), cb);
  } catch (const json::exception& e) {
    return bad(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) return bad("header is not a JSON object");
  if (!duplicate.empty()) return bad("header names tensor " + squote(duplicate) + " twice");

  SafetensorsFile f;
  f.path_ = path;
  f.data_start_ = 8 + n;
  const uint64_t data_size = size - f.data_start_;
  std::vector<std::pair<uint64_t, std::string>> order;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return bad("\"__metadata__\" is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return bad("metadata value of " + squote(m.key()) + " is not a string");
        f.metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    StTensorInfo info;
    std::string err = parse_entry(*it, data_size, &info);
    if (!err.empty()) return bad("tensor " + squote(it.key()) + ": " + err);
    order.emplace_back(info.begin, it.key());
    f.tensors_.emplace(it.key(), std::move(info));
  }
  // Overlap check over tensors sorted by start: each non-empty tensor must start at or after the
  // previous non-empty one ended.
  std::sort(order.begin(), order.end());
  const std::string* prev = nullptr;
  uint64_t prev_end = 0;
  for (const auto& [begin, name] : order) {
    const StTensorInfo& t = f.tensors_.at(name);
    if (t.end > t.begin) {
      if (prev && begin < prev_end)
        return bad("tensors " + squote(*prev) + " and " + squote(name) + " overlap in the data section");
      prev = &name;
      prev_end = t.end;
    }
    f.names_.push_back(name);
  }
  f.bytes_ = std::move(bytes);
  return f;
}

Result<SafetensorsFile> open_safetensors(const std::string& path) {
  auto bytes = read_file_bytes(path);
  // Any failure to get the bytes (a missing file included) is an I/O problem for the caller.
  if (!bytes.ok()) return io_error("cannot read safetensors file: " + bytes.status().message());
  return parse_safetensors(std::move(bytes).value(), path);
}

Status write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    auto bad = [&](const std::string& m) {
      return invalid_argument("write_safetensors " + squote(path) + ": tensor " + squote(t.name) + ": " + m);
    };
    if (t.name.empty() || t.name == "__metadata__") return bad("invalid tensor name");
    if (!seen.insert(t.name).second) return bad("name appears twice");
    for (int64_t d : t.shape)
      if (d < 0) return bad("negative dimension in shape " + shape_to_string(t.shape));
    const uint64_t bytes = static_cast<uint64_t>(shape_numel(t.shape)) * 4;
    if (bytes > 0 && !t.data) return bad("null data");
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');  // the format pads the header to 8-byte alignment
  const uint64_t n = text.size();

  TS_ASSIGN_OR_RETURN(AtomicFileWriter file, AtomicFileWriter::create(path));
  TS_RETURN_IF_ERROR(file.write(&n, 8));
  TS_RETURN_IF_ERROR(file.write(text.data(), text.size()));
  for (const auto& t : tensors) TS_RETURN_IF_ERROR(file.write(t.data, static_cast<size_t>(shape_numel(t.shape)) * 4));
  return file.commit();
}

Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (static_cast<int64_t>(t.data.size()) != shape_numel(t.shape))
      return invalid_argument("write_safetensors " + squote(path) + ": tensor " + squote(t.name) + " has " +
                              std::to_string(t.data.size()) + " values but shape " + shape_to_string(t.shape));
    refs.push_back({t.name, t.shape, t.data.data()});
  }
  return write_safetensors(path, refs, metadata);
}

}  // namespace tessera
