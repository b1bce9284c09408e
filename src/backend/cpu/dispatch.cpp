// The ops:: entry points of the CPU kernels: each forwards to the table of the level this process runs
// (select_cpu_isa), so one binary runs the AVX2 or the AVX-512 copy of every kernel. The level is the
// one process-wide setting of the backend, as oneDNN's own ISA cap is: it is chosen once, at a command's
// entry, and only read afterwards.
#include <oneapi/dnnl/dnnl.h>

#include <atomic>
#include <mutex>

#include "backend/cpu/kernel_table.h"
#include "backend/cpu_isa.h"

namespace tessera {
namespace {

struct Selection {
  std::mutex mu;
  bool chosen = false;  // select_cpu_isa has run
  bool forced = false;  // a level was named rather than "auto"
  CpuIsa isa = CpuIsa::avx2;
  std::atomic<const ops::CpuKernels*> kernels{nullptr};
};

// Process-wide on purpose, not CpuBackend state: it mirrors oneDNN's ISA cap, which is process-global
// and accepted only before oneDNN's first use. A CpuBackend(CpuIsa) still runs a level of its own.
Selection& selection() {
  static Selection s;
  return s;
}

dnnl_cpu_isa_t onednn_cap(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::avx2: return dnnl_cpu_isa_avx2;
    case CpuIsa::avx512: return dnnl_cpu_isa_avx512_core_vnni;  // no bf16 kernels below avx512_bf16
    case CpuIsa::avx512_bf16: return dnnl_cpu_isa_avx512_core_amx;
  }
  return dnnl_cpu_isa_all;
}

const char* onednn_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

}  // namespace

namespace ops {

const CpuKernels& cpu_kernels(CpuIsa isa) {
  return isa == CpuIsa::avx2 ? isa_avx2::kernel_table() : isa_avx512::kernel_table();
}

const CpuKernels& active_cpu_kernels() {
  const CpuKernels* k = selection().kernels.load(std::memory_order_acquire);
  if (k != nullptr) return *k;
  // No command chose a level (a test, a tool): the best one this CPU has, or TESSERA_MAX_CPU_ISA lets it
  // have, oneDNN capped to match (a no-op if oneDNN already ran; cpu_isa_summary shows its level).
  const CpuFeatures cpu = detect_cpu_features();
  if (cpu.capped_at) dnnl_set_max_cpu_isa(onednn_cap(best_cpu_isa(cpu)));
  const CpuKernels* best = &cpu_kernels(best_cpu_isa(cpu));
  selection().kernels.compare_exchange_strong(k, best, std::memory_order_acq_rel);
  return *selection().kernels.load(std::memory_order_acquire);
}

}  // namespace ops

Status select_cpu_isa(std::string_view request) {
  Result<CpuIsaRequest> r = parse_cpu_isa_request(request);
  if (!r.ok()) return r.status();
  return select_cpu_isa(*r);
}

Status select_cpu_isa(CpuIsaRequest request) {
  Result<std::optional<CpuIsa>> ceiling = cpu_isa_ceiling();
  if (!ceiling.ok()) return ceiling.status();
  const CpuFeatures cpu = detect_cpu_features();
  Result<CpuIsa> isa = resolve_cpu_isa(request, cpu);
  if (!isa.ok()) return isa.status();
  Selection& s = selection();
  std::lock_guard<std::mutex> lock(s.mu);
  const ops::CpuKernels* want = &ops::cpu_kernels(*isa);
  if (s.chosen) {
    if (s.isa == *isa && s.forced == (request != CpuIsaRequest::automatic)) return Status::ok_status();
    return invalid_argument(std::string("the CPU level is already chosen (") + cpu_isa_name(s.isa) +
                            "); choose cpu_isa once, when the command starts");
  }
  // "auto" leaves oneDNN free to use everything it finds (AMX included) unless TESSERA_MAX_CPU_ISA hid
  // levels; a named level caps it.
  const bool cap_onednn = request != CpuIsaRequest::automatic || cpu.capped_at.has_value();
  if (cap_onednn && dnnl_set_max_cpu_isa(onednn_cap(*isa)) != dnnl_success)
    return internal_error(std::string("oneDNN refused the ISA cap for cpu_isa = ") + cpu_isa_name(*isa) +
                          ": it was used before the level was chosen (select_cpu_isa must run first)");
  s.kernels.store(want, std::memory_order_release);
  s.isa = *isa;
  s.chosen = true;
  s.forced = request != CpuIsaRequest::automatic;
  return Status::ok_status();
}

CpuIsa active_cpu_isa() {
  Selection& s = selection();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.chosen ? s.isa : best_cpu_isa(detect_cpu_features());
}

std::string cpu_isa_summary() {
  ops::active_cpu_kernels();  // without a command's choice, the default level (and oneDNN's cap) takes effect
  const CpuIsa isa = active_cpu_isa();
  bool forced = false;
  {
    std::lock_guard<std::mutex> lock(selection().mu);
    forced = selection().forced;
  }
  return std::string(cpu_isa_name(isa)) + (forced ? " (forced" : " (auto") +
         "; CPU: " + cpu_features_string(detect_cpu_features()) +
         "; oneDNN: " + onednn_isa_name(dnnl_get_effective_cpu_isa()) + ")";
}

}  // namespace tessera
