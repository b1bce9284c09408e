// Open MPI's and srun's reports of dead ranks.
#include <gtest/gtest.h>

#include <csignal>

#include "launch/failure_messages.h"

using namespace tessera::launch;

TEST(LaunchFailureMessages, OpenMpiNoticedSignal) {
  FailureMessageParser p;
  EXPECT_FALSE(p.feed("--------------------------------------------------------------------------"));
  auto n = p.feed("mpirun noticed that process rank 2 with PID 4242 on node gpu-07 exited on signal 9 (Killed).");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->rank, 2);
  EXPECT_EQ(n->host, "gpu-07");
  EXPECT_EQ(n->pid, 4242);
  EXPECT_EQ(n->signal, 9);
  EXPECT_FALSE(n->exit_code);
  // Open MPI prints PID 0 when it does not know it.
  auto z = p.feed("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 11 (Segmentation fault).");
  ASSERT_TRUE(z);
  EXPECT_FALSE(z->pid);
  EXPECT_EQ(z->signal, 11);
}

TEST(LaunchFailureMessages, OpenMpiExitCodeBlock) {
  FailureMessageParser p;
  EXPECT_FALSE(p.feed("mpirun detected that one or more processes exited with non-zero status, thus causing"));
  EXPECT_FALSE(p.feed("  Process name: [[39466,1],3]"));
  auto n = p.feed("  Exit code:    7");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->rank, 3);
  EXPECT_EQ(n->exit_code, 7);
  EXPECT_FALSE(p.feed("  Exit code:    7"));  // no pending process name any more
}

TEST(LaunchFailureMessages, Srun) {
  FailureMessageParser p;
  auto k = p.feed("srun: error: nid0042: task 5: Killed");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->rank, 5);
  EXPECT_EQ(k->host, "nid0042");
  EXPECT_EQ(k->signal, SIGKILL);
  auto e = p.feed("srun: error: nid0042: tasks 2-3: Exited with exit code 1");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rank, 2);
  EXPECT_EQ(e->exit_code, 1);
  auto s = p.feed("srun: error: n1: task 0: Segmentation fault (core dumped)");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->signal, SIGSEGV);
  EXPECT_FALSE(p.feed("srun: error: Unable to allocate resources"));
}

TEST(LaunchFailureMessages, IgnoresOrdinaryOutput) {
  FailureMessageParser p;
  EXPECT_FALSE(p.feed("step 5 | loss 3.21 | rank 2 noticed nothing"));
  EXPECT_FALSE(p.feed(""));
}

TEST(LaunchFailureMessages, SignalNames) {
  EXPECT_EQ(signal_description(9), "signal 9, SIGKILL");
  EXPECT_EQ(signal_description(15), "signal 15, SIGTERM");
  EXPECT_EQ(signal_from_text("Terminated"), SIGTERM);
  EXPECT_EQ(signal_from_text("Aborted (core dumped)"), SIGABRT);
  EXPECT_EQ(signal_from_text("Exited with exit code 1"), 0);
}
