// EtcdElection: one leader among processes that share an election key in etcd, such as
// a job's masters (the leader serves, the others stand by).
//
// Campaign takes a lease of `ttl_s` seconds and creates the key, bound to the lease and
// holding this process's address, in a transaction that succeeds only while the key
// does not exist; a process that loses waits (polling every `poll`, keeping its lease
// alive) until the key is gone: the leader resigned, or died and its lease ran out. The
// winner's Fence (the revision that created the key) guards every write it makes
// (fence.h), so a leader that was replaced cannot write.
//
// KeepLeading renews the lease every ttl/3. A leader counts its lease from the moment
// it sent the last renewal that etcd acknowledged, which is never later than etcd's own
// count: once that much time has passed without one, it calls `on_lost` before etcd
// can let another process win, so two processes never both believe they lead.
//
// Thread-safety: Campaign and Resign from one thread; on_lost runs on the renewal thread.
#ifndef PADDLE_LIKE_ETCD_ETCD_ELECTION_H_
#define PADDLE_LIKE_ETCD_ETCD_ELECTION_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "paddle_like/etcd/etcd_client.h"
#include "paddle_like/etcd/fence.h"

namespace pl::etcd {

class EtcdElection {
 public:
  struct Options {
    std::string key;    // the election key, e.g. "<job prefix>/leader"
    std::string value;  // what the leader writes there: its address, for the others' lines
    int64_t ttl_s = 2;  // etcd may grant more (its minimum follows its election timeout)
    absl::Duration poll = absl::Milliseconds(50);
    // Waited once etcd first answers, before the first attempt: which of several
    // processes started together leads first becomes predictable (pl-launch gives node
    // r's master r seconds).
    absl::Duration first_delay = absl::ZeroDuration();
    std::function<void(const std::string&)> log;  // one line per change seen
  };

  // `client` outlives the election.
  EtcdElection(EtcdClient* client, Options options);
  ~EtcdElection();  // stops renewing (the lease then runs out unless Resign revoked it)
  EtcdElection(const EtcdElection&) = delete;
  EtcdElection& operator=(const EtcdElection&) = delete;

  // Blocks until this process leads (its Fence) or `stop()` returns true (CANCELLED).
  // Errors from etcd are retried, each logged once, until one of those.
  StatusOr<Fence> Campaign(const std::function<bool()>& stop);
  // After Campaign won: renews the lease on a thread of its own; `on_lost(why)` is
  // called once if it could not be renewed in time or etcd says it is gone.
  void KeepLeading(std::function<void(const std::string&)> on_lost);
  // Stops renewing and revokes the lease, so a standby takes over at once rather than
  // when the lease runs out.
  void Resign();

  int64_t granted_ttl_s() const { return granted_ttl_s_; }
  int64_t lease_id() const { return lease_id_; }

 private:
  Status GrantLease();
  void RenewLoop(std::function<void(const std::string&)> on_lost);

  EtcdClient* const client_;
  const Options options_;
  int64_t lease_id_ = 0;
  int64_t granted_ttl_s_ = 0;
  std::chrono::steady_clock::time_point lease_valid_until_;  // by this process's count

  std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread renewer_;
};

}  // namespace pl::etcd

#endif  // PADDLE_LIKE_ETCD_ETCD_ELECTION_H_
