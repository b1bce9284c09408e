// The x86 instruction-set levels the CPU kernels are built for, what this CPU has, and which level a
// process runs. One binary carries every level (backend/cpu/kernel_isa.h); the level is chosen once, at
// a command's entry, from the CPU's features or from an override (train.cpu_isa, --cpu-isa) that forces
// a lower level so that every path can be tested on any machine.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera {

// avx2: AVX2 + FMA (x86-64-v3), the portable baseline. avx512: AVX-512 F/BW/DQ/VL/CD (x86-64-v4).
// avx512_bf16: avx512 kernels, and oneDNN may use its AVX512-BF16 (and AMX) matmuls.
enum class CpuIsa : uint8_t { avx2, avx512, avx512_bf16 };
inline constexpr CpuIsa kCpuIsaLevels[] = {CpuIsa::avx2, CpuIsa::avx512, CpuIsa::avx512_bf16};

struct CpuFeatures {
  bool avx2_fma = false;     // the whole x86-64-v3 set
  bool avx512 = false;       // the whole x86-64-v4 set, enabled by the OS
  bool avx512_bf16 = false;  // AVX512-BF16
  bool amx_bf16 = false;     // AMX tiles with bf16 (oneDNN only)
  // Set when TESSERA_MAX_CPU_ISA hid levels the CPU has: the level it capped this process at.
  std::optional<CpuIsa> capped_at;
};

// The environment variable that caps this process at a level, whatever the CPU has (as oneDNN's
// ONEDNN_MAX_CPU_ISA does): `TESSERA_MAX_CPU_ISA=avx2 ctest` runs a whole suite or job, every
// subprocess included, at a lower level without editing configs or flags.
inline constexpr const char* kCpuIsaCeilingVariable = "TESSERA_MAX_CPU_ISA";
// The level it names; nullopt when it is unset or empty; invalid_argument naming the choices otherwise.
Result<std::optional<CpuIsa>> cpu_isa_ceiling();

// What this CPU has, less what TESSERA_MAX_CPU_ISA hides (an invalid value hides nothing here:
// select_cpu_isa reports it).
CpuFeatures detect_cpu_features();
bool cpu_isa_supported(CpuIsa isa, const CpuFeatures& cpu);
CpuIsa best_cpu_isa(const CpuFeatures& cpu);
const char* cpu_isa_name(CpuIsa isa);
// "avx2+fma avx512 avx512_bf16 amx_bf16": what the CPU has, for banners and errors.
std::string cpu_features_string(const CpuFeatures& cpu);

// What a command asks for (train.cpu_isa, --cpu-isa): "auto" (the best level this CPU has) or a level
// forced by name. Parsed once, where the request enters; the names are "auto" and cpu_isa_name's.
enum class CpuIsaRequest : uint8_t { automatic, avx2, avx512, avx512_bf16 };
std::string_view cpu_isa_request_name(CpuIsaRequest r);  // "auto", "avx2", "avx512", "avx512_bf16"
// The inverse of cpu_isa_request_name; anything else is invalid_argument naming the choices.
Result<CpuIsaRequest> parse_cpu_isa_request(std::string_view s);

// The request -> the level. Errors name the choices, or what the CPU lacks and the highest level it
// can run.
Result<CpuIsa> resolve_cpu_isa(CpuIsaRequest request, const CpuFeatures& cpu);
Result<CpuIsa> resolve_cpu_isa(std::string_view request, const CpuFeatures& cpu);  // parse, then resolve

// Runs this process's kernels (every ops:: call) at the requested level and caps oneDNN's own dispatch
// at the same level. Call at a command's entry, before any op runs: oneDNN accepts its cap only before
// its first use, so a later change of level is refused (asking again for the level in use is fine).
Status select_cpu_isa(CpuIsaRequest request);
Status select_cpu_isa(std::string_view request);  // parse_cpu_isa_request, then select
CpuIsa active_cpu_isa();
// "avx2 (auto; CPU: avx2+fma; oneDNN: avx2)": the start-up banner's and --version's line.
std::string cpu_isa_summary();

}  // namespace tessera
