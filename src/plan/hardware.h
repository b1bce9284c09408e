// A hardware description for the step-time model (plan/step_time_model.h): the device (peak FLOP/s
// per dtype, achieved-GEMM efficiency by matmul size, memory and its bandwidth, per-op overhead), the
// node (devices per node, intra-node link) and the network (inter-node link), plus collectives measured
// on this machine by `tessera plan --calibrate`. Read from and written to TOML (configs/hardware/).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera {

// One link's alpha-beta cost: a message of n bytes takes alpha_s + n / bandwidth seconds.
struct LinkSpec {
  double latency_s = 0;  // alpha: per ring step (a ring all-reduce over n takes 2 (n - 1) of them)
  double bandwidth = 0;  // bytes/s per device, one direction (1 / beta)
};

// Achieved fraction of the peak of a matmul whose smallest dimension is `size` (interpolated in
// log(size) between points, clamped at the ends).
struct GemmEfficiencyPoint {
  int64_t size = 0;
  double efficiency = 0;
};

// A collective measured on this machine (--calibrate): ring all-reduce over `ranks` ranks fitted to
// 2(p-1) alpha + 2(p-1)/p n / bandwidth.
struct MeasuredCollective {
  int ranks = 0;
  LinkSpec link;
};

// What the optimizer step streams a parameter: the gradient norm reads the gradient (4), AdamW reads
// parameter, gradient and both moments and writes parameter and moments (28).
inline constexpr double kOptimizerBytesPerParam = 32;

struct HardwareSpec {
  std::string name;    // "a100-80gb-8x"
  std::string source;  // where the numbers come from (a citation, or "measured by tessera plan --calibrate")
  // [device] one rank's device (a GPU, or the CPU cores one rank uses)
  double peak_flops_fp32 = 0;  // FLOP/s
  double peak_flops_bf16 = 0;  // FLOP/s (fp16 uses the same)
  std::vector<GemmEfficiencyPoint> gemm_efficiency;  // sorted by size
  double attention_efficiency = 0.5;  // of the matmul peak, for attention's FLOPs
  // The precision attention computes in on this device whatever train.precision is ("fp32": Tessera's
  // CPU kernels, whose attention stays f32 under bf16); empty: the run's precision, as on GPUs whose
  // flash attention runs in the matmuls' precision. Picks the peak attention_efficiency applies to.
  std::string attention_precision;
  double memory_bytes = 0;
  double memory_bandwidth = 0;          // bytes/s, the achieved copy rate (elementwise ops, optimizer)
  double op_overhead_s = 0;             // fixed cost per op (kernel launch, OpenMP fork/join)
  // bytes/s at which memory handed back to the OS is faulted in (and zeroed) again on its next write:
  // what ZeRO 2 / 3 pay every micro-batch for the gradient and gathered-parameter pages they give
  // back (core/memory.h, paged buffers). 0: free (a GPU's buffers stay mapped).
  double refault_bandwidth = 0;
  // bytes/s of the optimizer step's streams (the gradient norm and AdamW: kOptimizerBytesPerParam),
  // measured over arrays far beyond the caches; 0: memory_bandwidth.
  double optimizer_bandwidth = 0;
  // [node]
  int devices_per_node = 1;
  // CPU machines: the cores the node's ranks share (0: every device computes on its own, as GPUs do).
  // Ranks x threads beyond them time-share the cores, so each rank's compute stretches by the excess.
  int cores_per_node = 0;
  // CPU machines: the threads per rank the device's rates were measured with (0: unknown, taken to be
  // the run's own). A run whose ranks run more (or fewer) threads computes faster (slower) in proportion.
  int threads_per_device = 0;
  // bytes/s the node's memory gives the optimizer's streams of all its ranks updating at once (0:
  // unmeasured, each rank streams at optimizer_bandwidth). Two ranks of a 2-core Zen 4 each updated at
  // 28 GB/s together against 39 alone.
  double node_stream_bandwidth = 0;
  LinkSpec intra;
  // [network]
  LinkSpec inter;
  // Fraction of overlappable communication (data-parallel buckets during backward, ZeRO-3
  // prefetch) that really hides behind compute: 1 with a communication engine (GPUs with NCCL),
  // less on CPUs where MPI progresses only inside MPI calls.
  double overlap_efficiency = 1.0;
  double step_overhead_s = 0;  // per step: data loading, host synchronisation, bookkeeping
  // A model's measured forward + backward over the sum of its ops' roofline times (calibrate.cpp's
  // probe model): what the per-op rates, each measured on cache-hot buffers, leave out (operands
  // arriving from memory, the work between ops). Multiplies every compute time; 1 = none.
  double compute_scale = 1.0;
  // The same ratio per op class, where the calibration profiled its probe by class (0 = compute_scale):
  // the op model misses matmuls, attention and the memory-bound rest (norms, activations, residuals,
  // the loss, the embedding) by different factors, and layouts mix them differently (tensor
  // parallelism halves the matmuls, not the replicated norms).
  double matmul_scale = 0, attention_scale = 0, memory_op_scale = 0;
  std::vector<MeasuredCollective> measured;  // [[collective]] rows, sorted by ranks

  // The matmul efficiency for a smallest dimension (1.0 when the table is empty).
  double gemm_efficiency_at(int64_t size) const;
  // Peak FLOP/s for "fp32", "bf16" or "fp16" (the last two: peak_flops_bf16, or fp32 when 0).
  double peak_flops(std::string_view precision) const;
  // The peak attention's FLOPs run at in a run of `precision` (attention_precision when set).
  double attention_peak_flops(std::string_view precision) const {
    return peak_flops(attention_precision.empty() ? precision : std::string_view(attention_precision));
  }
  // The link of a ring collective over `ranks` ranks: a measured one with that many ranks when
  // intra-node, else intra or inter by placement.
  LinkSpec collective_link(int ranks, bool spans_nodes) const;
  // How much slower each rank computes when `ranks_on_node` ranks of `threads` threads each share
  // cores_per_node cores: max(1, ranks x threads / cores); 1 without cores_per_node.
  double core_sharing(int ranks_on_node, int threads) const;
  // How much faster each rank computes than the device as measured when it runs `threads` threads
  // (threads / threads_per_device; below 1 with fewer; 1 without cores_per_node or threads_per_device).
  // Time-sharing beyond the cores is core_sharing's.
  double thread_speedup(int threads) const;
  // The optimizer step's streaming rate: optimizer_bandwidth, or memory_bandwidth where unmeasured.
  double optimizer_rate() const { return optimizer_bandwidth > 0 ? optimizer_bandwidth : memory_bandwidth; }
  // A rank's optimizer rate when `ranks_on_node` ranks of `threads` threads update at once: its own
  // rate, or its share of node_stream_bandwidth where that is less. Only the ranks on cores of their
  // own stream together; the rest take turns with them, which core_sharing charges.
  double optimizer_rate_on_node(int ranks_on_node, int threads) const;
};

// Parses a hardware TOML; every error names the file, the key and what is expected.
Result<HardwareSpec> parse_hardware(std::string_view toml_text, const std::string& origin = "hardware");
Result<HardwareSpec> load_hardware(const std::string& path);
// The TOML form (parse_hardware(to_toml(h)) == h up to printing precision).
std::string hardware_to_toml(const HardwareSpec& h);

}  // namespace tessera
