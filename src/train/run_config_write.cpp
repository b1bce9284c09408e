// Writing a resolved RunConfig: as TOML (the run directory's config.toml, which parses back to an
// equal config) and as JSON (checkpoints, agreement hashes, comparisons).
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/config_json.h"
#include "train/run_config.h"

namespace tessera {
namespace {

// TOML text for values: shortest round-trip decimal forms, so 3e-4f prints as 0.0003.
template <typename Float>
std::string toml_number(Float v) {
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, p);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}
std::string toml_string(const std::string& v) {
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else out += static_cast<char>(c);
  }
  return out + "\"";
}
const char* toml_bool(bool b) { return b ? "true" : "false"; }

}  // namespace

std::string RunConfig::to_toml() const {
  const ModelConfig& m = model;
  std::ostringstream s;
  s << "# Resolved run configuration (every key explicit; grad_accum = " << train.grad_accum << ").\n";
  s << "[model]\n"
    << "preset = " << toml_string(model_preset) << "\n"
    << "arch = " << toml_string(std::string(arch_name(m.arch))) << "\n"
    << "vocab_size = " << m.vocab_size << "\n"
    << "max_seq_len = " << m.max_seq_len << "\n"
    << "n_layer = " << m.n_layer << "\n"
    << "n_head = " << m.n_head << "\n"
    << "n_kv_head = " << m.n_kv_head << "\n"
    << "d_model = " << m.d_model << "\n"
    << "d_ff = " << m.d_ff << "\n"
    << "norm_eps = " << toml_number(m.norm_eps) << "\n"
    << "rope_theta = " << toml_number(m.rope_theta) << "\n"
    << "tied_embeddings = " << toml_bool(m.tied_embeddings) << "\n"
    << "init_weights = " << toml_string(init_weights) << "\n\n";
  s << "[data]\n"
    << "dir = " << toml_string(data.dir) << "\n"
    << "seq_len = " << data.seq_len << "\n\n";
  s << "[train]\n"
    << "steps = " << train.steps << "\n"
    << "batch_tokens = " << train.batch_tokens << "\n"
    << "micro_batch = " << train.micro_batch << "\n"
    << "seed = " << train.seed << "\n"
    << "threads = " << train.threads << "\n"
    << "eval_interval = " << train.eval_interval << "\n"
    << "eval_batches = " << train.eval_batches << "\n"
    << "log_interval = " << train.log_interval << "\n"
    << "checkpoint_interval = " << train.checkpoint_interval << "\n"
    << "keep_checkpoints = " << train.keep_checkpoints << "\n"
    << "out_dir = " << toml_string(train.out_dir) << "\n"
    << "timeout_s = " << toml_number(train.timeout_s) << "\n\n";
  s << "[optim]\n"
    << "lr = " << toml_number(optim.lr) << "\n"
    << "min_lr = " << toml_number(optim.min_lr) << "\n"
    << "warmup_steps = " << optim.warmup_steps << "\n"
    << "schedule = " << toml_string(std::string(lr_schedule_name(optim.schedule))) << "\n"
    << "beta1 = " << toml_number(optim.beta1) << "\n"
    << "beta2 = " << toml_number(optim.beta2) << "\n"
    << "eps = " << toml_number(optim.eps) << "\n"
    << "weight_decay = " << toml_number(optim.weight_decay) << "\n"
    << "decay_norms_and_biases = " << toml_bool(optim.decay_norms_and_biases) << "\n"
    << "decay_embeddings = " << toml_bool(optim.decay_embeddings) << "\n"
    << "grad_clip = " << toml_number(optim.grad_clip) << "\n\n";
  s << "[parallel]\n"
    << "dp = " << parallel.dp << "\n"
    << "pp = " << parallel.pp << "\n"
    << "tp = " << parallel.tp << "\n"
    << "bucket_mb = " << toml_number(parallel.bucket_mb) << "\n";
  return s.str();
}

nlohmann::json to_json(const RunConfig& c) {
  const ModelConfig& m = c.model;
  nlohmann::json j;
  j["model"] = model_config_json(m);
  j["model"]["preset"] = c.model_preset;
  j["model"]["name"] = m.name;
  j["model"]["init_weights"] = c.init_weights;
  j["model"]["num_parameters"] = m.num_parameters();
  j["data"] = {{"dir", c.data.dir}, {"seq_len", c.data.seq_len}};
  const TrainConfig& t = c.train;
  j["train"] = {{"steps", t.steps}, {"batch_tokens", t.batch_tokens}, {"micro_batch", t.micro_batch},
                {"grad_accum", t.grad_accum}, {"seed", t.seed}, {"threads", t.threads},
                {"eval_interval", t.eval_interval}, {"eval_batches", t.eval_batches},
                {"log_interval", t.log_interval}, {"checkpoint_interval", t.checkpoint_interval},
                {"keep_checkpoints", t.keep_checkpoints}, {"out_dir", t.out_dir}, {"timeout_s", t.timeout_s}};
  const OptimConfig& o = c.optim;
  j["optim"] = {{"lr", o.lr}, {"min_lr", o.min_lr}, {"warmup_steps", o.warmup_steps},
                {"schedule", std::string(lr_schedule_name(o.schedule))}, {"beta1", o.beta1}, {"beta2", o.beta2},
                {"eps", o.eps}, {"weight_decay", o.weight_decay},
                {"decay_norms_and_biases", o.decay_norms_and_biases}, {"decay_embeddings", o.decay_embeddings},
                {"grad_clip", o.grad_clip}};
  j["parallel"] = {{"dp", c.parallel.dp}, {"pp", c.parallel.pp}, {"tp", c.parallel.tp},
                   {"bucket_mb", c.parallel.bucket_mb}};
  return j;
}

bool RunConfig::operator==(const RunConfig& other) const { return to_json(*this) == to_json(other); }

}  // namespace tessera
