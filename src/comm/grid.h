// Process grid dp x pp x tp over a world communicator, in Megatron order (tp fastest):
//   tp_rank = r % tp,  pp_rank = (r / tp) % pp,  dp_rank = r / (tp * pp)
// so the ranks of one tensor-parallel group are adjacent (on one node when nodes hold whole
// tp groups). Groups: dp group = ranks with the same (pp, tp); pp group = same (dp, tp);
// tp group = same (dp, pp); a rank's index inside each group is its coordinate on that axis.
// The coordinate math is pure (testable without MPI); Grid adds the sub-communicators.
// Grid is a value owned by the caller and passed by reference: no global parallel state.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace tessera {

struct GridShape {
  int dp = 1, pp = 1, tp = 1;
  int world_size() const { return dp * pp * tp; }
};
struct GridCoord {
  int dp = 0, pp = 0, tp = 0;
  bool operator==(const GridCoord&) const = default;
};
enum class GridAxis { dp, pp, tp };

std::string grid_shape_string(const GridShape& s);  // "dp=2 pp=1 tp=2"
GridCoord grid_coord(const GridShape& s, int world_rank);
int grid_world_rank(const GridShape& s, const GridCoord& c);
// World ranks of the group along `axis` that contains world_rank, ordered by that axis' coordinate.
std::vector<int> grid_group_ranks(const GridShape& s, GridAxis axis, int world_rank);
// Every (dp, pp, tp) whose product is world_size.
std::vector<GridShape> grid_factorisations(int world_size);
// ok, or an error listing the factorisations that would fit world_size.
Status validate_grid_shape(const GridShape& s, int world_size);

class Grid {
 public:
  // Collective over `world`: splits it into the dp, pp and tp groups. `world` must outlive the Grid.
  static Result<Grid> create(Communicator& world, const GridShape& shape);

  const GridShape& shape() const { return shape_; }
  const GridCoord& coord() const { return coord_; }
  Communicator& world() const { return *world_; }
  Communicator& dp() const { return *dp_; }
  Communicator& pp() const { return *pp_; }
  Communicator& tp() const { return *tp_; }
  Communicator& group(GridAxis axis) const;
  // Error path: abandons the dp, pp and tp communicators (Communicator::abandon), not the world.
  void abandon();

 private:
  Grid() = default;
  GridShape shape_;
  GridCoord coord_;
  Communicator* world_ = nullptr;
  std::unique_ptr<Communicator> dp_, pp_, tp_;
};

}  // namespace tessera
