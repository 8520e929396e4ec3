// PserverProcess: one parameter-server process as a class, so that pl-pserver's main
// only parses flags and a test can run the same process with an Env of its own
// (pserver_env.h: clock, files, faults). It restores the newest valid checkpoint (a
// replica first asks the master whether it is the shard's primary), serves the
// ParameterServer service, registers with the master, checkpoints every N seconds,
// returns freed message buffers to the kernel when traffic pauses, and when told to stop
// hands over (replicated), stops serving and writes a final checkpoint.
//
//   PserverOptions o;  o.index = 0;  o.num_pservers = 2;  o.master = "127.0.0.1:7000";
//   PserverProcess p(o);
//   Status s = p.Run([](absl::Duration wait) { return StopRequested(wait); });
//
// Thread-safety: Run is called once, from one thread; the process's own threads (gRPC,
// replication, eviction) are started and joined inside it.
#ifndef PSERVER_SERVICE_PSERVER_PROCESS_H_
#define PSERVER_SERVICE_PSERVER_PROCESS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/metrics/telemetry.h"
#include "pserver/service/pserver_env.h"
#include "pserver/store/norm_guard.h"

namespace pl::pserver {

// Every field is a pl-pserver flag of the same name (pserver/main.cc documents each).
struct PserverOptions {
  int index = -1;         // required: in [0, num_pservers)
  int num_pservers = 0;   // required: >= 1
  std::string master;     // empty: no master (and no replication)
  std::string host = "127.0.0.1";
  int port = 0;           // 0: any free port
  std::string advertise_host;  // empty: host, or 127.0.0.1 for a wildcard host
  std::string port_file;
  std::string replica_id_file;
  std::string checkpoint_dir;  // empty: no checkpoints
  int checkpoint_every_s = 10;
  int table_report_every_s = 60;
  int full_checkpoint_every = 10;
  int max_message_mb = 256;
  int threads = 0;
  int trim_idle_ms = 1000;
  int apply_threads = 0;  // 0: one per core (process-wide: parallel_for.h)
  NormGuardOptions norm_guard;  // --max_gradient_norm, --gradient_norm_ratio
  int64_t max_memory_mb = 0;    // 0: DefaultMemoryBudgetBytes(); -1: no limit
  int replicas = 1;
  bool replica_checkpoints = false;
  int64_t sparse_memory_mb = 0;  // 0: what the dense parameters leave of the budget; -1: no cap
  std::string sparse_disk_dir;
  bool snapshot_socket = true;
  int snapshot_lanes = 0;       // 0: DefaultSnapshotLanes
  bool dense_link = true;
  int64_t dense_link_max_mb = 0;
  bool stream_link = true;
  bool stream_shm = true;
  bool snapshot_shm = true;  // a joiner's snapshot through the stream's shared memory
  bool stream_doorbell = true;
  int stream_link_lanes = 0;    // 0: as a trainer's link
  int heartbeat_ms = 100;
  bool shm = true;

  Env* env = Env::Default();                       // not owned; outlives the process
  metrics::ProcessTelemetry* telemetry = nullptr;  // /metrics and event files; may be null
};

// Three quarters of the host's memory, or of the container's limit (cgroup v2
// memory.max) when that is lower: what a pserver's dense state may take by default.
int64_t DefaultMemoryBudgetBytes();

// INVALID_ARGUMENT naming the first option out of range or in conflict with another.
Status ValidatePserverOptions(const PserverOptions& options);

class PserverProcess {
 public:
  // Returns true once the process should stop; waits at most the given time for that.
  using StopWaiter = std::function<bool(absl::Duration)>;

  explicit PserverProcess(PserverOptions options);
  ~PserverProcess();
  PserverProcess(const PserverProcess&) = delete;
  PserverProcess& operator=(const PserverProcess&) = delete;

  // Starts, serves until `stopped` says so (or replication fails for good), and shuts
  // down. OK after a clean stop; otherwise the one-line cause.
  Status Run(const StopWaiter& stopped);

 private:
  class Parts;  // what Run builds, in the order it builds them
  Status Start();
  Status Serve(const StopWaiter& stopped);
  Status Stop();

  const PserverOptions options_;
  std::unique_ptr<Parts> parts_;
};

}  // namespace pl::pserver

#endif  // PSERVER_SERVICE_PSERVER_PROCESS_H_
