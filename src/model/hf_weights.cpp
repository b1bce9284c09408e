// Hugging Face <-> Tessera weight mapping: names, row splits (LLaMA q/k/v, gate/up) and the
// GPT-2 Conv1D transposes, plus config metadata written next to exported weights.
#include "model/hf_weights.h"

#include <charconv>
#include <cstring>
#include <unordered_map>

#include "core/log.h"
#include "model/hf_config.h"
#include "model/hf_directory.h"

namespace tessera {

namespace {

std::string squote(const std::string& s) { return "'" + s + "'"; }

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// "h.<digits>.<rest>" -> layer and rest; false for non-layer names.
bool split_layer_name(const std::string& name, const std::string& prefix, int* layer, std::string* rest) {
  if (!starts_with(name, prefix)) return false;
  const char* b = name.data() + prefix.size();
  const char* e = name.data() + name.size();
  int v = 0;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p == b || p == e || *p != '.') return false;
  *layer = v;
  *rest = std::string(p + 1, e);
  return true;
}

// The HF pieces of one Tessera parameter.
void add_pieces(const ModelConfig& cfg, const ParamInfo& p, std::vector<HfTensorMap>* out) {
  const int64_t rows = p.shape[0];
  const int64_t cols = p.shape.size() > 1 ? p.shape[1] : 1;
  auto whole = [&](std::string hf, bool transposed) {
    HfTensorMap m;
    m.hf_name = std::move(hf);
    m.tessera_name = p.name;
    m.row_begin = 0;
    m.rows = rows;
    m.transposed = transposed;
    if (p.shape.size() == 1) m.hf_shape = {rows};
    else m.hf_shape = transposed ? Shape{cols, rows} : Shape{rows, cols};
    out->push_back(std::move(m));
  };
  auto split = [&](std::vector<std::pair<std::string, int64_t>> parts) {
    int64_t r = 0;
    for (auto& [hf, n] : parts) {
      HfTensorMap m;
      m.hf_name = std::move(hf);
      m.tessera_name = p.name;
      m.row_begin = r;
      m.rows = n;
      m.hf_shape = {n, cols};
      out->push_back(std::move(m));
      r += n;
    }
    TS_CHECK(r == rows) << p.name << ": split rows " << r << " != " << rows;
  };

  int layer = -1;
  std::string rest;
  const bool is_layer = split_layer_name(p.name, "h.", &layer, &rest);
  if (cfg.arch == Arch::gpt2) {
    if (!is_layer) {
      static const std::unordered_map<std::string, std::string> top = {
          {"wte", "wte.weight"}, {"wpe", "wpe.weight"}, {"lnf.w", "ln_f.weight"},
          {"lnf.b", "ln_f.bias"}, {"lm_head.w", "lm_head.weight"}};
      auto it = top.find(p.name);
      TS_CHECK(it != top.end()) << "no GPT-2 name for " << p.name;
      whole(it->second, false);
      return;
    }
    static const std::unordered_map<std::string, std::pair<std::string, bool>> per_layer = {
        {"ln1.w", {"ln_1.weight", false}},          {"ln1.b", {"ln_1.bias", false}},
        {"attn.qkv.w", {"attn.c_attn.weight", true}}, {"attn.qkv.b", {"attn.c_attn.bias", false}},
        {"attn.proj.w", {"attn.c_proj.weight", true}}, {"attn.proj.b", {"attn.c_proj.bias", false}},
        {"ln2.w", {"ln_2.weight", false}},          {"ln2.b", {"ln_2.bias", false}},
        {"mlp.fc.w", {"mlp.c_fc.weight", true}},     {"mlp.fc.b", {"mlp.c_fc.bias", false}},
        {"mlp.proj.w", {"mlp.c_proj.weight", true}}, {"mlp.proj.b", {"mlp.c_proj.bias", false}}};
    auto it = per_layer.find(rest);
    TS_CHECK(it != per_layer.end()) << "no GPT-2 name for " << p.name;
    whole("h." + std::to_string(layer) + "." + it->second.first, it->second.second);
    return;
  }
  // LLaMA
  if (!is_layer) {
    if (p.name == "wte") whole("model.embed_tokens.weight", false);
    else if (p.name == "lnf.w") whole("model.norm.weight", false);
    else if (p.name == "lm_head.w") whole("lm_head.weight", false);
    else TS_CHECK(false) << "no LLaMA name for " << p.name;
    return;
  }
  const std::string L = "model.layers." + std::to_string(layer) + ".";
  const int64_t HS = cfg.head_size();
  // A MoE layer's dense MLP is its shared expert: Qwen2-MoE's names (Mixtral has none; Tessera's has
  // no shared_expert_gate).
  const std::string mlp = L + (cfg.is_moe_layer(layer) ? "mlp.shared_expert." : "mlp.");
  const std::string moe = L + "block_sparse_moe.";
  if (rest == "ln1.w") whole(L + "input_layernorm.weight", false);
  else if (rest == "ln2.w") whole(L + "post_attention_layernorm.weight", false);
  else if (rest == "attn.proj.w") whole(L + "self_attn.o_proj.weight", false);
  else if (rest == "mlp.proj.w") whole(mlp + "down_proj.weight", false);
  else if (rest == "attn.qkv.w")
    split({{L + "self_attn.q_proj.weight", cfg.n_head * HS},
           {L + "self_attn.k_proj.weight", cfg.n_kv_head * HS},
           {L + "self_attn.v_proj.weight", cfg.n_kv_head * HS}});
  else if (rest == "mlp.fc.w")
    split({{mlp + "gate_proj.weight", cfg.d_ff}, {mlp + "up_proj.weight", cfg.d_ff}});
  else if (rest == "moe.gate.w") whole(moe + "gate.weight", false);
  else if (rest == "moe.fc.w" || rest == "moe.proj.w") {  // Mixtral: w1 gate, w3 up (F, C); w2 down (C, F)
    std::vector<std::pair<std::string, int64_t>> parts;
    for (int64_t e = 0; e < cfg.moe_experts; ++e) {
      const std::string x = moe + "experts." + std::to_string(e) + ".";
      if (rest == "moe.fc.w") {
        parts.push_back({x + "w1.weight", cfg.d_ff});
        parts.push_back({x + "w3.weight", cfg.d_ff});
      } else {
        parts.push_back({x + "w2.weight", cfg.d_model});
      }
    }
    split(std::move(parts));
  }
  else TS_CHECK(false) << "no LLaMA name for " << p.name;
}

// Buffers HF checkpoints carry that are not parameters.
bool is_ignorable_buffer(const ModelConfig& cfg, const std::string& name) {
  int layer;
  std::string rest;
  if (cfg.arch == Arch::gpt2)
    return split_layer_name(name, "h.", &layer, &rest) && (rest == "attn.bias" || rest == "attn.masked_bias");
  return split_layer_name(name, "model.layers.", &layer, &rest) && rest == "self_attn.rotary_emb.inv_freq";
}

// The layout must be (a layer range of) the one cfg describes, or offsets would be meaningless.
Status check_layout(const ModelConfig& cfg, const ParamLayout& layout, const ParamLayout& full) {
  TS_RETURN_IF_ERROR(cfg.validate());
  for (const auto& p : layout.params()) {
    const ParamInfo* q = full.find(p.name);
    if (!q || q->shape != p.shape)
      return invalid_argument("parameter layout does not match model config '" + cfg.name + "': tensor " +
                              squote(p.name) + (q ? " has shape " + shape_to_string(p.shape) + ", config implies " +
                                                        shape_to_string(q->shape)
                                                  : " is not part of the model"));
  }
  return Status::ok_status();
}

void copy_from_hf(const HfTensorMap& m, const ParamInfo& p, const float* hf, float* dst) {
  const int64_t cols = p.shape.size() > 1 ? p.shape[1] : 1;
  float* out = dst + p.offset + m.row_begin * cols;
  if (!m.transposed) {
    std::memcpy(out, hf, static_cast<size_t>(m.rows * cols) * sizeof(float));
    return;
  }
  // hf is (cols, rows): out[r, c] = hf[c, r]
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = hf[c * m.rows + r];
}

void copy_to_hf(const HfTensorMap& m, const ParamInfo& p, const float* src, float* hf) {
  const int64_t cols = p.shape.size() > 1 ? p.shape[1] : 1;
  const float* in = src + p.offset + m.row_begin * cols;
  if (!m.transposed) {
    std::memcpy(hf, in, static_cast<size_t>(m.rows * cols) * sizeof(float));
    return;
  }
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < m.rows; ++r) hf[c * m.rows + r] = in[r * cols + c];
}

}  // namespace

std::vector<HfTensorMap> hf_tensor_map(const ModelConfig& cfg, const ParamLayout& layout) {
  std::vector<HfTensorMap> out;
  for (const auto& p : layout.params()) add_pieces(cfg, p, &out);
  return out;
}

Status import_hf_weights(const SafetensorsFile& file, const ModelConfig& cfg, const ParamLayout& layout, float* dst) {
  const ParamLayout full(cfg);
  TS_RETURN_IF_ERROR(check_layout(cfg, layout, full));
  const std::string where = "importing " + squote(file.path()) + " into " + std::string(arch_name(cfg.arch)) +
                            " model '" + cfg.name + "'";
  const std::vector<HfTensorMap> all = hf_tensor_map(cfg, full);
  std::unordered_map<std::string, const HfTensorMap*> by_hf;
  for (const auto& m : all) by_hf[m.hf_name] = &m;

  // HF name -> name in the file (which may carry the "transformer." prefix).
  std::unordered_map<std::string, std::string> found;
  for (const auto& fname : file.names()) {
    std::string name = fname;
    if (cfg.arch == Arch::gpt2 && starts_with(name, "transformer.")) name = name.substr(12);
    if (by_hf.count(name)) {
      auto [it, inserted] = found.emplace(name, fname);
      if (!inserted)
        return invalid_argument(where + ": tensors " + squote(it->second) + " and " + squote(fname) +
                                " both name " + squote(name));
      continue;
    }
    if (is_ignorable_buffer(cfg, name)) continue;
    if (name == "lm_head.weight" && cfg.tied_embeddings) {
      const StTensorInfo& t = *file.find(fname);
      if (t.shape == Shape{cfg.vocab_size, cfg.d_model}) continue;  // a saved copy of the tied wte
      return invalid_argument(where + ": tied model, but the file's " + squote(fname) + " has shape " +
                              shape_to_string(t.shape) + " instead of " +
                              shape_to_string({cfg.vocab_size, cfg.d_model}));
    }
    return invalid_argument(where + ": unexpected tensor " + squote(fname) + " " +
                            shape_to_string(file.find(fname)->shape) + ", which is not part of a " +
                            std::string(arch_name(cfg.arch)) + " model with " + std::to_string(cfg.n_layer) +
                            " layers (wrong architecture or layer count in the model config?)");
  }

  std::vector<float> tmp;
  for (const auto& m : all) {
    const ParamInfo* p = layout.find(m.tessera_name);
    if (!p) continue;  // a layer outside this pipeline stage's range
    auto it = found.find(m.hf_name);
    if (it == found.end())
      return not_found(where + ": missing tensor " + squote(m.hf_name) + " " + shape_to_string(m.hf_shape) +
                       " (Tessera " + squote(m.tessera_name) + ")");
    const StTensorInfo& t = *file.find(it->second);
    if (t.shape != m.hf_shape)
      return invalid_argument(where + ": tensor " + squote(it->second) + " has shape " + shape_to_string(t.shape) +
                              ", expected " + shape_to_string(m.hf_shape) +
                              " (check that the model config matches the checkpoint)");
    tmp.resize(static_cast<size_t>(t.numel()));
    TS_RETURN_IF_ERROR(file.read_f32_into(it->second, tmp.data(), t.numel()));
    copy_from_hf(m, *p, tmp.data(), dst);
  }
  return Status::ok_status();
}

Status import_hf_weights(const std::string& path, const ModelConfig& cfg, const ParamLayout& layout, float* dst) {
  if (!is_hf_directory(path)) {
    TS_ASSIGN_OR_RETURN(SafetensorsFile file, open_safetensors(path));
    return import_hf_weights(file, cfg, layout, dst);
  }
  // A directory says what model it holds: a different one would load shapes that fit (or not) and
  // compute something else (another eps or theta), so the difference is an error.
  TS_ASSIGN_OR_RETURN(ModelConfig there, read_hf_directory_config(path));
  const std::string diff = first_model_difference(cfg, there);
  if (!diff.empty())
    return invalid_argument("the model config (" + std::string(arch_name(cfg.arch)) + " '" + cfg.name +
                            "') differs from the one in " + squote(path + "/config.json") + " (" + diff +
                            "); set the [model] keys to the directory's values");
  TS_ASSIGN_OR_RETURN(SafetensorsFile file, open_safetensors(hf_directory_weights(path)));
  return import_hf_weights(file, cfg, layout, dst);
}

std::vector<NamedTensor> to_hf_tensors(const ModelConfig& cfg, const ParamLayout& layout, const float* src,
                                       HfGpt2Names names) {
  const bool prefixed = cfg.arch == Arch::gpt2 && names == HfGpt2Names::lm_head_model;
  std::vector<NamedTensor> out;
  for (const auto& m : hf_tensor_map(cfg, layout)) {
    NamedTensor t;
    t.name = prefixed && m.hf_name != "lm_head.weight" ? "transformer." + m.hf_name : m.hf_name;
    t.shape = m.hf_shape;
    t.data.resize(static_cast<size_t>(shape_numel(m.hf_shape)));
    copy_to_hf(m, layout.get(m.tessera_name), src, t.data.data());
    out.push_back(std::move(t));
  }
  return out;
}

Status export_hf_weights(const std::string& path, const ModelConfig& cfg, const ParamLayout& layout,
                         const float* src, HfGpt2Names names) {
  const ParamLayout full(cfg);
  TS_RETURN_IF_ERROR(check_layout(cfg, layout, full));
  if (!layout.whole_model())
    return invalid_argument("export_hf_weights " + squote(path) + ": the layout covers layers [" +
                            std::to_string(layout.first_layer()) + ", " + std::to_string(layout.last_layer()) +
                            ") of " + std::to_string(cfg.n_layer) +
                            "; export needs the whole model (gather the pipeline stages first)");
  return write_safetensors(path, to_hf_tensors(cfg, layout, src, names), hf_metadata(cfg));
}

std::map<std::string, std::string> hf_metadata(const ModelConfig& cfg) {
  auto f = [](float v) {
    char buf[32];
    auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest text that round-trips
    return std::string(buf, p);
  };
  std::map<std::string, std::string> md = {{"format", "pt"},
          {"tessera.name", cfg.name},
          {"tessera.arch", std::string(arch_name(cfg.arch))},
          {"tessera.vocab_size", std::to_string(cfg.vocab_size)},
          {"tessera.max_seq_len", std::to_string(cfg.max_seq_len)},
          {"tessera.n_layer", std::to_string(cfg.n_layer)},
          {"tessera.n_head", std::to_string(cfg.n_head)},
          {"tessera.n_kv_head", std::to_string(cfg.n_kv_head)},
          {"tessera.d_model", std::to_string(cfg.d_model)},
          {"tessera.d_ff", std::to_string(cfg.d_ff)},
          {"tessera.norm_eps", f(cfg.norm_eps)},
          {"tessera.rope_theta", f(cfg.rope_theta)},
          {"tessera.tied_embeddings", cfg.tied_embeddings ? "true" : "false"}};
  if (cfg.is_moe()) {  // only MoE models carry these (a dense model's metadata is unchanged)
    md["tessera.moe_experts"] = std::to_string(cfg.moe_experts);
    md["tessera.moe_top_k"] = std::to_string(cfg.moe_top_k);
    md["tessera.moe_capacity_factor"] = f(cfg.moe_capacity_factor);
    md["tessera.moe_aux_loss"] = f(cfg.moe_aux_loss);
    md["tessera.moe_z_loss"] = f(cfg.moe_z_loss);
    md["tessera.moe_shared_expert"] = cfg.moe_shared_expert ? "true" : "false";
    md["tessera.moe_every"] = std::to_string(cfg.moe_every);
  }
  return md;
}

Result<ModelConfig> config_from_metadata(const SafetensorsFile& file) {
  const auto& md = file.metadata();
  auto bad = [&](const std::string& m) {
    return invalid_argument("model config from the metadata of " + squote(file.path()) + ": " + m +
                            " (was it written by Tessera? otherwise choose a model preset)");
  };
  auto get = [&](const std::string& key, std::string* v) {
    auto it = md.find("tessera." + key);
    if (it == md.end()) return false;
    *v = it->second;
    return true;
  };
  ModelConfig cfg;
  std::string s;
  if (!get("arch", &s)) return bad("missing key 'tessera.arch'");
  auto arch = parse_arch(s);
  if (!arch.ok()) return bad(arch.status().message());
  cfg.arch = *arch;
  if (get("name", &s)) cfg.name = s;
  const std::pair<const char*, int64_t*> ints[] = {
      {"vocab_size", &cfg.vocab_size}, {"max_seq_len", &cfg.max_seq_len}, {"n_layer", &cfg.n_layer},
      {"n_head", &cfg.n_head},         {"n_kv_head", &cfg.n_kv_head},     {"d_model", &cfg.d_model},
      {"d_ff", &cfg.d_ff}};
  for (auto [key, dst] : ints) {
    if (!get(key, &s)) return bad(std::string("missing key 'tessera.") + key + "'");
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *dst);
    if (ec != std::errc() || p != s.data() + s.size())
      return bad(std::string("'tessera.") + key + "' = '" + s + "' is not an integer");
  }
  const std::pair<const char*, float*> floats[] = {{"norm_eps", &cfg.norm_eps}, {"rope_theta", &cfg.rope_theta}};
  for (auto [key, dst] : floats) {
    if (!get(key, &s)) return bad(std::string("missing key 'tessera.") + key + "'");
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *dst);
    if (ec != std::errc() || p != s.data() + s.size())
      return bad(std::string("'tessera.") + key + "' = '" + s + "' is not a number");
  }
  if (!get("tied_embeddings", &s) || (s != "true" && s != "false"))
    return bad("'tessera.tied_embeddings' must be \"true\" or \"false\"");
  cfg.tied_embeddings = s == "true";
  // Mixture of experts: optional keys (absent = dense).
  const std::pair<const char*, int64_t*> moe_ints[] = {
      {"moe_experts", &cfg.moe_experts}, {"moe_top_k", &cfg.moe_top_k}, {"moe_every", &cfg.moe_every}};
  for (auto [key, dst] : moe_ints) {
    if (!get(key, &s)) continue;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *dst);
    if (ec != std::errc() || p != s.data() + s.size())
      return bad(std::string("'tessera.") + key + "' = '" + s + "' is not an integer");
  }
  const std::pair<const char*, float*> moe_floats[] = {{"moe_capacity_factor", &cfg.moe_capacity_factor},
                                                       {"moe_aux_loss", &cfg.moe_aux_loss},
                                                       {"moe_z_loss", &cfg.moe_z_loss}};
  for (auto [key, dst] : moe_floats) {
    if (!get(key, &s)) continue;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *dst);
    if (ec != std::errc() || p != s.data() + s.size())
      return bad(std::string("'tessera.") + key + "' = '" + s + "' is not a number");
  }
  if (get("moe_shared_expert", &s)) {
    if (s != "true" && s != "false") return bad("'tessera.moe_shared_expert' must be \"true\" or \"false\"");
    cfg.moe_shared_expert = s == "true";
  }
  Status v = cfg.validate();
  if (!v.ok()) return bad(v.message());
  return cfg;
}

}  // namespace tessera
