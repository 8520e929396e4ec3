// MasterClient: every process's side of the master service, with one retry policy
// (MasterCallPolicy): the trainer's calls, a pserver's registration and heartbeats
// (pserver/replication/replicator.h, pserver/service/membership_watcher.h) and the
// launcher's job status and replica reports (trainer/launcher). Each call makes
// attempts of `attempt_timeout` and retries a retryable failure with Backoff
// (backoff.h: 100 ms doubling to 2 s) until `give_up_after` (zero: one attempt), so a
// master restart costs a pause, not work. After a failed attempt the next one dials a
// fresh channel (at most every 200 ms): a channel that failed through a partition, or
// through a master restarted several times in a second, was seen to fail every call
// long after the master served others (gRPC 1.51, TLS handshakes cut off).
//
// A trainer's calls carry its id and token; a master that forgot the trainer
// (NOT_FOUND / known=false) is answered by registering again.
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

// How one call to the master is made.
struct MasterCallPolicy {
  absl::Duration attempt_timeout = absl::Seconds(5);
  // A retryable failure is tried again with backoff until this long after the first
  // attempt (zero: one attempt only).
  absl::Duration give_up_after = absl::Minutes(5);
  // An attempt waits (within its deadline) for the channel to connect instead of
  // failing at once while it reconnects: a blocking client advances a reconnect only
  // while a call waits on the channel.
  bool wait_for_ready = true;

  // One attempt of `timeout`, failing at once on a channel that is down (a heartbeat).
  static MasterCallPolicy Once(absl::Duration timeout) { return {timeout, absl::ZeroDuration(), false}; }
};

class MasterClient {
 public:
  // `name`: a trainer's name for Register (empty for other processes);
  // `give_up_after`: the trainer calls' policy.
  explicit MasterClient(const std::string& address, std::string name = "",
                        absl::Duration give_up_after = absl::Minutes(5));

  // Registers (again); remembers the trainer id and lease.
  StatusOr<proto::RegisterTrainerResponse> Register();
  int64_t trainer_id() const;
  int64_t lease_ms() const { return lease_ms_.load(); }
  // The job's live trainers as of the last heartbeat (0 before the first answer).
  int live_trainers() const { return live_trainers_.load(); }
  // A job of virtual trainers: the micro-batch every Register gives (0: none, the default).
  void set_micro_batch(int64_t samples) { micro_batch_ = samples; }
  // A job of virtual trainers: how many tasks this trainer may hold, as of the last
  // heartbeat or lease (HeartbeatResponse.lease_slots; 1 in other jobs, 0 before any).
  int lease_slots() const { return lease_slots_.load(); }

  // `slot`: the lease slot asking (GetTaskRequest.slot; 0 but in a job of virtual trainers).
  StatusOr<proto::GetTaskResponse> GetTask(int32_t slot = 0);
  // Reports `finished` (trained, `num_samples`) and leases the next task in one call.
  // The report did not count when the answer's finish_refused says why, or when the
  // master had dropped this trainer (it registers again and leases without the report).
  StatusOr<proto::GetTaskResponse> FinishAndGetTask(const proto::Task& finished, int64_t num_samples,
                                                    int32_t slot = 0);
  Status TaskFinished(const proto::Task& task, int64_t num_samples);
  // returned=true: given back on purpose (stop signal), not a failure. `resumable`: in a
  // job of virtual trainers, whoever takes it next goes on where it is (nothing of it is
  // trained again).
  Status TaskFailed(const proto::Task& task, const std::string& reason, bool returned, int64_t samples_pushed = 0,
                    bool resumable = false);
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

  // Any process of the job, each call under `policy`.
  StatusOr<proto::RegisterPserverResponse> RegisterPserver(const proto::RegisterPserverRequest& request,
                                                           const MasterCallPolicy& policy);
  StatusOr<proto::MembershipResponse> Membership(const MasterCallPolicy& policy);
  StatusOr<proto::JobStatusResponse> JobStatus(const MasterCallPolicy& policy);
  StatusOr<proto::ReplicaExitedResponse> ReplicaExited(const proto::ReplicaExitedRequest& request,
                                                       const MasterCallPolicy& policy);
  StatusOr<proto::TrainerExitedResponse> TrainerExited(const proto::TrainerExitedRequest& request,
                                                       const MasterCallPolicy& policy);
  StatusOr<proto::ScaleTrainersResponse> ScaleTrainers(const proto::ScaleTrainersRequest& request,
                                                       const MasterCallPolicy& policy);

  // While set, retries stop early (the trainer is shutting down).
  void set_stop_flag(const std::atomic<bool>* stop) { stop_ = stop; }

 private:
  // GetTask, with `finished` (may be null) reported in the same call.
  StatusOr<proto::GetTaskResponse> GetTask(const proto::Task* finished, int64_t num_samples, int32_t slot);
  // The trainer's id and the token bound to it (rpc/caller.h), taken together: a call
  // made while another thread registers again carries a matching pair.
  struct Credential {
    int64_t trainer_id = 0;
    std::string token;
  };
  Credential credential() const;
  MasterCallPolicy TrainerPolicy() const { return {absl::Seconds(5), give_up_after_, true}; }
  // Makes `method`'s attempts under `policy`; `token`: a trainer's credential to carry.
  template <typename Request, typename Response>
  Status Call(grpc::Status (proto::Master::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
              const Request& request, Response* response, const MasterCallPolicy& policy, const std::string& token,
              const char* what);
  std::shared_ptr<proto::Master::Stub> stub() const;
  // A fresh channel in place of `failed`, unless another thread redialled since, or the
  // last redial was under 200 ms ago.
  void Redial(const std::shared_ptr<proto::Master::Stub>& failed);

  const std::string address_;
  mutable std::mutex stub_mu_;
  std::shared_ptr<proto::Master::Stub> stub_;  // guarded by stub_mu_
  absl::Time dialled_;                         // guarded by stub_mu_
  // With PL_TRAINER_ID_FILE set (pl-launch sets it), writes the id there, so the
  // launcher can tell the master the moment this process exits (TrainerExited).
  static void WriteTrainerIdFile(int64_t trainer_id);

  std::string name_;
  absl::Duration give_up_after_;
  mutable std::mutex credential_mu_;
  Credential credential_;  // guarded by credential_mu_
  std::atomic<int64_t> lease_ms_{3000};
  std::atomic<int> live_trainers_{0};
  std::atomic<int64_t> micro_batch_{0};
  std::atomic<int> lease_slots_{0};
  const std::atomic<bool>* stop_ = nullptr;
  std::mutex register_mu_;  // serialises RegisterAgain
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_MASTER_CLIENT_H_
