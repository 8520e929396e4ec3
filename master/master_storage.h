// MasterStorage: where a pl-master keeps the job's state, chosen by its flags.
//
// - A local directory (--state_dir): LocalDirStore plus the event log file in it. A
//   restarted master on the same disk resumes the job.
// - etcd (--etcd_endpoints): the masters of a job campaign for "<prefix>/leader"
//   (etcd/etcd_election.h); the winner keeps the snapshot and the event log under
//   "<prefix>/state" and "<prefix>/events/", every write fenced by its term, and the
//   others stand by until it resigns or its lease runs out, then the next one reads
//   the state and leads. A master that loses its lease exits (on_lost): a replaced
//   leader never serves again.
//
// Thread-safety: Open from one thread; what it returns is used as its parts document.
#ifndef PADDLE_LIKE_MASTER_MASTER_STORAGE_H_
#define PADDLE_LIKE_MASTER_MASTER_STORAGE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "paddle_like/core/status.h"
#include "paddle_like/etcd/etcd_client.h"
#include "paddle_like/etcd/etcd_election.h"
#include "paddle_like/store/record_log.h"
#include "paddle_like/store/state_store.h"

namespace pl {

struct MasterStorageOptions {
  std::string state_dir;       // the local directory (without etcd)
  bool event_log = true;       // false: the whole state on every change (comparison)
  std::string etcd_endpoints;  // "host:port,..." ; empty: the local directory
  std::string etcd_prefix = "/paddle_like/job";
  std::string etcd_tls_dir;    // mutual TLS to etcd with these certificates; empty: plaintext
  std::string advertise;       // this master's address, written in the leader key
  int64_t leader_ttl_s = 2;
  int64_t campaign_delay_ms = 0;  // before the first campaign (EtcdElection's first_delay)
  std::function<void(const std::string&)> log;
};

struct MasterStorage {
  std::unique_ptr<etcd::EtcdClient> etcd;         // with etcd only
  std::unique_ptr<etcd::EtcdElection> election;  // with etcd only; this master leads
  std::unique_ptr<StateStore> store;
  std::shared_ptr<RecordLog> event_log;  // nullptr: `log_path` (or no log)
  std::string log_path;
  std::string where;  // for the serving line: the directory, or etcd and the term
};

// INVALID_ARGUMENT naming what is wrong with the etcd endpoints or prefix (OK without
// etcd), so a bad flag is refused before anything starts.
Status ValidateEtcdSettings(const MasterStorageOptions& options);

// The storage; with etcd, blocks as a standby until this master leads (CANCELLED if
// `stop()` returns true first), then renews its lease and calls `on_lost(why)` once if
// it loses it or a fenced write is refused.
StatusOr<MasterStorage> OpenMasterStorage(const MasterStorageOptions& options, const std::function<bool()>& stop,
                                          std::function<void(const std::string&)> on_lost);

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_MASTER_STORAGE_H_
