// Sub-communicators: split, and the Grid's dp/pp/tp groups checked member by member with an
// all_gather of world ranks (4 ranks; skipped at other sizes).
#include <gtest/gtest.h>

#include <vector>

#include "comm/agreement.h"
#include "comm/grid.h"
#include "mpi_test_world.h"

using namespace tessera;
using tessera::testing::world;

TEST(Split, ReversedKeyOrderAndIsolation) {
  Communicator& w = world();
  auto sub = w.split(w.rank() % 2, -w.rank(), "parity");
  ASSERT_TRUE(sub.ok()) << sub.status().to_string();
  Communicator& s = **sub;
  EXPECT_EQ(s.name(), "world/parity");
  int members = (w.size() + 1 - w.rank() % 2) / 2;
  ASSERT_EQ(s.size(), members);
  std::vector<int32_t> ranks(members);
  int32_t me = w.rank();
  ASSERT_TRUE(s.all_gather(&me, ranks.data(), 1, DType::i32).ok());
  // key = -rank: the highest world rank comes first.
  for (int i = 0; i + 1 < members; ++i) EXPECT_GT(ranks[i], ranks[i + 1]);
  for (int32_t r : ranks) EXPECT_EQ(r % 2, w.rank() % 2);
  EXPECT_EQ(ranks[s.rank()], w.rank());
  auto none = w.split(-1, 0, "none");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->get(), nullptr);
}

class GridGroups : public ::testing::TestWithParam<GridShape> {};

TEST_P(GridGroups, MembersMatchTheCoordinateMath) {
  Communicator& w = world();
  if (w.size() != 4) GTEST_SKIP() << "needs 4 ranks";
  GridShape shape = GetParam();
  Result<Grid> g = Grid::create(w, shape);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->coord(), grid_coord(shape, w.rank()));
  for (GridAxis axis : {GridAxis::dp, GridAxis::pp, GridAxis::tp, GridAxis::cp, GridAxis::ep}) {
    Communicator& c = g->group(axis);
    std::vector<int> want = grid_group_ranks(shape, axis, w.rank());
    ASSERT_EQ(c.size(), static_cast<int>(want.size()));
    std::vector<int32_t> got(c.size());
    int32_t me = w.rank();
    ASSERT_TRUE(c.all_gather(&me, got.data(), 1, DType::i32).ok());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << grid_shape_string(shape) << " " << c.name();
    GridCoord coord = g->coord();
    EXPECT_EQ(c.rank(), grid_axis_coord(coord, axis));
  }
  Communicator& replicas = g->param_replicas();
  std::vector<int> want = grid_replica_ranks(shape, w.rank());
  ASSERT_EQ(replicas.size(), static_cast<int>(want.size()));
  std::vector<int32_t> got(replicas.size());
  int32_t me = w.rank();
  ASSERT_TRUE(replicas.all_gather(&me, got.data(), 1, DType::i32).ok());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << grid_shape_string(shape) << " replicas";
}

INSTANTIATE_TEST_SUITE_P(World4, GridGroups,
                         ::testing::Values(GridShape{4, 1, 1}, GridShape{2, 2, 1}, GridShape{1, 2, 2},
                                           GridShape{2, 1, 2}, GridShape{1, 1, 4}, GridShape{1, 2, 1, 2, 1},
                                           GridShape{1, 1, 2, 2, 1}, GridShape{2, 1, 1, 1, 2},
                                           GridShape{1, 1, 1, 2, 2}),
                         [](const auto& info) {
                           const GridShape& s = info.param;
                           return "dp" + std::to_string(s.dp) + "pp" + std::to_string(s.pp) + "tp" + std::to_string(s.tp) +
                                  "cp" + std::to_string(s.cp) + "ep" + std::to_string(s.ep);
                         });

TEST(GridErrors, WrongProductListsFactorisations) {
  Communicator& w = world();
  Result<Grid> g = Grid::create(w, {w.size(), 2, 1});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("dp=" + std::to_string(w.size()) + " pp=1 tp=1"), std::string::npos)
      << g.status().message();
}

TEST(Agreement, EqualValuesPass) {
  EXPECT_TRUE(check_agreement(world(), "model shapes", agreement_hash("gpt2 L=2 C=64")).ok());
}
