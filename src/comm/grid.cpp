// Grid coordinates, group membership and sub-communicator construction.
#include "comm/grid.h"

namespace tessera {

std::string grid_shape_string(const GridShape& s) {
  return "dp=" + std::to_string(s.dp) + " pp=" + std::to_string(s.pp) + " tp=" + std::to_string(s.tp);
}

GridCoord grid_coord(const GridShape& s, int r) { return GridCoord{r / (s.tp * s.pp), (r / s.tp) % s.pp, r % s.tp}; }

int grid_world_rank(const GridShape& s, const GridCoord& c) { return (c.dp * s.pp + c.pp) * s.tp + c.tp; }

std::vector<int> grid_group_ranks(const GridShape& s, GridAxis axis, int world_rank) {
  GridCoord c = grid_coord(s, world_rank);
  int n = axis == GridAxis::dp ? s.dp : axis == GridAxis::pp ? s.pp : s.tp;
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    GridCoord m = c;
    (axis == GridAxis::dp ? m.dp : axis == GridAxis::pp ? m.pp : m.tp) = i;
    out.push_back(grid_world_rank(s, m));
  }
  return out;
}

std::vector<GridShape> grid_factorisations(int world_size) {
  std::vector<GridShape> out;
  for (int dp = 1; dp <= world_size; ++dp) {
    if (world_size % dp) continue;
    for (int pp = 1; pp <= world_size / dp; ++pp) {
      if ((world_size / dp) % pp) continue;
      out.push_back(GridShape{dp, pp, world_size / dp / pp});
    }
  }
  return out;
}

Status validate_grid_shape(const GridShape& s, int world_size) {
  if (s.dp >= 1 && s.pp >= 1 && s.tp >= 1 && s.world_size() == world_size) return Status();
  std::string fits;
  for (const GridShape& f : grid_factorisations(world_size)) fits += "\n  " + grid_shape_string(f);
  return invalid_argument("process grid " + grid_shape_string(s) + " needs " + std::to_string(s.world_size()) +
                          " ranks (every size >= 1) but the job has " + std::to_string(world_size) +
                          "; set dp*pp*tp to the number of ranks, e.g. one of:" + fits);
}

Result<Grid> Grid::create(Communicator& world, const GridShape& shape) {
  TS_RETURN_IF_ERROR(validate_grid_shape(shape, world.size()));
  Grid g;
  g.shape_ = shape;
  g.coord_ = grid_coord(shape, world.rank());
  g.world_ = &world;
  const GridCoord& c = g.coord_;
  // color = the coordinates the group shares, key = the coordinate along the group's axis.
  TS_ASSIGN_OR_RETURN(g.dp_, world.split(c.pp * shape.tp + c.tp, c.dp, "dp"));
  TS_ASSIGN_OR_RETURN(g.pp_, world.split(c.dp * shape.tp + c.tp, c.pp, "pp"));
  TS_ASSIGN_OR_RETURN(g.tp_, world.split(c.dp * shape.pp + c.pp, c.tp, "tp"));
  return g;
}

Communicator& Grid::group(GridAxis axis) const {
  return axis == GridAxis::dp ? *dp_ : axis == GridAxis::pp ? *pp_ : *tp_;
}

void Grid::abandon() {
  for (auto* c : {dp_.get(), pp_.get(), tp_.get()})
    if (c) c->abandon();
}

}  // namespace tessera
