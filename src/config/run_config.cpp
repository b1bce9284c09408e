// Strict TOML parsing of the run configuration: the schema (run_config_schema.h) drives the unknown-key /
// wrong-type checks, override parsing, range checks and storing; derived values are resolved here.
// The run config's only file including toml++ (plan/hardware.cpp reads hardware files with it too).
#include "config/run_config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "config/run_config_schema.h"

namespace tessera {

std::string_view parallel_mode_name(ParallelMode m) { return m == ParallelMode::ps ? "ps" : "allreduce"; }

int64_t data_replicas(const ParallelConfig& p) { return static_cast<int64_t>(p.dp) * p.ep; }

Result<ParallelMode> parse_parallel_mode(std::string_view s) {
  if (s == "allreduce") return ParallelMode::allreduce;
  if (s == "ps") return ParallelMode::ps;
  return invalid_argument("unknown parallel mode '" + std::string(s) + "': use \"allreduce\" or \"ps\"");
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string did_you_mean(std::string_view word, const std::vector<std::string_view>& candidates) {
  std::string_view best;
  size_t best_d = SIZE_MAX;
  for (auto c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  size_t limit = std::max<size_t>(2, word.size() / 3);
  bool contains = !word.empty() && !best.empty() &&
                  (best.find(word) != std::string_view::npos || word.find(best) != std::string_view::npos);
  if (best_d <= limit || contains) return "; did you mean '" + std::string(best) + "'?";
  return "";
}

namespace {

const char* node_type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    default: return "nothing";
  }
}

std::string join(const std::vector<std::string_view>& v) {
  std::string out;
  for (auto s : v) out += (out.empty() ? "" : ", ") + std::string(s);
  return out;
}

Status unknown_section_error(const std::string& where, std::string_view name) {
  auto names = section_names();
  return invalid_argument(where + ": unknown section [" + std::string(name) + "]" + did_you_mean(name, names) +
                          " (allowed sections: " + join(names) + ")");
}
Status unknown_key_error(const std::string& where, const SectionSpec& sec, std::string_view key) {
  auto names = key_names(sec);
  return invalid_argument(where + ": unknown key '" + std::string(key) + "' in [" + std::string(sec.name) + "]" +
                          did_you_mean(key, names) + " (allowed keys in [" + std::string(sec.name) +
                          "]: " + join(names) + ")");
}

// Parses an override value by the key's type into a TOML node.
Result<toml::table> override_value(const std::string& text, const KeySpec& key, std::string_view value) {
  auto bad = [&](const char* why) {
    return invalid_argument("override '" + text + "': " + std::string(key.name) + " expects " +
                            key_type_name(key.value.type) + ", got '" + std::string(value) + "'" + why);
  };
  toml::table t;
  switch (key.value.type) {
    case KeyType::integer: {
      int64_t v = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size() || value.empty()) return bad("");
      t.insert("v", v);
      break;
    }
    case KeyType::floating: {
      std::string s(value);
      char* end = nullptr;
      double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size()) return bad("");
      t.insert("v", v);
      break;
    }
    case KeyType::boolean:
      if (value == "true") t.insert("v", true);
      else if (value == "false") t.insert("v", false);
      else return bad(" (use true or false)");
      break;
    case KeyType::string: {
      std::string s(value);
      if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
      t.insert("v", s);
      break;
    }
    case KeyType::integer_list: {
      // "[2,3,3]", "2,3,3", "[]" or "" (spaces allowed around the numbers).
      std::string_view body = value;
      auto trim = [](std::string_view x) {
        while (!x.empty() && x.front() == ' ') x.remove_prefix(1);
        while (!x.empty() && x.back() == ' ') x.remove_suffix(1);
        return x;
      };
      body = trim(body);
      if (!body.empty() && body.front() == '[') {
        if (body.back() != ']') return bad(" (write a list as [2,3,3] or 2,3,3)");
        body = trim(body.substr(1, body.size() - 2));
      }
      toml::array list;
      while (!body.empty()) {
        const size_t comma = body.find(',');
        const std::string_view item = trim(body.substr(0, comma));
        int64_t v = 0;
        auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty() || ec != std::errc() || p != item.data() + item.size())
          return bad(" (write a list as [2,3,3] or 2,3,3)");
        list.push_back(v);
        if (comma == std::string_view::npos) break;
        body.remove_prefix(comma + 1);
        if (trim(body).empty()) return bad(" (write a list as [2,3,3] or 2,3,3)");
      }
      t.insert("v", std::move(list));
      break;
    }
  }
  return t;
}

// Reads typed values out of the checked table and says where a value came from in errors.
class Reader {
 public:
  Reader(const toml::table& root, std::string source, std::map<std::string, std::string> origins)
      : root_(root), source_(std::move(source)), origins_(std::move(origins)) {}

  const toml::node* node(std::string_view sec, std::string_view key) const {
    auto* t = root_.get_as<toml::table>(sec);
    return t ? t->get(key) : nullptr;
  }
  bool has(std::string_view sec, std::string_view key) const { return node(sec, key) != nullptr; }
  std::optional<int64_t> integer(std::string_view sec, std::string_view key) const {
    auto* n = node(sec, key);
    return n ? std::optional<int64_t>(n->as_integer()->get()) : std::nullopt;
  }
  std::optional<double> floating(std::string_view sec, std::string_view key) const {
    auto* n = node(sec, key);
    if (!n) return std::nullopt;
    if (auto* i = n->as_integer()) return static_cast<double>(i->get());
    return n->as_floating_point()->get();
  }
  std::optional<bool> boolean(std::string_view sec, std::string_view key) const {
    auto* n = node(sec, key);
    return n ? std::optional<bool>(n->as_boolean()->get()) : std::nullopt;
  }
  std::optional<std::string> string(std::string_view sec, std::string_view key) const {
    auto* n = node(sec, key);
    return n ? std::optional<std::string>(n->as_string()->get()) : std::nullopt;
  }
  std::optional<std::vector<int64_t>> integer_list(std::string_view sec, std::string_view key) const {
    auto* n = node(sec, key);
    if (!n) return std::nullopt;
    std::vector<int64_t> out;
    for (const toml::node& e : *n->as_array()) out.push_back(e.as_integer()->get());
    return out;
  }
  // The key's value by its schema type, if the TOML (or an override) gives it.
  std::optional<KeyValue> value(std::string_view sec, const KeySpec& key) const {
    switch (key.value.type) {
      case KeyType::integer: if (auto v = integer(sec, key.name)) return *v; break;
      case KeyType::floating: if (auto v = floating(sec, key.name)) return *v; break;
      case KeyType::boolean: if (auto v = boolean(sec, key.name)) return *v; break;
      case KeyType::string: if (auto v = string(sec, key.name)) return *v; break;
      case KeyType::integer_list: if (auto v = integer_list(sec, key.name)) return *v; break;
    }
    return std::nullopt;
  }
  // "cfg.toml:12: train.steps" or "override 'train.steps=0': train.steps" or "cfg.toml: train.steps (default)".
  std::string where(std::string_view sec, std::string_view key) const {
    std::string full = std::string(sec) + "." + std::string(key);
    auto it = origins_.find(full);
    if (it != origins_.end()) return "override '" + it->second + "': " + full;
    auto* n = node(sec, key);
    if (n && n->source().begin.line > 0) return source_ + ":" + std::to_string(n->source().begin.line) + ": " + full;
    return source_ + ": " + full;
  }
  const std::string& source() const { return source_; }

 private:
  const toml::table& root_;
  std::string source_;
  std::map<std::string, std::string> origins_;
};

std::string location(const std::string& source, const toml::node& n) {
  return n.source().begin.line > 0 ? source + ":" + std::to_string(n.source().begin.line) : source;
}

// Checks every section and key against the schema: unknown names and wrong types.
Status check_structure(const toml::table& root, const std::string& source,
                       const std::map<std::string, std::string>& origins) {
  for (auto&& [k, v] : root) {
    auto* sec = find_section(k.str());
    if (!sec && !v.is_table()) {
      std::string hint;
      for (auto& cand : run_config_schema())
        if (find_key(cand, k.str())) hint = "; it belongs in [" + std::string(cand.name) + "]";
      return invalid_argument(location(source, v) + ": key '" + std::string(k.str()) +
                              "' is outside any section" + hint + " (allowed sections: " + join(section_names()) + ")");
    }
    if (!sec) return unknown_section_error(location(source, v), k.str());
    auto* tbl = v.as_table();
    if (!tbl)
      return invalid_argument(location(source, v) + ": '" + std::string(k.str()) + "' must be a table [" +
                              std::string(k.str()) + "], got " + node_type_name(v.type()));
    for (auto&& [key, val] : *tbl) {
      std::string full = std::string(sec->name) + "." + std::string(key.str());
      auto it = origins.find(full);
      std::string where = it != origins.end() ? "override '" + it->second + "'" : location(source, val);
      auto* spec = find_key(*sec, key.str());
      if (!spec) return unknown_key_error(where, *sec, key.str());
      bool ok = false;
      switch (spec->value.type) {
        case KeyType::integer: ok = val.is_integer(); break;
        case KeyType::floating: ok = val.is_floating_point() || val.is_integer(); break;
        case KeyType::boolean: ok = val.is_boolean(); break;
        case KeyType::string: ok = val.is_string(); break;
        case KeyType::integer_list:
          ok = val.is_array();
          if (ok)
            for (size_t i = 0; i < val.as_array()->size(); ++i)
              if (const toml::node& e = *val.as_array()->get(i); !e.is_integer())
                return invalid_argument(where + ": " + full + "[" + std::to_string(i) + "] must be integer, got " +
                                        node_type_name(e.type()) + " (write e.g. " + full.substr(full.find('.') + 1) +
                                        " = [2, 3, 3])");
          break;
      }
      if (!ok)
        return invalid_argument(where + ": " + full + " must be " + key_type_name(spec->value.type) + ", got " +
                                node_type_name(val.type()));
    }
  }
  return Status::ok_status();
}

// Applies "section.key=value" overrides into the table; records where each value came from.
Status apply_overrides(toml::table& root, const std::vector<std::string>& overrides,
                       std::map<std::string, std::string>& origins) {
  for (const auto& o : overrides) {
    auto eq = o.find('=');
    auto dot = o.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq || dot == 0 || dot + 1 == eq)
      return invalid_argument("override '" + o + "': expected section.key=value (e.g. train.steps=20)");
    std::string_view sec_name(o.data(), dot), key_name(o.data() + dot + 1, eq - dot - 1);
    std::string_view value(o.data() + eq + 1, o.size() - eq - 1);
    auto* sec = find_section(sec_name);
    if (!sec) return unknown_section_error("override '" + o + "'", sec_name);
    auto* spec = find_key(*sec, key_name);
    if (!spec) return unknown_key_error("override '" + o + "'", *sec, key_name);
    TS_ASSIGN_OR_RETURN(toml::table holder, override_value(o, *spec, value));
    auto* sec_tbl = root.get_as<toml::table>(sec_name);
    if (!sec_tbl) {
      if (root.contains(sec_name))
        return invalid_argument("override '" + o + "': the config's '" + std::string(sec_name) + "' is not a table");
      root.insert(sec_name, toml::table{});
      sec_tbl = root.get_as<toml::table>(sec_name);
    }
    sec_tbl->insert_or_assign(key_name, *holder.get("v"));
    origins[std::string(sec_name) + "." + std::string(key_name)] = o;
  }
  return Status::ok_status();
}

// Checks and stores one key when the TOML (or an override) gives it; errors name where the value came from.
Status apply_key(const Reader& r, RunConfig& cfg, std::string_view section, const KeySpec& key) {
  std::optional<KeyValue> v = r.value(section, key);
  if (!v) return Status::ok_status();
  std::string error = key.assign(cfg, *v);
  if (!error.empty()) return invalid_argument(r.where(section, key.name) + error);
  return Status::ok_status();
}

// Applies every key of a section the TOML gives, in schema order, except `skip`.
Status apply_section(const Reader& r, RunConfig& cfg, std::string_view section, std::string_view skip = {}) {
  for (const KeySpec& key : find_section(section)->keys)
    if (key.value.in_toml && key.name != skip) TS_RETURN_IF_ERROR(apply_key(r, cfg, section, key));
  return Status::ok_status();
}

// The preset first, then explicit [model] keys over it, then the GPT-2 family's derived sizes.
Status resolve_model(const Reader& r, RunConfig& cfg) {
  TS_RETURN_IF_ERROR(apply_key(r, cfg, "model", *find_key(*find_section("model"), "preset")));
  auto preset = model_preset(cfg.model_preset);
  if (!preset.ok()) return invalid_argument(r.where("model", "preset") + ": " + preset.status().message());
  cfg.model = preset.value();
  TS_RETURN_IF_ERROR(apply_section(r, cfg, "model", /*skip=*/"preset"));
  ModelConfig& m = cfg.model;
  // GPT-2 family definitions: keys derived from others follow them unless given explicitly.
  if (m.arch == Arch::gpt2) {
    if (!r.has("model", "n_kv_head")) m.n_kv_head = m.n_head;
    if (!r.has("model", "d_ff") && r.has("model", "d_model")) m.d_ff = 4 * m.d_model;
  }
  Status st = m.validate();
  if (!st.ok())
    return invalid_argument(r.source() + ": [model] (preset '" + cfg.model_preset + "' + explicit keys): " +
                            st.message());
  return Status::ok_status();
}

Status resolve_data(const Reader& r, RunConfig& cfg) {
  auto dir = r.string("data", "dir");
  if (!dir || dir->empty())
    return invalid_argument(r.source() + ": [data] dir is required: the prepared dataset directory holding "
                            "manifest.json (e.g. dir = \"data/kjv\", made by `tessera prepare`)");
  TS_RETURN_IF_ERROR(apply_section(r, cfg, "data"));
  if (!r.has("data", "seq_len")) cfg.data.seq_len = cfg.model.max_seq_len;  // >= 1: the model is validated
  if (cfg.data.seq_len > cfg.model.max_seq_len)
    return invalid_argument(r.where("data", "seq_len") + " (" + std::to_string(cfg.data.seq_len) +
                            ") must be <= model.max_seq_len (" + std::to_string(cfg.model.max_seq_len) +
                            "): lower data.seq_len or raise model.max_seq_len");
  return Status::ok_status();
}

Status resolve_train(const Reader& r, RunConfig& cfg) {
  TS_RETURN_IF_ERROR(apply_section(r, cfg, "train"));
  // grad_accum is derived so that the global batch is stated once, in tokens.
  auto& t = cfg.train;
  if (cfg.parallel.dp == 0) return Status::ok_status();  // derived once the world size is known
  const int64_t per_step = t.micro_batch * cfg.data.seq_len * data_replicas(cfg.parallel);
  if (!r.has("train", "batch_tokens")) t.batch_tokens = per_step;
  if (t.batch_tokens < per_step || t.batch_tokens % per_step != 0) {
    int64_t lower = std::max<int64_t>(per_step, t.batch_tokens / per_step * per_step);
    int64_t upper = (t.batch_tokens / per_step + 1) * per_step;
    std::string fits = lower < t.batch_tokens ? std::to_string(lower) + " or " + std::to_string(upper)
                                              : std::to_string(lower);
    return invalid_argument(r.where("train", "batch_tokens") + " (" + std::to_string(t.batch_tokens) +
                            ") must be a positive multiple of train.micro_batch (" + std::to_string(t.micro_batch) +
                            ") x data.seq_len (" + std::to_string(cfg.data.seq_len) + ") x parallel.dp (" +
                            std::to_string(cfg.parallel.dp) + ")" +
                            (cfg.parallel.ep > 1 ? " x parallel.ep (" + std::to_string(cfg.parallel.ep) + ")" : "") +
                            " = " + std::to_string(per_step) +
                            " (the multiple is grad_accum); try batch_tokens = " + fits);
  }
  t.grad_accum = t.batch_tokens / per_step;
  return Status::ok_status();
}

Status resolve_optim(const Reader& r, RunConfig& cfg) {
  TS_RETURN_IF_ERROR(apply_section(r, cfg, "optim"));
  auto& o = cfg.optim;
  if (!r.has("optim", "min_lr")) o.min_lr = o.lr / 10;
  if (!(o.min_lr >= 0) || o.min_lr > o.lr) {
    std::ostringstream s;
    s << r.where("optim", "min_lr") << " (" << static_cast<double>(o.min_lr) << ") must be in [0, optim.lr = "
      << static_cast<double>(o.lr) << "]";
    return invalid_argument(s.str());
  }
  return Status::ok_status();
}

}  // namespace

Result<RunConfig> parse_run_config(std::string_view toml_text, const std::vector<std::string>& overrides,
                                   std::string_view source_name) {
  const std::string source(source_name);
  toml::table root;
  try {
    root = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& e) {
    return invalid_argument(source + ":" + std::to_string(e.source().begin.line) + ":" +
                            std::to_string(e.source().begin.column) + ": TOML syntax error: " +
                            std::string(e.description()));
  }
  std::map<std::string, std::string> origins;
  TS_RETURN_IF_ERROR(apply_overrides(root, overrides, origins));
  TS_RETURN_IF_ERROR(check_structure(root, source, origins));
  Reader r(root, source, std::move(origins));
  RunConfig cfg;
  TS_RETURN_IF_ERROR(resolve_model(r, cfg));
  TS_RETURN_IF_ERROR(resolve_data(r, cfg));
  TS_RETURN_IF_ERROR(apply_section(r, cfg, "parallel"));
  TS_RETURN_IF_ERROR(apply_section(r, cfg, "ps"));
  TS_RETURN_IF_ERROR(resolve_train(r, cfg));
  TS_RETURN_IF_ERROR(resolve_optim(r, cfg));
  TS_RETURN_IF_ERROR(apply_section(r, cfg, "outer"));
  TS_RETURN_IF_ERROR(apply_section(r, cfg, "comm"));
  return cfg;
}

Result<RunConfig> load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found("cannot open run config '" + path + "': check the path (configs/default.toml is the default job)");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error("error reading run config '" + path + "'");
  return parse_run_config(ss.str(), overrides, path);
}

Result<RunConfig> load_run_config_for_world(const std::string& path, const std::vector<std::string>& overrides,
                                            int world_size) {
  TS_ASSIGN_OR_RETURN(RunConfig cfg, load_run_config(path, overrides));
  if (cfg.parallel.dp != 0) return cfg;
  int dp = 0;
  if (cfg.parallel.mode == ParallelMode::ps) {  // the last ps.servers (+ spare) ranks serve; the others are tp x pp worker replicas
    const int other = cfg.ps.other_ranks();
    const std::string servers = "ps.servers = " + std::to_string(cfg.ps.servers) +
                                (cfg.ps.spare_workers > 0 ? " and ps.spare_workers = " + std::to_string(cfg.ps.spare_workers) : "");
    if (world_size <= other)
      return invalid_argument("parallel.mode = \"ps\" with " + servers + " needs at least " + std::to_string(other + 1) +
                              " ranks but the job has " + std::to_string(world_size) + ": launch more ranks or lower " +
                              (cfg.ps.spare_workers > 0 ? "ps.servers or ps.spare_workers" : "ps.servers"));
    const int workers = world_size - other, mp = cfg.parallel.tp * cfg.parallel.pp;
    if (workers % mp != 0)
      return invalid_argument("parallel.dp = 0 (the default) fills the job with parameter-server workers, but " +
                              std::to_string(world_size) + " ranks less " + servers +
                              " leave " + std::to_string(workers) + " workers, not a multiple of parallel.tp x "
                              "parallel.pp = " + std::to_string(mp) + ": launch " + std::to_string(other) + " + a multiple of " +
                              std::to_string(mp) + " ranks, or set ps.servers = " +
                              std::to_string(cfg.ps.servers + workers % mp));
    dp = workers / mp;
  } else {
    const int mp = cfg.parallel.tp * cfg.parallel.pp * cfg.parallel.cp * cfg.parallel.ep;
    if (world_size < mp || world_size % mp != 0)
      return invalid_argument("parallel.dp = 0 (the default) fills the job with data-parallel replicas, but " +
                              std::to_string(world_size) + " ranks are not a multiple of parallel.tp x parallel.pp" +
                              (cfg.parallel.cp > 1 ? " x parallel.cp" : "") + (cfg.parallel.ep > 1 ? " x parallel.ep" : "") +
                              " = " + std::to_string(mp) +
                              ": launch a multiple of " + std::to_string(mp) + " ranks");
    dp = world_size / mp;
  }
  std::vector<std::string> with_dp = overrides;
  with_dp.push_back("parallel.dp=" + std::to_string(dp));
  return load_run_config(path, with_dp);
}

}  // namespace tessera
