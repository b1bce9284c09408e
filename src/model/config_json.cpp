// ModelConfig <-> JSON.
#include "model/config_json.h"

namespace tessera {

nlohmann::json model_config_json(const ModelConfig& c) {
  return {{"arch", std::string(arch_name(c.arch))}, {"vocab_size", c.vocab_size}, {"max_seq_len", c.max_seq_len},
          {"n_layer", c.n_layer}, {"n_head", c.n_head}, {"n_kv_head", c.n_kv_head}, {"d_model", c.d_model},
          {"d_ff", c.d_ff}, {"norm_eps", c.norm_eps}, {"rope_theta", c.rope_theta},
          {"tied_embeddings", c.tied_embeddings}};
}

Result<ModelConfig> model_config_from_json(const nlohmann::json& j) {
  try {
    ModelConfig c;
    TS_ASSIGN_OR_RETURN(c.arch, parse_arch(j.at("arch").get<std::string>()));
    c.vocab_size = j.at("vocab_size"); c.max_seq_len = j.at("max_seq_len"); c.n_layer = j.at("n_layer");
    c.n_head = j.at("n_head"); c.n_kv_head = j.at("n_kv_head"); c.d_model = j.at("d_model"); c.d_ff = j.at("d_ff");
    c.norm_eps = j.at("norm_eps"); c.rope_theta = j.at("rope_theta"); c.tied_embeddings = j.at("tied_embeddings");
    TS_RETURN_IF_ERROR(c.validate());
    return c;
  } catch (const std::exception& e) {
    return corrupt_data(std::string("model config in checkpoint is incomplete: ") + e.what());
  }
}

}  // namespace tessera
