// Checkpoint record types to and from JSON, with validation that names the bad field, and the
// merge of per-rank entries into one list of tensors.
#include "checkpoint/format.h"

#include "checkpoint/fingerprint.h"
#include "core/log.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tessera::checkpoint {
namespace {

using nlohmann::json;

// Parsing throws this internally so that the many nested field checks stay readable; it never
// leaves this file (the public functions turn it into a Status).
struct ParseError {
  std::string message;
};

[[noreturn]] void fail(std::string_view where, const std::string& what) {
  throw ParseError{std::string(where) + ": " + what};
}

const json& field(const json& j, const char* name, std::string_view where) {
  if (!j.is_object()) fail(where, "expected a JSON object");
  auto it = j.find(name);
  if (it == j.end()) fail(where, std::string("missing field '") + name + "'");
  return *it;
}

int64_t int_field(const json& j, const char* name, std::string_view where, int64_t min_value = 0,
                  int64_t max_value = INT64_MAX) {
  const json& v = field(j, name, where);
  // An unsigned value above INT64_MAX would wrap to a negative int64_t: refuse it by name.
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
    fail(where, std::string("field '") + name + "' must be an integer that fits in 64 bits");
  int64_t x = v.get<int64_t>();
  if (x < min_value || x > max_value)
    fail(where, std::string("field '") + name + "' is " + std::to_string(x) + ", must be in [" +
                    std::to_string(min_value) + ", " + std::to_string(max_value) + "]");
  return x;
}

int rank_field(const json& j, const char* name, std::string_view where, int min_value = 0) {
  return static_cast<int>(int_field(j, name, where, min_value, INT_MAX));
}

// A name from the manifest as it may appear in a message: quoted, control bytes escaped, cut short
// (a hostile name may hold NULs or be megabytes long).
std::string printable(const std::string& s) {
  constexpr size_t kMax = 80;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMax) out += "...";
  return out + "'";
}

void check_shard_file(const std::string& file, int rank, std::string_view where) {
  if (!is_shard_file_name(file, rank))
    fail(where, "file " + printable(file) + " is not allowed: rank " + std::to_string(rank) + "'s file must be the plain file name '" +
                    shard_file_name(rank) + "' inside the checkpoint directory (a manifest never names other paths)");
}

std::string string_field(const json& j, const char* name, std::string_view where) {
  const json& v = field(j, name, where);
  if (!v.is_string()) fail(where, std::string("field '") + name + "' must be a string");
  return v.get<std::string>();
}

std::string checksum_hex(uint64_t c) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(c));
  return buf;
}

uint64_t parse_checksum(const std::string& s, std::string_view where) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (s.size() != 16 || ec != std::errc() || ptr != s.data() + s.size())
    fail(where, "checksum '" + s + "' is not 16 hex digits");
  return v;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

json piece_to_json(const TensorPiece& p) {
  json j = {{"rank", p.rank},
            {"file", p.file},
            {"offset_in_file", p.offset_in_file},
            {"global_offset", p.global_offset},
            {"numel", p.numel},
            {"checksum", checksum_hex(p.checksum)}};
  if (p.fingerprint) j["fingerprint"] = fingerprint_hex(*p.fingerprint);
  return j;
}

// The optional "fingerprint" field of a piece or tensor (absent in older checkpoints).
std::optional<uint64_t> optional_fingerprint(const json& j, std::string_view where) {
  auto it = j.find("fingerprint");
  if (it == j.end()) return std::nullopt;
  uint64_t v = 0;
  if (!it->is_string() || !parse_fingerprint_hex(it->get<std::string>(), &v))
    fail(where, "field 'fingerprint' must be 16 lowercase hex digits");
  return v;
}

TensorPiece piece_from_json(const json& j, std::string_view where) {
  TensorPiece p;
  p.rank = rank_field(j, "rank", where);
  p.file = string_field(j, "file", where);
  // Piece files must stay inside the checkpoint directory: a manifest is data, not a path oracle.
  check_shard_file(p.file, p.rank, where);
  p.offset_in_file = int_field(j, "offset_in_file", where);
  p.global_offset = int_field(j, "global_offset", where);
  p.numel = int_field(j, "numel", where);
  p.checksum = parse_checksum(string_field(j, "checksum", where), where);
  p.fingerprint = optional_fingerprint(j, where);
  return p;
}

json entry_to_json(const TensorEntry& e) {
  json pieces = json::array();
  for (const auto& p : e.pieces) pieces.push_back(piece_to_json(p));
  json j = {{"key", e.key}, {"dtype", std::string(dtype_name(e.dtype))}, {"global_shape", e.global_shape}};
  if (e.fingerprint) j["fingerprint"] = fingerprint_hex(*e.fingerprint);
  j["pieces"] = pieces;
  return j;
}

TensorEntry entry_from_json(const json& j, std::string_view where) {
  TensorEntry e;
  e.key = string_field(j, "key", where);
  if (e.key.empty()) fail(where, "tensor with an empty key");
  std::string w = std::string(where) + ", tensor " + printable(e.key);
  auto dt = parse_dtype_name(string_field(j, "dtype", w));
  if (!dt.ok()) fail(w, dt.status().message());
  e.dtype = dt.value();
  const json& shape = field(j, "global_shape", w);
  if (!shape.is_array()) fail(w, "global_shape must be an array of integers");
  if (shape.size() > kMaxDims)
    fail(w, "global_shape has " + std::to_string(shape.size()) + " dimensions, more than the " +
                std::to_string(kMaxDims) + " a checkpoint may hold");
  for (const auto& d : shape) {
    if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<uint64_t>() > uint64_t{INT64_MAX}) ||
        d.get<int64_t>() < 0)
      fail(w, "global_shape must hold integers in [0, 2^63)");
    e.global_shape.push_back(d.get<int64_t>());
  }
  if (checked_shape_numel(e.global_shape, dtype_size(e.dtype)) < 0)
    fail(w, "global_shape " + shape_string(e.global_shape) + " of " + std::string(dtype_name(e.dtype)) +
                " has more elements or bytes than fit in 64 bits");
  e.fingerprint = optional_fingerprint(j, w);
  const json& pieces = field(j, "pieces", w);
  if (!pieces.is_array()) fail(w, "pieces must be an array");
  for (const auto& p : pieces) e.pieces.push_back(piece_from_json(p, w));
  return e;
}

std::vector<TensorEntry> entries_from_json_or_throw(const json& j, std::string_view where) {
  if (!j.is_array()) fail(where, "tensor list must be an array");
  std::vector<TensorEntry> out;
  for (const auto& e : j) out.push_back(entry_from_json(e, where));
  return out;
}

ShardRecord shard_from_json(const json& j, std::string_view where, bool with_entries) {
  ShardRecord r;
  r.rank = rank_field(j, "rank", where);
  r.file = string_field(j, "file", where);
  check_shard_file(r.file, r.rank, where);
  r.bytes = int_field(j, "bytes", where);
  if (with_entries) r.entries = entries_from_json_or_throw(field(j, "tensors", where), where);
  return r;
}

// Bytes [begin, end) of rank's shard file that hold a piece of `entry`.
struct FileSpan {
  int rank;
  int64_t begin, end;
  const TensorEntry* entry;
};

}  // namespace

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

bool parse_step_dir_name(std::string_view name, int64_t* step) {
  constexpr std::string_view prefix = "step_";
  if (name.size() < prefix.size() + 8 || name.substr(0, prefix.size()) != prefix) return false;
  std::string_view digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return false;
  if (step_dir_name(v) != name) return false;  // canonical form only
  *step = v;
  return true;
}

std::string shard_file_name(int rank) { return "shard_" + std::to_string(rank) + ".bin"; }

bool is_shard_file_name(std::string_view name, int rank) { return rank >= 0 && name == shard_file_name(rank); }

Result<DType> parse_dtype_name(std::string_view name) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::u16, DType::u8})
    if (dtype_name(t) == name) return t;
  return invalid_argument("unknown dtype '" + std::string(name) + "' (expected f32, bf16, f16, i32, u16 or u8)");
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t checked_shape_numel(const std::vector<int64_t>& shape, size_t elem_bytes) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  int64_t bytes;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(elem_bytes), &bytes)) return -1;
  return n;
}

uint64_t checksum_bytes(const void* data, size_t bytes) { return XXH64(data, bytes, 0); }

ChecksumStream::ChecksumStream() : state_(XXH64_createState()) {
  TS_CHECK(state_ != nullptr);
  XXH64_reset(static_cast<XXH64_state_t*>(state_), 0);
}
ChecksumStream::~ChecksumStream() { XXH64_freeState(static_cast<XXH64_state_t*>(state_)); }
void ChecksumStream::update(const void* data, size_t bytes) {
  XXH64_update(static_cast<XXH64_state_t*>(state_), data, bytes);
}
uint64_t ChecksumStream::digest() const { return XXH64_digest(static_cast<const XXH64_state_t*>(state_)); }

Status validate_coverage(const TensorEntry& e, std::string_view where) {
  const int64_t total = checked_shape_numel(e.global_shape, dtype_size(e.dtype));
  const std::string name = std::string(where) + ": tensor " + printable(e.key) + " " + shape_string(e.global_shape);
  if (total < 0) return corrupt_data(name + ": the shape's element or byte count does not fit in 64 bits");
  int64_t next = 0;
  for (size_t i = 0; i < e.pieces.size(); ++i) {
    const TensorPiece& p = e.pieces[i];
    // Checked before any sum, so that offsets near INT64_MAX cannot overflow below.
    if (p.global_offset < 0 || p.numel < 0 || p.global_offset > total || p.numel > total - p.global_offset) {
      return corrupt_data(name + ": rank " + std::to_string(p.rank) + " stored elements [" +
                          std::to_string(p.global_offset) + ", +" + std::to_string(p.numel) +
                          "), past the tensor's " + std::to_string(total) + " elements");
    }
    if (p.global_offset < next) {
      return corrupt_data(name + ": elements [" + std::to_string(p.global_offset) + ", " +
                          std::to_string(std::min(next, p.global_offset + p.numel)) +
                          ") are stored twice (ranks " + std::to_string(e.pieces[i - 1].rank) + " and " +
                          std::to_string(p.rank) + "); save each range from exactly one rank (e.g. dp rank 0)");
    }
    if (p.global_offset > next) {
      return corrupt_data(name + ": elements [" + std::to_string(next) + ", " + std::to_string(p.global_offset) +
                          ") are stored by no rank; every range of every tensor must be saved by some rank");
    }
    next = p.global_offset + p.numel;
  }
  if (next != total) {
    return corrupt_data(name + ": elements [" + std::to_string(next) + ", " + std::to_string(total) +
                        ") are stored by no rank; every range of every tensor must be saved by some rank");
  }
  return {};
}

Result<std::vector<TensorEntry>> merge_entries(const std::vector<TensorEntry>& entries) {
  std::map<std::string, TensorEntry> by_key;
  std::map<std::string, int> first_rank;  // who defined dtype/shape first, for error messages
  for (const TensorEntry& e : entries) {
    int rank = e.pieces.empty() ? -1 : e.pieces.front().rank;
    auto [it, inserted] = by_key.try_emplace(e.key, TensorEntry{e.key, e.dtype, e.global_shape, {}});
    if (inserted) first_rank[e.key] = rank;
    TensorEntry& m = it->second;
    if (m.dtype != e.dtype || m.global_shape != e.global_shape) {
      return invalid_argument("tensor '" + e.key + "' is saved as " + std::string(dtype_name(m.dtype)) + " " +
                              shape_string(m.global_shape) + " by rank " + std::to_string(first_rank[e.key]) +
                              " but as " + std::string(dtype_name(e.dtype)) + " " + shape_string(e.global_shape) +
                              " by rank " + std::to_string(rank) +
                              "; every rank must describe a tensor with the same dtype and global shape");
    }
    for (const auto& p : e.pieces)
      if (p.numel > 0) m.pieces.push_back(p);
  }
  std::vector<TensorEntry> out;
  out.reserve(by_key.size());
  for (auto& [key, e] : by_key) {
    std::sort(e.pieces.begin(), e.pieces.end(),
              [](const TensorPiece& a, const TensorPiece& b) { return a.global_offset < b.global_offset; });
    Status s = validate_coverage(e, "saving checkpoint");
    if (!s.ok()) return invalid_argument(s.message());
    // The tensor's fingerprint is the sum of its pieces' partials (each rank computed its own).
    bool all = true;
    uint64_t sum = 0;
    for (TensorPiece& p : e.pieces) {
      all = all && p.fingerprint.has_value();
      sum += p.fingerprint.value_or(0);
      p.fingerprint.reset();
    }
    if (all) e.fingerprint = sum;
    out.push_back(std::move(e));
  }
  return out;
}

nlohmann::json entries_to_json(const std::vector<TensorEntry>& entries) {
  json arr = json::array();
  for (const auto& e : entries) arr.push_back(entry_to_json(e));
  return arr;
}

Result<std::vector<TensorEntry>> entries_from_json(const nlohmann::json& j, std::string_view where) {
  try {
    return entries_from_json_or_throw(j, where);
  } catch (const ParseError& e) {
    return corrupt_data(e.message);
  }
}

nlohmann::json shard_record_to_json(const ShardRecord& r) {
  return {{"rank", r.rank}, {"file", r.file}, {"bytes", r.bytes}, {"tensors", entries_to_json(r.entries)}};
}

Result<ShardRecord> shard_record_from_json(const nlohmann::json& j) {
  try {
    return shard_from_json(j, "shard record", true);
  } catch (const ParseError& e) {
    return corrupt_data(e.message);
  }
}

Result<nlohmann::json> parse_json_limited(const std::string& text, const std::string& path) {
  bool too_deep = false;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) too_deep = true;
    return !too_deep;  // stop keeping values once the document is refused
  };
  json j = json::parse(text, cb, /*allow_exceptions=*/false);
  if (too_deep)
    return corrupt_data("'" + path + "' nests JSON deeper than " + std::to_string(kMaxJsonDepth) +
                        " levels, which Tessera never writes");
  if (j.is_discarded()) return corrupt_data("'" + path + "' is not valid JSON");
  return j;
}

nlohmann::json manifest_to_json(const Manifest& m) {
  json shards = json::array();
  for (const auto& s : m.shards) shards.push_back({{"rank", s.rank}, {"file", s.file}, {"bytes", s.bytes}});
  json j = {{"format", std::string(kFormatName)},
            {"version", m.version},
            {"step", m.step},
            {"world_size", m.world_size},
            {"shards", shards},
            {"config", m.config},
            {"state", m.state},
            {"tensors", entries_to_json(m.tensors)}};
  if (m.state_fingerprint) j["state_fingerprint"] = fingerprint_hex(*m.state_fingerprint);
  return j;
}

Result<Manifest> manifest_from_json(const nlohmann::json& j, const std::string& path) {
  const std::string fix = "; the manifest is damaged or was not written by Tessera: resume from another checkpoint";
  try {
    Manifest m;
    if (string_field(j, "format", path) != kFormatName)
      fail(path, "'format' is not '" + std::string(kFormatName) + "'");
    m.version = rank_field(j, "version", path, 1);
    if (m.version > kFormatVersion) {
      return invalid_argument(path + ": checkpoint format version " + std::to_string(m.version) +
                              " is newer than this build supports (" + std::to_string(kFormatVersion) +
                              "); load it with a newer Tessera");
    }
    m.step = int_field(j, "step", path);
    m.world_size = rank_field(j, "world_size", path, 1);
    const json& shards = field(j, "shards", path);
    if (!shards.is_array()) fail(path, "'shards' must be an array");
    for (const auto& s : shards) m.shards.push_back(shard_from_json(s, path + ", shard", false));
    if (static_cast<int>(m.shards.size()) != m.world_size)
      fail(path, std::to_string(m.shards.size()) + " shard files listed for world_size " +
                     std::to_string(m.world_size));
    for (int r = 0; r < m.world_size; ++r)
      if (m.shards[r].rank != r) fail(path, "shard list is not ordered by rank 0.." + std::to_string(m.world_size - 1));
    m.config = field(j, "config", path);
    m.state = field(j, "state", path);
    if (!m.config.is_object()) fail(path, "'config' must be an object");
    if (!m.state.is_object()) fail(path, "'state' must be an object");
    auto sf = j.find("state_fingerprint");
    if (sf != j.end()) {
      uint64_t v = 0;
      if (!sf->is_string() || !parse_fingerprint_hex(sf->get<std::string>(), &v))
        fail(path, "field 'state_fingerprint' must be 16 lowercase hex digits");
      if (state_fingerprint(m.state) != v)
        fail(path, "the training state (step, data position, optimizer step count, run config) does not match its "
                   "state_fingerprint " + fingerprint_hex(v) + ": it was changed or damaged after saving");
      m.state_fingerprint = v;
    }
    m.tensors = entries_from_json_or_throw(field(j, "tensors", path), path);
    std::map<std::string_view, int> seen;
    std::vector<FileSpan> spans;  // every stored piece's bytes, to find pieces sharing bytes
    for (auto& e : m.tensors) {
      std::sort(e.pieces.begin(), e.pieces.end(),
                [](const TensorPiece& a, const TensorPiece& b) { return a.global_offset < b.global_offset; });
      if (seen[e.key]++) fail(path, "tensor " + printable(e.key) + " is listed twice");
      // Element ranges first (no sum below can overflow once they are inside the tensor).
      Status s = validate_coverage(e, path);
      if (!s.ok()) return corrupt_data(s.message() + fix);
      const int64_t esize = static_cast<int64_t>(dtype_size(e.dtype));
      for (const auto& p : e.pieces) {
        if (p.rank >= m.world_size)
          fail(path, "tensor " + printable(e.key) + " has a piece of rank " + std::to_string(p.rank) +
                         ", but only ranks 0.." + std::to_string(m.world_size - 1) + " saved this checkpoint");
        const int64_t bytes = p.numel * esize;  // <= the tensor's byte size, which fits
        const int64_t file_bytes = m.shards[p.rank].bytes;
        if (p.offset_in_file > file_bytes || bytes > file_bytes - p.offset_in_file)
          fail(path, "tensor " + printable(e.key) + " has a piece at bytes [" + std::to_string(p.offset_in_file) +
                         ", +" + std::to_string(bytes) + ") of '" + p.file + "', past its recorded size " +
                         std::to_string(file_bytes));
        if (bytes > 0) spans.push_back({p.rank, p.offset_in_file, p.offset_in_file + bytes, &e});
      }
    }
    std::sort(spans.begin(), spans.end(), [](const FileSpan& a, const FileSpan& b) {
      return std::tie(a.rank, a.begin) < std::tie(b.rank, b.begin);
    });
    for (size_t i = 1; i < spans.size(); ++i) {
      const FileSpan &a = spans[i - 1], &b = spans[i];
      if (a.rank == b.rank && b.begin < a.end)
        fail(path, "pieces of tensors " + printable(a.entry->key) + " and " + printable(b.entry->key) +
                       " share bytes [" + std::to_string(b.begin) + ", " + std::to_string(std::min(a.end, b.end)) +
                       ") of '" + shard_file_name(a.rank) + "'; each piece must have bytes of its own");
    }
    return m;
  } catch (const ParseError& e) {
    return corrupt_data(e.message + fix);
  }
}

}  // namespace tessera::checkpoint
