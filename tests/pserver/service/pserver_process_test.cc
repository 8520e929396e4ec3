// PserverProcess in this test's own process, with an Env the test controls: its clock
// decides when the periodic checkpoint falls due (no test waits for a real timer), its
// file writes are recorded instead of made, and a write it refuses stops the start.
#include "pserver/service/pserver_process.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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

// A clock that moves only when told, files kept in memory, and optionally a path whose
// write fails.
class TestEnv : public Env {
 public:
  absl::Time Now() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += d;
  }
  Status WriteFileAtomically(const std::string& path, const std::string& contents) const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (path == refused_) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
    files_[path] = contents;
    return absl::OkStatus();
  }
  std::string File(const std::string& path) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find(path);
    return it == files_.end() ? "" : it->second;
  }
  void Refuse(const std::string& path) { refused_ = path; }

 private:
  mutable std::mutex mu_;
  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  mutable std::map<std::string, std::string> files_;
  std::string refused_;
};

int CheckpointFiles(const fs::path& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    n += name.rfind("ckpt-", 0) == 0 && name.find(".tmp") == std::string::npos;
  }
  return n;
}

template <typename Pred>
bool WaitUntil(Pred pred, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (pred()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return pred();
}

class PserverProcessInProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / absl::StrCat("ps_in_proc_", getpid(), "_",
                                                         ::testing::UnitTest::GetInstance()->random_seed());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    options_.index = 0;
    options_.num_pservers = 1;
    options_.port_file = (dir_ / "port").string();
    options_.checkpoint_dir = (dir_ / "ckpt").string();
    options_.checkpoint_every_s = 10;
    options_.table_report_every_s = 0;
    options_.env = &env_;
  }
  void TearDown() override {
    stop_ = true;
    if (runner_.joinable()) runner_.join();
    if (!HasFailure()) fs::remove_all(dir_);
  }

  void Start() {
    runner_ = std::thread([this] {
      result_ = process_->Run([this](absl::Duration wait) {
        absl::SleepFor(std::min(wait, absl::Milliseconds(5)));
        return stop_.load();
      });
      done_ = true;
    });
  }
  int Port() const {
    int port = 0;
    return absl::SimpleAtoi(absl::StripAsciiWhitespace(env_.File(options_.port_file)), &port) ? port : 0;
  }

  fs::path dir_;
  TestEnv env_;
  PserverOptions options_;
  std::unique_ptr<PserverProcess> process_;
  std::thread runner_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  Status result_;
};

TEST_F(PserverProcessInProcessTest, ChecksAsItsEnvClockSaysAndStopsWithAFinalCheckpoint) {
  process_ = std::make_unique<PserverProcess>(options_);
  Start();
  ASSERT_TRUE(WaitUntil([&] { return Port() > 0 || done_; }, absl::Seconds(20))) << "no port written";
  ASSERT_FALSE(done_) << result_;
  EXPECT_FALSE(fs::exists(options_.port_file)) << "the port file went through the Env, not the disk";
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", Port())));
  proto::InitResponse init;
  grpc::Status st = stub->Init(rpc::MakeContext(std::chrono::seconds(10), true).get(),
                               MakeInit({DenseSpec("p", {2}, 2, InitSpec::Constant(1.0f))}, Sgd(0.5f)), &init);
  ASSERT_TRUE(st.ok()) << st.error_message();
  proto::PushRequest push;
  AddDense(&push, "p", 0, {2.0f, 4.0f});
  proto::PushResponse pushed;
  st = stub->Push(rpc::MakeContext(std::chrono::seconds(10), true).get(), push, &pushed);
  ASSERT_TRUE(st.ok()) << st.error_message();

  // Real time passes, the Env's clock does not: no checkpoint falls due.
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(CheckpointFiles(options_.checkpoint_dir), 0);
  env_.Advance(absl::Seconds(11));
  EXPECT_TRUE(WaitUntil([&] { return CheckpointFiles(options_.checkpoint_dir) == 1; }, absl::Seconds(20)))
      << "the periodic checkpoint did not follow the Env's clock";

  // A second push, then a stop: the final checkpoint holds it.
  st = stub->Push(rpc::MakeContext(std::chrono::seconds(10), true).get(), push, &pushed);
  ASSERT_TRUE(st.ok()) << st.error_message();
  stop_ = true;
  runner_.join();
  EXPECT_TRUE(result_.ok()) << result_;
  EXPECT_EQ(CheckpointFiles(options_.checkpoint_dir), 2);
}

TEST_F(PserverProcessInProcessTest, AnEnvThatCannotWriteThePortFileStopsTheStart) {
  env_.Refuse(options_.port_file);
  process_ = std::make_unique<PserverProcess>(options_);
  Start();
  ASSERT_TRUE(WaitUntil([&] { return done_.load(); }, absl::Seconds(20)));
  EXPECT_TRUE(absl::IsPermissionDenied(result_)) << result_;
  EXPECT_THAT(std::string(result_.message()), HasSubstr(options_.port_file));
}

TEST(PserverOptionsTest, ConflictsAreNamed) {
  PserverOptions o;
  o.index = 0;
  o.num_pservers = 1;
  EXPECT_TRUE(ValidatePserverOptions(o).ok());
  o.replicas = 2;
  EXPECT_EQ(ValidatePserverOptions(o).message(),
            "--replicas > 1 needs --master (the master keeps the shard's replica map)");
  o.replicas = 1;
  o.index = 1;
  EXPECT_EQ(ValidatePserverOptions(o).message(), "--index (or PL_PSERVER_INDEX) 1 must be in [0, 1)");
  o.index = 0;
  o.sparse_disk_dir = "/tmp/x";
  EXPECT_THAT(std::string(ValidatePserverOptions(o).message()), HasSubstr("--sparse_disk_dir needs --sparse_memory_mb"));
}

}  // namespace
}  // namespace pl::pserver
