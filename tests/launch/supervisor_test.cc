// Supervisor: output streaming, restart policy, stop escalation — with real `sh -c`
// children.
#include "trainer/launcher/supervisor.h"

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "paddle_like/testing/process.h"

namespace pl {
namespace {

using std::chrono::milliseconds;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Collects the sink's lines.
struct Lines {
  std::vector<std::string> lines;
  LineSink sink() {
    return [this](const std::string& l) { lines.push_back(l); };
  }
  bool Has(const std::string& needle) const {
    for (const auto& l : lines) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  std::vector<std::string> With(const std::string& prefix) const {
    std::vector<std::string> out;
    for (const auto& l : lines) {
      if (l.rfind(prefix, 0) == 0) out.push_back(l);
    }
    return out;
  }
};

ProcessSpec Shell(const std::string& name, const std::string& script, RestartPolicy policy) {
  ProcessSpec spec;
  spec.name = name;
  spec.child.argv = {"/bin/sh", "-c", script};
  spec.restart = policy;
  return spec;
}

SupervisorOptions Fast() {
  SupervisorOptions o;
  o.restart_delay = milliseconds(10);
  o.max_restart_delay = milliseconds(40);
  o.healthy_after = milliseconds(60000);
  o.max_quick_failures = 3;
  return o;
}

// Pumps until `done` or 10 s; collects events.
std::vector<ProcessEvent> PumpUntil(Supervisor& sup, const std::function<bool()>& done) {
  std::vector<ProcessEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    for (auto& e : sup.Pump(milliseconds(20))) events.push_back(e);
  }
  return events;
}

TEST(SupervisorTest, StreamsWholePrefixedLinesWithoutInterleaving) {
  Lines out;
  Supervisor sup(Fast(), out.sink());
  // `slow` writes half a line, waits for `fast` to print a full one, then ends its line.
  ASSERT_TRUE(sup.Start(Shell("slow", "printf 'first half, '; sleep 0.3; printf 'second half\\nlast'", RestartPolicy::kNever)).ok());
  ASSERT_TRUE(sup.Start(Shell("fast", "sleep 0.1; echo one; echo two >&2", RestartPolicy::kNever)).ok());
  auto events = PumpUntil(sup, [&] { return !sup.IsAlive("slow") && !sup.IsAlive("fast"); });
  EXPECT_THAT(out.With("[slow] "), ElementsAre("[slow] first half, second half", "[slow] last"));
  EXPECT_THAT(out.With("[fast] "), ElementsAre("[fast] one", "[fast] two"));
  EXPECT_TRUE(out.Has("INFO launch: slow exited (status 0)"));
  ASSERT_EQ(events.size(), 2u);
  for (const auto& e : events) {
    EXPECT_TRUE(e.exit.success()) << e.name;
    EXPECT_FALSE(e.will_restart);
  }
}

TEST(SupervisorTest, RestartsAnAlwaysProcessThatIsKilled) {
  Lines out;
  Supervisor sup(Fast(), out.sink());
  ProcessSpec spec = Shell("pserver-1", "echo up; exec sleep 30", RestartPolicy::kAlways);
  spec.restart_note = "at index 1";
  ASSERT_TRUE(sup.Start(spec).ok());
  PumpUntil(sup, [&] { return out.Has("[pserver-1] up"); });
  const pid_t first = sup.Pid("pserver-1");
  ASSERT_GT(first, 0);

  ASSERT_TRUE(testing::KillPid(first, SIGKILL).ok());
  std::vector<ProcessEvent> events = PumpUntil(sup, [&] { return sup.Restarts("pserver-1") == 1 && sup.IsRunning("pserver-1"); });
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].name, "pserver-1");
  EXPECT_EQ(events[0].exit.signal, SIGKILL);
  EXPECT_TRUE(events[0].will_restart);
  EXPECT_TRUE(out.Has("INFO launch: pserver-1 exited (signal 9); restarting at index 1"));
  EXPECT_TRUE(sup.IsRunning("pserver-1"));
  EXPECT_NE(sup.Pid("pserver-1"), first);
  EXPECT_FALSE(testing::PidAlive(first));
  PumpUntil(sup, [&] { return out.With("[pserver-1] up").size() == 2; });
  EXPECT_EQ(out.With("[pserver-1] up").size(), 2u);
}

// A pserver copy's death must reach the master at once (it promotes the backup on it),
// not at the supervisor's next tick. Here the child's output pipe stays open (a
// background grandchild holds it), so nothing but the exit itself can wake the poll.
TEST(SupervisorTest, AnExitWakesAPumpWaitingOnNothingElse) {
  Lines out;
  Supervisor sup(Fast(), out.sink());
  ASSERT_TRUE(sup.Start(Shell("pserver-0", "sleep 60 & echo up; exec sleep 60", RestartPolicy::kNever)).ok());
  PumpUntil(sup, [&] { return out.Has("[pserver-0] up"); });
  const pid_t pid = sup.Pid("pserver-0");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(testing::KillPid(pid, SIGKILL).ok());  // the pid alone: the grandchild lives on
  const auto start = std::chrono::steady_clock::now();
  std::vector<ProcessEvent> events = sup.Pump(milliseconds(60000));
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].exit.signal, SIGKILL);
  // Not a speed bound: without the wake-up this Pump returns at its 60 s timeout.
  EXPECT_LT(waited, std::chrono::seconds(30));
}

TEST(SupervisorTest, NeverPolicyOnlyReports) {
  Lines out;
  Supervisor sup(Fast(), out.sink());
  ASSERT_TRUE(sup.Start(Shell("trainer-0", "exit 5", RestartPolicy::kNever)).ok());
  auto events = PumpUntil(sup, [&] { return !sup.IsAlive("trainer-0"); });
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].exit.code, 5);
  EXPECT_FALSE(events[0].will_restart);
  EXPECT_EQ(sup.Restarts("trainer-0"), 0);
  EXPECT_TRUE(out.Has("INFO launch: trainer-0 exited (status 5)"));
  EXPECT_EQ(sup.Signal("trainer-0", SIGTERM).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(sup.Signal("nobody", SIGTERM).code(), absl::StatusCode::kNotFound);
}

TEST(SupervisorTest, GivesUpOnACrashLoop) {
  Lines out;
  Supervisor sup(Fast(), out.sink());  // 3 quick failures allowed
  ASSERT_TRUE(sup.Start(Shell("master", "echo boot; exit 1", RestartPolicy::kAlways)).ok());
  auto events = PumpUntil(sup, [&] { return !sup.IsAlive("master"); });
  ASSERT_EQ(events.size(), 4u);  // the first run and 3 restarts
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(events[i].will_restart) << i;
  EXPECT_TRUE(events[3].gave_up);
  EXPECT_FALSE(events[3].will_restart);
  EXPECT_EQ(sup.Restarts("master"), 3);
  EXPECT_EQ(out.With("[master] boot").size(), 4u);
  EXPECT_TRUE(out.Has("giving up"));
}

TEST(SupervisorTest, RestartUsesTheUpdatedCommand) {
  Lines out;
  Supervisor sup(Fast(), out.sink());
  ASSERT_TRUE(sup.Start(Shell("master", "echo first; exec sleep 30", RestartPolicy::kAlways)).ok());
  PumpUntil(sup, [&] { return out.Has("[master] first"); });
  ASSERT_TRUE(sup.SetCommand("master", {"/bin/sh", "-c", "echo second --port 1234; exec sleep 30"}).ok());
  ASSERT_TRUE(sup.Signal("master", SIGKILL).ok());
  PumpUntil(sup, [&] { return out.Has("[master] second --port 1234"); });
  EXPECT_TRUE(out.Has("[master] first"));
  EXPECT_TRUE(out.Has("[master] second --port 1234"));
  EXPECT_EQ(sup.SetCommand("nobody", {"x"}).code(), absl::StatusCode::kNotFound);
}

TEST(SupervisorTest, StopTermsThenKillsAndDoesNotRestart) {
  Lines out;
  Supervisor sup(Fast(), out.sink());
  // Each says "ready" once its trap is set, and only then is it stopped: a shell that
  // is still starting would die of SIGTERM instead of answering it.
  ASSERT_TRUE(sup.Start(Shell("polite", "trap 'echo bye; exit 0' TERM; echo ready; while true; do sleep 0.05; done",
                              RestartPolicy::kAlways)).ok());
  ASSERT_TRUE(sup.Start(Shell("stubborn", "trap '' TERM; echo ready; exec sleep 30", RestartPolicy::kAlways)).ok());
  PumpUntil(sup, [&] { return out.Has("[stubborn] ready") && out.Has("[polite] ready"); });
  ASSERT_TRUE(out.Has("[polite] ready") && out.Has("[stubborn] ready")) << "both traps must be set before the stop";
  const pid_t stubborn = sup.Pid("stubborn");
  auto events = sup.StopAll(milliseconds(300));
  ASSERT_EQ(events.size(), 2u);
  for (const auto& e : events) {
    EXPECT_FALSE(e.will_restart) << e.name;
    if (e.name == "polite") {
      EXPECT_TRUE(e.exit.success());
    } else {
      EXPECT_EQ(e.exit.signal, SIGKILL);
    }
  }
  EXPECT_TRUE(out.Has("[polite] bye"));
  EXPECT_TRUE(out.Has("stubborn did not stop within 300 ms of SIGTERM; sending SIGKILL"));
  EXPECT_FALSE(sup.IsAlive("polite"));
  EXPECT_FALSE(sup.IsAlive("stubborn"));
  EXPECT_FALSE(testing::PidAlive(stubborn));
  sup.Pump(milliseconds(50));
  EXPECT_EQ(sup.Restarts("polite"), 0);
}

TEST(SupervisorTest, DuplicateNamesAndBadProgramsAreRefused) {
  Lines out;
  Supervisor sup(Fast(), out.sink());
  ASSERT_TRUE(sup.Start(Shell("a", "exec sleep 30", RestartPolicy::kNever)).ok());
  EXPECT_EQ(sup.Start(Shell("a", "true", RestartPolicy::kNever)).code(), absl::StatusCode::kAlreadyExists);
  ProcessSpec bad;
  bad.name = "b";
  bad.child.argv = {"/nonexistent/pl-master"};
  Status s = sup.Start(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/pl-master"));
}

TEST(SupervisorTest, DestructorKillsEverything) {
  Lines out;
  pid_t pid = 0;
  {
    Supervisor sup(Fast(), out.sink());
    ASSERT_TRUE(sup.Start(Shell("x", "exec sleep 30", RestartPolicy::kAlways)).ok());
    pid = sup.Pid("x");
  }
  EXPECT_FALSE(testing::PidAlive(pid));
}

}  // namespace
}  // namespace pl
