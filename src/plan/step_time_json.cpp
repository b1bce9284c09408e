// JSON form of a step-time prediction.
#include "plan/step_time_json.h"

namespace tessera {

nlohmann::json step_time_json(const StepTimePrediction& p) {
  const StepTimeBreakdown& b = p.breakdown;
  return {{"step_s", p.step_s},
          {"tokens_per_s", p.tokens_per_s},
          {"tokens_per_step", p.tokens_per_step},
          {"flops_per_device", p.flops_per_device},
          {"mfu", p.mfu},
          {"breakdown",
           {{"compute_s", b.compute_s}, {"recompute_s", b.recompute_s}, {"bubble_s", b.bubble_s},
            {"tp_comm_s", b.tp_s}, {"cp_comm_s", b.cp_s}, {"ep_comm_s", b.ep_s}, {"pp_comm_s", b.pp_s}, {"dp_comm_s", b.dp_s}, {"dp_comm_total_s", b.dp_total_s},
            {"optimizer_s", b.optimizer_s}, {"other_s", b.other_s}}}};
}

}  // namespace tessera
