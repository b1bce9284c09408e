// The alpha-beta cost of collectives for the step-time model: ring algorithms over a group whose
// link (intra-node, inter-node, or measured by --calibrate) follows from where the group's ranks sit.
//   all-reduce of n bytes over p ranks:      2(p-1) alpha + 2(p-1)/p n beta
//   reduce-scatter / all-gather (n = whole): (p-1) alpha + (p-1)/p n beta
//   all-to-all, n bytes sent per rank:       (p-1) alpha + (p-1)/p n beta
//   point-to-point send of n bytes:          alpha + n beta
// (beta = 1 / bandwidth). These are the classic ring bounds (Patarasuk & Yuan 2009; NCCL's
// "bus bandwidth" uses the same 2(p-1)/p factor).
#pragma once
#include <cstdint>

#include "comm/grid.h"
#include "plan/hardware.h"

namespace tessera {

double ring_all_reduce_s(double bytes, int ranks, const LinkSpec& link);
double ring_reduce_scatter_s(double bytes, int ranks, const LinkSpec& link);  // bytes: the whole input
double ring_all_gather_s(double bytes, int ranks, const LinkSpec& link);      // bytes: the whole output
double all_to_all_s(double bytes, int ranks, const LinkSpec& link);            // bytes: one rank's send buffer
double point_to_point_s(double bytes, const LinkSpec& link);

// Whether the `axis` group of world rank 0 spans more than one node of `devices_per_node` ranks
// (ranks are numbered node by node: node = rank / devices_per_node).
bool group_spans_nodes(const GridShape& grid, GridAxis axis, int devices_per_node);

// The link a collective over the `axis` group uses on `hw`.
LinkSpec group_link(const HardwareSpec& hw, const GridShape& grid, GridAxis axis);

}  // namespace tessera
