// Grid coordinates, group membership and sub-communicator construction.
#include "comm/grid.h"

namespace tessera {

int grid_axis_size(const GridShape& s, GridAxis axis) {
  switch (axis) {
    case GridAxis::dp: return s.dp;
    case GridAxis::pp: return s.pp;
    case GridAxis::tp: return s.tp;
    case GridAxis::cp: return s.cp;
    case GridAxis::ep: return s.ep;
  }
  return 1;
}

int& grid_axis_coord(GridCoord& c, GridAxis axis) {
  switch (axis) {
    case GridAxis::dp: return c.dp;
    case GridAxis::pp: return c.pp;
    case GridAxis::tp: return c.tp;
    case GridAxis::cp: return c.cp;
    case GridAxis::ep: return c.ep;
  }
  return c.dp;
}

std::string grid_shape_string(const GridShape& s) {
  std::string out = "dp=" + std::to_string(s.dp) + " pp=" + std::to_string(s.pp) + " tp=" + std::to_string(s.tp);
  if (s.cp > 1) out += " cp=" + std::to_string(s.cp);
  if (s.ep > 1) out += " ep=" + std::to_string(s.ep);
  return out;
}

GridCoord grid_coord(const GridShape& s, int r) {
  GridCoord c;
  c.tp = r % s.tp, r /= s.tp;
  c.cp = r % s.cp, r /= s.cp;
  c.pp = r % s.pp, r /= s.pp;
  c.ep = r % s.ep, r /= s.ep;
  c.dp = r;
  return c;
}

int grid_world_rank(const GridShape& s, const GridCoord& c) {
  return c.tp + s.tp * (c.cp + s.cp * (c.pp + s.pp * (c.ep + s.ep * c.dp)));
}

int grid_data_rank(const GridShape& s, const GridCoord& c) { return c.dp * s.ep + c.ep; }

std::vector<int> grid_group_ranks(const GridShape& s, GridAxis axis, int world_rank) {
  GridCoord c = grid_coord(s, world_rank);
  std::vector<int> out;
  for (int i = 0; i < grid_axis_size(s, axis); ++i) {
    grid_axis_coord(c, axis) = i;
    out.push_back(grid_world_rank(s, c));
  }
  return out;
}

std::vector<int> grid_replica_ranks(const GridShape& s, int world_rank) {
  const GridCoord c = grid_coord(s, world_rank);
  std::vector<int> out;
  for (int r = 0; r < s.world_size(); ++r) {
    const GridCoord m = grid_coord(s, r);
    if (m.pp == c.pp && m.tp == c.tp) out.push_back(r);
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
  if (s.dp >= 1 && s.pp >= 1 && s.tp >= 1 && s.cp >= 1 && s.ep >= 1 && s.world_size() == world_size) return Status();
  const char* product = s.cp > 1 || s.ep > 1 ? "dp*ep*pp*cp*tp" : "dp*pp*tp";
  std::string fits;
  for (const GridShape& f : grid_factorisations(world_size)) fits += "\n  " + grid_shape_string(f);
  return invalid_argument("process grid " + grid_shape_string(s) + " needs " + std::to_string(s.world_size()) +
                          " ranks (every size >= 1) but the job has " + std::to_string(world_size) +
                          "; set " + product + " to the number of ranks, e.g. (dp, pp, tp) one of:" + fits);
}

Result<Grid> Grid::create(Communicator& world, const GridShape& shape) {
  TS_RETURN_IF_ERROR(validate_grid_shape(shape, world.size()));
  Grid g;
  g.shape_ = shape;
  g.coord_ = grid_coord(shape, world.rank());
  g.world_ = &world;
  // color = the world rank with this axis' coordinate set to 0 (the coordinates the group shares),
  // key = the coordinate along the axis.
  auto split_axis = [&](GridAxis axis, const char* name) {
    GridCoord c = g.coord_;
    const int key = grid_axis_coord(c, axis);
    grid_axis_coord(c, axis) = 0;
    return world.split(grid_world_rank(shape, c), key, name);
  };
  TS_ASSIGN_OR_RETURN(g.dp_, split_axis(GridAxis::dp, "dp"));
  TS_ASSIGN_OR_RETURN(g.pp_, split_axis(GridAxis::pp, "pp"));
  TS_ASSIGN_OR_RETURN(g.tp_, split_axis(GridAxis::tp, "tp"));
  TS_ASSIGN_OR_RETURN(g.cp_, split_axis(GridAxis::cp, "cp"));
  TS_ASSIGN_OR_RETURN(g.ep_, split_axis(GridAxis::ep, "ep"));
  if (shape.cp > 1 || shape.ep > 1) {
    TS_ASSIGN_OR_RETURN(g.replicas_, world.split(g.coord_.pp * shape.tp + g.coord_.tp, world.rank(), "replicas"));
  }
  return g;
}

Communicator& Grid::group(GridAxis axis) const {
  switch (axis) {
    case GridAxis::dp: return *dp_;
    case GridAxis::pp: return *pp_;
    case GridAxis::tp: return *tp_;
    case GridAxis::cp: return *cp_;
    case GridAxis::ep: return *ep_;
  }
  return *dp_;
}

void Grid::abandon() {
  for (auto* c : {dp_.get(), pp_.get(), tp_.get(), cp_.get(), ep_.get(), replicas_.get()})
    if (c) c->abandon();
}

}  // namespace tessera
