// Pipeline-parallel schedules as plain data: (kind, p stages, m micro-batches, V virtual stages,
// stage s) -> the ordered actions rank s runs in one training step. No model, no communicator.
//
// Kinds (Megatron-LM naming, megatron/core/pipeline_parallel/schedules.py):
//   gpipe        all m forwards, then all m backwards; holds m activations.
//   one_f_one_b  PipeDream-flush 1F1B: min(p - s - 1, m) warm-up forwards, then one forward / one
//                backward, then the remaining backwards; holds at most min(p - s, m) activations.
//   interleaved  Megatron's interleaved 1F1B: rank s holds model chunks s, s + p, ..., s + (V-1)p of
//                the p*V-way layer split (global virtual stage = chunk * p + stage); forwards walk the
//                micro-batches in groups of p, chunk by chunk, backwards the chunks in reverse. Warm-up
//                is 2(p - s - 1) + (V - 1)p forwards. Needs m a multiple of p, p >= 2 and V >= 2.
//   zb_h1        zero-bubble ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism"): 1F1B with
//                each backward split into the input-gradient pass (backward, on the critical path)
//                and the weight-gradient pass (weight); stage s runs each weight pass s backwards
//                late (the rest at the end), so the weight passes fill the cool-down bubble. Every
//                stage then holds at most p micro-batches (1F1B's stage 0: the same peak memory),
//                and the bubble is (p - 1)(F + B - W) against 1F1B's (p - 1)(F + B + W): a third
//                when the three passes cost the same. V = 1.
//
// Communication is explicit: the forward of (micro, chunk) is preceded by recv_activation from the
// previous virtual stage's rank (unless it is virtual stage 0) and followed by send_activation to
// the next one (unless it is the last virtual stage); a backward is preceded by recv_gradient from
// the next virtual stage's rank and followed by send_gradient to the previous one. A receive sits
// right before the compute that consumes it and a send right after the compute that produces it.
//
// Runner rule (checked for every allowed shape with p <= 6, m <= 12, V <= 3 by tests/parallel/pipeline_schedule_test.cpp;
// a runner can check any other shape once at set-up with simulate_pipeline, pipeline_schedule_sim.h):
//   1. Execute the actions in list order.
//   2. send_*: start a NON-BLOCKING send (MPI_Isend) and go on. Keep its buffer untouched until it
//      completes; wait for all sends at the end of the step (MPI_Waitall), before the optimizer
//      step. Never block on a send in the middle of the list.
//   3. recv_*: block until the message has arrived (MPI_Recv, or an MPI_Irecv waited right there).
//      Posting receives earlier (MPI_Irecv ahead, to overlap) is allowed if those from one
//      (peer, kind) are posted in list order and still waited at the recv action: it only removes
//      waiting.
//   4. Tag each message by its kind (activation / gradient). MPI's non-overtaking rule then pairs
//      the k-th send from rank a to rank b of a kind with the k-th receive of that kind on b from a,
//      and the schedules guarantee both carry the same (micro-batch, virtual stage).
// Why that is enough: sends never wait, so a rank only ever waits in a receive, for a send of
// another rank's list; a deadlock is then a cycle of such waits through the lists' program order,
// which simulate_pipeline would find (it runs every list under this rule and names the stuck
// ranks). The final Waitall completes because each send's receive is in the peer's list and every
// list runs to its end. The receive-just-before / send-just-after placement is what makes it hold:
// e.g. in 1F1B a stage has sent its forward's activation before it waits for the next gradient.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera {

enum class PipelineScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1 };

// "gpipe" | "1f1b" | "interleaved" | "zb-h1"
Result<PipelineScheduleKind> parse_pipeline_schedule(std::string_view name);
std::string_view pipeline_schedule_name(PipelineScheduleKind kind);

// backward: the whole backward, or under zb_h1 only its input-gradient part; weight: zb_h1's
// weight-gradient pass of a micro-batch whose backward ran (no communication of its own).
enum class PipeOp { recv_activation, forward, send_activation, recv_gradient, backward, send_gradient, weight };
std::string_view pipe_op_name(PipeOp op);
bool is_pipe_compute(PipeOp op);  // forward, backward or weight

struct PipeAction {
  PipeOp op;
  int micro_batch;  // 0..m-1
  int chunk;        // model chunk on this rank, 0..V-1 (global virtual stage = chunk * p + stage).
                    // For a send or recv: the chunk of THIS rank's compute that produces / consumes it.
  int peer_stage;   // for send/recv: the pipeline rank on the other end (-1 otherwise)
  bool operator==(const PipeAction&) const = default;
};

struct PipelineShape {
  int stages = 1, micro_batches = 1, virtual_stages = 1;  // p, m, V
};

// Every error says what to change.
Status validate_pipeline_shape(PipelineScheduleKind kind, const PipelineShape& shape);

// The actions stage `stage` (0..p-1) runs in one step. The shape must be valid (TS_CHECK).
std::vector<PipeAction> make_pipeline_schedule(PipelineScheduleKind kind, const PipelineShape& shape, int stage);

// A compute order (forward / backward / weight actions) of stage `stage`, with the receive before and
// the send after each compute that the runner rule asks for (the expansion every schedule above gets;
// for orders that are not a named schedule, e.g. a search over orders).
std::vector<PipeAction> with_communication(const std::vector<PipeAction>& computes, const PipelineShape& shape, int stage);

// Megatron's warm-up length: forwards stage s runs before its first backward (capped at m * V).
int pipeline_warmup_forwards(PipelineScheduleKind kind, const PipelineShape& shape, int stage);

// Most (micro, chunk) activations held at once (forward done, backward not; under zb_h1 until the
// weight pass, which still reads the forward's activations): how many activation
// buffers a runner needs. 1F1B: min(p - s, m); GPipe: m; interleaved: min(m V, warm-up + 1), each
// chunk 1/V of the stage's layers, so stage 0 holds p + (p - 1)/V stages' worth against 1F1B's p.
int peak_activations(const std::vector<PipeAction>& actions);

// Activation buffers (model instances) a runner needs for model chunk `chunk`: the most of its
// micro-batches between forward and backward at once, at least 1 (evaluation uses one).
int activation_slots(const std::vector<PipeAction>& actions, int chunk);

// Whether the list splits its backwards (has weight actions): then a micro-batch is held until its weight pass.
bool splits_backward(const std::vector<PipeAction>& actions);

// "F0 B0 ...": computes only, forward "F<micro>", backward "B<micro>", weight pass "W<micro>"; with chunks (any chunk > 0)
// every compute carries ".<chunk>", e.g. "F3.1".
std::string describe(const std::vector<PipeAction>& actions);
// Every action: computes as above, receives "ra<micro><from" / "rg<micro><from", sends
// "sa<micro>>to" / "sg<micro>>to" (chunks as above), e.g. "F0 sa0>1 F1 sa1>1 rg0<1 B0".
std::string describe_with_comm(const std::vector<PipeAction>& actions);

}  // namespace tessera
