// Checkpoint comparison: whole-tensor reads through CheckpointReader (checksums verified), a
// bitwise element comparison, and the differing elements mapped back onto each side's pieces.
#include "checkpoint/diff.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

namespace tessera::checkpoint {
namespace {

std::string shape_text(const TensorEntry& e) {
  std::string s = std::string(dtype_name(e.dtype)) + " [";
  for (size_t i = 0; i < e.global_shape.size(); ++i) s += (i ? "," : "") + std::to_string(e.global_shape[i]);
  return s + "]";
}

// The pieces of `e` holding any element whose flag is set.
std::vector<DifferingPiece> differing_pieces(const TensorEntry& e, const std::vector<uint8_t>& differs) {
  std::vector<DifferingPiece> out;
  for (const TensorPiece& p : e.pieces) {
    const auto first = differs.begin() + p.global_offset;
    if (std::find(first, first + p.numel, uint8_t{1}) != first + p.numel)
      out.push_back({p.rank, p.global_offset, p.global_offset + p.numel});
  }
  return out;
}

Status compare_tensor(const CheckpointReader& ra, const TensorEntry& ea, const CheckpointReader& rb,
                      const TensorEntry& eb, TensorDiff* d) {
  const int64_t n = shape_numel(ea.global_shape);
  const size_t esize = dtype_size(ea.dtype);
  d->numel = n;
  std::vector<char> a(static_cast<size_t>(n) * esize), b(a.size());
  TS_RETURN_IF_ERROR(ra.read(ea.key, 0, n, a.data()));
  TS_RETURN_IF_ERROR(rb.read(eb.key, 0, n, b.data()));
  if (std::memcmp(a.data(), b.data(), a.size()) == 0) return Status::ok_status();
  d->kind = TensorDiffKind::differs;
  std::vector<uint8_t> differs(static_cast<size_t>(n), 0);
  double max_abs = 0;
  for (int64_t i = 0; i < n; ++i) {
    const char* x = a.data() + static_cast<size_t>(i) * esize;
    const char* y = b.data() + static_cast<size_t>(i) * esize;
    if (std::memcmp(x, y, esize) == 0) continue;
    differs[static_cast<size_t>(i)] = 1;
    if (d->first_difference < 0) d->first_difference = i;
    ++d->differing;
    if (ea.dtype == DType::f32) {
      float fx, fy;
      std::memcpy(&fx, x, 4);
      std::memcpy(&fy, y, 4);
      const double diff = std::fabs(static_cast<double>(fx) - static_cast<double>(fy));
      // NaN against a number (or NaNs with other bits) has no finite distance.
      max_abs = std::isnan(diff) ? std::numeric_limits<double>::infinity() : std::max(max_abs, diff);
    }
  }
  if (ea.dtype == DType::f32) d->max_abs_diff = max_abs;
  d->pieces_a = differing_pieces(ea, differs);
  d->pieces_b = differing_pieces(eb, differs);
  return Status::ok_status();
}

}  // namespace

const char* tensor_diff_kind_name(TensorDiffKind kind) {
  switch (kind) {
    case TensorDiffKind::equal: return "equal";
    case TensorDiffKind::differs: return "differs";
    case TensorDiffKind::only_in_a: return "only_in_a";
    case TensorDiffKind::only_in_b: return "only_in_b";
    case TensorDiffKind::shape_differs: return "shape_differs";
  }
  return "?";
}

bool CheckpointDiff::equal() const {
  if (!config_differences.empty() || !state_differences.empty()) return false;
  return std::all_of(tensors.begin(), tensors.end(), [](const TensorDiff& t) { return t.kind == TensorDiffKind::equal; });
}

Result<CheckpointDiff> diff_checkpoints(const std::string& a, const std::string& b) {
  TS_ASSIGN_OR_RETURN(CheckpointReader ra, open_checkpoint(a));
  TS_ASSIGN_OR_RETURN(CheckpointReader rb, open_checkpoint(b));
  CheckpointDiff out;
  out.a = a;
  out.b = b;
  out.ranks_a = ra.world_size();
  out.ranks_b = rb.world_size();
  out.config_differences = config_differences(ra.config(), rb.config());
  out.state_differences = config_differences(ra.state(), rb.state());
  std::set<std::string> keys;
  for (const TensorEntry& e : ra.tensors()) keys.insert(e.key);
  for (const TensorEntry& e : rb.tensors()) keys.insert(e.key);
  for (const std::string& key : keys) {
    const TensorEntry* ea = ra.find(key);
    const TensorEntry* eb = rb.find(key);
    TensorDiff d;
    d.key = key;
    if (ea) d.fingerprint_a = ea->fingerprint;
    if (eb) d.fingerprint_b = eb->fingerprint;
    if (!ea || !eb) {
      d.kind = ea ? TensorDiffKind::only_in_a : TensorDiffKind::only_in_b;
    } else if (ea->dtype != eb->dtype || ea->global_shape != eb->global_shape) {
      d.kind = TensorDiffKind::shape_differs;
      d.detail = shape_text(*ea) + " vs " + shape_text(*eb);
    } else {
      TS_RETURN_IF_ERROR(compare_tensor(ra, *ea, rb, *eb, &d));
      if (d.kind == TensorDiffKind::equal && d.fingerprint_a && d.fingerprint_b && *d.fingerprint_a != *d.fingerprint_b)
        d.detail = "equal contents but different saved fingerprints: one manifest does not match its pieces (run "
                   "`tessera checkpoint fingerprint` on each)";
    }
    out.tensors.push_back(std::move(d));
  }
  return out;
}

}  // namespace tessera::checkpoint
