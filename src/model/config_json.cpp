// ModelConfig <-> JSON.
#include "model/config_json.h"

namespace tessera {

nlohmann::json model_config_json(const ModelConfig& c) {
  nlohmann::json j = {{"arch", std::string(arch_name(c.arch))}, {"vocab_size", c.vocab_size}, {"max_seq_len", c.max_seq_len},
          {"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_kv_head", c.n_kv_head}, {"d_model", c.d_model},
          {"d_ff", c.d_ff}, {"norm_eps", c.norm_eps}, {"rope_theta", c.rope_theta},
          {"tied_embeddings", c.tied_embeddings}};
  // Only MoE models carry the moe_* keys, so a dense model's JSON (and older checkpoints) are unchanged.
  if (c.is_moe()) {
    j["moe_experts"] = c.moe_experts; j["moe_top_k"] = c.moe_top_k; j["moe_capacity_factor"] = c.moe_capacity_factor;
    j["moe_aux_loss"] = c.moe_aux_loss; j["moe_z_loss"] = c.moe_z_loss; j["moe_shared_expert"] = c.moe_shared_expert;
    j["moe_every"] = c.moe_every;
  }
  return j;
}

Result<ModelConfig> model_config_from_json(const nlohmann::json& j) {
  try {
    ModelConfig c;
    TS_ASSIGN_OR_RETURN(c.arch, parse_arch(j.at("arch").get<std::string>()));
    c.vocab_size = j.at("vocab_size"); c.max_seq_len = j.at("max_seq_len"); c.n_layer = j.at("n_layer");
    c.n_head = j.at("n_head"); c.n_kv_head = j.at("n_kv_head"); c.d_model = j.at("d_model"); c.d_ff = j.at("d_ff");
    c.norm_eps = j.at("norm_eps"); c.rope_theta = j.at("rope_theta"); c.tied_embeddings = j.at("tied_embeddings");
    c.moe_experts = j.value("moe_experts", int64_t{0}); c.moe_top_k = j.value("moe_top_k", c.moe_top_k);
    c.moe_capacity_factor = j.value("moe_capacity_factor", c.moe_capacity_factor);
    c.moe_aux_loss = j.value("moe_aux_loss", c.moe_aux_loss); c.moe_z_loss = j.value("moe_z_loss", c.moe_z_loss);
    c.moe_shared_expert = j.value("moe_shared_expert", c.moe_shared_expert);
    c.moe_every = j.value("moe_every", c.moe_every);
    TS_RETURN_IF_ERROR(c.validate());
    return c;
  } catch (const std::exception& e) {
    return corrupt_data(std::string("model config in checkpoint is incomplete: ") + e.what());
  }
}

}  // namespace tessera
