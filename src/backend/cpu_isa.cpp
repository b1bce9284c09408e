// CPU feature detection, level names and the start-up check that the CPU can run this build's baseline.
// Compiled for plain x86-64 (backend/CMakeLists.txt), so that the check itself runs on any x86-64 CPU.
#include "backend/cpu_isa.h"

#include <cpuid.h>
#include <unistd.h>

#include <cstdlib>

namespace tessera {
namespace {

bool has_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (edx >> 22) & 1u;  // CPUID.(EAX=7,ECX=0):EDX[22] = AMX-BF16
}

// Runs before every other static constructor of the program (priority 101), before any code compiled
// for the baseline can execute an instruction this CPU lacks: a clear message instead of SIGILL.
#if defined(TESSERA_BASELINE_X86_64_V3)
__attribute__((constructor(101))) void require_baseline_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v3")) return;
  static const char kMessage[] =
      "error: this CPU lacks AVX2/FMA (the x86-64-v3 level), which this build of Tessera needs on every "
      "x86-64 CPU it runs on; build it on this machine with cmake -DTESSERA_PORTABLE=OFF (-march=native)\n";
  [[maybe_unused]] const ssize_t n = write(2, kMessage, sizeof kMessage - 1);
  _exit(3);
}
#endif

}  // namespace

Result<std::optional<CpuIsa>> cpu_isa_ceiling() {
  const char* value = std::getenv(kCpuIsaCeilingVariable);
  if (value == nullptr || *value == '\0') return std::optional<CpuIsa>();
  for (CpuIsa isa : kCpuIsaLevels)
    if (std::string_view(value) == cpu_isa_name(isa)) return std::optional<CpuIsa>(isa);
  return invalid_argument(std::string("unknown ") + kCpuIsaCeilingVariable + "=\"" + value +
                          "\": use avx2, avx512 or avx512_bf16, or unset it for every level the CPU has");
}

CpuFeatures detect_cpu_features() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2_fma = __builtin_cpu_supports("x86-64-v3");
  f.avx512 = f.avx2_fma && __builtin_cpu_supports("x86-64-v4");
  f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
  f.amx_bf16 = f.avx512_bf16 && has_amx_bf16();
  Result<std::optional<CpuIsa>> ceiling = cpu_isa_ceiling();
  if (ceiling.ok() && ceiling->has_value()) {
    const CpuFeatures found = f;
    if (**ceiling == CpuIsa::avx2) f.avx512 = false;
    if (**ceiling != CpuIsa::avx512_bf16) f.avx512_bf16 = f.amx_bf16 = false;
    if (found.avx512 != f.avx512 || found.avx512_bf16 != f.avx512_bf16) f.capped_at = **ceiling;
  }
  return f;
}

bool cpu_isa_supported(CpuIsa isa, const CpuFeatures& cpu) {
  switch (isa) {
    case CpuIsa::avx2: return cpu.avx2_fma;
    case CpuIsa::avx512: return cpu.avx512;
    case CpuIsa::avx512_bf16: return cpu.avx512_bf16;
  }
  return false;
}

CpuIsa best_cpu_isa(const CpuFeatures& cpu) {
  CpuIsa best = CpuIsa::avx2;
  for (CpuIsa isa : kCpuIsaLevels)
    if (cpu_isa_supported(isa, cpu)) best = isa;
  return best;
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
    case CpuIsa::avx512_bf16: return "avx512_bf16";
  }
  return "?";
}

std::string cpu_features_string(const CpuFeatures& cpu) {
  std::string s = cpu.avx2_fma ? "avx2+fma" : "no avx2";
  if (cpu.avx512) s += " avx512";
  if (cpu.avx512_bf16) s += " avx512_bf16";
  if (cpu.amx_bf16) s += " amx_bf16";
  if (cpu.capped_at) s += std::string(", more hidden by ") + kCpuIsaCeilingVariable + "=" + cpu_isa_name(*cpu.capped_at);
  return s;
}

std::string_view cpu_isa_request_name(CpuIsaRequest r) {
  switch (r) {
    case CpuIsaRequest::automatic: return "auto";
    case CpuIsaRequest::avx2: return cpu_isa_name(CpuIsa::avx2);
    case CpuIsaRequest::avx512: return cpu_isa_name(CpuIsa::avx512);
    case CpuIsaRequest::avx512_bf16: return cpu_isa_name(CpuIsa::avx512_bf16);
  }
  return "?";
}

Result<CpuIsaRequest> parse_cpu_isa_request(std::string_view s) {
  for (CpuIsaRequest r : {CpuIsaRequest::automatic, CpuIsaRequest::avx2, CpuIsaRequest::avx512,
                          CpuIsaRequest::avx512_bf16})
    if (s == cpu_isa_request_name(r)) return r;
  return invalid_argument("unknown cpu_isa \"" + std::string(s) + "\": use auto, avx2, avx512 or avx512_bf16");
}

Result<CpuIsa> resolve_cpu_isa(CpuIsaRequest request, const CpuFeatures& cpu) {
  if (request == CpuIsaRequest::automatic) return best_cpu_isa(cpu);
  const CpuIsa isa = request == CpuIsaRequest::avx2     ? CpuIsa::avx2
                     : request == CpuIsaRequest::avx512 ? CpuIsa::avx512
                                                        : CpuIsa::avx512_bf16;
  if (!cpu_isa_supported(isa, cpu))
    return invalid_argument(std::string("cpu_isa = \"") + cpu_isa_name(isa) + "\" needs a CPU with " +
                            cpu_isa_name(isa) + ", and this one has only " + cpu_features_string(cpu) +
                            ": use \"auto\" or \"" + cpu_isa_name(best_cpu_isa(cpu)) + "\"");
  return isa;
}

Result<CpuIsa> resolve_cpu_isa(std::string_view request, const CpuFeatures& cpu) {
  Result<CpuIsaRequest> r = parse_cpu_isa_request(request);
  if (!r.ok()) return r.status();
  return resolve_cpu_isa(*r, cpu);
}

}  // namespace tessera
