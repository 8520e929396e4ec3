// paddle_like/process: spawn, capture, kill by pid, bounded waits, ports, ChildProcess.
#include "paddle_like/testing/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gmock/gmock.h>
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include <gtest/gtest.h>

namespace pl::testing {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

TEST(ProcessTest, SpawnShellCapturesStdoutStderrAndEnvironment) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string out = dir.path() + "/out.txt";
  auto child = SpawnShell("echo out-$PL_TEST_VALUE; echo err >&2; exit 3", out, {{"PL_TEST_VALUE", "42"}});
  ASSERT_TRUE(child.ok()) << child.status();
  auto exit = WaitForExit(**child, milliseconds(5000));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(exit->exited);
  EXPECT_EQ(exit->code, 3);
  EXPECT_EQ(exit->signal, 0);
  EXPECT_FALSE(exit->success());
  EXPECT_EQ(exit->Describe(), "status 3");
  EXPECT_EQ(ReadFileOrEmpty(out), "out-42\nerr\n");
}

TEST(ProcessTest, ExecFailureIsAnErrorNamingTheProgram) {
  TempDir dir;
  auto child = Spawn({dir.path() + "/no-such-program"}, dir.path() + "/out.txt");
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(child.status().message(), HasSubstr("no-such-program"));

  auto not_in_path = Spawn({"pl-surely-not-a-command-anywhere"}, dir.path() + "/out.txt");
  ASSERT_FALSE(not_in_path.ok());
  EXPECT_EQ(not_in_path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(not_in_path.status().message(), HasSubstr("not found in PATH"));
}

TEST(ProcessTest, KillByPidAndWaitTimeout) {
  TempDir dir;
  auto child = SpawnShell("exec sleep 30", dir.path() + "/out.txt");
  ASSERT_TRUE(child.ok()) << child.status();
  const pid_t pid = (*child)->pid();
  EXPECT_TRUE(PidAlive(pid));

  auto early = WaitForExit(**child, milliseconds(50));
  ASSERT_FALSE(early.ok());
  EXPECT_EQ(early.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(early.status().message(), HasSubstr(std::to_string(pid)));

  ASSERT_TRUE(KillPid(pid, SIGKILL).ok());
  auto exit = WaitForExit(**child, milliseconds(5000));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->signal, SIGKILL);
  EXPECT_EQ(exit->Describe(), "signal 9");
  EXPECT_FALSE(PidAlive(pid));
  EXPECT_EQ(KillPid(pid, SIGKILL).code(), absl::StatusCode::kNotFound);
}

TEST(ProcessTest, StopEscalatesToSigkillAndTakesTheWholeGroup) {
  TempDir dir;
  const std::string pid_file = dir.path() + "/grandchild.pid";
  // The shell ignores SIGTERM (and so does its background sleep): only SIGKILL works.
  auto child = SpawnShell("trap '' TERM; sleep 30 & echo $! > " + pid_file + "; wait", dir.path() + "/out.txt");
  ASSERT_TRUE(child.ok()) << child.status();
  int grandchild = 0;
  ASSERT_TRUE(WaitUntil([&] { return absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileOrEmpty(pid_file)), &grandchild); },
                        milliseconds(5000)));
  ASSERT_TRUE(PidAlive(grandchild));

  const auto start = std::chrono::steady_clock::now();
  ExitInfo exit = (*child)->Stop(milliseconds(200));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(200));
  EXPECT_EQ(exit.signal, SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return !PidAlive(grandchild); }, milliseconds(5000)))
      << "the background child of the killed shell survived";
}

TEST(ProcessTest, DestructorKillsARunningChild) {
  TempDir dir;
  pid_t pid = 0;
  {
    auto child = SpawnShell("exec sleep 30", dir.path() + "/out.txt");
    ASSERT_TRUE(child.ok()) << child.status();
    pid = (*child)->pid();
  }
  EXPECT_FALSE(PidAlive(pid));
}

TEST(ProcessTest, ChildDiesWithItsParent) {
  // A forked copy of this test starts `sleep` and dies; PR_SET_PDEATHSIG must take the
  // sleep down with it.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t middle = ::fork();
  ASSERT_GE(middle, 0);
  if (middle == 0) {
    ::close(fds[0]);
    ChildSpec spec;
    spec.argv = {"/bin/sleep", "30"};
    spec.output = ChildSpec::Output::kInherit;
    auto child = ChildProcess::Start(spec);
    pid_t pid = child.ok() ? (*child)->pid() : -1;
    ssize_t ignored = ::write(fds[1], &pid, sizeof(pid));
    (void)ignored;
    ::_exit(0);  // no destructors: the child is left to PDEATHSIG
  }
  ::close(fds[1]);
  pid_t grandchild = -1;
  ASSERT_EQ(::read(fds[0], &grandchild, sizeof(grandchild)), static_cast<ssize_t>(sizeof(grandchild)));
  ::close(fds[0]);
  int st;
  ::waitpid(middle, &st, 0);
  ASSERT_GT(grandchild, 0);
  EXPECT_TRUE(WaitUntil([&] { return !PidAlive(grandchild); }, milliseconds(5000)))
      << "pid " << grandchild << " outlived its parent";
  KillPid(grandchild, SIGKILL).IgnoreError();
}

TEST(ProcessTest, PickFreePortAndWaitForPortFile) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);

  TempDir dir;
  const std::string port_file = dir.path() + "/x.port";
  auto writer = SpawnShell("sleep 0.1; echo 4321 > " + port_file + ".tmp; mv " + port_file + ".tmp " + port_file +
                               "; exec sleep 30",
                           dir.path() + "/out.txt");
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto got = WaitForPortFile(port_file, milliseconds(5000), writer->get());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, 4321);

  auto missing = WaitForPortFile(dir.path() + "/never.port", milliseconds(50));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(missing.status().message(), HasSubstr("never.port"));

  auto quitter = SpawnShell("exit 7", dir.path() + "/out.txt");
  ASSERT_TRUE(quitter.ok()) << quitter.status();
  auto early = WaitForPortFile(dir.path() + "/never.port", milliseconds(5000), quitter->get());
  EXPECT_EQ(early.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(early.status().message(), HasSubstr("status 7"));
}

TEST(ProcessTest, BinaryPathNamesWhatIsMissing) {
  auto path = BinaryPath("pl-no-such-binary");
  ASSERT_FALSE(path.ok());
  // PL_BIN_DIR is set by pl_add_test; the binary is not there.
  EXPECT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(path.status().message(), HasSubstr("pl-no-such-binary"));
}

}  // namespace
}  // namespace pl::testing
