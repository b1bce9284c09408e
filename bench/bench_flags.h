// Command-line flags of the benchmark programs: `--name value` options, on/off switches and
// positional arguments, each declared with a line of help and shown with its default.
// --help (or -h) prints the usage and exits 0. An unknown flag, a flag without its value, or a value
// that is not a number of the flag's kind prints the problem and the usage and exits 2: a benchmark
// that ran its whole measurement on a mistyped flag wastes minutes and reports the wrong setup.
// Header-only: every bench/*.cpp is a program of its own (bench/CMakeLists.txt).
#pragma once
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu_isa.h"

namespace tessera::bench {

class Flags {
 public:
  // `program`: the binary's name; `about`: one line on what it measures.
  Flags(std::string program, std::string about) : program_(std::move(program)), about_(std::move(about)) {}

  // `--name VALUE` into *out (a string, or a number of *out's type, read whole).
  template <typename T>
  Flags& option(const char* name, T* out, const char* help) {
    flags_.push_back({name, help, shown(*out), true, [out](const std::string& v) { return read(v, out); }});
    return *this;
  }
  // `--name` alone sets *out.
  Flags& toggle(const char* name, bool* out, const char* help) {
    flags_.push_back({name, help, "", false, [out](const std::string&) { return *out = true; }});
    return *this;
  }
  // The next bare argument, in declaration order; optional (its default stays when absent).
  template <typename T>
  Flags& positional(const char* name, T* out, const char* help) {
    positionals_.push_back({name, help, shown(*out), true, [out](const std::string& v) { return read(v, out); }});
    return *this;
  }
  // --cpu-isa LEVEL: the kernels' level (backend/cpu_isa.h), applied by parse() once the flags are read.
  Flags& cpu_isa(std::string* out) {
    cpu_isa_ = out;
    return option("--cpu-isa", out, "kernel level: auto, avx2, avx512 or avx512_bf16 (a lower one is forced)");
  }

  std::string usage() const {
    std::string u = "usage: " + program_;
    for (const Flag& f : flags_) u += " [" + f.name + (f.takes_value ? " X" : "") + "]";
    for (const Flag& p : positionals_) u += " [" + p.name + "]";
    u += "\n" + about_ + "\n";
    for (const std::vector<Flag>* list : {&flags_, &positionals_})
      for (const Flag& f : *list) {
        u += "  " + f.name + std::string(f.name.size() < 16 ? 16 - f.name.size() : 1, ' ') + f.help;
        if (!f.default_text.empty()) u += " (default " + f.default_text + ")";
        u += "\n";
      }
    u += "  --help          this text\n";
    return u;
  }

  // Reads argv into the declared places, then applies --cpu-isa when declared. nullopt: go on;
  // otherwise the exit code (0 after --help, 2 on a bad flag or level).
  std::optional<int> parse(int argc, char** argv) const {
    size_t next_positional = 0;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--help" || a == "-h") {
        std::printf("%s", usage().c_str());
        return 0;
      }
      const Flag* f = nullptr;
      if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
        for (const Flag& candidate : flags_)
          if (candidate.name == a) f = &candidate;
        if (f == nullptr) return refuse("unknown flag " + a);
      } else {
        if (next_positional == positionals_.size()) return refuse("unexpected argument '" + a + "'");
        f = &positionals_[next_positional++];
        if (!f->set(a)) return refuse(f->name + ": '" + a + "' is not a valid value");
        continue;
      }
      if (!f->takes_value) {
        f->set("");
        continue;
      }
      if (i + 1 >= argc) return refuse(a + " needs a value");
      const std::string v = argv[++i];
      if (!f->set(v)) return refuse(a + ": '" + v + "' is not a valid value");
    }
    return cpu_isa_ != nullptr ? select_cpu_isa_level(*cpu_isa_) : std::nullopt;
  }

 private:
  struct Flag {
    std::string name, help, default_text;
    bool takes_value;
    std::function<bool(const std::string&)> set;
  };

  // Runs this process's kernels at the level (before any kernel or oneDNN call: oneDNN takes its cap
  // only before its first use) and prints the level in use. nullopt: go on; otherwise exit code 2.
  static std::optional<int> select_cpu_isa_level(const std::string& level) {
    if (const Status s = select_cpu_isa(level); !s.ok()) {
      std::fprintf(stderr, "--cpu-isa %s: %s\n", level.c_str(), s.message().c_str());
      return 2;
    }
    std::printf("CPU kernels %s\n", cpu_isa_summary().c_str());
    return std::nullopt;
  }

  std::optional<int> refuse(const std::string& problem) const {
    std::fprintf(stderr, "%s: %s\n%s", program_.c_str(), problem.c_str(), usage().c_str());
    return 2;
  }

  static bool read(const std::string& v, std::string* out) {
    *out = v;
    return true;
  }
  template <typename T>
  static bool read(const std::string& v, T* out) {
    static_assert(std::is_arithmetic_v<T>);
    if constexpr (std::is_floating_point_v<T>) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') return false;
      *out = static_cast<T>(x);
      return true;
    } else {
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), *out);
      return ec == std::errc() && end == v.data() + v.size();
    }
  }
  static std::string shown(const std::string& v) { return v; }
  template <typename T>
  static std::string shown(const T& v) {
    if constexpr (std::is_same_v<T, bool>) return "";
    else if constexpr (std::is_floating_point_v<T>) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
      return buf;
    } else return std::to_string(v);
  }

  std::string program_, about_;
  std::vector<Flag> flags_, positionals_;
  std::string* cpu_isa_ = nullptr;  // set by cpu_isa()
};

}  // namespace tessera::bench
