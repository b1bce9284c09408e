// Memory planning: replays a run's allocations (training_setup.cpp, pipeline_runner.cpp,
// transformer.cpp, zero.cpp) against counters that behave like core/memory.cpp's.
#include "train/memory_plan.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "parallel/pipeline_schedule.h"

namespace tessera {
namespace {

constexpr int64_t kF = sizeof(float);
size_t idx(MemCategory c) { return static_cast<size_t>(c); }

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

// ---- activations (model/transformer.cpp: struct Acts, allocate_activations) ----

struct ActDims {
  int64_t B, T, N, C, Q, A, F, FC, NH, V, NS;
};

ActDims act_dims(const ModelConfig& c, const ParamLayout& layout, int64_t B, int64_t T, bool sp) {
  const int64_t p = layout.tp().size, NH = c.n_head / p, NKV = c.n_kv_head / p, HS = c.head_size(), F = c.d_ff / p;
  const int64_t N = B * T;
  const bool llama = c.arch == Arch::llama;
  return {B, T, N, c.d_model, (NH + 2 * NKV) * HS, NH * HS, F, llama ? 2 * F : F, NH,
          layout.padded_vocab_size() / p, sp ? N / p : N};
}

// The buffers allocate_activations makes, each as a number of floats (zero-sized ones allocate nothing).
std::vector<int64_t> activation_buffers(const ModelConfig& c, const ParamLayout& layout, int64_t B, int64_t T,
                                        bool sp, const std::string& recompute) {
  const ActDims d = act_dims(c, layout, B, T, sp && layout.tp().size > 1);
  const bool first = layout.first_layer() == 0, last = layout.last_layer() == c.n_layer;
  const int64_t N = d.N, NS = d.NS, C = d.C;
  const int layers = layout.last_layer() - layout.first_layer();
  std::vector<int64_t> f;
  f.push_back(NS * C);  // encoded
  // One layer's saved tensors, in struct LayerActs order.
  auto layer_saved = [&](std::vector<int64_t>& out) {
    out.insert(out.end(), {NS * C, NS, NS,      // ln1, mean, rstd
                           N * d.Q,             // qkv
                           N * d.A,             // atty
                           d.B * d.NH * d.T,    // lse
                           NS * C,              // residual2
                           NS * C, NS, NS,      // ln2, mean, rstd
                           N * d.FC, N * d.F,   // fch, fch_act
                           NS * C});            // residual3
  };
  if (recompute == "full") {
    // Each layer keeps only its output (the next layer's input); the rest of one layer's tensors
    // are rebuilt in a shared set during backward.
    for (int l = 0; l < layers; ++l) f.push_back(NS * C);
    if (layers > 0) {
      layer_saved(f);
      f.pop_back();  // the shared set has no residual3
    }
  } else if (recompute == "selective") {
    // The attention output and its row statistics are recomputed from qkv: one shared set.
    for (int l = 0; l < layers; ++l)
      f.insert(f.end(), {NS * C, NS, NS, N * d.Q, NS * C, NS * C, NS, NS, N * d.FC, N * d.F, NS * C});
    if (layers > 0) f.insert(f.end(), {N * d.A, d.B * d.NH * d.T});
  } else {
    for (int l = 0; l < layers; ++l) layer_saved(f);
  }
  if (last) {
    f.insert(f.end(), {NS * C, NS, NS, N * d.V, N});  // lnf, mean, rstd, logits, losses
    if (layout.tp().size > 1) f.insert(f.end(), {N, 2 * N});  // ce_max, ce_stats
  } else {
    f.push_back(N * C);  // output_grad
  }
  if (!first) f.push_back(N * C);  // input_grad
  f.insert(f.end(), {N * C, N * C, N * d.A, N * d.Q, N * d.FC, N * d.F});  // dresidual dln datty dqkv dfch dfch_act
  if (sp && layout.tp().size > 1) {
    f.push_back(N * C);                // full
    if (!first) f.push_back(N * C);    // stage_in
    if (!last) f.push_back(N * C);     // stage_out
  }
  return f;
}

// ---- paged buffers (core/memory.cpp: Residency::paged) ----

int64_t page_bytes() {
  static const int64_t p = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  return p > 0 ? p : 4096;
}

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
  // (stages 2, 3), then two receive and two send slots of the largest slice.
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
    counters_.alloc(MemCategory::communication, 4 * max_slice * kF);
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
    for (Unit& u : units_)  // set_sync
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
  void gather_parameters() {
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

// ---- one rank ----

// DataParallel's TiedEmbeddingTail (parallel/tied_embedding_tail.h): a side buffer of the tied
// embedding's size, when the chunk holds wte and the head that reads it and dp > 1.
int64_t tied_embedding_tail_bytes(const ParamLayout& layout, int dp) {
  const ParamInfo* wte = layout.find("wte");
  const ParamInfo* lnf = layout.find("lnf.w");
  if (dp == 1 || !wte || wte->layer != -1 || !lnf || layout.find("lm_head.w")) return 0;
  return wte->numel * kF;
}

struct RankResult {
  std::vector<std::pair<int, int>> chunk_layers;
  std::vector<int> slots;
  int64_t parameters = 0;
  MemBytes at_peak{}, category_peak{};
  int64_t peak = 0;
};

RankResult simulate_rank(const RunConfig& cfg, const ParallelLayout& lay, GridCoord coord) {
  const ModelConfig& mc = cfg.model;
  const int64_t B = cfg.train.micro_batch, T = cfg.data.seq_len;
  const int tp = lay.grid.tp, dp = lay.grid.dp, zero = cfg.parallel.zero;
  const bool sp = lay.sequence_parallel && tp > 1;
  const std::string& recompute = cfg.train.recompute;
  Counters k;
  RankResult r;
  auto finish = [&] {
    r.at_peak = k.at_peak();
    r.category_peak = k.category_peak();
    r.peak = k.peak();
    return r;
  };

  if (tp == 1 && lay.grid.pp == 1 && zero == 0) {  // build_data_parallel_model
    const ParamLayout layout(mc);
    const int64_t bytes = layout.total_numel() * kF;
    r.chunk_layers = {{0, static_cast<int>(mc.n_layer)}};
    r.slots = {1};
    r.parameters = layout.total_numel();
    k.alloc(MemCategory::parameters, bytes);
    k.alloc(MemCategory::gradients, bytes);
    for (int64_t f : activation_buffers(mc, layout, B, T, false, recompute)) k.alloc(MemCategory::activations, f * kF);
    k.alloc(MemCategory::optimizer_state, bytes);  // AdamW m
    k.alloc(MemCategory::optimizer_state, bytes);  // AdamW v
    k.alloc(MemCategory::communication, tied_embedding_tail_bytes(layout, dp));
    return finish();
  }

  // build_model_parallel: the stores per chunk.
  const int V = lay.pipe.virtual_stages;
  const int64_t alignment = zero > 0 ? 16 * static_cast<int64_t>(dp) : 16;  // parallel/zero.h: zero_layer_alignment
  std::vector<std::unique_ptr<ParamLayout>> layouts;
  std::vector<std::unique_ptr<ZeroChunk>> zc;
  for (int c = 0; c < V; ++c) {
    const auto [first, last] = lay.chunk_layers(coord.pp, c);
    r.chunk_layers.push_back({first, last});
    layouts.push_back(
        std::make_unique<ParamLayout>(mc, first, last, TensorParallelShard{coord.tp, tp}, alignment));
    const ParamLayout& layout = *layouts.back();
    r.parameters += layout.total_numel();
    if (zero > 0) {
      zc.push_back(std::make_unique<ZeroChunk>(mc, layout, zero, dp, coord.dp, T, k));
      zc.back()->allocate();
    } else {
      k.alloc(MemCategory::parameters, layout.total_numel() * kF);
      k.alloc(MemCategory::gradients, layout.total_numel() * kF);
    }
    // initialise_parameters: a stage or shard imports the whole model once, then frees it.
    const bool whole = tp == 1 && first == 0 && last == mc.n_layer;
    if (!cfg.init_weights.empty() && !whole) {
      const ParamLayout full(mc);
      const int a = k.alloc(MemCategory::parameters, full.total_numel() * kF);
      const int b = k.alloc(MemCategory::gradients, full.total_numel() * kF);
      k.free(b);
      k.free(a);
    }
  }
  // ModelParallelSync: a DataParallel (AdamW over the chunk) or a ZeroSharded per chunk.
  for (int c = 0; c < V; ++c) {
    if (zero > 0) {
      zc[static_cast<size_t>(c)]->allocate_sync();
    } else {
      const ParamLayout& layout = *layouts[static_cast<size_t>(c)];
      k.alloc(MemCategory::optimizer_state, layout.total_numel() * kF);
      k.alloc(MemCategory::optimizer_state, layout.total_numel() * kF);
      k.alloc(MemCategory::communication, tied_embedding_tail_bytes(layout, dp));
    }
  }
  // PipelineRunner: the activation slots. Each model is built with every activation kept and whole
  // rows, then configure() (training_setup.cpp) reallocates it (the old set freed first) for
  // train.recompute, then for its sequence-parallel row shard when it sets the hooks.
  const std::vector<PipeAction> actions = make_pipeline_schedule(lay.schedule, lay.pipe, coord.pp);
  for (int c = 0; c < V; ++c) {
    const int n = activation_slots(actions, c);
    r.slots.push_back(n);
    const ParamLayout& layout = *layouts[static_cast<size_t>(c)];
    for (int i = 0; i < n; ++i) {
      std::vector<int> ids;
      auto reallocate = [&](bool rows_shard, const std::string& mode) {
        for (int id : ids) k.free(id);
        ids.clear();
        for (int64_t f : activation_buffers(mc, layout, B, T, rows_shard, mode))
          ids.push_back(k.alloc(MemCategory::activations, f * kF));
      };
      reallocate(false, "none");
      if (recompute != "none") reallocate(false, recompute);
      if (sp) reallocate(true, recompute);
    }
  }
  for (auto& z : zc) z->broadcast_parameters();

  // One training step (the next ones repeat it).
  for (auto& z : zc) z->zero_grads();
  bool first_forward = true;
  for (const PipeAction& a : actions) {
    if (a.op == PipeOp::forward) {
      if (first_forward && sp)  // TensorParallel's reduce-scatter receive buffer, N/tp rows of C
        k.alloc(MemCategory::communication, B * T / tp * mc.d_model * kF);
      first_forward = false;
      if (zero > 0) zc[static_cast<size_t>(a.chunk)]->forward();
    } else if (a.op == PipeOp::backward && zero > 0) {
      zc[static_cast<size_t>(a.chunk)]->backward();
    }
  }
  for (auto& z : zc) z->finish();
  for (auto& z : zc) z->gather_parameters();
  return finish();
}

std::string str(int64_t v) { return std::to_string(v); }

// The config with train.micro_batch = b, keeping train.batch_tokens (grad_accum follows); false when
// b does not divide the batch.
bool with_micro_batch(const RunConfig& cfg, int64_t b, RunConfig& out) {
  const int64_t per = b * cfg.data.seq_len * cfg.parallel.dp;
  if (b < 1 || per <= 0 || cfg.train.batch_tokens % per != 0) return false;
  out = cfg;
  out.train.micro_batch = b;
  out.train.grad_accum = cfg.train.batch_tokens / per;
  return true;
}

// Every rank's plan for one config (one simulation per stage and tp rank; dp replicas are the same).
Result<MemoryPlan> plan_ranks(const RunConfig& cfg, int world_size) {
  TS_ASSIGN_OR_RETURN(ParallelLayout lay, plan_parallel_layout(cfg, world_size));
  MemoryPlan plan;
  plan.layout = lay;
  plan.world_size = world_size;
  plan.micro_batch = cfg.train.micro_batch;
  plan.budget_bytes = static_cast<int64_t>(cfg.train.memory_budget_mb * 1048576.0);
  std::map<std::pair<int, int>, RankResult> kinds;
  for (int rank = 0; rank < world_size; ++rank) {
    const GridCoord c = grid_coord(lay.grid, rank);
    auto it = kinds.find({c.pp, c.tp});
    if (it == kinds.end()) it = kinds.emplace(std::make_pair(c.pp, c.tp), simulate_rank(cfg, lay, c)).first;
    const RankResult& res = it->second;
    RankMemoryPlan p;
    p.rank = rank;
    p.coord = c;
    p.chunk_layers = res.chunk_layers;
    p.activation_slots = res.slots;
    p.parameters = res.parameters;
    p.at_peak = res.at_peak;
    p.category_peak = res.category_peak;
    p.peak = res.peak;
    plan.ranks.push_back(std::move(p));
  }
  return plan;
}

int64_t budget_of(const RunConfig& cfg) { return static_cast<int64_t>(cfg.train.memory_budget_mb * 1048576.0); }

// The candidate micro-batches: divisors of batch_tokens / (seq_len x dp), ascending.
std::vector<int64_t> micro_batch_candidates(const RunConfig& cfg) {
  std::vector<int64_t> out;
  const int64_t per = cfg.data.seq_len * cfg.parallel.dp;
  if (per <= 0 || cfg.train.batch_tokens % per != 0) return {cfg.train.micro_batch};
  const int64_t K = cfg.train.batch_tokens / per;
  for (int64_t b = 1; b * b <= K; ++b)
    if (K % b == 0) {
      out.push_back(b);
      if (b * b != K) out.push_back(K / b);
    }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

int64_t transformer_activation_bytes(const ModelConfig& cfg, const ParamLayout& layout, int64_t B, int64_t T,
                                     bool sequence_parallel, const std::string& recompute) {
  int64_t sum = 0;
  for (int64_t f : activation_buffers(cfg, layout, B, T, sequence_parallel, recompute)) sum += f * kF;
  return sum;
}

std::string format_mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

const RankMemoryPlan& MemoryPlan::worst() const {
  static const RankMemoryPlan none;
  if (ranks.empty()) return none;
  size_t w = 0;
  for (size_t i = 1; i < ranks.size(); ++i)
    if (ranks[i].peak > ranks[w].peak) w = i;
  return ranks[w];
}

int64_t MemoryPlan::largest_micro_batch_that_fits() const {
  int64_t m = -1;
  for (const RankMemoryPlan& r : ranks) m = m < 0 ? r.largest_micro_batch_that_fits : std::min(m, r.largest_micro_batch_that_fits);
  return std::max<int64_t>(m, 0);
}

Result<MemoryPlan> plan_memory(const RunConfig& cfg, int world_size) {
  TS_ASSIGN_OR_RETURN(MemoryPlan plan, plan_ranks(cfg, world_size));
  // Largest micro-batch per rank: every candidate's plan (the peak need not be monotone in the
  // micro-batch: a GPipe stage holds grad_accum micro-batches, and grad_accum shrinks as it grows).
  for (RankMemoryPlan& r : plan.ranks) r.largest_micro_batch_that_fits = 0;
  for (int64_t b : micro_batch_candidates(cfg)) {
    RunConfig c;
    if (!with_micro_batch(cfg, b, c)) continue;
    Result<MemoryPlan> p = b == cfg.train.micro_batch ? Result<MemoryPlan>(plan) : plan_ranks(c, world_size);
    if (!p.ok()) continue;  // e.g. too few micro-batches for 1F1B, or rows sequence parallelism cannot split
    for (size_t i = 0; i < plan.ranks.size(); ++i)
      if (plan.budget_bytes <= 0 || p->ranks[i].peak <= plan.budget_bytes)
        plan.ranks[i].largest_micro_batch_that_fits = b;
  }
  return plan;
}

std::vector<MemoryOption> memory_options_that_fit(const RunConfig& cfg, int world_size, int64_t budget_bytes) {
  std::vector<MemoryOption> out;
  auto fits = [&](const RunConfig& c, const std::string& change) {
    Result<MemoryPlan> p = plan_ranks(c, world_size);
    if (!p.ok() || (budget_bytes > 0 && p->peak() > budget_bytes)) return false;
    out.push_back({change, p->peak()});
    return true;
  };
  for (int z = cfg.parallel.zero + 1; z <= 3; ++z) {
    RunConfig c = cfg;
    c.parallel.zero = z;
    if (fits(c, "parallel.zero=" + str(z))) break;
  }
  const std::vector<std::string> modes = {"none", "selective", "full"};
  const auto now = std::find(modes.begin(), modes.end(), cfg.train.recompute);
  for (auto it = now == modes.end() ? modes.end() : now + 1; it != modes.end(); ++it) {
    RunConfig c = cfg;
    c.train.recompute = *it;
    if (fits(c, "train.recompute=" + *it)) break;
  }
  if (cfg.parallel.tp > 1 && !cfg.parallel.sequence_parallel) {
    RunConfig c = cfg;
    c.parallel.sequence_parallel = true;
    fits(c, "parallel.sequence_parallel=true");
  }
  // More tp or pp on the same ranks: dp shrinks, the global batch stays (grad_accum grows).
  for (const GridShape& g : grid_factorisations(world_size)) {
    if (g.tp < cfg.parallel.tp || g.pp < cfg.parallel.pp || (g.tp == cfg.parallel.tp && g.pp == cfg.parallel.pp))
      continue;
    RunConfig c = cfg;
    c.parallel.dp = g.dp;
    c.parallel.tp = g.tp;
    c.parallel.pp = g.pp;
    if (g.pp != cfg.parallel.pp) c.parallel.stage_layers.clear();
    const int64_t per = c.train.micro_batch * c.data.seq_len * g.dp;
    if (c.train.batch_tokens % per != 0) continue;
    c.train.grad_accum = c.train.batch_tokens / per;
    std::string change;
    if (g.tp != cfg.parallel.tp) change += "parallel.tp=" + str(g.tp);
    if (g.pp != cfg.parallel.pp) change += std::string(change.empty() ? "" : " ") + "parallel.pp=" + str(g.pp);
    change += " parallel.dp=" + str(g.dp);
    fits(c, change);
  }
  // A smaller micro-batch for the same global batch: the largest that fits.
  std::vector<int64_t> smaller = micro_batch_candidates(cfg);
  for (auto it = smaller.rbegin(); it != smaller.rend(); ++it) {
    if (*it >= cfg.train.micro_batch) continue;
    RunConfig c;
    if (!with_micro_batch(cfg, *it, c)) continue;
    if (fits(c, "train.micro_batch=" + str(*it) + " (grad_accum " + str(c.train.grad_accum) + ")")) break;
  }
  return out;
}

Status check_memory_budget(const RunConfig& cfg, int world_size) {
  const int64_t budget = budget_of(cfg);
  if (budget <= 0) return Status::ok_status();
  TS_ASSIGN_OR_RETURN(MemoryPlan plan, plan_ranks(cfg, world_size));
  if (plan.fits()) return Status::ok_status();
  const RankMemoryPlan& w = plan.worst();
  int over = 0;
  for (const RankMemoryPlan& r : plan.ranks) over += r.peak > budget;
  std::string parts;
  for (int c = 0; c < kNumMemCategories; ++c) {
    if (w.at_peak[static_cast<size_t>(c)] == 0) continue;
    parts += std::string(parts.empty() ? "" : ", ") + std::string(mem_category_name(static_cast<MemCategory>(c))) +
             " " + format_mib(w.at_peak[static_cast<size_t>(c)]);
  }
  std::string msg = "train.memory_budget_mb = " + format_mib(budget) + ": rank " + str(w.rank) + " (dp " +
                    str(w.coord.dp) + ", pp " + str(w.coord.pp) + ", tp " + str(w.coord.tp) +
                    ") is predicted to peak at " + format_mib(w.peak) + " MiB (" + parts + ") over the budget of " +
                    format_mib(budget) + " MiB";
  if (over > 1) msg += " (" + str(over) + " of " + str(world_size) + " ranks are over)";
  const std::vector<MemoryOption> options = memory_options_that_fit(cfg, world_size, budget);
  if (options.empty()) {
    msg += "; no single change of parallel.zero, train.recompute, parallel.sequence_parallel, parallel.tp/pp or "
           "train.micro_batch fits: use more ranks or raise train.memory_budget_mb to at least " +
           format_mib(w.peak);
  } else {
    msg += "; these single changes fit:";
    for (const MemoryOption& o : options) msg += " " + o.change + " (" + format_mib(o.peak) + " MiB);";
    msg += " or raise train.memory_budget_mb to at least " + format_mib(w.peak) + " (`tessera plan` shows the details)";
  }
  return invalid_argument(msg);
}

}  // namespace tessera
