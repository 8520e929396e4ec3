// A replicated shard of real processes for tests that talk to it as a plain client of
// the ParameterServer service: pl-master (one shard) and pl-pserver processes started
// with --replicas 2, the first to register being the primary. They run on 127.0.0.1
// unless a subclass places them elsewhere (HostOf, SpawnOn: the multi-host test bed).
// The fixture owns the processes (killed and reaped when it goes) and a temporary
// folder with their logs.
//
// Thread-safety: used by the test's thread.
#ifndef PADDLE_LIKE_TESTS_DIST_ONE_REPLICATED_SHARD_H_
#define PADDLE_LIKE_TESTS_DIST_ONE_REPLICATED_SHARD_H_

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/core/status.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/master.grpc.pb.h"
#include "proto/pserver.grpc.pb.h"
#include "paddle_like/testing/cluster.h"
#include "paddle_like/testing/process.h"

namespace pl::dist_testing {

class OneReplicatedShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The pservers take their faults (PL_TEST_*) from a test's own build of pl-pserver
    // (tests/pserver/faulty_pserver_main.cc); without any it is pl-pserver.
    for (auto [name, binary] : {std::pair<const char*, const char*>{"pl-master", "pl-master"},
                                {"pl-pserver", "pl-pserver-faulty"}}) {
      auto path = testing::BinaryPath(binary);
      if (!path.ok()) GTEST_SKIP() << "needs the real binaries: " << path.status().message();
      bin_[name] = *path;
    }
    data_ = FashionMnistFile("test.plrec");
    if (data_.empty()) GTEST_SKIP() << "needs $PL_DATA_DIR/fashion-mnist (make data)";
  }

  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  // Where process `name` ("master", or a replica's name) listens, and how it starts.
  virtual std::string HostOf(const std::string& name) { return "127.0.0.1"; }
  virtual StatusOr<std::unique_ptr<ChildProcess>> SpawnOn(const std::string& name, const std::vector<std::string>& argv,
                                                          const std::string& log) {
    return testing::Spawn(argv, log);
  }

  // pl-master for one shard, its log master.log; sets master_port_ and master_address_.
  Status StartMaster(int64_t pserver_lease_ms) {
    PL_ASSIGN_OR_RETURN(master_, SpawnOn("master",
                                         {bin_["pl-master"], "--state_dir", Path("state"), "--data", data_,
                                          "--num_pservers", "1", "--host", HostOf("master"), "--port_file",
                                          Path("master.port"), "--pserver_lease_ms", std::to_string(pserver_lease_ms)},
                                         Path("master.log")));
    PL_ASSIGN_OR_RETURN(master_port_,
                        testing::WaitForPortFile(Path("master.port"), std::chrono::seconds(20), master_.get()));
    master_address_ = absl::StrCat(HostOf("master"), ":", master_port_);
    return absl::OkStatus();
  }

  // A replica of shard 0 reaching the master at `master`, with pserver_flags_; its log
  // is NAME.log.
  StatusOr<std::unique_ptr<ChildProcess>> StartPserver(const std::string& name, const std::string& master) {
    std::vector<std::string> argv = {bin_["pl-pserver"], "--index", "0", "--num_pservers", "1",
                                     "--replicas", "2", "--master", master, "--host",
                                     HostOf(name), "--port_file", Path(name + ".port")};
    argv.insert(argv.end(), pserver_flags_.begin(), pserver_flags_.end());
    PL_ASSIGN_OR_RETURN(auto child, SpawnOn(name, argv, Path(name + ".log")));
    PL_RETURN_IF_ERROR(testing::WaitForPortFile(Path(name + ".port"), std::chrono::seconds(20), child.get()).status());
    return child;
  }

  // ps-a, reaching the master at `primary_master`, and once it is the primary ps-b,
  // until it is a backup in sync (both kept in primary_ and backup_). Returns the
  // primary's address.
  StatusOr<std::string> StartPrimaryAndBackup(const std::string& primary_master) {
    PL_ASSIGN_OR_RETURN(primary_, StartPserver("ps-a", primary_master));
    if (!MasterLogSays("is the primary", std::chrono::seconds(20))) {
      return absl::DeadlineExceededError("ps-a did not become the primary: " + testing::ReadFileOrEmpty(Path("master.log")));
    }
    PL_ASSIGN_OR_RETURN(backup_, StartPserver("ps-b", master_address_));
    if (!MasterLogSays("now a backup in sync", std::chrono::seconds(20))) {
      return absl::DeadlineExceededError("ps-b did not catch up: " + testing::ReadFileOrEmpty(Path("master.log")));
    }
    std::string primary = PrimaryAddress();
    if (primary.empty()) return absl::UnavailableError("the master names no primary");
    return primary;
  }

  bool MasterLogSays(const std::string& text, std::chrono::seconds within) {
    return testing::WaitUntil(
        [&] { return testing::ReadFileOrEmpty(Path("master.log")).find(text) != std::string::npos; }, within);
  }

  // The address of a primary other than `old` once the master names one within
  // `within`, else "". One Membership reading a check: a call that fails under load
  // reads "" and never passes for a new primary.
  std::string NewPrimaryAddress(const std::string& old, std::chrono::seconds within) {
    std::string next;
    const bool named = testing::WaitUntil(
        [&] {
          next = PrimaryAddress();
          return !next.empty() && next != old;
        },
        within);
    return named ? next : "";
  }

  // The id replica `name` wrote to Path(name + ".id") (pl-pserver --replica_id_file), or 0.
  uint64_t ReplicaId(const std::string& name) {
    std::ifstream in(Path(name + ".id"));
    std::string hex;
    uint64_t id = 0;
    return in >> hex && absl::SimpleHexAtoi(hex, &id) ? id : 0;
  }

  // The primary's address, as the master names it to trainers ("" if none).
  std::string PrimaryAddress() {
    auto stub = proto::Master::NewStub(rpc::MakeChannel(master_address_));
    proto::MembershipResponse resp;
    auto ctx = rpc::MakeContext(std::chrono::seconds(3));
    if (!stub->Membership(ctx.get(), proto::MembershipRequest(), &resp).ok() || resp.pservers_size() != 1) return "";
    return resp.pservers(0).address();
  }

  std::map<std::string, std::string> bin_;
  std::vector<std::string> pserver_flags_;  // added to every pl-pserver's command line
  std::string data_;
  int master_port_ = 0;
  std::string master_address_;
  testing::TempDir dir_;
  std::unique_ptr<ChildProcess> master_;
  std::unique_ptr<ChildProcess> primary_, backup_;
};

}  // namespace pl::dist_testing

#endif  // PADDLE_LIKE_TESTS_DIST_ONE_REPLICATED_SHARD_H_
