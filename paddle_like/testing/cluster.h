// A local cluster of real processes for the distributed-runtime integration tests:
// pl-master, P pl-pservers and any number of pl-trainers on 127.0.0.1, started
// directly (not through pl-launch) so a test can SIGKILL / SIGTERM any one of them
// and restart it. Also: gRPC reads of the master's JobStatus / Membership and the
// pservers' Stats, log polling with timestamps, and small record-file subsets of the
// prepared Fashion-MNIST data.
//
//   Cluster c(options);                 // options.data: a record file
//   ASSERT_TRUE(c.Start(/*trainers=*/2).ok());
//   auto status = c.WaitForJobDone(std::chrono::seconds(60));
//
// Every process is owned by a ChildProcess in a unique_ptr: the destructor SIGKILLs
// (its process group) and reaps whatever is still running, so a failed assertion
// leaves nothing behind. Every wait takes a timeout. Ports are chosen by the servers
// (--port 0) and read from their --port_file; a restarted master binds the port its
// first incarnation had, because trainers were given that address.
//
// By default every process runs on 127.0.0.1; a ProcessPlacement puts each one on a
// host of its choosing (the multi-host test bed, tests/netbed), and may move a
// process to another host before it is started again.
//
// Thread-safety: a Cluster is used by one thread.
#ifndef PADDLE_LIKE_TESTS_DIST_CLUSTER_H_
#define PADDLE_LIKE_TESTS_DIST_CLUSTER_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"
#include "proto/master.grpc.pb.h"
#include "proto/pserver.grpc.pb.h"
#include "paddle_like/testing/process.h"

namespace pl::dist_testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Where a Cluster's processes run: the address each one listens on and is reached
// at, and how it is started there.
class ProcessPlacement {
 public:
  enum class Role { kMaster, kPserver, kTrainer };
  virtual ~ProcessPlacement() = default;
  // The host address of process `index` of `role` (the master's index is 0); asked at
  // every start, so a restarted process may come back elsewhere.
  virtual std::string Address(Role role, int index) const = 0;
  // Starts argv as that process; stdout and stderr appended to `log`.
  virtual StatusOr<std::unique_ptr<ChildProcess>> Spawn(Role role, int index, const std::vector<std::string>& argv,
                                                        const std::string& log, const testing::EnvVars& env) = 0;
};

struct ClusterOptions {
  std::string data;                 // --data of the master: a record file or directory
  int num_pservers = 2;
  int passes = 1;
  int chunks_per_task = 2;
  int64_t lease_ms = 1500;
  int checkpoint_every_s = 0;       // 0: the pservers get no --checkpoint_dir
  uint64_t seed = 1;                // the master's pass shuffling
  // pl-trainer's flags (after the binary); --master is added by the cluster.
  std::vector<std::string> trainer_args;
  testing::EnvVars trainer_env;     // added to every trainer's environment
  std::vector<std::string> pserver_args;  // added to every pl-pserver's flags; "{i}" becomes its index
  // Not owned; outlives the Cluster. nullptr: every process on 127.0.0.1.
  ProcessPlacement* placement = nullptr;
  // Mutual TLS: Start makes a CA for the job in DIR/tls and a certificate per process,
  // and this process talks to the job as `launch` (rpc/caller.h) until the Cluster goes.
  bool tls = false;
  // The job's state in etcd ("host:port,..."; empty: the master's state directory), with
  // `masters` masters on ports chosen up front: master 0 leads, the others stand by
  // (StartStandbyMaster), and every process is given every master's address.
  std::string etcd_endpoints;
  int masters = 1;
  int64_t leader_ttl_s = 1;
  // Per master index, etcd endpoints that replace etcd_endpoints (a relay, to cut one off).
  std::vector<std::string> etcd_endpoints_of_master;
};

class Cluster {
 public:
  // `dir`: where state, checkpoints, port files and logs go (the caller owns it).
  Cluster(ClusterOptions options, std::string dir);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Master, then the pservers (waits until they are registered), then `trainers`.
  Status Start(int trainers);

  // Starts the master; port 0: any free port (the first start), else that port. With
  // etcd: master 0 on its port, returning once it leads.
  Status StartMaster(int port = 0);
  // With etcd: starts master `i` (1 <= i < masters) again or for the first time; it stands
  // by until it leads, so this returns once it runs.
  Status StartStandbyMaster(int i);
  // Starts pserver `i` again (a fresh process, --port 0, same --checkpoint_dir).
  Status StartPserver(int i);
  // Starts one more trainer (rank = number of trainers started so far) and returns
  // its rank. `extra_args` are appended to options.trainer_args.
  StatusOr<int> StartTrainer(const std::vector<std::string>& extra_args = {});

  ChildProcess& master() { return *master_; }
  ChildProcess& standby_master(int i) { return *standbys_[i]; }
  ChildProcess& pserver(int i) { return *pservers_[i]; }
  ChildProcess& trainer(int rank) { return *trainers_[rank]; }
  int num_trainers() const { return static_cast<int>(trainers_.size()); }
  int master_port() const { return master_port_; }
  std::string master_address() const;

  // SIGKILLs the process and reaps it (bounded wait).
  Status KillMaster();
  Status KillPserver(int i);

  // Log files. A restarted master / pserver writes a new file (…-<incarnation>.log);
  // these read the current incarnation's log.
  std::string MasterLog() const;
  std::string StandbyMasterLog(int i) const;
  std::string PserverLog(int i) const;
  std::string TrainerLogPath(int rank) const;
  std::string TrainerLog(int rank) const;
  // Every log file of every incarnation, with headers: for failure messages.
  std::string AllLogs() const;

  // One RPC each, 3 s deadline.
  StatusOr<proto::JobStatusResponse> JobStatus() const;
  StatusOr<proto::MembershipResponse> Membership() const;
  StatusOr<proto::StatsResponse> PserverStats(int i) const;

  // Polls JobStatus until job_done. DEADLINE_EXCEEDED with the last status seen.
  StatusOr<proto::JobStatusResponse> WaitForJobDone(milliseconds timeout) const;
  // Waits for every trainer to exit (how each ended: trainer(rank).exit_info()).
  // DEADLINE_EXCEEDED naming the first that did not exit in time.
  Status WaitForTrainers(milliseconds timeout);

 private:
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  StatusOr<std::vector<std::string>> TlsArgs(const std::string& identity);
  // pl-master's flags for master `index` on `port`, its files named by `stem`.
  StatusOr<std::vector<std::string>> MasterArgv(int index, int port, const std::string& stem);
  Status SpawnPserver(int i);
  std::string HostOf(ProcessPlacement::Role role, int index) const;
  StatusOr<std::unique_ptr<ChildProcess>> Spawn(ProcessPlacement::Role role, int index,
                                                const std::vector<std::string>& argv, const std::string& log,
                                                const testing::EnvVars& env = {});

  ClusterOptions options_;
  std::string dir_;
  std::string bin_master_, bin_pserver_, bin_trainer_;
  int master_port_ = 0;
  int master_incarnation_ = 0;
  std::vector<int> master_ports_;  // with etcd: every master's, picked up front
  std::vector<std::unique_ptr<ChildProcess>> standbys_;  // with etcd: [i] is master i (0 unused)
  std::vector<int> standby_incarnation_;
  std::vector<int> pserver_incarnation_;
  std::unique_ptr<ChildProcess> master_;
  std::vector<std::unique_ptr<ChildProcess>> pservers_;
  std::vector<std::unique_ptr<ChildProcess>> trainers_;
  std::vector<std::string> log_files_;  // every log file, for AllLogs()
};

// ---- data and logs ----

// $PL_DATA_DIR/fashion-mnist/<name>; empty when PL_DATA_DIR is unset or the file is
// missing (the caller skips, naming what to prepare).
std::string FashionMnistFile(const std::string& name);

// Writes the first `n` records of record file `src` to `dst`, `per_chunk` per chunk.
// Returns the number of chunks written.
StatusOr<int64_t> WriteSubset(const std::string& src, const std::string& dst, int64_t n, int64_t per_chunk);

// The number after the last occurrence of `label` (e.g. "final test accuracy: ") in
// `text`; nullopt when absent.
std::optional<double> LastNumberAfter(const std::string& text, const std::string& label);
// Number of non-overlapping occurrences of `needle` in `text`.
int CountOf(const std::string& text, const std::string& needle);

// Writes `command` as one line to pl-launch's control FIFO `fifo`, once the launcher
// reads it (within `timeout`); UNAVAILABLE when it never does, INTERNAL on a short write.
Status SendControl(const std::string& fifo, const std::string& command, milliseconds timeout = seconds(10));

// Polls file `path` every 5 ms until it contains `needle`. Returns the time it was
// first seen, nullopt on timeout.
std::optional<Clock::time_point> WaitForText(const std::string& path, const std::string& needle,
                                             milliseconds timeout);

// Seconds between two time points.
double SecondsBetween(Clock::time_point a, Clock::time_point b);

}  // namespace pl::dist_testing

#endif  // PADDLE_LIKE_TESTS_DIST_CLUSTER_H_
