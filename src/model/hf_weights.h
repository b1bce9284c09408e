// Mapping between Tessera's flat parameter layout and Hugging Face tensor names and layouts
// (GPT-2: GPT2Model / GPT2LMHeadModel, whose Conv1D weights are stored transposed (in, out);
// LLaMA: LlamaForCausalLM, with q/k/v and gate/up stored as separate (out, in) matrices).
//
//   GPT-2                                   Tessera
//   wte.weight (V,C), wpe.weight (maxT,C)   wte, wpe
//   h.{i}.ln_1.weight/.bias                 h.{i}.ln1.w/.b
//   h.{i}.attn.c_attn.weight (C,3C)/.bias   h.{i}.attn.qkv.w (3C,C) transposed /.b
//   h.{i}.attn.c_proj.weight (C,C)/.bias    h.{i}.attn.proj.w transposed /.b
//   h.{i}.ln_2.weight/.bias                 h.{i}.ln2.w/.b
//   h.{i}.mlp.c_fc.weight (C,F)/.bias       h.{i}.mlp.fc.w (F,C) transposed /.b
//   h.{i}.mlp.c_proj.weight (F,C)/.bias     h.{i}.mlp.proj.w (C,F) transposed /.b
//   ln_f.weight/.bias                       lnf.w/.b
//   LLaMA
//   model.embed_tokens.weight               wte
//   model.layers.{i}.input_layernorm.weight h.{i}.ln1.w
//   ...self_attn.{q,k,v}_proj.weight        rows [q | k | v] of h.{i}.attn.qkv.w
//   ...self_attn.o_proj.weight              h.{i}.attn.proj.w
//   ...post_attention_layernorm.weight      h.{i}.ln2.w
//   ...mlp.{gate,up}_proj.weight            rows [gate | up] of h.{i}.mlp.fc.w
//   ...mlp.down_proj.weight                 h.{i}.mlp.proj.w
//   model.norm.weight, lm_head.weight       lnf.w, lm_head.w
//   Mixture-of-experts layers (Mixtral names; the shared expert, which Mixtral lacks, as Qwen2-MoE's)
//   ...block_sparse_moe.gate.weight (E,C)            h.{i}.moe.gate.w
//   ...block_sparse_moe.experts.{e}.w1/w3.weight     rows [e*2F, e*2F+F) / [e*2F+F, (e+1)*2F) of h.{i}.moe.fc.w
//   ...block_sparse_moe.experts.{e}.w2.weight (C,F)  rows [e*C, (e+1)*C) of h.{i}.moe.proj.w
//   ...mlp.shared_expert.{gate,up,down}_proj.weight  h.{i}.mlp.fc.w / mlp.proj.w of a MoE layer
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/safetensors.h"

namespace tessera {

// One Hugging Face tensor and where it lives in a Tessera parameter: rows [row_begin, row_begin +
// rows) of `tessera_name` (the whole tensor unless q/k/v or gate/up are split out), stored
// transposed in the HF file when `transposed` (GPT-2 Conv1D).
struct HfTensorMap {
  std::string hf_name;
  std::string tessera_name;
  Shape hf_shape;
  int64_t row_begin = 0;
  int64_t rows = 0;
  bool transposed = false;
};

// The HF tensors of every parameter in `layout` (any layer range), in layout order.
std::vector<HfTensorMap> hf_tensor_map(const ModelConfig& cfg, const ParamLayout& layout);

// Fills `dst` (layout.total_numel() floats, layout offsets) from an HF checkpoint. Every tensor of
// the layout must be present with exactly the expected shape; F16/BF16 convert to f32. GPT-2
// names may carry a "transformer." prefix; attention-mask buffers (attn.bias, attn.masked_bias),
// rotary inv_freq buffers and a tied model's lm_head.weight of shape (V,C) are ignored. Any other
// tensor is an error, except those of layers outside a partial (pipeline stage) layout.
Status import_hf_weights(const SafetensorsFile& file, const ModelConfig& cfg, const ParamLayout& layout, float* dst);
// `path` is a safetensors file or a Hugging Face model directory (its model.safetensors; its
// config.json must describe the same model as `cfg`, or the error names the first difference).
Status import_hf_weights(const std::string& path, const ModelConfig& cfg, const ParamLayout& layout, float* dst);

// How GPT-2 tensors are named: bare (GPT2Model's names, what `tessera export --out` has always
// written) or with GPT2LMHeadModel's "transformer." prefix. from_pretrained needs the prefix next to
// an untied lm_head.weight: bare names plus lm_head.weight is a mix it refuses ("state dictionary
// ... corrupted", transformers 4.40). LLaMA names are the same either way.
enum class HfGpt2Names { bare, lm_head_model };

// The parameters (or gradients) in `src` (layout offsets) as f32 tensors with HF names and
// layouts, in layout order. A tied model has no lm_head.weight (HF ties it to the embedding).
std::vector<NamedTensor> to_hf_tensors(const ModelConfig& cfg, const ParamLayout& layout, const float* src,
                                       HfGpt2Names names = HfGpt2Names::bare);

// Writes a full-model layout as an HF-named safetensors file with metadata from hf_metadata().
Status export_hf_weights(const std::string& path, const ModelConfig& cfg, const ParamLayout& layout,
                         const float* src, HfGpt2Names names = HfGpt2Names::bare);

// {"format": "pt", "tessera.arch": ..., "tessera.vocab_size": ..., ...}: enough to rebuild cfg.
std::map<std::string, std::string> hf_metadata(const ModelConfig& cfg);
// The ModelConfig recorded by hf_metadata(); invalid_argument naming the missing or bad key
// when the file was not written by Tessera (pass a model preset instead).
Result<ModelConfig> config_from_metadata(const SafetensorsFile& file);

}  // namespace tessera
