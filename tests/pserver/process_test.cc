// The pl-pserver binary: startup errors, serving, SIGTERM with a final checkpoint,
// and a restart that restores it. Processes are started by fork/exec and killed by pid.
#include <iostream>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/ascii.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/pserver.grpc.pb.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using ::testing::HasSubstr;
using namespace ::pl::pserver::testing;
namespace fs = std::filesystem;

std::string Binary() {
  const char* dir = std::getenv("PL_BIN_DIR");
  return (fs::path(dir ? dir : "bin") / "pl-pserver").string();
}

class Process {
 public:
  // Starts `args` with stderr to `log_path`.
  Process(const std::vector<std::string>& args, const std::string& log_path) {
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::freopen(log_path.c_str(), "w", stderr);
      (void)f;
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Exit status, or -1 when it did not exit within `timeout`.
  int Wait(absl::Duration timeout) {
    const absl::Time end = absl::Now() + timeout;
    while (absl::Now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return -1;
  }
  void Signal(int sig) { kill(pid_, sig); }

 private:
  pid_t pid_ = -1;
};

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

int WaitForPort(const std::string& port_file, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    int port = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadAll(port_file)), &port) && port > 0) return port;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return 0;
}

TEST(PserverProcess, StartupErrorIsOneLineAndNonZero) {
  const std::string log = (fs::path(::testing::TempDir()) / absl::StrCat("ps_err_", getpid(), ".log")).string();
  Process p({Binary(), "--index", "3", "--num_pservers", "2"}, log);
  EXPECT_EQ(p.Wait(absl::Seconds(10)), 1);
  const std::string text = ReadAll(log);
  EXPECT_THAT(text, HasSubstr("--index (or PL_PSERVER_INDEX) 3 must be in [0, 2)"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1);
  fs::remove(log);
}

TEST(PserverProcess, ServesCheckpointsOnSigtermAndRestores) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("ps_proc_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string port_file = (dir / "port").string();
  const std::vector<std::string> args = {Binary(), "--index", "0", "--num_pservers", "1", "--host", "127.0.0.1",
                                         "--port", "0", "--port_file", port_file, "--checkpoint_dir",
                                         (dir / "ckpt").string(), "--checkpoint_every_s", "3600"};
  {
    Process p(args, (dir / "run1.log").string());
    const int port = WaitForPort(port_file, absl::Seconds(10));
    ASSERT_GT(port, 0) << ReadAll((dir / "run1.log").string());
    auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port)));
    proto::InitResponse init;
    ASSERT_TRUE(stub->Init(rpc::MakeContext(std::chrono::seconds(5)).get(),
                           MakeInit({DenseSpec("p", {2}, 2, InitSpec::Constant(1.0f))}, Sgd(0.5f)), &init).ok());
    proto::PushRequest push;
    AddDense(&push, "p", 0, {2.0f, 4.0f});
    proto::PushResponse pushed;
    ASSERT_TRUE(stub->Push(rpc::MakeContext(std::chrono::seconds(5)).get(), push, &pushed).ok());
    p.Signal(SIGTERM);
    EXPECT_EQ(p.Wait(absl::Seconds(10)), 0) << ReadAll((dir / "run1.log").string());
  }
  const std::string log1 = ReadAll((dir / "run1.log").string());
  EXPECT_THAT(log1, HasSubstr("checkpoint"));
  EXPECT_THAT(log1, HasSubstr("Terminated"));
  fs::remove(port_file);
  {
    Process p(args, (dir / "run2.log").string());
    const int port = WaitForPort(port_file, absl::Seconds(10));
    ASSERT_GT(port, 0) << ReadAll((dir / "run2.log").string());
    auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port)));
    proto::StatsResponse stats;
    ASSERT_TRUE(stub->Stats(rpc::MakeContext(std::chrono::seconds(5)).get(), proto::StatsRequest(), &stats).ok());
    EXPECT_EQ(stats.version(), 1);
    EXPECT_THAT(stats.restored_from(), HasSubstr("ckpt-"));
    proto::PullRequest pull;
    pull.add_dense()->set_param("p");
    proto::PullResponse got;
    ASSERT_TRUE(stub->Pull(rpc::MakeContext(std::chrono::seconds(5)).get(), pull, &got).ok());
    EXPECT_THAT(Floats(got.dense(0).values()), ::testing::ElementsAre(0.0f, -1.0f));
    p.Signal(SIGINT);
    EXPECT_EQ(p.Wait(absl::Seconds(10)), 0);
  }
  if (!HasFailure()) fs::remove_all(dir);
}

// The pserver keeps freed message buffers while traffic flows (they are reused at
// once) and gives them back once it pauses for --trim_idle_ms; 0 keeps them.
TEST(PserverProcess, ReturnsMessageBuffersWhenTrafficPauses) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("ps_trim_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto rss_after_traffic = [&](const std::string& trim_idle_ms, int64_t* right_after, int64_t* later) {
    const std::string port_file = (dir / ("port" + trim_idle_ms)).string();
    const std::string log = (dir / ("run" + trim_idle_ms + ".log")).string();
    Process p({Binary(), "--index", "0", "--num_pservers", "1", "--port", "0", "--port_file", port_file,
               "--trim_idle_ms", trim_idle_ms},
              log);
    const int port = WaitForPort(port_file, absl::Seconds(10));
    ASSERT_GT(port, 0) << ReadAll(log);
    auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port)));
    const int64_t n = 8 << 20;  // 32 MB
    proto::InitResponse init;
    ASSERT_TRUE(stub->Init(rpc::MakeContext(std::chrono::seconds(30)).get(),
                           MakeInit({DenseSpec("p", {n}, n, InitSpec::Constant(0.0f))}, Sgd(0.5f)), &init).ok());
    proto::PushRequest push;
    AddDense(&push, "p", 0, std::vector<float>(n, 1e-3f));
    for (int i = 0; i < 3; ++i) {
      proto::PushResponse pushed;
      ASSERT_TRUE(stub->Push(rpc::MakeContext(std::chrono::seconds(30)).get(), push, &pushed).ok());
    }
    auto rss = [&] {
      proto::StatsResponse stats;
      EXPECT_TRUE(stub->Stats(rpc::MakeContext(std::chrono::seconds(5)).get(), proto::StatsRequest(), &stats).ok());
      return stats.rss_bytes();
    };
    *right_after = rss();
    absl::SleepFor(absl::Milliseconds(1500));
    *later = rss();
    p.Signal(SIGTERM);
    EXPECT_EQ(p.Wait(absl::Seconds(10)), 0) << ReadAll(log);
  };
  int64_t kept_after = 0, kept_later = 0, trimmed_after = 0, trimmed_later = 0;
  ASSERT_NO_FATAL_FAILURE(rss_after_traffic("0", &kept_after, &kept_later));
  ASSERT_NO_FATAL_FAILURE(rss_after_traffic("300", &trimmed_after, &trimmed_later));
  // Half of a 32 MB message's worth at least is returned (measured: 30-60 MB), and
  // nothing much without trimming.
  EXPECT_LT(trimmed_later, trimmed_after - (16 << 20)) << trimmed_after << " -> " << trimmed_later;
  EXPECT_GT(kept_later, kept_after - (8 << 20)) << kept_after << " -> " << kept_later;
  std::cout << "[measured] rss right after / 1.5 s later: kept " << kept_after << " / " << kept_later
            << ", trimmed " << trimmed_after << " / " << trimmed_later << std::endl;
  if (!HasFailure()) fs::remove_all(dir);
}

TEST(PserverProcess, ANegativeTrimDelayIsRefused) {
  const std::string log = (fs::path(::testing::TempDir()) / absl::StrCat("ps_trim_err_", getpid(), ".log")).string();
  Process p({Binary(), "--index", "0", "--num_pservers", "1", "--trim_idle_ms", "-5"}, log);
  EXPECT_EQ(p.Wait(absl::Seconds(10)), 1);
  EXPECT_THAT(ReadAll(log), HasSubstr("--trim_idle_ms -5 must be >= 0"));
  fs::remove(log);
}

}  // namespace
}  // namespace pl::pserver
