// Heartbeat parsing, polling of a heartbeat directory, stall detection and failure descriptions.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "launch/heartbeat_watch.h"
#include "launch/restart_log.h"

using namespace tessera::launch;

namespace {
RankProgress progress(int rank, const std::string& phase, int64_t step, double last_change, double busy = -1) {
  RankProgress p;
  p.rank = rank;
  p.reported = true;
  p.beat.rank = rank;
  p.beat.phase = phase;
  p.beat.step = step;
  p.last_change = last_change;
  p.busy_fraction = busy;
  return p;
}
void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }
}  // namespace

TEST(LaunchHeartbeat, Parses) {
  auto h = parse_heartbeat(R"({"rank": 2, "world_size": 4, "host": "n1", "pid": 77, "attempt": 1, "step": 9,
                              "phase": "train", "time": 1700000000.5, "out_dir": "/runs/a", "message": ""})",
                           "f");
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(h->rank, 2);
  EXPECT_EQ(h->world_size, 4);
  EXPECT_EQ(h->host, "n1");
  EXPECT_EQ(h->pid, 77);
  EXPECT_EQ(h->attempt, 1);
  EXPECT_EQ(h->step, 9);
  EXPECT_EQ(h->phase, "train");
  EXPECT_DOUBLE_EQ(h->time, 1700000000.5);
  EXPECT_EQ(h->out_dir, "/runs/a");
}

TEST(LaunchHeartbeat, RejectsBadFiles) {
  EXPECT_FALSE(parse_heartbeat("{\"rank\": 1", "f").ok());                       // cut short
  EXPECT_FALSE(parse_heartbeat("{\"phase\": \"train\"}", "f").ok());             // no rank
  EXPECT_FALSE(parse_heartbeat("{\"rank\": \"x\", \"phase\": \"train\"}", "f").ok());
  EXPECT_FALSE(parse_heartbeat("[1, 2]", "f").ok());
}

TEST(LaunchHeartbeat, NoStallWithinTimeout) {
  std::vector<RankProgress> r = {progress(0, "train", 5, 100), progress(1, "train", 5, 100)};
  EXPECT_FALSE(find_stall(r, 2, 90, 109.9, 10, 10));
  EXPECT_TRUE(find_stall(r, 2, 90, 110.1, 10, 10));
}

TEST(LaunchHeartbeat, DoneAndFailedRanksNeverStall) {
  std::vector<RankProgress> r = {progress(0, "done", 9, 0), progress(1, "failed", 3, 0)};
  EXPECT_FALSE(find_stall(r, 2, 0, 1000, 10, 10));
}

TEST(LaunchHeartbeat, LowestStepIsTheCulprit) {
  // Rank 1 stopped at step 4; the others wait at step 5 for it and went quiet a little later.
  std::vector<RankProgress> r = {progress(0, "train", 5, 101), progress(1, "train", 4, 100.5),
                                 progress(2, "train", 5, 101), progress(3, "train", 5, 101)};
  auto s = find_stall(r, 4, 90, 112, 10, 10);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks.front(), 1);
  EXPECT_EQ(s->ranks.size(), 4u);
  EXPECT_DOUBLE_EQ(s->seconds, 11.5);
}

TEST(LaunchHeartbeat, IdleRankBeatsSpinningRanksAtTheSameStep) {
  // Same step, rank 2's heartbeat is even a bit newer, but it idles while the others spin in a collective.
  std::vector<RankProgress> r = {progress(0, "train", 5, 100, 0.9), progress(1, "train", 5, 100, 0.8),
                                 progress(2, "train", 5, 100.2, 0.01)};
  auto s = find_stall(r, 3, 90, 111, 10, 10);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks.front(), 2);
  // On a loaded machine the spinning ranks get little CPU, but still more than the hung one.
  r[0].busy_fraction = 0.2;
  r[1].busy_fraction = 0.15;
  r[2].busy_fraction = 0.0;
  EXPECT_EQ(find_stall(r, 3, 90, 111, 10, 10)->ranks.front(), 2);
}

TEST(LaunchHeartbeat, OldestHeartbeatWhenNothingElseTells) {
  std::vector<RankProgress> r = {progress(0, "train", 5, 100.3), progress(1, "train", 5, 100.1),
                                 progress(2, "train", 5, 100.2)};
  auto s = find_stall(r, 3, 90, 111, 10, 10);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks, (std::vector<int>{1, 2, 0}));
}

TEST(LaunchHeartbeat, MissingRankUsesStartupTimeout) {
  std::vector<RankProgress> r = {progress(0, "setup", 0, 100)};
  EXPECT_FALSE(find_stall(r, 2, 100, 125, 10, 30));  // rank 1 not reported, but within the 30 s set-up
  auto s = find_stall(r, 2, 100, 131, 10, 30);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks.front(), 1);  // never reported comes first
}

TEST(LaunchHeartbeat, WatchReadsOnlyThisAttemptsFiles) {
  const std::string dir = ::testing::TempDir() + "/h6_hb_watch";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  write(dir + "/rank_0.json", R"({"rank": 0, "phase": "train", "step": 3, "attempt": 1, "time": 1})");
  write(dir + "/rank_1.json", R"({"rank": 1, "phase": "train", "step": 8, "attempt": 0, "time": 1})");  // old attempt
  write(dir + "/rank_2.json.tmp.55", R"({"rank": 2, "phase": "train", "step": 3, "attempt": 1})");       // a temporary
  write(dir + "/rank_3.json", R"({"rank": 3, "phase": )");                                                // broken
  HeartbeatWatch w(dir, 1, 10.0);
  std::string warn;
  EXPECT_EQ(w.poll(11.0, &warn), std::vector<int>{0});
  EXPECT_NE(warn.find("rank_3.json"), std::string::npos);
  ASSERT_EQ(w.ranks().size(), 1u);
  EXPECT_DOUBLE_EQ(w.ranks().at(0).last_change, 11.0);
  // Unchanged file: no progress; a new step: progress at the new time.
  EXPECT_TRUE(w.poll(12.0, nullptr).empty());
  EXPECT_DOUBLE_EQ(w.ranks().at(0).last_change, 11.0);
  write(dir + "/rank_0.json", R"({"rank": 0, "phase": "train", "step": 4, "attempt": 1, "time": 2})");
  EXPECT_EQ(w.poll(13.0, nullptr), std::vector<int>{0});
  EXPECT_DOUBLE_EQ(w.ranks().at(0).last_change, 13.0);
  std::filesystem::remove_all(dir);
}

namespace {
Failure failure(const std::string& cause, int rank, const std::string& host, int64_t step, const std::string& phase) {
  Failure f;
  f.cause = cause;
  f.rank = rank;
  f.host = host;
  f.step = step;
  f.phase = phase;
  return f;
}
}  // namespace

TEST(LaunchFailureText, Describes) {
  Failure died = failure("died", 2, "n1", 4, "train");
  died.signal = 9;
  EXPECT_EQ(describe_failure(died), "rank 2 on host n1 died (signal 9, SIGKILL) at step 5 (last completed step 4)");
  Failure hung = failure("no_progress", 1, "n1", 5, "train");
  hung.idle_s = 20.2;
  hung.stalled_ranks = {1, 0, 3};
  EXPECT_EQ(describe_failure(hung),
            "rank 1 on host n1 made no progress for 20 s (last step 5); ranks 0, 3 stalled too (likely waiting on it)");
  Failure failed = failure("failed", 0, "", -1, "setup");
  failed.message = "no space left";
  EXPECT_EQ(describe_failure(failed), "rank 0 failed during set-up: no space left");
  Failure ckpt = failure("exited", 3, "n2", 8, "checkpoint");
  ckpt.exit_code = 1;
  EXPECT_EQ(describe_failure(ckpt), "rank 3 on host n2 exited with code 1 while saving a checkpoint after step 8");
}
