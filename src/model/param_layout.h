// Flat parameter/gradient buffers with named views. Every tensor of a model (or of the layer range
// [first_layer, last_layer) a pipeline stage owns) lives at a fixed offset in one f32 buffer, and
// its gradient at the same offset in a second one, so data parallelism can bucket the gradients and
// ZeRO can shard both as plain ranges.
//
// Tessera's names and layouts (weights are (out, in), as torch.nn.Linear):
//   wte (V,C)  wpe (maxT,C) [gpt2]
//   h.{i}.ln1.w (C)  h.{i}.ln1.b (C) [gpt2]
//   h.{i}.attn.qkv.w ((NH+2*NKV)*HS, C) rows [q | k | v]   h.{i}.attn.qkv.b [gpt2]
//   h.{i}.attn.proj.w (C, NH*HS)   h.{i}.attn.proj.b [gpt2]
//   h.{i}.ln2.w (C)  h.{i}.ln2.b (C) [gpt2]
//   h.{i}.mlp.fc.w (F, C) [gpt2] or (2F, C) rows [gate | up] [llama]   h.{i}.mlp.fc.b [gpt2]
//   h.{i}.mlp.proj.w (C, F)   h.{i}.mlp.proj.b [gpt2]
//   lnf.w (C)  lnf.b (C) [gpt2]   lm_head.w (V,C) [untied only]
// Order in the buffer: embeddings, layer 0 .. L-1, final norm and head. Each tensor starts on a
// 64-byte boundary.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/memory.h"
#include "core/tensor.h"
#include "model/config.h"

namespace tessera {

struct ParamInfo {
  std::string name;
  Shape shape;
  int64_t offset = 0;   // in elements, into the flat buffer
  int64_t numel = 0;
  int layer = -1;       // -1: embeddings; n_layer: final norm/head; else the layer index
  bool decay = false;   // weight decay applies (matrices only by default)
};

class ParamLayout {
 public:
  // The tensors of layers [first_layer, last_layer); embeddings when first_layer == 0, the final
  // norm and head when last_layer == n_layer.
  ParamLayout(const ModelConfig& cfg, int first_layer, int last_layer);
  explicit ParamLayout(const ModelConfig& cfg) : ParamLayout(cfg, 0, static_cast<int>(cfg.n_layer)) {}

  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t total_numel() const { return total_; }
  const ParamInfo* find(const std::string& name) const;
  const ParamInfo& get(const std::string& name) const;  // TS_CHECKs existence
  // [begin, end) element range covering all tensors of `layer` (-1 and n_layer allowed).
  std::pair<int64_t, int64_t> layer_range(int layer) const;
  int first_layer() const { return first_; }
  int last_layer() const { return last_; }

 private:
  void add(const std::string& name, Shape shape, int layer, bool decay);
  std::vector<ParamInfo> params_;
  std::unordered_map<std::string, size_t> index_;
  int64_t total_ = 0;
  int first_, last_;
};

// Parameters and their gradients: two flat buffers over one layout.
class ParamStore {
 public:
  explicit ParamStore(ParamLayout layout);
  const ParamLayout& layout() const { return layout_; }
  float* params() { return params_.as<float>(); }
  const float* params() const { return params_.as<float>(); }
  float* grads() { return grads_.as<float>(); }
  const float* grads() const { return grads_.as<float>(); }
  int64_t numel() const { return layout_.total_numel(); }
  float* param(const std::string& name) { return params() + layout_.get(name).offset; }
  float* grad(const std::string& name) { return grads() + layout_.get(name).offset; }
  const float* param(const std::string& name) const { return params() + layout_.get(name).offset; }
  const float* grad(const std::string& name) const { return grads() + layout_.get(name).offset; }
  void zero_grads();

 private:
  ParamLayout layout_;
  Buffer params_;
  Buffer grads_;
};

// GPT-2 initialisation: weights N(0, 0.02), residual output projections (attn.proj, mlp.proj)
// N(0, 0.02/sqrt(2L)), biases 0, norm weights 1. Each tensor draws from its own stream seeded by
// (seed, name), so a pipeline stage initialises its layers exactly as the whole model would.
void init_parameters(ParamStore& store, const ModelConfig& cfg, uint64_t seed);

}  // namespace tessera
