// Layout of the flat parameter buffer and GPT-2 initialisation.
#include "model/param_layout.h"

#include <cmath>
#include <cstring>

#include "core/log.h"
#include "core/rng.h"

namespace tessera {

ParamLayout::ParamLayout(const ModelConfig& cfg, int first_layer, int last_layer)
    : first_(first_layer), last_(last_layer) {
  const int64_t C = cfg.d_model, V = cfg.vocab_size, F = cfg.d_ff, HS = cfg.head_size();
  const bool bias = cfg.has_bias();
  const int L = static_cast<int>(cfg.n_layer);
  if (first_layer == 0) {
    add("wte", {V, C}, -1, false);
    if (cfg.learned_positions()) add("wpe", {cfg.max_seq_len, C}, -1, false);
  }
  for (int i = first_layer; i < last_layer; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    add(p + "ln1.w", {C}, i, false);
    if (bias) add(p + "ln1.b", {C}, i, false);
    add(p + "attn.qkv.w", {cfg.qkv_width(), C}, i, true);
    if (bias) add(p + "attn.qkv.b", {cfg.qkv_width()}, i, false);
    add(p + "attn.proj.w", {C, cfg.n_head * HS}, i, true);
    if (bias) add(p + "attn.proj.b", {C}, i, false);
    add(p + "ln2.w", {C}, i, false);
    if (bias) add(p + "ln2.b", {C}, i, false);
    const int64_t fc_out = cfg.arch == Arch::llama ? 2 * F : F;
    add(p + "mlp.fc.w", {fc_out, C}, i, true);
    if (bias) add(p + "mlp.fc.b", {fc_out}, i, false);
    add(p + "mlp.proj.w", {C, F}, i, true);
    if (bias) add(p + "mlp.proj.b", {C}, i, false);
  }
  if (last_layer == L) {
    add("lnf.w", {C}, L, false);
    if (bias) add("lnf.b", {C}, L, false);
    if (!cfg.tied_embeddings) add("lm_head.w", {V, C}, L, true);
  }
}

void ParamLayout::add(const std::string& name, Shape shape, int layer, bool decay) {
  ParamInfo p;
  p.name = name;
  p.numel = shape_numel(shape);
  p.shape = std::move(shape);
  p.offset = total_;
  p.layer = layer;
  p.decay = decay;
  total_ += (p.numel + 15) / 16 * 16;  // 64-byte aligned starts
  index_[name] = params_.size();
  params_.push_back(std::move(p));
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
  return {b, e};
}

ParamStore::ParamStore(ParamLayout layout)
    : layout_(std::move(layout)),
      params_(static_cast<size_t>(layout_.total_numel()) * sizeof(float), MemCategory::parameters),
      grads_(static_cast<size_t>(layout_.total_numel()) * sizeof(float), MemCategory::gradients) {}

void ParamStore::zero_grads() { std::memset(grads(), 0, static_cast<size_t>(numel()) * sizeof(float)); }

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
  for (const auto& p : store.layout().params()) {
    float* w = store.params() + p.offset;
    if (p.shape.size() == 1) {
      const bool norm_weight = ends_with(p.name, "ln1.w") || ends_with(p.name, "ln2.w") || p.name == "lnf.w";
      for (int64_t i = 0; i < p.numel; ++i) w[i] = norm_weight ? 1.f : 0.f;
      continue;
    }
    Rng rng(seed ^ hash_name(p.name));
    const bool residual = ends_with(p.name, "attn.proj.w") || ends_with(p.name, "mlp.proj.w");
    const float stddev = residual ? residual_std : 0.02f;
    for (int64_t i = 0; i < p.numel; ++i) w[i] = rng.normal(0.f, stddev);
  }
}

}  // namespace tessera
