// Which GPU a rank uses: its place among the job's ranks on its machine (MPI_COMM_TYPE_SHARED, so it
// holds under mpirun, srun and hydra alike, with no launcher variable to read) against the devices
// the process sees (CUDA_VISIBLE_DEVICES already applied), round-robin. More ranks than devices
// share them, which the staged communicator allows (how the layouts are tested on one GPU); NCCL
// then refuses at its communicator's creation, naming the ranks that share a GPU.
#pragma once
#include "core/status.h"

namespace tessera {

struct NodeRank {
  int local_rank = 0;     // this rank among the job's ranks on this machine
  int ranks_on_node = 1;  // the job's ranks on this machine
};

// The device ordinal for this rank among `visible_devices`, or an error naming the problem and the way out.
Result<int> assign_device(NodeRank r, int visible_devices);

}  // namespace tessera
