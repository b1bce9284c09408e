// Layout of the flat parameter buffer (whole tensors or one tensor-parallel shard) and GPT-2 initialisation.
#include "model/param_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/log.h"
#include "core/rng.h"

namespace tessera {

Status validate_tensor_parallel(const ModelConfig& cfg, TensorParallelShard tp) {
  auto bad = [&](const std::string& m) {
    return invalid_argument("tensor parallel size " + std::to_string(tp.size) + ": " + m);
  };
  if (tp.size < 1) return bad("must be >= 1");
  if (tp.rank < 0 || tp.rank >= tp.size)
    return bad("rank " + std::to_string(tp.rank) + " is outside [0, " + std::to_string(tp.size) + ")");
  auto divides = [&](const char* field, int64_t v, const char* why) -> Status {
    if (v % tp.size == 0) return Status::ok_status();
    return bad("must divide " + std::string(field) + " (" + std::to_string(v) + ") so that each rank owns " + why +
               "; choose a tensor-parallel size that divides it");
  };
  // Mixture-of-experts layers are not split: every tp rank runs them whole (their experts are
  // divided by expert parallelism instead), so d_ff must divide only for dense MLPs (shared experts).
  bool dense_mlp = false;
  for (int l = 0; l < cfg.n_layer; ++l) dense_mlp = dense_mlp || cfg.has_dense_mlp(l);
  TS_RETURN_IF_ERROR(divides("n_head", cfg.n_head, "whole attention heads"));
  TS_RETURN_IF_ERROR(divides("n_kv_head", cfg.n_kv_head, "whole key/value heads"));
  if (dense_mlp) TS_RETURN_IF_ERROR(divides("d_ff", cfg.d_ff, "an equal slice of the MLP"));
  return Status::ok_status();
}

ParamLayout::ParamLayout(const ModelConfig& cfg, int first_layer, int last_layer, TensorParallelShard tp,
                         int64_t layer_alignment, ExpertShard experts, HeadStage head)
    : first_(first_layer), last_(last_layer),
      head_(last_layer == cfg.n_layer && (head == HeadStage::with_last_layer || first_layer == last_layer)), tp_(tp),
      experts_(experts), experts_per_layer_(cfg.moe_experts), layer_alignment_(layer_alignment) {
  TS_CHECK(0 <= first_layer && first_layer <= last_layer && last_layer <= cfg.n_layer && (first_layer < last_layer || head_))
      << "layers [" << first_layer << ", " << last_layer << ") of " << cfg.n_layer
      << ": a range holds at least one layer unless it is the head's own";
  const Status valid = validate_tensor_parallel(cfg, tp);
  TS_CHECK(valid.ok()) << valid.message();
  TS_CHECK(experts.size == 1 || (cfg.is_moe() && cfg.moe_experts % experts.size == 0 && experts.rank >= 0 &&
                                 experts.rank < experts.size))
      << "expert shard " << experts.rank << " of " << experts.size << " for " << cfg.moe_experts << " experts";
  TS_CHECK(layer_alignment >= 16 && layer_alignment % 16 == 0) << "layer_alignment " << layer_alignment;
  const int64_t C = cfg.d_model, V = cfg.vocab_size, F = cfg.d_ff, HS = cfg.head_size();
  const bool bias = cfg.has_bias();
  const int L = static_cast<int>(cfg.n_layer);
  vocab_ = V;
  padded_vocab_ = (V + tp.size - 1) / tp.size * tp.size;
  const std::vector<int64_t> qkv_blocks{cfg.n_head * HS, cfg.n_kv_head * HS, cfg.n_kv_head * HS};
  const std::vector<int64_t> fc_blocks = cfg.arch == Arch::llama ? std::vector<int64_t>{F, F} : std::vector<int64_t>{F};
  const auto col = TpSplit::column, row = TpSplit::row, vocab = TpSplit::vocab;
  if (first_layer == 0) {
    add("wte", {V, C}, -1, false, vocab);
    if (cfg.learned_positions()) add("wpe", {cfg.max_seq_len, C}, -1, false);
  }
  for (int i = first_layer; i < last_layer; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    add(p + "ln1.w", {C}, i, false);
    if (bias) add(p + "ln1.b", {C}, i, false);
    add(p + "attn.qkv.w", {cfg.qkv_width(), C}, i, true, col, qkv_blocks);
    if (bias) add(p + "attn.qkv.b", {cfg.qkv_width()}, i, false, col, qkv_blocks);
    add(p + "attn.proj.w", {C, cfg.n_head * HS}, i, true, row);
    if (bias) add(p + "attn.proj.b", {C}, i, false);
    add(p + "ln2.w", {C}, i, false);
    if (bias) add(p + "ln2.b", {C}, i, false);
    const int64_t fc_out = cfg.arch == Arch::llama ? 2 * F : F;
    if (cfg.has_dense_mlp(i)) {  // a dense layer's MLP, or a MoE layer's shared expert
      add(p + "mlp.fc.w", {fc_out, C}, i, true, col, fc_blocks);
      if (bias) add(p + "mlp.fc.b", {fc_out}, i, false, col, fc_blocks);
      add(p + "mlp.proj.w", {C, F}, i, true, row);
      if (bias) add(p + "mlp.proj.b", {C}, i, false);
    }
    if (cfg.is_moe_layer(i)) {  // router and E experts stacked by expert index (expert e: its rows)
      const int64_t E = cfg.moe_experts;
      add(p + "moe.gate.w", {E, C}, i, true);
      add(p + "moe.fc.w", {E * 2 * F, C}, i, true, TpSplit::replicated, {}, /*expert=*/true);
      add(p + "moe.proj.w", {E * C, F}, i, true, TpSplit::replicated, {}, /*expert=*/true);
    }
  }
  if (head_) {
    add("lnf.w", {C}, L, false);
    if (bias) add("lnf.b", {C}, L, false);
    if (!cfg.tied_embeddings) add("lm_head.w", {V, C}, L, true, vocab);
    // A tied head on a later pipeline stage than the embedding keeps its own copy of wte (same name,
    // so the same initial values); its gradient is summed with the first stage's before the update.
    else if (first_layer > 0) add("wte", {V, C}, L, false, vocab);
  }
  total_ = (total_ + layer_alignment_ - 1) / layer_alignment_ * layer_alignment_;
}

Result<ParamLayout> ParamLayout::create(const ModelConfig& cfg, int first_layer, int last_layer,
                                        TensorParallelShard tp) {
  TS_RETURN_IF_ERROR(validate_tensor_parallel(cfg, tp));
  return ParamLayout(cfg, first_layer, last_layer, tp);
}

void ParamLayout::add(const std::string& name, Shape global_shape, int layer, bool decay, TpSplit split,
                      std::vector<int64_t> blocks, bool expert) {
  const int64_t tp = tp_.size;
  ParamInfo p;
  p.name = name;
  p.shape = global_shape;
  p.expert = expert;
  if (expert) p.shape[0] /= experts_.size;  // the stored experts' rows
  if (split == TpSplit::column) p.shape[0] /= tp;  // every block divides (validated)
  if (split == TpSplit::row) p.shape[1] /= tp;
  if (split == TpSplit::vocab) p.shape[0] = padded_vocab_ / tp;
  p.numel = shape_numel(p.shape);
  p.global_shape = std::move(global_shape);
  if (!params_.empty() && params_.back().layer != layer)
    total_ = (total_ + layer_alignment_ - 1) / layer_alignment_ * layer_alignment_;
  p.offset = total_;
  p.layer = layer;
  p.decay = decay;
  p.split = split;
  p.blocks = std::move(blocks);
  total_ += (p.numel + 15) / 16 * 16;  // 64-byte aligned starts
  index_[name] = params_.size();
  params_.push_back(std::move(p));
}

std::pair<int64_t, int64_t> ParamLayout::local_vocab_range() const {
  const int64_t rows = padded_vocab_ / tp_.size;
  return {tp_.rank * rows, (tp_.rank + 1) * rows};
}

std::vector<TensorPiece> ParamLayout::shard_pieces(const ParamInfo& p) const {
  const int64_t r = tp_.rank, n = tp_.size;
  const int64_t cols = p.global_shape.size() > 1 ? p.global_shape[1] : 1;  // elements per dim-0 row
  std::vector<TensorPiece> pieces;
  if (p.expert && experts_sharded()) {
    pieces.push_back({0, experts_.rank * p.numel, p.numel});
  } else if (n == 1 || p.split == TpSplit::replicated) {
    pieces.push_back({0, 0, p.numel});
  } else if (p.split == TpSplit::column) {
    int64_t local = 0, global = 0;
    for (int64_t rows : p.blocks) {  // block (rows, cols): rank r keeps rows [r*rows/n, (r+1)*rows/n)
      const int64_t numel = rows / n * cols;
      pieces.push_back({local, global + r * numel, numel});
      local += numel;
      global += rows * cols;
    }
  } else if (p.split == TpSplit::row) {  // (R, K) -> (R, K/n): columns [r*K/n, (r+1)*K/n) of each row
    const int64_t R = p.global_shape[0], K = p.global_shape[1], k = K / n;
    for (int64_t i = 0; i < R; ++i) pieces.push_back({i * k, i * K + r * k, k});
  } else {  // vocab: rows [begin, min(end, V)); the rest is padding
    const auto [begin, end] = local_vocab_range();
    const int64_t real_end = std::min(end, vocab_);
    if (real_end > begin) pieces.push_back({0, begin * cols, (real_end - begin) * cols});
  }
  return pieces;
}

const ParamInfo* ParamLayout::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &params_[it->second];
}

const ParamInfo& ParamLayout::get(const std::string& name) const {
  const ParamInfo* p = find(name);
  TS_CHECK(p) << "no parameter named " << name;
  return *p;
}

std::pair<int64_t, int64_t> ParamLayout::layer_range(int layer) const {
  int64_t b = -1, e = -1;
  for (const auto& p : params_) {
    if (p.layer != layer) continue;
    if (b < 0) b = p.offset;
    e = p.offset + (p.numel + 15) / 16 * 16;
  }
  if (b < 0) return {0, 0};
  return {b, std::min(total_, (e + layer_alignment_ - 1) / layer_alignment_ * layer_alignment_)};
}

std::vector<std::pair<int64_t, int64_t>> expert_ranges(const ParamLayout& layout) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (!layout.experts_sharded()) return out;
  const auto& params = layout.params();
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].expert) continue;
    const int64_t end = i + 1 < params.size() ? params[i + 1].offset : layout.total_numel();
    if (!out.empty() && out.back().second == params[i].offset) out.back().second = end;
    else out.emplace_back(params[i].offset, end);
  }
  return out;
}

namespace {
Buffer store_buffer(const StoreOptions& o, size_t bytes, MemCategory category, Residency residency) {
  return o.backend ? o.backend->allocate(bytes, category, residency) : Buffer(bytes, category, residency);
}
}  // namespace

ParamStore::ParamStore(ParamLayout layout, StoreOptions options)
    : layout_(std::move(layout)),
      params_(store_buffer(options, static_cast<size_t>(layout_.total_numel() + options.slack) * sizeof(float),
                           MemCategory::parameters, options.params)),
      grads_(store_buffer(options, static_cast<size_t>(layout_.total_numel() + options.slack) * sizeof(float),
                          MemCategory::gradients, options.grads)),
      backend_(options.backend) {}

void ParamStore::zero_grads() { grads_.zero_range(0, static_cast<size_t>(numel()) * sizeof(float)); }

void ParamStore::copy_params_to_host(int64_t offset, int64_t n, float* host) const {
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (backend_) backend_->copy_to_host(host, params() + offset, bytes);
  else if (bytes) std::memcpy(host, params() + offset, bytes);
}

void ParamStore::copy_params_from_host(int64_t offset, int64_t n, const float* host) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (backend_) backend_->copy_to_device(params() + offset, host, bytes);
  else if (bytes) std::memcpy(params() + offset, host, bytes);
}

namespace {
uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void init_parameters(ParamStore& store, const ModelConfig& cfg, uint64_t seed) {
  const float residual_std = 0.02f / std::sqrt(2.0f * static_cast<float>(cfg.n_layer));
  const ParamLayout& layout = store.layout();
  std::vector<float> global;  // a sharded tensor's whole stream, cut into this rank's pieces
  std::vector<float> host;    // one tensor's initial values, drawn on the host
  // Host memory is written in place; a device's gets each tensor drawn on the host and copied across.
  const bool on_host = store.backend() == nullptr || store.backend()->device() == Device::cpu;
  for (const auto& p : layout.params()) {
    if (!on_host) host.resize(static_cast<size_t>(p.numel));
    float* w = on_host ? store.params() + p.offset : host.data();
    auto place = [&] {
      if (!on_host) store.copy_params_from_host(p.offset, p.numel, w);  // crosses to the device
    };
    if (p.shape.size() == 1) {
      const bool norm_weight = ends_with(p.name, "ln1.w") || ends_with(p.name, "ln2.w") || p.name == "lnf.w";
      for (int64_t i = 0; i < p.numel; ++i) w[i] = norm_weight ? 1.f : 0.f;
      place();
      continue;
    }
    Rng rng(seed ^ hash_name(p.name));
    const bool residual =
        ends_with(p.name, "attn.proj.w") || ends_with(p.name, "mlp.proj.w") || ends_with(p.name, "moe.proj.w");
    const float stddev = residual ? residual_std : 0.02f;
    if (p.numel == shape_numel(p.global_shape)) {  // a whole tensor
      for (int64_t i = 0; i < p.numel; ++i) w[i] = rng.normal(0.f, stddev);
      place();
      continue;
    }
    global.resize(static_cast<size_t>(shape_numel(p.global_shape)));
    for (float& x : global) x = rng.normal(0.f, stddev);
    std::fill(w, w + p.numel, 0.f);
    for (const TensorPiece& piece : layout.shard_pieces(p))
      std::copy_n(global.data() + piece.global_offset, piece.numel, w + piece.local_offset);
    place();
  }
}

}  // namespace tessera
