// pl-master as a process: serving, the port file, resuming, SIGTERM, one-line errors.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/data/record_file.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/master.grpc.pb.h"
#include "tests/master/test_util.h"

extern char** environ;

namespace pl {
namespace {

using ::testing::HasSubstr;
using pl::testing::ScratchDir;
using pl::testing::Slurp;

// PL_BIN_DIR, or the build's bin/ beside the tests/ folder holding this binary.
std::string BinDir() {
  const char* d = getenv("PL_BIN_DIR");
  if (d != nullptr && *d != '\0') return d;
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  std::filesystem::path bin = exe.parent_path().parent_path() / "bin";
  return std::filesystem::exists(bin / "pl-master") ? bin.string() : "";
}

class MasterProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (BinDir().empty()) GTEST_SKIP() << "pl-master not found: set PL_BIN_DIR";
  }
  void TearDown() override {
    for (pid_t pid : pids_) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }

  // Starts pl-master with `args`, its stdout and stderr going to `log`.
  pid_t Start(const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> argv = {BinDir() + "/pl-master"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> cargv;
    for (std::string& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "cannot start " << cargv[0];
    if (rc == 0) pids_.push_back(pid);
    return pid;
  }

  // The exit status of `pid` within `timeout`, or -1.
  int WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pids_.erase(std::remove(pids_.begin(), pids_.end(), pid), pids_.end());
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }

  // The port written to `port_file`, or 0 after `timeout`.
  int WaitPort(const std::string& port_file, std::chrono::milliseconds timeout) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int port = 0;
      std::ifstream f(port_file);
      if (f >> port && port > 0) return port;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
  }

  std::vector<pid_t> pids_;
};

TEST_F(MasterProcessTest, NoRecordFilesIsAOneLineErrorNamingThePath) {
  ScratchDir dir;
  std::string log = dir.path() + "/stderr";
  pid_t pid = Start({"--state_dir", dir.path() + "/state", "--data", dir.path(), "--port_file", dir.path() + "/port"},
                    log);
  EXPECT_EQ(WaitExit(pid, std::chrono::seconds(20)), 1);
  std::string err = Slurp(log);
  EXPECT_THAT(err, HasSubstr(" ERROR master: "));
  EXPECT_THAT(err, HasSubstr("no *.plrec files in '" + dir.path() + "'"));
  // The cause in one line; the other says the transport is insecure (no --tls_dir).
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 2) << err;
  EXPECT_THAT(err, HasSubstr("WARNING master: transport: insecure"));
  EXPECT_FALSE(std::ifstream(dir.path() + "/port").good());

  pid = Start({"--state_dir", dir.path() + "/state", "--passes", "zero"}, log);
  EXPECT_EQ(WaitExit(pid, std::chrono::seconds(20)), 2);
  EXPECT_THAT(Slurp(log), HasSubstr("--passes: 'zero' is not an integer"));
}

TEST_F(MasterProcessTest, ServesResumesAfterRestartAndExitsZeroOnSigterm) {
  ScratchDir dir;
  const std::string data = dir.path() + "/data.plrec";
  {
    RecordWriter w;
    ASSERT_TRUE(w.Open(data, /*records_per_chunk=*/5).ok());
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(w.Write("record " + std::to_string(i)).ok());
    ASSERT_TRUE(w.Close().ok());
  }
  const std::string state = dir.path() + "/state", port_file = dir.path() + "/port", log = dir.path() + "/stderr";
  const std::vector<std::string> args = {"--host", "127.0.0.1", "--port", "0", "--port_file", port_file,
                                         "--state_dir", state, "--passes", "1", "--chunks_per_task", "2",
                                         "--num_pservers", "1", "--lease_ms", "5000", "--seed", "3"};
  const auto timeout = std::chrono::seconds(10);

  std::vector<std::string> first = args;
  first.insert(first.end(), {"--data", data});
  pid_t pid = Start(first, log);
  int port = WaitPort(port_file, std::chrono::seconds(20));
  ASSERT_GT(port, 0) << Slurp(log);
  auto stub = proto::Master::NewStub(rpc::MakeChannel("127.0.0.1:" + std::to_string(port)));
  proto::RegisterTrainerRequest reg_req;
  reg_req.set_name("test:1");
  proto::RegisterTrainerResponse reg;
  ASSERT_TRUE(stub->RegisterTrainer(rpc::MakeContext(timeout, /*wait_for_ready=*/true).get(), reg_req, &reg).ok());
  EXPECT_EQ(reg.trainer_id(), 1);
  const std::string token1 = reg.token();
  // Nothing the master is told is larger than a few KB: 2 MB is refused unread.
  proto::RegisterTrainerRequest huge;
  huge.set_name(std::string(2 << 20, 'x'));
  proto::RegisterTrainerResponse unused;
  grpc::Status big = stub->RegisterTrainer(rpc::MakeContext(timeout, /*wait_for_ready=*/true).get(), huge, &unused);
  EXPECT_EQ(big.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << big.error_message();
  auto as_trainer = [&](const std::string& token) {
    std::unique_ptr<grpc::ClientContext> ctx = rpc::MakeContext(timeout, /*wait_for_ready=*/true);
    ctx->AddMetadata(rpc::kTrainerTokenKey, token);
    return ctx;
  };
  proto::GetTaskRequest get;
  get.set_trainer_id(1);
  proto::GetTaskResponse task;
  ASSERT_TRUE(stub->GetTask(as_trainer(token1).get(), get, &task).ok());
  ASSERT_EQ(task.result(), proto::GetTaskResponse::TASK);
  ASSERT_EQ(task.task().chunks_size(), 2);
  EXPECT_EQ(task.task().chunks(0).path(), data);
  EXPECT_EQ(task.task().chunks(0).num_records(), 5);
  ::kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid, std::chrono::seconds(20)), 0) << Slurp(log);

  // The restarted master resumes from the state dir alone: the data is not needed.
  ::unlink(port_file.c_str());
  std::vector<std::string> second = args;
  second.insert(second.end(), {"--data", dir.path() + "/gone"});
  pid = Start(second, log);
  port = WaitPort(port_file, std::chrono::seconds(20));
  ASSERT_GT(port, 0) << Slurp(log);
  EXPECT_THAT(Slurp(log), HasSubstr("resumed: pass 1 of 1, todo/pending/done/failed 1/1/0/0"));
  stub = proto::Master::NewStub(rpc::MakeChannel("127.0.0.1:" + std::to_string(port)));
  ASSERT_TRUE(stub->RegisterTrainer(rpc::MakeContext(timeout, /*wait_for_ready=*/true).get(), reg_req, &reg).ok());
  EXPECT_EQ(reg.trainer_id(), 2);
  proto::GetTaskResponse again;
  // Trainer 1's token outlived the restart (its digest is in the state); trainer 2's
  // token does not act for trainer 1.
  grpc::Status as_other = stub->GetTask(as_trainer(reg.token()).get(), get, &again);
  EXPECT_EQ(as_other.error_code(), grpc::StatusCode::PERMISSION_DENIED) << as_other.error_message();
  ASSERT_TRUE(stub->GetTask(as_trainer(token1).get(), get, &again).ok());
  EXPECT_EQ(again.task().id(), task.task().id());  // trainer 1 still holds its lease
  ::kill(pid, SIGTERM);
  EXPECT_EQ(WaitExit(pid, std::chrono::seconds(20)), 0) << Slurp(log);
}

}  // namespace
}  // namespace pl
