// NodeBed: pl-launch on several machines (--nnodes) for tests, one pl-launch per host
// of a multi-host test bed (test_bed.h), node R on host R, all with the job's CA
// (--tls_ca) so that their processes talk mutual TLS across the hosts; this test
// process holds a "launch" certificate of that CA, to read the master's JobStatus and
// Membership. The nodes' processes are killed and the bed removed on destruction.
//
// Thread-safety: used by the test's thread.
#ifndef PADDLE_LIKE_TESTS_NETBED_NODE_BED_H_
#define PADDLE_LIKE_TESTS_NETBED_NODE_BED_H_

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"
#include "proto/master.grpc.pb.h"
#include "paddle_like/testing/cluster.h"
#include "paddle_like/testing/test_bed.h"

namespace pl::dist_testing {

// The master's port on node 0 (each host has its own network namespace: no clash).
inline constexpr int kMasterPort = 17000;

class NodeBed {
  using TestBed = netbed::TestBed;

 public:
  // A bed of `hosts` hosts; `dir` holds the nodes' logs and work directories.
  static StatusOr<std::unique_ptr<NodeBed>> Create(int hosts, std::string dir) {
    std::unique_ptr<NodeBed> nb(new NodeBed(std::move(dir)));
    for (const char* name : {"pl-launch", "pl-trainer", "pl-gen-clicks"}) {
      PL_ASSIGN_OR_RETURN(nb->bin_[name], testing::BinaryPath(name));
    }
    PL_ASSIGN_OR_RETURN(nb->bed_, TestBed::Create(hosts));
    // One CA for the job, made as a user makes it (pl-launch --make_ca) and handed to
    // every node (--tls_ca): their processes talk mutual TLS across the bed's hosts.
    PL_ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> make_ca,
                        testing::Spawn({nb->bin_["pl-launch"], "--make_ca", nb->dir_ + "/job-tls/ca"},
                                       nb->dir_ + "/make-ca.log"));
    PL_ASSIGN_OR_RETURN(ExitInfo made, testing::WaitForExit(*make_ca, std::chrono::seconds(30)));
    if (!made.success()) {
      return absl::InternalError("pl-launch --make_ca failed: " + testing::ReadFileOrEmpty(nb->dir_ + "/make-ca.log"));
    }
    // The test reads the master's JobStatus: as one of the job's processes.
    PL_RETURN_IF_ERROR(rpc::IssueCertificate(nb->dir_ + "/job-tls", "launch"));
    PL_RETURN_IF_ERROR(rpc::ConfigureTransportSecurity(nb->dir_ + "/job-tls/launch"));
    nb->master_addr_ = absl::StrCat(nb->bed_->host(0).address(), ":", kMasterPort);
    return nb;
  }
  ~NodeBed() {
    nodes_.clear();  // before the bed: its processes first
    master_.reset();
    rpc::UseInsecureTransport();
  }

  // The master's JobStatus (num_passes 0 when it does not answer within a second).
  proto::JobStatusResponse JobStatus() {
    proto::JobStatusResponse st;
    auto ctx = rpc::MakeContext(std::chrono::milliseconds(1000));
    if (!Master()->JobStatus(ctx.get(), proto::JobStatusRequest(), &st).ok()) {
      master_.reset();  // a fresh channel next time, as pl-launch's WaitForMaster
      return {};
    }
    return st;
  }

  // The master's membership (nullopt when it does not answer within a second).
  std::optional<proto::MembershipResponse> Membership() {
    proto::MembershipResponse m;
    auto ctx = rpc::MakeContext(std::chrono::milliseconds(1000));
    if (Master()->Membership(ctx.get(), proto::MembershipRequest(), &m).ok()) return m;
    master_.reset();
    return std::nullopt;
  }

  // How a job ended, as FollowToTheEnd saw it.
  struct Ending {
    bool all_exited = false;
    bool saw_done = false;
    proto::JobStatusResponse last;  // the last JobStatus read (the done one, if seen)
  };
  // Reads the JobStatus until the started nodes have all exited or `timeout` passed; node
  // 0 keeps the master up for a while after job_done, so the done status is seen.
  Ending FollowToTheEnd(std::chrono::seconds timeout) {
    Ending e;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto all_exited = [&] {
      for (const auto& n : nodes_) {
        if (n->running()) return false;
      }
      return true;
    };
    while (!(e.all_exited = all_exited()) && std::chrono::steady_clock::now() < deadline) {
      if (!e.saw_done) {
        if (proto::JobStatusResponse st = JobStatus(); st.num_passes() > 0) {
          e.last = st;
          e.saw_done = st.job_done();
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return e;
  }

  // Nodes 0..k-1 each run a master (pl-launch --master_addr A,B,C: one leads, the others
  // stand by, beside an etcd member each); the test reads JobStatus from whichever leads.
  void UseMasters(int k) {
    std::vector<std::string> all;
    for (int i = 0; i < k; ++i) all.push_back(absl::StrCat(bed_->host(i).address(), ":", kMasterPort));
    master_addr_ = absl::StrJoin(all, ",");
    master_.reset();
  }

  TestBed& bed() { return *bed_; }
  const std::string& master_addr() const { return master_addr_; }
  const std::string& bin(const std::string& name) { return bin_[name]; }
  ChildProcess& node(int rank) { return *nodes_.at(rank); }
  int num_started() const { return static_cast<int>(nodes_.size()); }

  std::string Log(int node) const { return absl::StrCat(dir_, "/node-", node, ".log"); }
  std::string Output(int node) const { return testing::ReadFileOrEmpty(Log(node)); }
  std::string AllOutput() const {
    std::string all;
    for (size_t i = 0; i < nodes_.size(); ++i) absl::StrAppend(&all, "==== node ", i, " ====\n", Output(i));
    return all;
  }

  // Starts pl-launch as node `rank` of `nnodes` on host `rank` with `flags` (after the
  // node's own) and `trainer` after "--".
  Status StartNode(int rank, int nnodes, const std::vector<std::string>& flags,
                   const std::vector<std::string>& trainer) {
    std::vector<std::string> argv = {bin_["pl-launch"], "--nnodes", std::to_string(nnodes), "--node_rank",
                                     std::to_string(rank), "--master_addr", master_addr_, "--pservers", "1",
                                     "--trainers", "1", "--workdir", absl::StrCat(dir_, "/work-", rank),
                                     "--progress_every_s", "2", "--tls_ca", dir_ + "/job-tls/ca"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.insert(argv.end(), trainer.begin(), trainer.end());
    PL_ASSIGN_OR_RETURN(auto child, bed_->Start(rank, argv, Log(rank)));
    if (num_started() <= rank) nodes_.resize(rank + 1);
    nodes_[rank] = std::move(child);
    return absl::OkStatus();
  }

 private:
  explicit NodeBed(std::string dir) : dir_(std::move(dir)) {}

  proto::Master::Stub* Master() {
    if (!master_) master_ = proto::Master::NewStub(rpc::MakeChannel(master_addr_));
    return master_.get();
  }

  std::string dir_;
  std::map<std::string, std::string> bin_;
  std::unique_ptr<TestBed> bed_;
  std::string master_addr_;
  std::vector<std::unique_ptr<ChildProcess>> nodes_;
  std::unique_ptr<proto::Master::Stub> master_;
};

// The last line of `text` (which ends with a newline).
inline std::string LastLine(const std::string& text) {
  if (text.size() < 2) return text;
  const size_t nl = text.rfind('\n', text.size() - 2);
  return nl == std::string::npos ? text : text.substr(nl + 1);
}

}  // namespace pl::dist_testing

#endif  // PADDLE_LIKE_TESTS_NETBED_NODE_BED_H_
