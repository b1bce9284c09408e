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
//   (a MoE layer, cfg.is_moe_layer(i), has mlp.* only with a shared expert, and E experts:)
//   h.{i}.moe.gate.w (E, C) router   h.{i}.moe.fc.w (E*2F, C) expert e: rows [e*2F, (e+1)*2F) = [gate | up]
//   h.{i}.moe.proj.w (E*C, F) expert e: rows [e*C, (e+1)*C)
//   lnf.w (C)  lnf.b (C) [gpt2]   lm_head.w (V,C) [untied only]
// Order in the buffer: embeddings, layer 0 .. L-1, final norm and head. Each tensor starts on a
// 64-byte boundary. A tensor-parallel layout (rank r of p) holds rank r's shard of each tensor
// under the same names and order (see TpSplit); p = 1 is the whole model.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/memory.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/config.h"

namespace tessera {

// Rank `rank` of a tensor-parallel group of `size`; {0, 1}: whole tensors.
struct TensorParallelShard {
  int rank = 0;
  int size = 1;
};

// Rank `rank` of an expert-parallel group of `size` that stores only its own experts (E / size of
// every MoE layer, experts [rank*E/size, (rank+1)*E/size)); {0, 1}: every expert, as ZeRO keeps them.
struct ExpertShard {
  int rank = 0;
  int size = 1;
};

// How a tensor is divided among tp ranks (Megatron's column/row/vocab-parallel layers).
enum class TpSplit : uint8_t {
  replicated,  // every rank holds all of it (one piece each): norms, wpe, row-parallel biases
  column,      // dim 0 (output rows), each block separately: qkv.w/.b [q | k | v] by heads,
               // mlp.fc.w/.b ([gate | up] for llama); rank r keeps [block_r of q | of k | of v]
  row,         // dim 1 (input columns): attn.proj.w, mlp.proj.w
  vocab,       // dim 0 (vocabulary rows, V padded to a multiple of p; padding rows map nowhere)
};

// A contiguous run of a shard inside the flattened global (unsharded) tensor.
struct TensorPiece {
  int64_t local_offset = 0;   // elements from the start of the local tensor
  int64_t global_offset = 0;  // elements from the start of the global tensor
  int64_t numel = 0;
};

struct ParamInfo {
  std::string name;
  Shape shape;          // local shape (this rank's shard; the whole tensor when tp size is 1)
  int64_t offset = 0;   // in elements, into the flat buffer
  int64_t numel = 0;    // of the local shard
  int layer = -1;       // -1: embeddings; n_layer: final norm/head; else the layer index
  bool decay = false;   // weight decay applies (matrices only by default)
  TpSplit split = TpSplit::replicated;
  Shape global_shape;   // the unsharded tensor (true vocabulary size for wte/lm_head.w)
  std::vector<int64_t> blocks;  // column: global dim-0 sizes of the separately split blocks
  bool expert = false;  // a MoE layer's stacked experts (moe.fc.w, moe.proj.w): split by ExpertShard
};

// Whether `cfg` can be split `tp` ways: heads, KV heads and d_ff divisible by tp.size, rank in range.
Status validate_tensor_parallel(const ModelConfig& cfg, TensorParallelShard tp);

// Where the final norm and head sit: with the layers that end at n_layer (every split but one), or
// on a stage of their own, the empty range [n_layer, n_layer) (a pipeline split whose last stage
// holds the head alone, GPT-2's head weighing ~5 layers); the range before it then ends at
// n_layer without the head.
enum class HeadStage { with_last_layer, own };

class ParamLayout {
 public:
  // The tensors of layers [first_layer, last_layer); embeddings when first_layer == 0, the final
  // norm and head when last_layer == n_layer and `head` puts them there (with tied embeddings and
  // first_layer > 0: a copy of wte, layer n_layer, for the head). An empty range only as the head's own.
  // TS_CHECKs validate_tensor_parallel (use create() where the split comes from user input).
  // layer_alignment (elements, a multiple of 16): each layer's tensors start, and the buffer ends,
  // on a multiple of it, so every layer's range divides evenly into ZeRO shards (16 * dp).
  // experts: which experts this rank stores (TS_CHECKs that experts.size divides moe_experts).
  ParamLayout(const ModelConfig& cfg, int first_layer, int last_layer, TensorParallelShard tp = {},
              int64_t layer_alignment = 16, ExpertShard experts = {}, HeadStage head = HeadStage::with_last_layer);
  explicit ParamLayout(const ModelConfig& cfg, TensorParallelShard tp = {})
      : ParamLayout(cfg, 0, static_cast<int>(cfg.n_layer), tp) {}
  static Result<ParamLayout> create(const ModelConfig& cfg, int first_layer, int last_layer,
                                    TensorParallelShard tp);

  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t total_numel() const { return total_; }
  const ParamInfo* find(const std::string& name) const;
  const ParamInfo& get(const std::string& name) const;  // TS_CHECKs existence
  // [begin, end) element range covering all tensors of `layer` (-1 and n_layer allowed); with a
  // layer_alignment the range runs to the next layer's start (a multiple of it).
  std::pair<int64_t, int64_t> layer_range(int layer) const;
  int first_layer() const { return first_; }
  int last_layer() const { return last_; }
  bool holds_embedding() const { return first_ == 0; }
  bool holds_head() const { return head_; }
  // All of the model: every layer, the embedding and the head (which only a range ending at n_layer holds).
  bool whole_model() const { return holds_embedding() && holds_head(); }

  TensorParallelShard tp() const { return tp_; }
  ExpertShard experts() const { return experts_; }
  bool experts_sharded() const { return experts_.size > 1; }
  // The global index of the first expert this rank stores (0 unless experts_sharded()).
  int64_t first_stored_expert() const { return experts_.rank * (experts_per_layer_ / experts_.size); }
  // Whether every tensor is whole (no tp or expert shard; any layer range).
  bool whole_tensors() const { return tp_.size == 1 && experts_.size == 1; }
  int64_t vocab_size() const { return vocab_; }                // true V
  int64_t padded_vocab_size() const { return padded_vocab_; }  // V rounded up to a multiple of tp size
  // Vocabulary rows [begin, end) of this rank's wte/lm_head shard (end may pass the true V).
  std::pair<int64_t, int64_t> local_vocab_range() const;
  // Where this rank's shard of `p` lies in the flattened global tensor, in local order: one piece
  // for a whole tensor, one per block for column splits, one per row for row splits; none for a
  // vocabulary shard made only of padding; one (at the first stored expert's rows) for sharded experts.
  std::vector<TensorPiece> shard_pieces(const ParamInfo& p) const;

 private:
  void add(const std::string& name, Shape global_shape, int layer, bool decay, TpSplit split = TpSplit::replicated,
           std::vector<int64_t> blocks = {}, bool expert = false);
  std::vector<ParamInfo> params_;
  std::unordered_map<std::string, size_t> index_;
  int64_t total_ = 0;
  int first_, last_;
  bool head_;
  TensorParallelShard tp_;
  ExpertShard experts_;
  int64_t experts_per_layer_ = 0;
  int64_t vocab_ = 0, padded_vocab_ = 0;
  int64_t layer_alignment_ = 16;
};

// How a ParamStore allocates: ZeRO stages 2 and 3 use paged buffers (core/memory.h) so only the
// pages in use are resident, and every ZeRO stage needs `slack` elements after the last tensor (its
// per-layer collectives read and write whole padded slices).
struct StoreOptions {
  Residency params = Residency::resident;
  Residency grads = Residency::resident;
  int64_t slack = 0;
  Backend* backend = nullptr;  // whose memory the buffers are (nullptr: plain host buffers, for tools and tests)
};

// Parameters and their gradients: two flat buffers over one layout.
class ParamStore {
 public:
  explicit ParamStore(ParamLayout layout, StoreOptions options = {});
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
  // Zeroes the gradients (a paged buffer hands its pages back instead of writing zeros).
  void zero_grads();
  Buffer& param_buffer() { return params_; }
  Buffer& grad_buffer() { return grads_; }
  // Whose memory the buffers are (StoreOptions::backend; nullptr: plain host buffers).
  Backend* backend() const { return backend_; }
  // The named crossings of the host/device line for parameters (initialisation, checkpoints,
  // hashes, fault injection): elements [offset, offset + n) of the flat parameter buffer to or from
  // host memory, through the backend's copies (a plain copy for host buffers, and on the CPU).
  void copy_params_to_host(int64_t offset, int64_t n, float* host) const;
  void copy_params_from_host(int64_t offset, int64_t n, const float* host);

 private:
  ParamLayout layout_;
  Buffer params_;
  Buffer grads_;
  Backend* backend_ = nullptr;
};

// The flat ranges [offset of an expert tensor, offset of the next tensor) of the sharded experts,
// adjacent ones merged, in buffer order; empty unless layout.experts_sharded().
std::vector<std::pair<int64_t, int64_t>> expert_ranges(const ParamLayout& layout);

// GPT-2 initialisation: weights N(0, 0.02), residual output projections (attn.proj, mlp.proj)
// N(0, 0.02/sqrt(2L)), biases 0, norm weights 1. Each tensor draws from its own stream seeded by
// (seed, name) over the global tensor, so a pipeline stage or a tp shard initialises its part
// exactly as the whole model would (vocabulary padding rows are 0).
void init_parameters(ParamStore& store, const ModelConfig& cfg, uint64_t seed);

}  // namespace tessera
