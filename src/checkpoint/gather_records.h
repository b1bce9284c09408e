// Collecting what every rank wrote into a checkpoint, so rank 0 can write the manifest: each rank's
// outcome and ShardRecord travel as JSON through two all_gathers (sizes, then padded bytes).
#pragma once
#include <vector>

#include "checkpoint/format.h"
#include "comm/communicator.h"
#include "core/status.h"

namespace tessera::checkpoint {

// Collective over `comm`. `local` is this rank's outcome of writing its shard (its record is only
// read when ok). Returns every rank's record, ordered by rank, or -- on every rank alike -- the
// error of the lowest failing rank (this rank's own error if it failed), naming the failed ranks.
Result<std::vector<ShardRecord>> all_gather_records(Communicator& comm, const Status& local, const ShardRecord& record);

}  // namespace tessera::checkpoint
