// The launcher's process control against fake jobs (fake_mpirun.sh + fake_rank.sh, which write
// heartbeat files like the trainer): a crashed rank, a hung rank, a lost slot, restarts running out,
// a rank reporting failure, a preempted job, a plain command, and a real `mpirun` when one is installed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "launch/launcher.h"

using namespace tessera::launch;
namespace fs = std::filesystem;

namespace {

const std::string kScripts = std::string(TESSERA_SOURCE_DIR) + "/tests/launch";

class LaunchJob : public ::testing::Test {
 protected:
  void SetUp() override {
    // The process id keeps two checkouts running the suite at once out of each other's directories.
    root_ = ::testing::TempDir() + "/h6_launch_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_ + "/bin");
    fs::create_symlink(kScripts + "/fake_mpirun.sh", root_ + "/bin/mpirun");
    run_dir_ = root_ + "/run";
    ::setenv("FAKE_ARGS_LOG", (root_ + "/args.log").c_str(), 1);
    ::unsetenv("TESSERA_FAULT");
    ::unsetenv("FAKE_SLOTS_FILE");
  }
  void TearDown() override {
    ::unsetenv("TESSERA_FAULT");
    ::unsetenv("FAKE_SLOTS_FILE");
    ::unsetenv("FAKE_SLOTS_ON_CRASH");
    ::unsetenv("FAKE_ARGS_LOG");
    if (!HasFailure()) fs::remove_all(root_);
  }

  LaunchOptions options(int ranks, int steps) {
    LaunchOptions o;
    o.command = {root_ + "/bin/mpirun", "-n", std::to_string(ranks), "bash", kScripts + "/fake_rank.sh", run_dir_,
                 std::to_string(steps)};
    o.run_dir = run_dir_;
    o.heartbeat_timeout = 2;
    o.grace = 1;
    o.poll_interval = 0.05;
    return o;
  }

  // Runs the launcher, keeping what it printed to stderr in err_.
  int launch(const LaunchOptions& o) {
    ::testing::internal::CaptureStderr();
    const int code = run_launch(o);
    err_ = ::testing::internal::GetCapturedStderr();
    std::fprintf(stdout, "%s", err_.c_str());
    return code;
  }

  std::vector<nlohmann::json> records() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(run_dir_ + "/launch/restarts.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  std::string file(const std::string& path) const {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  std::string root_, run_dir_, err_;
};

}  // namespace

TEST_F(LaunchJob, FinishesWithoutFailure) {
  EXPECT_EQ(launch(options(2, 4)), kLaunchDone);
  const auto r = records();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["outcome"], "done");
  EXPECT_EQ(r[0]["last_step"], 4);
  EXPECT_TRUE(r[0]["failure"].is_null());
  // The launcher exported its variables to the job and kept the rank count.
  EXPECT_NE(file(root_ + "/args.log").find("-x TESSERA_HEARTBEAT_DIR -x TESSERA_RESUME -x TESSERA_LAUNCH_ATTEMPT"),
            std::string::npos);
  EXPECT_NE(file(root_ + "/args.log").find("-n 2 bash"), std::string::npos);
}

TEST_F(LaunchJob, CrashedRankIsReportedAndTheJobResumes) {
  ::setenv("TESSERA_FAULT", "crash:rank=2:step=3", 1);
  EXPECT_EQ(launch(options(4, 6)), kLaunchDone);
  EXPECT_NE(err_.find("rank 2 on host "), std::string::npos);
  EXPECT_NE(err_.find("died (signal 9, SIGKILL) at step 3 (last completed step 2)"), std::string::npos) << err_;
  const auto r = records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["outcome"], "failed");
  EXPECT_EQ(r[0]["failure"]["cause"], "died");
  EXPECT_EQ(r[0]["failure"]["rank"], 2);
  EXPECT_EQ(r[0]["failure"]["step"], 2);
  EXPECT_EQ(r[0]["failure"]["signal"], 9);
  EXPECT_EQ(r[0]["will_restart"], true);
  EXPECT_EQ(r[1]["attempt"], 1);
  EXPECT_EQ(r[1]["outcome"], "done");
  EXPECT_EQ(r[1]["last_step"], 6);
  EXPECT_EQ(r[1]["recovered_from_attempt"], 0);
  ASSERT_TRUE(r[1]["recovery_s"].is_number());
  EXPECT_GT(r[1]["recovery_s"].get<double>(), 0);
  EXPECT_LT(r[1]["recovery_s"].get<double>(), 10);
  // The restart resumed from the fake checkpoint at step 2 (the launcher never removes it).
  EXPECT_EQ(file(run_dir_ + "/ckpt"), "6\n");
}

TEST_F(LaunchJob, HungRankIsNamedAndTheJobRestartedWithinTheTimeout) {
  ::setenv("TESSERA_FAULT", "hang:rank=1:step=3", 1);
  EXPECT_EQ(launch(options(3, 5)), kLaunchDone);
  EXPECT_NE(err_.find("made no progress for 2 s (last step 2)"), std::string::npos) << err_;
  const auto r = records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["failure"]["cause"], "no_progress");
  // The hung rank idles while the others spin at the barrier: it is named, not the oldest by chance.
  EXPECT_EQ(r[0]["failure"]["rank"], 1);
  EXPECT_EQ(r[0]["failure"]["step"], 2);
  EXPECT_EQ(r[0]["failure"]["stalled_ranks"].size(), 3u);
  // Detected within the timeout (+ polling), and the job was ended within the grace period.
  const double detected_after = r[0]["detected_time"].get<double>() - r[0]["start_time"].get<double>();
  EXPECT_LT(detected_after, 6.0);
  EXPECT_LT(r[0]["end_time"].get<double>() - r[0]["detected_time"].get<double>(), 2.5);
  EXPECT_EQ(r[1]["outcome"], "done");
}

TEST_F(LaunchJob, LostSlotRestartsWithFewerRanks) {
  const std::string slots = root_ + "/slots";
  std::ofstream(slots) << "localhost slots=4\n";
  ::setenv("FAKE_SLOTS_FILE", slots.c_str(), 1);
  ::setenv("FAKE_SLOTS_ON_CRASH", "3", 1);  // the crashing rank's "node" goes away
  ::setenv("TESSERA_FAULT", "crash:rank=3:step=2", 1);
  LaunchOptions o = options(4, 4);
  o.slots_file = slots;
  o.max_ranks = 4;
  o.min_ranks = 2;
  EXPECT_EQ(launch(o), kLaunchDone);
  const auto r = records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["ranks"], 4);
  EXPECT_EQ(r[1]["ranks"], 3);
  const std::string args = file(root_ + "/args.log");
  EXPECT_NE(args.find("-n 4 bash"), std::string::npos) << args;
  EXPECT_NE(args.find("-n 3 bash"), std::string::npos) << args;
}

TEST_F(LaunchJob, TooFewSlotsFailsClearly) {
  const std::string slots = root_ + "/slots";
  std::ofstream(slots) << "1\n";
  LaunchOptions o = options(4, 4);
  o.slots_file = slots;
  o.min_ranks = 2;
  EXPECT_EQ(launch(o), kLaunchSetupError);
  EXPECT_NE(err_.find("only 1 slot(s) in " + slots + ", fewer than --min-ranks 2"), std::string::npos) << err_;
}

TEST_F(LaunchJob, GivesUpWhenRestartsRunOut) {
  ::setenv("TESSERA_FAULT", "crash:rank=0:step=2,crash:rank=1:step=2:attempt=1", 1);
  LaunchOptions o = options(2, 4);
  o.max_restarts = 1;
  EXPECT_EQ(launch(o), kLaunchFailed);
  EXPECT_NE(err_.find("giving up: the job failed 2 time(s) (--max-restarts 1)"), std::string::npos) << err_;
  const auto r = records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["failure"]["rank"], 0);
  EXPECT_EQ(r[1]["failure"]["rank"], 1);
  EXPECT_EQ(r[1]["will_restart"], false);
}

TEST_F(LaunchJob, RankReportedFailureCarriesItsMessage) {
  ::setenv("TESSERA_FAULT", "fail:rank=1:step=2", 1);
  LaunchOptions o = options(2, 4);
  o.max_restarts = 0;
  EXPECT_EQ(launch(o), kLaunchFailed);
  const auto r = records();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["failure"]["cause"], "failed");
  EXPECT_EQ(r[0]["failure"]["rank"], 1);
  EXPECT_NE(r[0]["failure"]["description"].get<std::string>().find("injected failure"), std::string::npos);
}

// Ranks signalled directly (not through the launcher) stop with a checkpoint and exit 75: the
// attempt is "preempted", not a failure, not restarted, and the launcher exits 75 too.
TEST_F(LaunchJob, JobThatExitsPreemptedIsNotRestarted) {
  ::setenv("TESSERA_FAULT", "preempt:rank=0:step=2", 1);
  LaunchOptions o = options(2, 6);
  EXPECT_EQ(launch(o), kLaunchPreempted);
  EXPECT_NE(err_.find("preempted at step "), std::string::npos) << err_;
  EXPECT_NE(err_.find("checkpoint " + run_dir_ + "/ckpt saved; run the same command again to resume"),
            std::string::npos) << err_;
  const auto r = records();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["outcome"], "preempted");
  EXPECT_EQ(r[0]["exit_code"], 75);
  EXPECT_EQ(r[0]["failure"], nullptr);
  EXPECT_EQ(r[0]["will_restart"], false);
  EXPECT_EQ(r[0]["checkpoint"], run_dir_ + "/ckpt");
}

TEST_F(LaunchJob, PlainCommandLearnsTheRunDirFromTheHeartbeat) {
  ::setenv("TESSERA_FAULT", "crash:rank=0:step=2", 1);
  LaunchOptions o = options(1, 3);
  o.command = {"bash", kScripts + "/fake_rank.sh", run_dir_, "3"};
  o.run_dir.clear();
  EXPECT_EQ(launch(o), kLaunchDone);
  const auto r = records();  // written to <out_dir from the heartbeat>/launch/restarts.jsonl
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["failure"]["rank"], 0);
  EXPECT_EQ(r[0]["failure"]["signal"], nullptr);  // no mpirun to name the signal: the pid vanished
  EXPECT_NE(err_.find("died (process "), std::string::npos) << err_;
}

TEST_F(LaunchJob, CommandThatCannotStart) {
  LaunchOptions o = options(1, 1);
  o.command = {root_ + "/no-such-program"};
  EXPECT_EQ(launch(o), kLaunchSetupError);
  EXPECT_NE(err_.find("cannot run"), std::string::npos) << err_;
}

TEST_F(LaunchJob, RealMpirunCrash) {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "no mpirun";
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("TESSERA_FAULT", "crash:rank=1:step=2", 1);
  LaunchOptions o = options(2, 3);
  o.command = {"mpirun", "--oversubscribe", "-n", "2", "bash", kScripts + "/fake_rank.sh", run_dir_, "3"};
  o.heartbeat_timeout = 10;
  EXPECT_EQ(launch(o), kLaunchDone);
  const auto r = records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["failure"]["rank"], 1);
  EXPECT_EQ(r[0]["failure"]["signal"], 9);
  EXPECT_EQ(r[1]["outcome"], "done");
}
