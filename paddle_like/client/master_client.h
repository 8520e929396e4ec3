// MasterClient: the trainer's side of the master service. Every call retries with
// Backoff (backoff.h: 100 ms doubling to 2 s) while the master is unreachable or
// restarting, up to `give_up_after`, so a master restart costs the trainer a pause,
// not its work. A master that forgot this trainer (NOT_FOUND / known=false) is
// answered by registering again.
//
// Thread-safety: thread-safe (the heartbeat thread and the training loop share it).
#ifndef PADDLE_LIKE_CLIENT_MASTER_CLIENT_H_
#define PADDLE_LIKE_CLIENT_MASTER_CLIENT_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "paddle_like/client/backoff.h"
#include "paddle_like/core/status.h"
#include "proto/master.grpc.pb.h"

namespace pl {

class MasterClient {
 public:
  MasterClient(const std::string& address, std::string name,
               absl::Duration give_up_after = absl::Minutes(5));

  // Registers (again); remembers the trainer id and lease.
  StatusOr<proto::RegisterTrainerResponse> Register();
  int64_t trainer_id() const;
  int64_t lease_ms() const { return lease_ms_.load(); }

  StatusOr<proto::GetTaskResponse> GetTask();
  Status TaskFinished(const proto::Task& task, int64_t num_samples);
  // returned=true: given back on purpose (stop signal), not a failure.
  Status TaskFailed(const proto::Task& task, const std::string& reason, bool returned);
  // Renews the trainer's lease and that of `task_id` (0: none). Re-registers when
  // the master no longer knows this trainer.
  Status Heartbeat(int64_t task_id);
  Status Leave();
  StatusOr<proto::MembershipResponse> Membership();
  StatusOr<proto::JobStatusResponse> JobStatus();
  // The addresses of pservers 0..num_pservers-1 from the membership list;
  // UNAVAILABLE while some have not registered yet.
  StatusOr<std::vector<std::string>> PserverAddresses(int num_pservers);

  // Registers again unless the id is no longer `forgotten_id` (another thread already
  // registered again): one new id per forgotten one.
  Status RegisterAgain(int64_t forgotten_id);

  // While set, retries stop early (the trainer is shutting down).
  void set_stop_flag(const std::atomic<bool>* stop) { stop_ = stop; }

 private:
  // The trainer's id and the token bound to it (rpc/caller.h), taken together: a call
  // made while another thread registers again carries a matching pair.
  struct Credential {
    int64_t trainer_id = 0;
    std::string token;
  };
  Credential credential() const;

  std::unique_ptr<proto::Master::Stub> stub_;
  std::string name_;
  absl::Duration give_up_after_;
  mutable std::mutex credential_mu_;
  Credential credential_;  // guarded by credential_mu_
  std::atomic<int64_t> lease_ms_{3000};
  const std::atomic<bool>* stop_ = nullptr;
  std::mutex register_mu_;  // serialises RegisterAgain
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_MASTER_CLIENT_H_
