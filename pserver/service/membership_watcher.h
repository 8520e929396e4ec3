// MembershipWatcher: a pserver's link to the master. A background thread polls
// Master.Membership (every `poll_interval`) and hands the ids of the live trainers that hold a task to a
// callback (the shard's sync barrier), and, when `register_index` >= 0, re-registers
// this pserver (RegisterPserver) every `register_interval` so a restarted master
// learns it again. While the master is unreachable it retries with pl::Backoff and keeps
// the last live set; it logs one line when the master is lost and one when it is back.
//
// Thread-safety: Start/Stop from one owning thread; the callback runs on the watcher's
// thread.
#ifndef PSERVER_SERVICE_MEMBERSHIP_WATCHER_H_
#define PSERVER_SERVICE_MEMBERSHIP_WATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "paddle_like/client/master_client.h"
#include "proto/master.grpc.pb.h"

namespace pl::pserver {

struct MembershipWatcherOptions {
  std::string master_address;                            // host:port, required
  absl::Duration poll_interval = absl::Milliseconds(200);
  absl::Duration max_backoff = absl::Seconds(2);         // while the master is down
  absl::Duration rpc_timeout = absl::Seconds(1);
  int register_index = -1;                               // < 0: do not register
  std::string register_address;                          // what trainers dial
  absl::Duration register_interval = absl::Seconds(1);
  int num_pservers = 0;                                  // checked against the master's, if > 0
  // Told to the master with each registration (RegisterPserverRequest): this process's
  // number, and whether it began without state (nothing restored).
  uint64_t incarnation = 0;
  bool started_empty = false;
  int64_t restored_version = -1;  // the checkpoint's version it restored (-1: none)
  // Fills what changes as it serves (version, pushes_refused) into each registration.
  std::function<void(proto::RegisterPserverRequest*)> describe;
};

class MembershipWatcher {
 public:
  using Callback = std::function<void(const std::vector<int64_t>& live_trainers)>;
  MembershipWatcher(MembershipWatcherOptions options, Callback on_membership);
  ~MembershipWatcher();  // stops the thread

  void Start();
  void Stop();
  // True once RegisterPserver has succeeded at least once.
  bool registered() const;

 private:
  void Run();
  bool Poll();
  bool Register();

  const MembershipWatcherOptions options_;
  const Callback on_membership_;
  MasterClient master_;
  absl::Notification stop_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace pl::pserver

#endif  // PSERVER_SERVICE_MEMBERSHIP_WATCHER_H_
