// Pipeline schedules as data: the compute order of GPipe, 1F1B, interleaved 1F1B and ZB-H1 for one stage,
// expanded with the receives and sends around each compute; validation, description, peak memory.
#include "parallel/pipeline_schedule.h"

#include <algorithm>

#include "core/log.h"

namespace tessera {

namespace {

struct Compute {
  PipeOp op;  // forward, backward or weight
  int micro_batch, chunk;
};

std::vector<Compute> gpipe_order(int m) {
  std::vector<Compute> order;
  for (int i = 0; i < m; ++i) order.push_back({PipeOp::forward, i, 0});
  for (int i = 0; i < m; ++i) order.push_back({PipeOp::backward, i, 0});
  return order;
}

// ZB-H1: 1F1B's forwards and input-gradient backwards; stage s keeps up to `delay` = s weight passes
// pending and runs the oldest whenever a backward adds one more, the rest after the last backward.
std::vector<Compute> zb_h1_order(int m, int warmup, int delay) {
  std::vector<Compute> order;
  int next_weight = 0;
  auto backward = [&](int k) {
    order.push_back({PipeOp::backward, k, 0});
    if (k + 1 - next_weight > delay) order.push_back({PipeOp::weight, next_weight++, 0});
  };
  for (int k = 0; k < warmup; ++k) order.push_back({PipeOp::forward, k, 0});
  for (int k = 0; k < m - warmup; ++k) {
    order.push_back({PipeOp::forward, k + warmup, 0});
    backward(k);
  }
  for (int k = m - warmup; k < m; ++k) backward(k);
  while (next_weight < m) order.push_back({PipeOp::weight, next_weight++, 0});
  return order;
}

// Warm-up forwards, then the steady one-forward-one-backward pairs, then the cool-down backwards.
// fwd(k) / bwd(k) name the k-th forward / backward this rank runs.
template <typename Fwd, typename Bwd>
std::vector<Compute> one_f_one_b_order(int total, int warmup, Fwd fwd, Bwd bwd) {
  std::vector<Compute> order;
  for (int k = 0; k < warmup; ++k) order.push_back(fwd(k));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(fwd(k + warmup));
    order.push_back(bwd(k));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(bwd(k));
  return order;
}

std::vector<Compute> compute_order(PipelineScheduleKind kind, const PipelineShape& shape, int stage) {
  const int p = shape.stages, m = shape.micro_batches, V = shape.virtual_stages;
  const int warmup = pipeline_warmup_forwards(kind, shape, stage);
  switch (kind) {
    case PipelineScheduleKind::gpipe:
      return gpipe_order(m);
    case PipelineScheduleKind::one_f_one_b:
      return one_f_one_b_order(
          m, warmup, [](int k) { return Compute{PipeOp::forward, k, 0}; },
          [](int k) { return Compute{PipeOp::backward, k, 0}; });
    case PipelineScheduleKind::interleaved: {
      // The k-th forward: groups of p micro-batches, each group through chunk 0, 1, ..., V-1.
      // The k-th backward: the same micro-batch order through the chunks in reverse.
      auto micro = [=](int k) { return k / (p * V) * p + k % p; };
      auto chunk = [=](int k) { return k % (p * V) / p; };
      return one_f_one_b_order(
          m * V, warmup, [&](int k) { return Compute{PipeOp::forward, micro(k), chunk(k)}; },
          [&](int k) { return Compute{PipeOp::backward, micro(k), V - 1 - chunk(k)}; });
    }
    case PipelineScheduleKind::zb_h1:
      return zb_h1_order(m, warmup, stage);
  }
  return {};
}

std::string multiples_hint(int m, int p) {
  const int below = m / p * p, above = below + p;
  std::string hint = below > 0 ? std::to_string(below) + " or " : "";
  return hint + std::to_string(above);
}

}  // namespace

Result<PipelineScheduleKind> parse_pipeline_schedule(std::string_view name) {
  if (name == "gpipe") return PipelineScheduleKind::gpipe;
  if (name == "1f1b") return PipelineScheduleKind::one_f_one_b;
  if (name == "interleaved") return PipelineScheduleKind::interleaved;
  if (name == "zb-h1") return PipelineScheduleKind::zb_h1;
  return invalid_argument("unknown pipeline schedule '" + std::string(name) +
                          "': use \"gpipe\", \"1f1b\", \"interleaved\" or \"zb-h1\"");
}

std::string_view pipeline_schedule_name(PipelineScheduleKind kind) {
  switch (kind) {
    case PipelineScheduleKind::gpipe: return "gpipe";
    case PipelineScheduleKind::one_f_one_b: return "1f1b";
    case PipelineScheduleKind::interleaved: return "interleaved";
    case PipelineScheduleKind::zb_h1: return "zb-h1";
  }
  return "?";
}

std::string_view pipe_op_name(PipeOp op) {
  switch (op) {
    case PipeOp::recv_activation: return "recv_activation";
    case PipeOp::forward: return "forward";
    case PipeOp::send_activation: return "send_activation";
    case PipeOp::recv_gradient: return "recv_gradient";
    case PipeOp::backward: return "backward";
    case PipeOp::send_gradient: return "send_gradient";
    case PipeOp::weight: return "weight";
  }
  return "?";
}

bool is_pipe_compute(PipeOp op) { return op == PipeOp::forward || op == PipeOp::backward || op == PipeOp::weight; }

bool splits_backward(const std::vector<PipeAction>& actions) {
  return std::any_of(actions.begin(), actions.end(), [](const PipeAction& a) { return a.op == PipeOp::weight; });
}

Status validate_pipeline_shape(PipelineScheduleKind kind, const PipelineShape& shape) {
  const int p = shape.stages, m = shape.micro_batches, V = shape.virtual_stages;
  const std::string name(pipeline_schedule_name(kind));
  if (p < 1) return invalid_argument("pipeline stages must be at least 1, got " + std::to_string(p));
  if (m < 1) return invalid_argument("micro-batches per step must be at least 1, got " + std::to_string(m));
  if (V < 1) return invalid_argument("virtual stages per rank must be at least 1, got " + std::to_string(V));
  if (kind != PipelineScheduleKind::interleaved) {
    if (V != 1)
      return invalid_argument("the " + name + " schedule runs one model chunk per rank, but virtual stages = " +
                              std::to_string(V) + ": set virtual stages to 1, or use the \"interleaved\" schedule");
    return Status::ok_status();
  }
  if (p < 2)
    return invalid_argument(
        "the interleaved schedule needs at least 2 pipeline stages, got 1: use \"1f1b\" (or \"gpipe\") "
        "with virtual stages = 1");
  if (V < 2)
    return invalid_argument(
        "the interleaved schedule with virtual stages = 1 is plain 1F1B: set virtual stages to 2 or more, "
        "or use the \"1f1b\" schedule");
  if (m % p != 0)
    return invalid_argument("the interleaved schedule needs the micro-batches per step to be a multiple of the " +
                            std::to_string(p) + " pipeline stages (Megatron's rule), got " + std::to_string(m) +
                            ": use " + multiples_hint(m, p) + " micro-batches, or the \"1f1b\" schedule");
  return Status::ok_status();
}

int pipeline_warmup_forwards(PipelineScheduleKind kind, const PipelineShape& shape, int stage) {
  const int p = shape.stages, m = shape.micro_batches, V = shape.virtual_stages;
  switch (kind) {
    case PipelineScheduleKind::gpipe:
      return m;
    case PipelineScheduleKind::one_f_one_b:
    case PipelineScheduleKind::zb_h1:
      return std::min(p - stage - 1, m);
    case PipelineScheduleKind::interleaved:
      // Every rank first fills V - 1 chunks of p micro-batches; earlier stages run two more
      // forwards per stage behind them so that the later stages can start their backwards at once.
      return std::min(2 * (p - stage - 1) + (V - 1) * p, m * V);
  }
  return 0;
}

std::vector<PipeAction> make_pipeline_schedule(PipelineScheduleKind kind, const PipelineShape& shape, int stage) {
  const Status valid = validate_pipeline_shape(kind, shape);
  TS_CHECK(valid.ok()) << valid.message();
  TS_CHECK(stage >= 0 && stage < shape.stages) << "stage " << stage << " of " << shape.stages;
  std::vector<PipeAction> computes;
  for (const Compute& c : compute_order(kind, shape, stage)) computes.push_back({c.op, c.micro_batch, c.chunk, -1});
  return with_communication(computes, shape, stage);
}

std::vector<PipeAction> with_communication(const std::vector<PipeAction>& computes, const PipelineShape& shape, int stage) {
  const int p = shape.stages;
  const int last_virtual = p * shape.virtual_stages - 1;
  const int prev = (stage + p - 1) % p, next = (stage + 1) % p;
  std::vector<PipeAction> actions;
  for (const PipeAction& c : computes) {
    TS_CHECK(is_pipe_compute(c.op)) << "with_communication takes computes only, got " << pipe_op_name(c.op);
    const int virtual_stage = c.chunk * p + stage;
    const bool has_prev = virtual_stage > 0, has_next = virtual_stage < last_virtual;
    auto add = [&](PipeOp op, int peer) { actions.push_back({op, c.micro_batch, c.chunk, peer}); };
    if (c.op == PipeOp::forward) {
      if (has_prev) add(PipeOp::recv_activation, prev);
      add(PipeOp::forward, -1);
      if (has_next) add(PipeOp::send_activation, next);
    } else if (c.op == PipeOp::backward) {
      if (has_next) add(PipeOp::recv_gradient, next);
      add(PipeOp::backward, -1);
      if (has_prev) add(PipeOp::send_gradient, prev);
    } else {
      add(PipeOp::weight, -1);
    }
  }
  return actions;
}

namespace {
// The compute after which a micro-batch's activations are no longer read.
PipeOp last_compute(const std::vector<PipeAction>& actions) {
  return splits_backward(actions) ? PipeOp::weight : PipeOp::backward;
}
}  // namespace

int peak_activations(const std::vector<PipeAction>& actions) {
  const PipeOp last = last_compute(actions);
  int held = 0, peak = 0;
  for (const PipeAction& a : actions) {
    if (a.op == PipeOp::forward) peak = std::max(peak, ++held);
    if (a.op == last) --held;
  }
  return peak;
}

namespace {

std::string describe_actions(const std::vector<PipeAction>& actions, bool with_comm) {
  const bool chunks = std::any_of(actions.begin(), actions.end(), [](const PipeAction& a) { return a.chunk > 0; });
  std::string out;
  for (const PipeAction& a : actions) {
    const char* token = "";
    switch (a.op) {
      case PipeOp::forward: token = "F"; break;
      case PipeOp::backward: token = "B"; break;
      case PipeOp::recv_activation: token = "ra"; break;
      case PipeOp::send_activation: token = "sa"; break;
      case PipeOp::recv_gradient: token = "rg"; break;
      case PipeOp::send_gradient: token = "sg"; break;
      case PipeOp::weight: token = "W"; break;
    }
    const bool compute = is_pipe_compute(a.op);
    if (!compute && !with_comm) continue;
    if (!out.empty()) out += ' ';
    out += token;
    out += std::to_string(a.micro_batch);
    if (chunks) {
      out += '.';
      out += std::to_string(a.chunk);
    }
    if (!compute) {
      out += a.op == PipeOp::recv_activation || a.op == PipeOp::recv_gradient ? '<' : '>';
      out += std::to_string(a.peer_stage);
    }
  }
  return out;
}

}  // namespace

std::string describe(const std::vector<PipeAction>& actions) { return describe_actions(actions, false); }

std::string describe_with_comm(const std::vector<PipeAction>& actions) { return describe_actions(actions, true); }

int activation_slots(const std::vector<PipeAction>& actions, int chunk) {
  const PipeOp last = last_compute(actions);
  int now = 0, peak = 0;
  for (const PipeAction& a : actions) {
    if (a.chunk != chunk) continue;
    if (a.op == PipeOp::forward) peak = std::max(peak, ++now);
    if (a.op == last) --now;
  }
  return std::max(peak, 1);
}

}  // namespace tessera
