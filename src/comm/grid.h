// Process grid dp x ep x pp x cp x tp over a world communicator, tp fastest (Megatron's habit):
//   r = tp_rank + tp * (cp_rank + cp * (pp_rank + pp * (ep_rank + ep * dp_rank)))
// so the ranks of one tensor-parallel group are adjacent (on one node when nodes hold whole
// tp groups), then those of one context-parallel group. At cp = ep = 1 this is the dp x pp x tp grid:
//   tp_rank = r % tp,  pp_rank = (r / tp) % pp,  dp_rank = r / (tp * pp).
// The group along an axis holds the ranks that differ only in that axis' coordinate; a rank's index
// inside it is its coordinate on that axis.
// Axes: cp ranks split one sequence (same data, different tokens); ep ranks hold different experts
// and read different data, like dp ranks. So the data a rank reads is set by (dp, ep) (data_rank),
// and the replicated (dense) parameters are replicated over dp x cp x ep: param_replicas(), the
// group that averages their gradients (= dp at cp = ep = 1).
// The coordinate math is pure (testable without MPI); Grid adds the sub-communicators.
// Grid is a value owned by the caller and passed by reference: no global parallel state.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace tessera {

struct GridShape {
  int dp = 1, pp = 1, tp = 1, cp = 1, ep = 1;
  int world_size() const { return dp * ep * pp * cp * tp; }
  int data_size() const { return dp * ep; }             // ranks reading different data
  int replica_size() const { return dp * cp * ep; }     // size of param_replicas()
};
struct GridCoord {
  int dp = 0, pp = 0, tp = 0, cp = 0, ep = 0;
  bool operator==(const GridCoord&) const = default;
};
enum class GridAxis { dp, pp, tp, cp, ep };

int grid_axis_size(const GridShape& s, GridAxis axis);
int& grid_axis_coord(GridCoord& c, GridAxis axis);
// "dp=2 pp=1 tp=2", with " cp=N" / " ep=N" appended when above 1.
std::string grid_shape_string(const GridShape& s);
// Which slice of the data this rank reads: dp_rank * ep + ep_rank, of data_size().
int grid_data_rank(const GridShape& s, const GridCoord& c);
GridCoord grid_coord(const GridShape& s, int world_rank);
int grid_world_rank(const GridShape& s, const GridCoord& c);
// World ranks of the group along `axis` that contains world_rank, ordered by that axis' coordinate.
std::vector<int> grid_group_ranks(const GridShape& s, GridAxis axis, int world_rank);
// World ranks of param_replicas() for world_rank: same (pp, tp), in world-rank order.
std::vector<int> grid_replica_ranks(const GridShape& s, int world_rank);
// Every (dp, pp, tp) whose product is world_size (cp = ep = 1).
std::vector<GridShape> grid_factorisations(int world_size);
// ok, or an error listing the factorisations that would fit world_size.
Status validate_grid_shape(const GridShape& s, int world_size);

class Grid {
 public:
  // Collective over `world`: splits it into the groups. `world` must outlive the Grid.
  static Result<Grid> create(Communicator& world, const GridShape& shape);

  const GridShape& shape() const { return shape_; }
  const GridCoord& coord() const { return coord_; }
  Communicator& world() const { return *world_; }
  Communicator& dp() const { return *dp_; }
  Communicator& pp() const { return *pp_; }
  Communicator& tp() const { return *tp_; }
  Communicator& cp() const { return *cp_; }
  Communicator& ep() const { return *ep_; }
  // The ranks holding replicas of the same dense parameters: same (pp, tp), every dp, cp and ep.
  Communicator& param_replicas() const { return replicas_ ? *replicas_ : *dp_; }
  int data_rank() const { return grid_data_rank(shape_, coord_); }
  Communicator& group(GridAxis axis) const;
  // Error path: abandons the group communicators (Communicator::abandon), not the world.
  void abandon();

 private:
  Grid() = default;
  GridShape shape_;
  GridCoord coord_;
  Communicator* world_ = nullptr;
  std::unique_ptr<Communicator> dp_, pp_, tp_, cp_, ep_;
  std::unique_ptr<Communicator> replicas_;  // null at cp = ep = 1 (then dp_)
};

}  // namespace tessera
