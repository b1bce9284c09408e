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

TEST(GridMath, FiveAxesRoundTripWithCpInsideAndEpOutside) {
  const GridShape s{2, 2, 2, 2, 2};  // 32 ranks
  ASSERT_EQ(s.world_size(), 32);
  // tp fastest, then cp, pp, ep, dp.
  EXPECT_EQ(grid_coord(s, 1), (GridCoord{0, 0, 1, 0, 0}));
  EXPECT_EQ(grid_coord(s, 2), (GridCoord{0, 0, 0, 1, 0}));
  EXPECT_EQ(grid_coord(s, 4), (GridCoord{0, 1, 0, 0, 0}));
  EXPECT_EQ(grid_coord(s, 8), (GridCoord{0, 0, 0, 0, 1}));
  EXPECT_EQ(grid_coord(s, 16), (GridCoord{1, 0, 0, 0, 0}));
  for (int r = 0; r < 32; ++r) EXPECT_EQ(grid_world_rank(s, grid_coord(s, r)), r);
  EXPECT_EQ(grid_group_ranks(s, GridAxis::cp, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(grid_group_ranks(s, GridAxis::ep, 5), (std::vector<int>{5, 13}));
  EXPECT_EQ(grid_shape_string(s), "dp=2 pp=2 tp=2 cp=2 ep=2");
}

TEST(GridMath, DataRankSharedByCpAndReplicasSpanDpCpEp) {
  const GridShape s{2, 1, 1, 2, 2};  // dp 2 x ep 2 x cp 2
  std::set<int> data_ranks;
  for (int r = 0; r < 8; ++r) {
    const GridCoord c = grid_coord(s, r);
    data_ranks.insert(grid_data_rank(s, c));
    GridCoord partner = c;
    partner.cp = 1 - c.cp;  // the other half of the same sequences
    EXPECT_EQ(grid_data_rank(s, partner), grid_data_rank(s, c));
  }
  EXPECT_EQ(data_ranks.size(), 4u);  // dp x ep different slices
  EXPECT_EQ(grid_replica_ranks(s, 3).size(), 8u);
  const GridShape t{2, 2, 1, 2, 1};  // dp 2 x pp 2 x cp 2: replicas share the stage
  EXPECT_EQ(grid_replica_ranks(t, 0), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(grid_replica_ranks(t, 2), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(t.replica_size(), 4);
}

TEST(GridMath, ValidationNamesTheFiveAxisProduct) {
  Status s = validate_grid_shape(GridShape{1, 1, 1, 2, 1}, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dp*ep*pp*cp*tp"), std::string::npos) << s.message();
  EXPECT_TRUE(validate_grid_shape(GridShape{1, 1, 2, 2, 1}, 4).ok());
}
