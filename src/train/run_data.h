// The run's data: the dataset's manifest (verified, matched to the model), each rank's train and
// validation loaders over its data slice, and a spare parameter-server worker moving onto the slice
// of the worker it replaces.
#pragma once
#include <cstdint>

#include "core/status.h"

namespace tessera {

struct TrainingRun;

// The dataset manifest, verified (checksums on the lead rank only) and matched to the model.
Status open_dataset(TrainingRun& run);
// Train and validation loaders over this rank's data slice (dp x ep ranks read different data).
Status open_loaders(TrainingRun& run);
// A spare parameter-server worker taking the place of `worker` after `step` (ps_training.h,
// stand_by_as_spare): its loaders read that worker's data slice from there (the run's start position
// advanced by the steps since), and its clock and summary start at that step.
Status take_worker_place(TrainingRun& run, int worker, int64_t step);

}  // namespace tessera
