// Hardware descriptions: lookup helpers, and strict TOML reading/writing with toml++ (the library
// the run config uses). Units in the file are human ones (TFLOP/s, GB/s, GiB, us, ms).
#include "plan/hardware.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace tessera {

double HardwareSpec::gemm_efficiency_at(int64_t size) const {
  if (gemm_efficiency.empty()) return 1.0;
  const auto& g = gemm_efficiency;
  if (size <= g.front().size) return g.front().efficiency;
  if (size >= g.back().size) return g.back().efficiency;
  for (size_t i = 1; i < g.size(); ++i) {
    if (size > g[i].size) continue;
    const double x0 = std::log(static_cast<double>(g[i - 1].size)), x1 = std::log(static_cast<double>(g[i].size));
    const double t = (std::log(static_cast<double>(size)) - x0) / (x1 - x0);
    return g[i - 1].efficiency + t * (g[i].efficiency - g[i - 1].efficiency);
  }
  return g.back().efficiency;
}

double HardwareSpec::peak_flops(std::string_view precision) const {
  if (precision != "fp32" && peak_flops_bf16 > 0) return peak_flops_bf16;
  return peak_flops_fp32;
}

LinkSpec HardwareSpec::collective_link(int ranks, bool spans_nodes) const {
  if (spans_nodes) return inter;
  for (const MeasuredCollective& m : measured)
    if (m.ranks == ranks) return m.link;
  // The nearest measured group size below, else the node's link.
  const MeasuredCollective* best = nullptr;
  for (const MeasuredCollective& m : measured)
    if (m.ranks <= ranks && (!best || m.ranks > best->ranks)) best = &m;
  return best ? best->link : intra;
}

double HardwareSpec::core_sharing(int ranks_on_node, int threads) const {
  if (cores_per_node <= 0) return 1.0;
  return std::max(1.0, static_cast<double>(ranks_on_node) * std::max(1, threads) / cores_per_node);
}

double HardwareSpec::optimizer_rate_on_node(int ranks_on_node, int threads) const {
  if (node_stream_bandwidth <= 0) return optimizer_rate();
  const int at_once = cores_per_node > 0 ? std::min(ranks_on_node, std::max(1, cores_per_node / std::max(1, threads)))
                                         : ranks_on_node;
  return std::min(optimizer_rate(), node_stream_bandwidth / std::max(1, at_once));
}

double HardwareSpec::thread_speedup(int threads) const {
  if (cores_per_node <= 0 || threads_per_device <= 0) return 1.0;
  return static_cast<double>(std::max(1, threads)) / threads_per_device;
}

namespace {

constexpr double kT = 1e12, kG = 1e9, kGiB = 1073741824.0, kUs = 1e-6, kMs = 1e-3;

// Reads keys of one table, remembering which were read so unknown ones become errors.
class Section {
 public:
  Section(const toml::table* t, std::string name, const std::string& origin)
      : t_(t), name_(std::move(name)), origin_(origin) {}
  Status number(std::string_view key, double scale, double& out, bool required, double min_value = 0) {
    seen_.insert(std::string(key));
    const toml::node* n = t_ ? t_->get(key) : nullptr;
    if (!n) return required ? invalid_argument(where() + "missing " + qualified(key) + ": add it (see "
                                               "configs/hardware/*.toml for the keys and their units)")
                            : Status::ok_status();
    std::optional<double> v = n->value<double>();
    if (!v || !std::isfinite(*v) || *v < min_value)
      return invalid_argument(where(n) + qualified(key) + " must be a number >= " + fmt(min_value));
    out = *v * scale;
    return Status::ok_status();
  }
  Status integer(std::string_view key, int& out, bool required) {
    double v = out;
    TS_RETURN_IF_ERROR(number(key, 1, v, required, 1));
    if (v != std::floor(v)) return invalid_argument(where() + qualified(key) + " must be an integer >= 1");
    out = static_cast<int>(v);
    return Status::ok_status();
  }
  // An optional string key, one of `allowed`.
  Status choice(std::string_view key, std::initializer_list<std::string_view> allowed, std::string& out) {
    seen_.insert(std::string(key));
    const toml::node* n = t_ ? t_->get(key) : nullptr;
    if (!n) return Status::ok_status();
    const std::optional<std::string> v = n->value<std::string>();
    std::string names;
    for (std::string_view a : allowed) names += (names.empty() ? "\"" : ", \"") + std::string(a) + "\"";
    if (!v || std::find(allowed.begin(), allowed.end(), *v) == allowed.end())
      return invalid_argument(where(n) + qualified(key) + " must be one of " + names);
    out = *v;
    return Status::ok_status();
  }
  Status unknown_keys() const {
    if (!t_) return Status::ok_status();
    for (auto&& [k, v] : *t_)
      if (!seen_.count(std::string(k.str())))
        return invalid_argument(where(&v) + "unknown key " + qualified(k.str()) +
                                ": remove it (keys: see configs/hardware/*.toml and docs/performance.md)");
    return Status::ok_status();
  }
  void mark(std::string_view key) { seen_.insert(std::string(key)); }  // read by other code
  const toml::table* table() const { return t_; }
  std::string where(const toml::node* n = nullptr) const {
    const int line = n ? static_cast<int>(n->source().begin.line) : 0;
    std::string out = origin_;
    if (line > 0) out.append(":").append(std::to_string(line));
    return out.append(": ");
  }
  std::string qualified(std::string_view key) const { return (name_.empty() ? "" : name_ + ".") + std::string(key); }
  static std::string fmt(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
  }

 private:
  const toml::table* t_;
  std::string name_;
  const std::string& origin_;
  std::set<std::string> seen_;
};

Status read_gemm_table(Section& dev, HardwareSpec& h) {
  const toml::node* n = dev.table() ? dev.table()->get("gemm_efficiency") : nullptr;
  if (!n) return Status::ok_status();
  const std::string bad = dev.where(n) + "device.gemm_efficiency must be an array of [size, efficiency] pairs "
                          "with size >= 1 ascending and 0 < efficiency <= 1, e.g. [[128, 0.45], [1024, 0.9]]";
  const toml::array* a = n->as_array();
  if (!a) return invalid_argument(bad);
  for (const toml::node& e : *a) {
    const toml::array* p = e.as_array();
    if (!p || p->size() != 2) return invalid_argument(bad);
    std::optional<double> s = p->get(0)->value<double>(), f = p->get(1)->value<double>();
    if (!s || !f || *s < 1 || *f <= 0 || *f > 1) return invalid_argument(bad);
    if (!h.gemm_efficiency.empty() && *s <= static_cast<double>(h.gemm_efficiency.back().size))
      return invalid_argument(bad);
    h.gemm_efficiency.push_back({static_cast<int64_t>(*s), *f});
  }
  return Status::ok_status();
}

}  // namespace

Result<HardwareSpec> parse_hardware(std::string_view toml_text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    return invalid_argument(origin + ":" + std::to_string(e.source().begin.line) + ": TOML syntax error: " +
                            std::string(e.description()));
  }
  HardwareSpec h;
  for (auto&& [k, v] : root) {
    const std::string key(k.str());
    if (key == "name" || key == "source") {
      if (!v.is_string()) return invalid_argument(origin + ": " + key + " must be a string");
      (key == "name" ? h.name : h.source) = *v.value<std::string>();
    } else if (key != "device" && key != "node" && key != "network" && key != "runtime" && key != "collective") {
      return invalid_argument(origin + ": unknown key or section '" + key +
                              "': use name, source, [device], [node], [network], [runtime], [[collective]]");
    }
  }
  Section dev(root.get_as<toml::table>("device"), "device", origin);
  if (!dev.table()) return invalid_argument(origin + ": missing [device] section (peak_tflops_fp32, memory_gib, ...)");
  TS_RETURN_IF_ERROR(dev.number("peak_tflops_fp32", kT, h.peak_flops_fp32, true, 1e-9));
  TS_RETURN_IF_ERROR(dev.number("peak_tflops_bf16", kT, h.peak_flops_bf16, false));
  TS_RETURN_IF_ERROR(dev.number("attention_efficiency", 1, h.attention_efficiency, false, 1e-6));
  TS_RETURN_IF_ERROR(dev.choice("attention_precision", {"fp32", "bf16", "fp16"}, h.attention_precision));
  TS_RETURN_IF_ERROR(dev.number("memory_gib", kGiB, h.memory_bytes, true, 1e-9));
  TS_RETURN_IF_ERROR(dev.number("memory_bandwidth_gbs", kG, h.memory_bandwidth, true, 1e-9));
  TS_RETURN_IF_ERROR(dev.number("op_overhead_us", kUs, h.op_overhead_s, false));
  TS_RETURN_IF_ERROR(dev.number("refault_gbs", kG, h.refault_bandwidth, false));
  TS_RETURN_IF_ERROR(dev.number("optimizer_gbs", kG, h.optimizer_bandwidth, false));
  TS_RETURN_IF_ERROR(dev.integer("threads", h.threads_per_device, false));
  dev.mark("gemm_efficiency");
  TS_RETURN_IF_ERROR(read_gemm_table(dev, h));
  TS_RETURN_IF_ERROR(dev.unknown_keys());

  Section node(root.get_as<toml::table>("node"), "node", origin);
  TS_RETURN_IF_ERROR(node.integer("devices", h.devices_per_node, true));
  TS_RETURN_IF_ERROR(node.integer("cores", h.cores_per_node, false));
  TS_RETURN_IF_ERROR(node.number("stream_gbs", kG, h.node_stream_bandwidth, false));
  TS_RETURN_IF_ERROR(node.number("link_bandwidth_gbs", kG, h.intra.bandwidth, true, 1e-9));
  TS_RETURN_IF_ERROR(node.number("link_latency_us", kUs, h.intra.latency_s, true));
  TS_RETURN_IF_ERROR(node.unknown_keys());

  Section net(root.get_as<toml::table>("network"), "network", origin);
  h.inter = h.intra;  // a single-node machine may leave the network out
  TS_RETURN_IF_ERROR(net.number("bandwidth_gbs", kG, h.inter.bandwidth, false, 1e-9));
  TS_RETURN_IF_ERROR(net.number("latency_us", kUs, h.inter.latency_s, false));
  TS_RETURN_IF_ERROR(net.unknown_keys());

  Section rt(root.get_as<toml::table>("runtime"), "runtime", origin);
  TS_RETURN_IF_ERROR(rt.number("overlap_efficiency", 1, h.overlap_efficiency, false));
  if (h.overlap_efficiency > 1)
    return invalid_argument(origin + ": runtime.overlap_efficiency must be between 0 and 1");
  TS_RETURN_IF_ERROR(rt.number("step_overhead_ms", kMs, h.step_overhead_s, false));
  TS_RETURN_IF_ERROR(rt.number("compute_scale", 1, h.compute_scale, false, 1e-3));
  TS_RETURN_IF_ERROR(rt.number("matmul_scale", 1, h.matmul_scale, false));
  TS_RETURN_IF_ERROR(rt.number("attention_scale", 1, h.attention_scale, false));
  TS_RETURN_IF_ERROR(rt.number("memory_op_scale", 1, h.memory_op_scale, false));
  TS_RETURN_IF_ERROR(rt.unknown_keys());

  if (const toml::node* c = root.get("collective")) {
    const toml::array* rows = c->as_array();
    if (!rows) return invalid_argument(origin + ": collective must be an array of tables ([[collective]])");
    for (const toml::node& row : *rows) {
      Section s(row.as_table(), "collective", origin);
      if (!s.table()) return invalid_argument(origin + ": each [[collective]] must be a table");
      MeasuredCollective m;
      TS_RETURN_IF_ERROR(s.integer("ranks", m.ranks, true));
      TS_RETURN_IF_ERROR(s.number("bandwidth_gbs", kG, m.link.bandwidth, true, 1e-9));
      TS_RETURN_IF_ERROR(s.number("latency_us", kUs, m.link.latency_s, true));
      TS_RETURN_IF_ERROR(s.unknown_keys());
      h.measured.push_back(m);
    }
    std::sort(h.measured.begin(), h.measured.end(), [](auto& a, auto& b) { return a.ranks < b.ranks; });
  }
  return h;
}

Result<HardwareSpec> load_hardware(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found("cannot read hardware file " + path + ": pass an existing file (configs/hardware/ "
                            "has some, or write one with tessera plan --calibrate --out FILE)");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hardware(ss.str(), path);
}

std::string hardware_to_toml(const HardwareSpec& h) {
  auto q = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out + "\"";
  };
  char b[256];
  std::string out = "name = " + q(h.name) + "\nsource = " + q(h.source) + "\n\n[device]\n";
  auto line = [&](const char* key, double v) {
    std::snprintf(b, sizeof b, "%s = %.6g\n", key, v);
    out += b;
  };
  line("peak_tflops_fp32", h.peak_flops_fp32 / kT);
  if (h.peak_flops_bf16 > 0) line("peak_tflops_bf16", h.peak_flops_bf16 / kT);
  line("attention_efficiency", h.attention_efficiency);
  if (!h.attention_precision.empty()) out += "attention_precision = " + q(h.attention_precision) + "\n";
  line("memory_gib", h.memory_bytes / kGiB);
  line("memory_bandwidth_gbs", h.memory_bandwidth / kG);
  line("op_overhead_us", h.op_overhead_s / kUs);
  if (h.refault_bandwidth > 0) line("refault_gbs", h.refault_bandwidth / kG);
  if (h.optimizer_bandwidth > 0) line("optimizer_gbs", h.optimizer_bandwidth / kG);
  if (h.threads_per_device > 0) out += "threads = " + std::to_string(h.threads_per_device) + "\n";
  if (!h.gemm_efficiency.empty()) {
    out += "gemm_efficiency = [";
    for (size_t i = 0; i < h.gemm_efficiency.size(); ++i) {
      std::snprintf(b, sizeof b, "%s[%lld, %.4f]", i ? ", " : "", (long long)h.gemm_efficiency[i].size,
                    h.gemm_efficiency[i].efficiency);
      out += b;
    }
    out += "]\n";
  }
  out += "\n[node]\n";
  out += "devices = " + std::to_string(h.devices_per_node) + "\n";
  if (h.cores_per_node > 0) out += "cores = " + std::to_string(h.cores_per_node) + "\n";
  if (h.node_stream_bandwidth > 0) line("stream_gbs", h.node_stream_bandwidth / kG);
  line("link_bandwidth_gbs", h.intra.bandwidth / kG);
  line("link_latency_us", h.intra.latency_s / kUs);
  out += "\n[network]\n";
  line("bandwidth_gbs", h.inter.bandwidth / kG);
  line("latency_us", h.inter.latency_s / kUs);
  out += "\n[runtime]\n";
  line("overlap_efficiency", h.overlap_efficiency);
  line("step_overhead_ms", h.step_overhead_s / kMs);
  line("compute_scale", h.compute_scale);
  if (h.matmul_scale > 0) line("matmul_scale", h.matmul_scale);
  if (h.attention_scale > 0) line("attention_scale", h.attention_scale);
  if (h.memory_op_scale > 0) line("memory_op_scale", h.memory_op_scale);
  for (const MeasuredCollective& m : h.measured) {
    out += "\n[[collective]]\nranks = " + std::to_string(m.ranks) + "\n";
    line("bandwidth_gbs", m.link.bandwidth / kG);
    line("latency_us", m.link.latency_s / kUs);
  }
  return out;
}

}  // namespace tessera
