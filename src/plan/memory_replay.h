// Replaying a run's allocations without making them (the memory planner's machinery): counters
// that behave like core/memory.cpp's, the Transformer's activation buffers, paged buffers and
// ZeRO's reductions and gathers over one chunk. Each piece names the code it mirrors; a change
// there must change it here (bench/plan_vs_measured.sh and tests/cli/plan.sh catch drift).
// Internal to plan/memory_plan.cpp.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/memory.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "plan/memory_plan.h"

namespace tessera::memory_replay {

// Every f32 buffer the Transformer allocates for a micro-batch (B, T) over `layout`, in elements, in
// allocation order (model/transformer.cpp: struct Acts, allocate_activations). T is the rank's own
// positions (seq_len / cp); ep > 1 sizes the experts' rows for ep x the slots and adds the
// expert-parallel receive buffers; split_backward (zb-h1) each layer's kept linear output
// gradients; cp > 1 adds the context-parallel exchange buffers (Ulysses', or with
// `ring` ring attention's).
std::vector<int64_t> activation_buffers(const ModelConfig& c, const ParamLayout& layout, int64_t B, int64_t T,
                                        bool sp, Recompute recompute, int cp = 1, bool ring = false, int ep = 1,
                                        bool split_backward = false);

// The machine's page size in bytes (Buffer's paged mode works in whole pages).
int64_t page_bytes();

constexpr int64_t kF = sizeof(float);
inline size_t idx(MemCategory c) { return static_cast<size_t>(c); }

// ---- the allocator's counters (core/memory.cpp: account) ----

class Counters {
 public:
  // A counted buffer; paged buffers start at 0 and change at set().
  int alloc(MemCategory c, int64_t bytes) {
    bufs_.push_back({c, 0});
    const int id = static_cast<int>(bufs_.size()) - 1;
    set(id, bytes);
    return id;
  }
  void set(int id, int64_t bytes) {
    Buf& b = bufs_[static_cast<size_t>(id)];
    account(b.cat, bytes - b.counted);
    b.counted = bytes;
  }
  void free(int id) { set(id, 0); }
  const MemBytes& category_peak() const { return cat_peak_; }
  const MemBytes& at_peak() const { return at_peak_; }
  int64_t peak() const { return peak_; }

 private:
  struct Buf {
    MemCategory cat;
    int64_t counted;
  };
  void account(MemCategory c, int64_t delta) {
    if (delta == 0) return;
    live_[idx(c)] += delta;
    total_ += delta;
    cat_peak_[idx(c)] = std::max(cat_peak_[idx(c)], live_[idx(c)]);
    if (total_ > peak_) {
      peak_ = total_;
      at_peak_ = live_;
    }
  }
  std::vector<Buf> bufs_;
  MemBytes live_{}, cat_peak_{}, at_peak_{};
  int64_t total_ = 0, peak_ = 0;
};

// ---- paged buffers (core/memory.cpp: Residency::paged) ----

class PagedBuffer {
 public:
  explicit PagedBuffer(int64_t bytes)
      : bytes_(bytes), ps_(page_bytes()), page_(static_cast<size_t>((bytes + ps_ - 1) / ps_), 0) {}
  // Pages written (or memset) in [b, e) bytes become resident.
  void touch(int64_t b, int64_t e) {
    if (b >= e) return;
    for (int64_t p = b / ps_; p < (e + ps_ - 1) / ps_; ++p) mark(p, 1);
  }
  // Buffer::zero_range: whole pages inside are handed back, the partial edges memset (so resident).
  void zero_range(int64_t off, int64_t n) {
    if (n == 0) return;
    const auto [first, last] = whole_pages(off, n);
    if (first >= last) return touch(off, off + n);
    touch(off, first);
    drop(first, last);
    touch(last, off + n);
  }
  // Buffer::discard_range: whole pages inside are handed back, the edges untouched.
  void discard_range(int64_t off, int64_t n) {
    if (n == 0) return;
    const auto [first, last] = whole_pages(off, n);
    drop(first, last);
  }
  int64_t resident_bytes() const { return std::min(resident_ * ps_, bytes_); }  // Buffer::sample_residency
  int64_t bytes() const { return bytes_; }

 private:
  std::pair<int64_t, int64_t> whole_pages(int64_t off, int64_t n) const {
    const int64_t first = (off + ps_ - 1) / ps_ * ps_, last = (off + n) / ps_ * ps_;
    return {first, std::max(first, last)};
  }
  void drop(int64_t first, int64_t last) {
    for (int64_t p = first / ps_; p < last / ps_; ++p) mark(p, 0);
  }
  void mark(int64_t p, uint8_t v) {
    uint8_t& x = page_[static_cast<size_t>(p)];
    resident_ += static_cast<int64_t>(v) - x;
    x = v;
  }
  int64_t bytes_, ps_;
  std::vector<uint8_t> page_;
  int64_t resident_ = 0;
};

// ---- ZeRO over one chunk (parallel/zero.cpp: ZeroSharded), replayed on paged buffers ----

// The poll (one per later layer's on_layer_ready) at which a reduction launched at a layer is seen
// complete: the second, the most zero.cpp allows (two receive slots; launching a third reduction
// completes the oldest). With Open MPI on one node (bench/plan_vs_measured.sh) a non-blocking
// reduce-scatter usually needs more than one progress call; assuming one under-predicted by a layer.
constexpr int kReductionPolls = 2;

class ZeroChunk {
 public:
  ZeroChunk(const ModelConfig& cfg, const ParamLayout& layout, int stage, int dp, int dp_rank, int64_t T,
            Counters& counters)
      : layout_(layout), stage_(stage), dp_(dp), counters_(counters) {
    std::vector<int> layers;
    for (const ParamInfo& p : layout.params())
      if (layers.empty() || layers.back() != p.layer) layers.push_back(p.layer);
    for (int layer : layers) {
      Unit u;
      u.layer = layer;
      std::tie(u.begin, u.end) = layout.layer_range(layer);
      const int64_t slice = (u.end - u.begin) / dp;
      u.own_b = u.begin + dp_rank * slice;
      u.own_e = u.own_b + slice;
      units_.push_back(u);
    }
    const ParamInfo* wte = layout.find("wte");
    tied_head_ = wte && wte->layer == -1 && layout.find("lnf.w") && !layout.find("lm_head.w");
    // The gradient pages a layer's backward writes: every tensor of the unit, except that the
    // embedding writes only the first T rows of wpe (and, assumed, every wte row's page); a tied
    // head writes the whole wte (unit -1) too.
    for (Unit& u : units_)
      for (const ParamInfo& p : layout.params()) {
        if (p.layer != u.layer) continue;
        const int64_t n = p.name == "wpe" ? std::min(p.numel, T * cfg.d_model) : p.numel;
        u.writes.push_back({p.offset * kF, (p.offset + n) * kF});
      }
  }

  // ParamStore construction (paged buffers count nothing until sampled).
  void allocate() {
    const int64_t bytes = layout_.total_numel() * kF;
    if (stage_ >= 2) {
      grads_ = std::make_unique<PagedBuffer>(bytes);
      grads_id_ = counters_.alloc(MemCategory::gradients, 0);
    } else {
      grads_id_ = counters_.alloc(MemCategory::gradients, bytes);
    }
    if (stage_ >= 3) {
      params_ = std::make_unique<PagedBuffer>(bytes);
      params_id_ = counters_.alloc(MemCategory::parameters, 0);
    } else {
      params_id_ = counters_.alloc(MemCategory::parameters, bytes);
    }
  }
  // The ZeroSharded constructor: AdamW m and v per unit slice, the owned gradient accumulators
  // (stages 2, 3), then two receive slots of the largest slice (the gathers run in place).
  void allocate_sync() {
    int64_t acc_floats = 0, max_slice = 0;
    for (const Unit& u : units_) {
      const int64_t slice = u.own_e - u.own_b;
      counters_.alloc(MemCategory::optimizer_state, slice * kF);
      counters_.alloc(MemCategory::optimizer_state, slice * kF);
      acc_floats += stage_ >= 2 ? slice : 0;
      max_slice = std::max(max_slice, slice);
    }
    counters_.alloc(MemCategory::gradients, acc_floats * kF);
    counters_.alloc(MemCategory::communication, 2 * max_slice * kF);
  }
  // Initialisation and broadcast write every parameter; broadcast_parameters pages out the others' slices.
  void broadcast_parameters() {
    if (params_) params_->touch(0, params_->bytes());
    if (stage_ >= 3)
      for (Unit& u : units_) release(u);
    sample();
  }
  void zero_grads() {
    if (grads_) grads_->zero_range(0, layout_.total_numel() * kF);
  }
  void forward() {
    if (stage_ < 3 || dp_ == 1) return;
    for (size_t i = 0; i < units_.size(); ++i) {
      Unit& u = units_[i];
      Unit* emb = tied_head_ && i + 1 == units_.size() ? &units_.front() : nullptr;
      ensure_gathered(u);
      if (emb) ensure_gathered(*emb);
      if (i + 1 < units_.size()) start_gather(units_[i + 1]);
      release(u);
      if (emb) release(*emb);
    }
  }
  void backward() {
    if (stage_ < 2) return;
    for (Unit& u : units_)  // begin_micro_batch
      if (u.reducing) complete_reduction(u);
    for (size_t i = units_.size(); i-- > 0;) {
      Unit& u = units_[i];
      const bool head_reads_wte = tied_head_ && i + 1 == units_.size();
      if (stage_ >= 3 && dp_ > 1 && u.layer != -1) {  // before_backward
        ensure_gathered(u);
        if (head_reads_wte) ensure_gathered(units_.front());
        if (i > 0 && units_[i - 1].layer != -1) start_gather(units_[i - 1]);
      }
      for (const auto& [b, e] : u.writes) grads_->touch(b, e);
      if (head_reads_wte)  // dhead is dwte
        if (const ParamInfo* wte = layout_.find("wte")) grads_->touch(wte->offset * kF, (wte->offset + wte->numel) * kF);
      // on_layer_ready: sample, poll (earlier reductions and gathers are done), launch, release.
      sample();
      for (Unit& o : units_) {
        if (o.reducing && --o.polls_left == 0) complete_reduction(o);
        if (o.gathering) {
          o.gathering = false;
          o.gathered = true;
        }
      }
      u.reducing = true;
      u.polls_left = kReductionPolls;
      if (stage_ >= 3) {
        release(u);
        if (head_reads_wte) release(units_.front());
      }
    }
  }
  void finish() {
    for (Unit& u : units_)
      if (u.reducing) complete_reduction(u);
    sample();
  }
  // ModelParallelSync's tied-embedding sum over a pipeline's first and last stage (ZeroSharded::
  // sum_grad_over): the whole unit holding `name` is gathered into a transient buffer, freed on return.
  void sum_grad_over(const std::string& name) {
    const ParamInfo* p = layout_.find(name);
    if (!p) return;
    for (const Unit& u : units_)
      if (u.layer == p->layer) counters_.free(counters_.alloc(MemCategory::communication, (u.end - u.begin) * kF));
  }
  void complete_update() {
    if (stage_ < 3 || dp_ == 1) return;
    for (Unit& u : units_) {
      u.gathering = false;
      release(u);
    }
    sample();
  }

 private:
  struct Unit {
    int layer = 0;
    int64_t begin = 0, end = 0, own_b = 0, own_e = 0;  // elements
    std::vector<std::pair<int64_t, int64_t>> writes;   // gradient bytes written by its backward
    bool gathered = true, gathering = false, reducing = false;
    int polls_left = 0;  // of a reduction in flight
  };
  void sample() {
    if (grads_) counters_.set(grads_id_, grads_->resident_bytes());
    if (params_) counters_.set(params_id_, params_->resident_bytes());
  }
  void complete_reduction(Unit& u) {
    u.reducing = false;
    grads_->zero_range(u.begin * kF, (u.end - u.begin) * kF);
  }
  // A started gather is counted as landed (an upper bound: MPI may deliver it later).
  void start_gather(Unit& u) {
    if (u.gathered || u.gathering) return;
    params_->touch(u.begin * kF, u.end * kF);
    u.gathering = true;
  }
  void ensure_gathered(Unit& u) {
    if (u.gathered) return;
    start_gather(u);
    u.gathering = false;
    u.gathered = true;
    sample();
  }
  void release(Unit& u) {
    if (stage_ < 3 || dp_ == 1 || u.gathering) return;
    params_->discard_range(u.begin * kF, (u.own_b - u.begin) * kF);
    params_->discard_range(u.own_e * kF, (u.end - u.own_e) * kF);
    u.gathered = false;
  }

  const ParamLayout& layout_;
  int stage_, dp_;
  Counters& counters_;
  std::vector<Unit> units_;
  bool tied_head_ = false;
  std::unique_ptr<PagedBuffer> grads_, params_;
  int grads_id_ = -1, params_id_ = -1;
};

}  // namespace tessera::memory_replay
