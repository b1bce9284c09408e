// Pure grid math (no MPI): Megatron-order coordinates, group membership, shape validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "comm/grid.h"

using namespace tessera;

TEST(GridMath, MegatronOrderTpFastest) {
  GridShape s{2, 2, 2};  // 8 ranks
  EXPECT_EQ(grid_coord(s, 0), (GridCoord{0, 0, 0}));
  EXPECT_EQ(grid_coord(s, 1), (GridCoord{0, 0, 1}));
  EXPECT_EQ(grid_coord(s, 2), (GridCoord{0, 1, 0}));
  EXPECT_EQ(grid_coord(s, 5), (GridCoord{1, 0, 1}));
  EXPECT_EQ(grid_coord(s, 7), (GridCoord{1, 1, 1}));
}

TEST(GridMath, CoordRoundTripsForEveryFactorisation) {
  for (int world : {1, 4, 6, 8, 12}) {
    for (const GridShape& s : grid_factorisations(world)) {
      ASSERT_EQ(s.world_size(), world);
      for (int r = 0; r < world; ++r) {
        GridCoord c = grid_coord(s, r);
        EXPECT_TRUE(c.dp < s.dp && c.pp < s.pp && c.tp < s.tp);
        EXPECT_EQ(grid_world_rank(s, c), r) << grid_shape_string(s) << " rank " << r;
      }
    }
  }
}

TEST(GridMath, GroupsPartitionTheWorldAndShareTheOtherCoords) {
  for (const GridShape& s : grid_factorisations(12)) {
    for (GridAxis axis : {GridAxis::dp, GridAxis::pp, GridAxis::tp}) {
      std::set<std::vector<int>> groups;
      for (int r = 0; r < 12; ++r) {
        std::vector<int> g = grid_group_ranks(s, axis, r);
        ASSERT_TRUE(std::find(g.begin(), g.end(), r) != g.end());
        GridCoord c = grid_coord(s, r);
        for (size_t i = 0; i < g.size(); ++i) {
          GridCoord m = grid_coord(s, g[i]);
          // The i-th member has coordinate i on the axis and the caller's coordinates elsewhere.
          if (axis == GridAxis::dp) EXPECT_TRUE(m.dp == int(i) && m.pp == c.pp && m.tp == c.tp);
          if (axis == GridAxis::pp) EXPECT_TRUE(m.pp == int(i) && m.dp == c.dp && m.tp == c.tp);
          if (axis == GridAxis::tp) EXPECT_TRUE(m.tp == int(i) && m.dp == c.dp && m.pp == c.pp);
        }
        groups.insert(g);
      }
      int n = axis == GridAxis::dp ? s.dp : axis == GridAxis::pp ? s.pp : s.tp;
      EXPECT_EQ(groups.size() * n, 12u) << grid_shape_string(s);
    }
  }
}

TEST(GridMath, KnownGroupsAtWorldFour) {
  GridShape s{1, 2, 2};
  EXPECT_EQ(grid_group_ranks(s, GridAxis::tp, 2), (std::vector<int>{2, 3}));
  EXPECT_EQ(grid_group_ranks(s, GridAxis::pp, 1), (std::vector<int>{1, 3}));
  EXPECT_EQ(grid_group_ranks(s, GridAxis::dp, 3), (std::vector<int>{3}));
  GridShape t{2, 1, 2};
  EXPECT_EQ(grid_group_ranks(t, GridAxis::dp, 1), (std::vector<int>{1, 3}));
}

TEST(GridMath, FactorisationsOfFour) {
  std::vector<GridShape> f = grid_factorisations(4);
  EXPECT_EQ(f.size(), 6u);  // ordered triples with product 4
  for (const GridShape& s : f) EXPECT_EQ(s.world_size(), 4);
}

TEST(GridMath, ValidationListsShapesThatFit) {
  EXPECT_TRUE(validate_grid_shape({2, 1, 2}, 4).ok());
  Status s = validate_grid_shape({2, 2, 2}, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_NE(s.message().find("needs 8 ranks"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("dp=1 pp=2 tp=2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("dp=4 pp=1 tp=1"), std::string::npos) << s.message();
  EXPECT_FALSE(validate_grid_shape({0, 4, 1}, 0).ok());
}
