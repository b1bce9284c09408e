// Ring collective costs and group placement for the step-time model.
#include "plan/comm_cost.h"

namespace tessera {

double ring_all_reduce_s(double bytes, int ranks, const LinkSpec& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double p = ranks;
  return 2 * (p - 1) * link.latency_s + 2 * (p - 1) / p * bytes / link.bandwidth;
}

double ring_reduce_scatter_s(double bytes, int ranks, const LinkSpec& link) {
  if (ranks <= 1 || bytes <= 0) return 0;
  const double p = ranks;
  return (p - 1) * link.latency_s + (p - 1) / p * bytes / link.bandwidth;
}

double ring_all_gather_s(double bytes, int ranks, const LinkSpec& link) { return ring_reduce_scatter_s(bytes, ranks, link); }

double all_to_all_s(double bytes, int ranks, const LinkSpec& link) { return ring_reduce_scatter_s(bytes, ranks, link); }

double point_to_point_s(double bytes, const LinkSpec& link) {
  return bytes <= 0 ? 0 : link.latency_s + bytes / link.bandwidth;
}

bool group_spans_nodes(const GridShape& grid, GridAxis axis, int devices_per_node) {
  const std::vector<int> ranks = grid_group_ranks(grid, axis, 0);
  const int d = devices_per_node < 1 ? 1 : devices_per_node;
  for (int r : ranks)
    if (r / d != ranks.front() / d) return true;
  return false;
}

LinkSpec group_link(const HardwareSpec& hw, const GridShape& grid, GridAxis axis) {
  const int size = axis == GridAxis::dp   ? grid.dp
                   : axis == GridAxis::pp ? grid.pp
                   : axis == GridAxis::cp ? grid.cp
                   : axis == GridAxis::ep ? grid.ep
                                          : grid.tp;
  return hw.collective_link(size, group_spans_nodes(grid, axis, hw.devices_per_node));
}

}  // namespace tessera
