// DType and ReduceOp -> MPI datatype and MPI_Op. MPI has no bf16/f16 arithmetic, so their
// reductions are user-defined ops that convert each pair to f32, combine and round back.
#pragma once
#include <mpi.h>

#include "comm/comm_types.h"
#include "core/dtype.h"

namespace tessera {

MPI_Datatype mpi_datatype(DType dt);

// The user-defined ops, created once per communicator family and freed with the last of them.
class MpiReduceOps {
 public:
  MpiReduceOps();
  ~MpiReduceOps();
  MpiReduceOps(const MpiReduceOps&) = delete;
  MpiReduceOps& operator=(const MpiReduceOps&) = delete;
  // avg maps to sum (the caller divides afterwards). dt must be reducible (validated upstream).
  MPI_Op get(DType dt, ReduceOp op) const;

 private:
  MPI_Op half_ops_[2][3];  // [bf16, f16][sum, max, min]
};

// In place: buf[i] /= n for the element type (f32, bf16, f16); the avg post-step.
void divide_in_place(void* buf, int64_t count, DType dt, int n);

}  // namespace tessera
