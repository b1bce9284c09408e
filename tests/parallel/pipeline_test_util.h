// Shared by the pipeline schedule tests: every allowed (kind, p, m, V) of the tested range.
#pragma once
#include <string>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace tessera::testing {

struct ScheduleCase {
  PipelineScheduleKind kind;
  PipelineShape shape;
  std::string name() const {
    return std::string(pipeline_schedule_name(kind)) + " p=" + std::to_string(shape.stages) +
           " m=" + std::to_string(shape.micro_batches) + " V=" + std::to_string(shape.virtual_stages);
  }
};

// p in 1..6, m in 1..12, V in 1..3, every kind, keeping the shapes validate_pipeline_shape allows.
inline std::vector<ScheduleCase> allowed_cases() {
  std::vector<ScheduleCase> cases;
  for (PipelineScheduleKind kind :
       {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_f_one_b, PipelineScheduleKind::interleaved,
        PipelineScheduleKind::zb_h1})
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 12; ++m)
        for (int V = 1; V <= 3; ++V) {
          const PipelineShape shape{p, m, V};
          if (validate_pipeline_shape(kind, shape).ok()) cases.push_back({kind, shape});
        }
  return cases;
}

}  // namespace tessera::testing
