// Hugging Face config.json for Tessera's two families, both directions. Keys absent from a file
// take transformers' defaults (GPT2Config / LlamaConfig), so an HF directory means what it means there.
#include "model/hf_config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace tessera {

namespace {

using nlohmann::json;

// The float as the shortest decimal that reads back to the same float: 1e-5f is written 1e-05, not
// 9.999999747378752e-06, and float(double(text)) == the original, so a round trip keeps every bit.
double shortest(float v) {
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf) - 1, v);
  *p = '\0';
  return std::strtod(buf, nullptr);
}

std::string num_text(float v) {  // shortest text of the float
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, p);
}

json opt_id(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }

// Reads key k of j, or `def` when absent (HF's default); type errors name the key.
struct Reader {
  const json& j;
  const std::string& where;
  Status status = Status::ok_status();

  Status bad(const std::string& key, const std::string& what) {
    return invalid_argument(where + ": '" + key + "' " + what);
  }
  // Key k as a T when `is` says its JSON value has the type (`what` names it in the error).
  template <typename T>
  T typed(const std::string& k, T def, bool (json::*is)() const noexcept, const char* what) {
    if (!j.contains(k) || j[k].is_null()) return def;
    if (!(j[k].*is)()) {
      if (status.ok()) status = bad(k, std::string("must be ") + what + ", got " + j[k].dump());
      return def;
    }
    return j[k].get<T>();
  }
  int64_t integer(const std::string& k, int64_t def) { return typed(k, def, &json::is_number_integer, "an integer"); }
  float number(const std::string& k, double def) {
    return static_cast<float>(typed(k, def, &json::is_number, "a number"));
  }
  bool boolean(const std::string& k, bool def) { return typed(k, def, &json::is_boolean, "true or false"); }
  std::string text(const std::string& k, const std::string& def) {
    return typed(k, def, &json::is_string, "a string");
  }
  // A setting Tessera's model does not compute: the message says which value it needs.
  void require(bool ok, const std::string& k, const std::string& need) {
    if (!ok && status.ok())
      status = bad(k, "= " + (j.contains(k) ? j[k].dump() : std::string("(default)")) +
                          " is not supported: Tessera computes only " + need);
  }
};

}  // namespace

Status check_hf_representable(const ModelConfig& cfg) {
  TS_RETURN_IF_ERROR(cfg.validate());
  auto refuse = [&](const std::string& m) {
    return invalid_argument("model '" + cfg.name + "' cannot be written as a Hugging Face config: " + m);
  };
  if (!std::isfinite(cfg.norm_eps)) return refuse("norm_eps is not finite; set model.norm_eps to a positive number");
  if (cfg.arch == Arch::llama && !(std::isfinite(cfg.rope_theta) && cfg.rope_theta > 0))
    return refuse("rope_theta " + num_text(cfg.rope_theta) +
                  " is not a positive number, which LlamaConfig's RoPE needs; set model.rope_theta (e.g. 10000)");
  return Status::ok_status();
}

Result<json> hf_config_json(const ModelConfig& c, const HfSpecialTokens& special) {
  TS_RETURN_IF_ERROR(check_hf_representable(c));
  json j;
  if (c.arch == Arch::gpt2) {
    j = {{"architectures", {"GPT2LMHeadModel"}},
         {"model_type", "gpt2"},
         {"vocab_size", c.vocab_size},
         {"n_positions", c.max_seq_len},
         {"n_ctx", c.max_seq_len},  // read by old transformers versions
         {"n_embd", c.d_model},
         {"n_layer", c.n_layer},
         {"n_head", c.n_head},
         {"n_inner", c.d_ff},  // explicit: HF's null means 4 * n_embd, Tessera's d_ff may differ
         {"activation_function", "gelu_new"},  // the tanh approximation Tessera computes
         {"layer_norm_epsilon", shortest(c.norm_eps)},
         {"scale_attn_weights", true},
         {"scale_attn_by_inverse_layer_idx", false},
         {"reorder_and_upcast_attn", false},
         // Tessera trains without dropout; HF fine-tuning from here should start the same way.
         {"resid_pdrop", 0.0},
         {"embd_pdrop", 0.0},
         {"attn_pdrop", 0.0},
         {"initializer_range", 0.02}};
  } else {
    j = {{"architectures", {"LlamaForCausalLM"}},
         {"model_type", "llama"},
         {"vocab_size", c.vocab_size},
         {"hidden_size", c.d_model},
         {"intermediate_size", c.d_ff},
         {"num_hidden_layers", c.n_layer},
         {"num_attention_heads", c.n_head},
         {"num_key_value_heads", c.n_kv_head},
         {"head_dim", c.head_size()},
         {"hidden_act", "silu"},
         {"max_position_embeddings", c.max_seq_len},
         {"rms_norm_eps", shortest(c.norm_eps)},
         {"rope_theta", shortest(c.rope_theta)},
         {"rope_scaling", nullptr},
         {"attention_bias", false},
         {"mlp_bias", false},
         {"attention_dropout", 0.0},
         {"pretraining_tp", 1},
         {"initializer_range", 0.02}};
  }
  if (c.is_moe()) {  // Mixtral's keys; what Mixtral lacks as tessera_* keys (HF ignores unknown keys)
    j["architectures"] = {"MixtralForCausalLM"};
    j["model_type"] = "mixtral";
    j["num_local_experts"] = c.moe_experts;
    j["num_experts_per_tok"] = c.moe_top_k;
    j["router_aux_loss_coef"] = shortest(c.moe_aux_loss);
    j["output_router_logits"] = false;
    j["router_jitter_noise"] = 0.0;
    j["sliding_window"] = nullptr;
    j["tessera_moe_capacity_factor"] = shortest(c.moe_capacity_factor);
    j["tessera_moe_z_loss"] = shortest(c.moe_z_loss);
    j["tessera_moe_shared_expert"] = c.moe_shared_expert;
    j["tessera_moe_every"] = c.moe_every;
  }
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["bos_token_id"] = opt_id(special.bos);
  j["eos_token_id"] = opt_id(special.eos);
  if (special.pad) j["pad_token_id"] = *special.pad;
  j["torch_dtype"] = "float32";
  j["use_cache"] = true;
  return j;
}

json hf_generation_config_json(const HfSpecialTokens& special) {
  json j = {{"bos_token_id", opt_id(special.bos)}, {"eos_token_id", opt_id(special.eos)}};
  if (special.pad) j["pad_token_id"] = *special.pad;
  return j;
}

Result<ModelConfig> model_config_from_hf_json(const json& j, const std::string& where) {
  if (!j.is_object()) return invalid_argument(where + ": not a JSON object (is it a Hugging Face config.json?)");
  Reader r{j, where};
  const std::string type = r.text("model_type", "");
  ModelConfig c;
  if (type == "gpt2") {
    c.name = "hf-gpt2";
    c.arch = Arch::gpt2;
    c.vocab_size = r.integer("vocab_size", 50257);
    c.max_seq_len = r.integer("n_positions", 1024);
    c.d_model = r.integer("n_embd", 768);
    c.n_layer = r.integer("n_layer", 12);
    c.n_head = r.integer("n_head", 12);
    c.n_kv_head = c.n_head;
    c.d_ff = r.integer("n_inner", 4 * c.d_model);
    c.norm_eps = r.number("layer_norm_epsilon", 1e-5);
    c.tied_embeddings = r.boolean("tie_word_embeddings", true);
    const std::string act = r.text("activation_function", "gelu_new");
    r.require(act == "gelu_new" || act == "gelu_pytorch_tanh", "activation_function",
              "the tanh GELU (\"gelu_new\" or \"gelu_pytorch_tanh\")");
    r.require(r.boolean("scale_attn_weights", true), "scale_attn_weights", "attention scaled by 1/sqrt(head size) (true)");
    r.require(!r.boolean("scale_attn_by_inverse_layer_idx", false), "scale_attn_by_inverse_layer_idx", "false");
    r.require(!r.boolean("add_cross_attention", false), "add_cross_attention", "decoder-only models (false)");
  } else if (type == "llama" || type == "mixtral") {
    c.name = type == "llama" ? "hf-llama" : "hf-mixtral";
    c.arch = Arch::llama;
    c.vocab_size = r.integer("vocab_size", 32000);
    c.d_model = r.integer("hidden_size", 4096);
    c.d_ff = r.integer("intermediate_size", 11008);
    c.n_layer = r.integer("num_hidden_layers", 32);
    c.n_head = r.integer("num_attention_heads", 32);
    c.n_kv_head = r.integer("num_key_value_heads", c.n_head);
    c.max_seq_len = r.integer("max_position_embeddings", 2048);
    c.norm_eps = r.number("rms_norm_eps", 1e-6);
    c.rope_theta = r.number("rope_theta", 10000.0);
    c.tied_embeddings = r.boolean("tie_word_embeddings", false);
    r.require(r.text("hidden_act", "silu") == "silu", "hidden_act", "SwiGLU with \"silu\"");
    r.require(!j.contains("rope_scaling") || j["rope_scaling"].is_null(), "rope_scaling", "plain RoPE (null)");
    r.require(!r.boolean("attention_bias", false), "attention_bias", "attention without biases (false)");
    r.require(!r.boolean("mlp_bias", false), "mlp_bias", "an MLP without biases (false)");
    if (type == "mixtral") {
      c.moe_experts = r.integer("num_local_experts", 8);
      c.moe_top_k = r.integer("num_experts_per_tok", 2);
      c.moe_aux_loss = r.number("router_aux_loss_coef", 0.001);
      c.moe_capacity_factor = r.number("tessera_moe_capacity_factor", 0.0);
      c.moe_z_loss = r.number("tessera_moe_z_loss", 0.0);
      c.moe_shared_expert = r.boolean("tessera_moe_shared_expert", false);
      c.moe_every = r.integer("tessera_moe_every", 1);
      r.require(!j.contains("sliding_window") || j["sliding_window"].is_null(), "sliding_window",
                "full causal attention (null)");
    }
    if (c.n_head > 0) {
      const int64_t hd = r.integer("head_dim", c.d_model / c.n_head);
      r.require(hd * c.n_head == c.d_model, "head_dim", "head_dim = hidden_size / num_attention_heads");
    }
  } else {
    return invalid_argument(where + ": model_type '" + type +
                            "' is not one Tessera computes; it reads \"gpt2\" (GPT2LMHeadModel), \"llama\" "
                            "(LlamaForCausalLM) and \"mixtral\" (MixtralForCausalLM) configs");
  }
  TS_RETURN_IF_ERROR(r.status);
  Status v = c.validate();
  if (!v.ok()) return invalid_argument(where + ": " + v.message());
  return c;
}

std::string first_model_difference(const ModelConfig& a, const ModelConfig& b) {
  auto i = [](const char* k, int64_t x, int64_t y) {
    return x == y ? std::string() : std::string(k) + ": " + std::to_string(x) + " vs " + std::to_string(y);
  };
  auto f = [](const char* k, float x, float y) {
    return x == y ? std::string() : std::string(k) + ": " + num_text(x) + " vs " + num_text(y);
  };
  if (a.arch != b.arch) return "arch: " + std::string(arch_name(a.arch)) + " vs " + std::string(arch_name(b.arch));
  for (const std::string& d :
       {i("vocab_size", a.vocab_size, b.vocab_size), i("max_seq_len", a.max_seq_len, b.max_seq_len),
        i("n_layer", a.n_layer, b.n_layer), i("n_head", a.n_head, b.n_head), i("n_kv_head", a.n_kv_head, b.n_kv_head),
        i("d_model", a.d_model, b.d_model), i("d_ff", a.d_ff, b.d_ff), f("norm_eps", a.norm_eps, b.norm_eps),
        a.arch == Arch::llama ? f("rope_theta", a.rope_theta, b.rope_theta) : std::string(),
        i("tied_embeddings", a.tied_embeddings, b.tied_embeddings), i("moe_experts", a.moe_experts, b.moe_experts),
        a.is_moe() ? i("moe_top_k", a.moe_top_k, b.moe_top_k) : std::string(),
        a.is_moe() ? i("moe_every", a.moe_every, b.moe_every) : std::string(),
        a.is_moe() ? i("moe_shared_expert", a.moe_shared_expert, b.moe_shared_expert) : std::string()})
    if (!d.empty()) return d;
  return "";
}

}  // namespace tessera
