// Rank-count rewriting and -x exports on mpirun/srun command lines.
#include <gtest/gtest.h>

#include "launch/command_line.h"

using namespace tessera::launch;

namespace {
std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) w.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return w;
}
std::string rewrite(const std::string& cmd, int n) {
  auto r = with_rank_count(classify_command(words(cmd)), n);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? shell_join(r->argv) : "";
}
std::optional<int> count(const std::string& cmd) {
  auto r = rank_count(classify_command(words(cmd)));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : std::nullopt;
}
}  // namespace

TEST(LaunchCommand, ClassifiesLaunchers) {
  EXPECT_EQ(classify_command(words("mpirun -n 4 a")).kind, LauncherKind::mpirun);
  EXPECT_EQ(classify_command(words("/usr/bin/mpiexec -n 4 a")).kind, LauncherKind::mpirun);
  EXPECT_EQ(classify_command(words("srun -n 4 a")).kind, LauncherKind::srun);
  const JobCommand wrapped = classify_command(words("timeout 600 mpirun -n 4 a"));
  EXPECT_EQ(wrapped.kind, LauncherKind::mpirun);
  EXPECT_EQ(wrapped.launcher_index, 2u);
  EXPECT_EQ(classify_command(words("./train.sh -n 4")).kind, LauncherKind::other);
}

TEST(LaunchCommand, ReadsRankCounts) {
  EXPECT_EQ(count("mpirun -n 4 tessera train"), 4);
  EXPECT_EQ(count("mpirun --oversubscribe -np 3 tessera train"), 3);
  EXPECT_EQ(count("mpirun --np=5 a"), 5);
  EXPECT_EQ(count("srun --ntasks=6 a"), 6);
  EXPECT_EQ(count("srun -n7 a"), 7);
  EXPECT_EQ(count("srun --ntasks 8 a"), 8);
  EXPECT_EQ(count("mpirun --host a,b tessera train"), std::nullopt);
  EXPECT_EQ(count("./job.sh -n 4"), std::nullopt);
  EXPECT_FALSE(rank_count(classify_command(words("mpirun -n four a"))).ok());
}

TEST(LaunchCommand, StopsAtTheProgram) {
  // The program's own -n is not the rank count; options with values (and --mca's two) are skipped.
  EXPECT_EQ(count("mpirun --bind-to none --mca btl self,tcp tessera sample -n 5"), std::nullopt);
  EXPECT_EQ(rewrite("mpirun --mca btl self tessera sample -n 5", 3), "mpirun -n 3 --mca btl self tessera sample -n 5");
  EXPECT_EQ(rewrite("mpirun -x FOO -np 4 --oversubscribe prog -n 9", 2), "mpirun -x FOO -np 2 --oversubscribe prog -n 9");
}

TEST(LaunchCommand, RewritesEveryForm) {
  EXPECT_EQ(rewrite("mpirun -n 4 tessera train --config a.toml", 3), "mpirun -n 3 tessera train --config a.toml");
  EXPECT_EQ(rewrite("mpiexec --np=4 a", 2), "mpiexec --np=2 a");
  EXPECT_EQ(rewrite("srun -N 2 --ntasks=8 a", 6), "srun -N 2 --ntasks=6 a");
  EXPECT_EQ(rewrite("srun -n8 a", 4), "srun -n4 a");
  EXPECT_EQ(rewrite("timeout 60 mpirun tessera train", 2), "timeout 60 mpirun -n 2 tessera train");
  EXPECT_FALSE(with_rank_count(classify_command(words("./job.sh")), 2).ok());
}

TEST(LaunchCommand, ExportsEnvironmentToMpirunOnly) {
  const std::vector<std::string> vars = {"TESSERA_HEARTBEAT_DIR", "TESSERA_RESUME"};
  EXPECT_EQ(shell_join(with_exported_env(classify_command(words("mpirun -n 2 a")), vars).argv),
            "mpirun -x TESSERA_HEARTBEAT_DIR -x TESSERA_RESUME -n 2 a");
  EXPECT_EQ(shell_join(with_exported_env(classify_command(words("srun -n 2 a")), vars).argv), "srun -n 2 a");
  // The exports do not disturb a later rank-count rewrite.
  auto again = with_rank_count(with_exported_env(classify_command(words("mpirun -n 2 a")), vars), 1);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(shell_join(again->argv), "mpirun -x TESSERA_HEARTBEAT_DIR -x TESSERA_RESUME -n 1 a");
}

TEST(LaunchCommand, ShellJoinQuotes) {
  EXPECT_EQ(shell_join({"a", "b c", "it's", ""}), "a 'b c' 'it'\\''s' ''");
}
