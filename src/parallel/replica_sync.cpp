// The rank-ordered sum shared by the gradient norms.
#include "parallel/replica_sync.h"

#include <string>
#include <vector>

namespace tessera {

Result<double> ordered_sum(Communicator& comm, double local, const char* what) {
  if (comm.size() == 1) return local;
  std::vector<double> parts(static_cast<size_t>(comm.size()));
  const Status s = comm.all_gather_async(&local, parts.data(), sizeof(double), DType::u8).wait();
  if (!s.ok()) return Status(s.code(), std::string(what) + ": " + s.message());
  double total = 0;
  for (double x : parts) total += x;
  return total;
}

}  // namespace tessera
