// The master: task queue and membership under one mutex, persisted through a
// StateStore, served over gRPC.
//
// `Master` holds the logic and speaks pl::Status; `MasterService`
// (master_grpc_service.h) is the gRPC face that checks the caller and forwards. Every call that may change the state
// is stored before it is answered (master_journal.h): with an event log (pl-master's
// default), as one small event appended to the log, calls in flight sharing an fsync,
// and every so often a snapshot of the whole state; without one, as the whole state.
// A master restarted on the same store resumes exactly where the last reply left it:
// queues, leases (deadlines are unix ms, so leases granted before the restart simply
// run out if their trainers are gone), membership, the trainer id counter and the pass.
// If the write fails the change is undone and the call fails with UNAVAILABLE, so
// memory never runs ahead of what is stored.
//
// Each call reads the lease clock once (`now_ms`), and every part of the call judges
// time by that reading: a replayed event, given the same reading, makes the same
// change.
//
// A background thread expires trainer and task leases every `expire_interval_ms`;
// every call also expires what is due first, so behaviour does not depend on the
// thread's timing (tests use a fake clock and no thread). With the thread, a gap much
// longer than its interval means the master itself did not run: every lease then gets
// a full term instead of all expiring at once.
//
// Calls from trainers: an unknown or expired trainer id gets NOT_FOUND from GetTask
// ("register again") and known=false from Heartbeat. TaskFinished / TaskFailed for a
// task the trainer no longer holds get FAILED_PRECONDITION: the work is not counted
// and the trainer should move on to its next task. JobStatus.failed counts tasks set
// aside in the current pass; failed_task_ids lists every task set aside in any pass.
//
// Thread-safety: all methods are thread-safe.
#ifndef PADDLE_LIKE_MASTER_MASTER_SERVICE_H_
#define PADDLE_LIKE_MASTER_MASTER_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "master/master_journal.h"
#include "master/membership.h"
#include "master/task_queue.h"
#include "paddle_like/core/status.h"
#include "paddle_like/data/chunk_index.h"
#include "paddle_like/store/record_log.h"
#include "paddle_like/store/state_store.h"
#include "proto/master.grpc.pb.h"
#include "proto/master_state.pb.h"

namespace pl {

// The longest trainer name RegisterTrainer takes.
inline constexpr size_t kMaxTrainerNameBytes = 256;
// The most trainers ScaleTrainers may ask a job to run.
inline constexpr int32_t kMaxTrainerTarget = 100000;


struct MasterOptions {
  // For a new job; a resumed job keeps the values it was created with.
  TaskQueueOptions queue;    // its lease_ms is ignored: `lease_ms` below is used
  int32_t num_pservers = 1;
  // Machines pl-launch runs the job on (reported by JobStatus, so that every node can
  // check it was started for the same job). Not stored: a restarted master is told again.
  int32_t num_nodes = 1;
  // Copies of each shard pl-launch runs (reported by JobStatus, for the same check; 0:
  // not told). The master itself counts whichever replicas register.
  int32_t replicas = 0;
  int64_t lease_ms = 3000;   // trainer and task leases; heartbeats every lease_ms / 3
  // Replicated shards: a replica silent this long leaves the shard's map (a primary's
  // backup is promoted at once); replicas heartbeat every few hundred ms.
  int64_t pserver_lease_ms = 800;
  // Unix milliseconds; default: the system clock.
  std::function<int64_t()> now_ms;
  // Milliseconds of a clock that never jumps, for the starvation guard's gaps (leases
  // are judged on now_ms); default: std::chrono::steady_clock.
  std::function<int64_t()> monotonic_ms;
  // Period of the lease-expiry thread; 0: no thread (calls still expire what is due).
  int64_t expire_interval_ms = 100;
  // One line per event (trainer joined/dropped, pass started, task failed, resumed...).
  // Default: stderr, prefixed with "pl-master: ".
  std::function<void(const std::string&)> log;
  // The event log's file (master_journal.h); empty: every change stores the whole state.
  std::string log_path;
  // The event log itself, in place of `log_path` (in etcd, where a standby reads it).
  std::shared_ptr<RecordLog> event_log;
  // A snapshot of the whole state is stored, and the log emptied, once the log holds
  // this many bytes.
  int64_t snapshot_bytes = int64_t{64} << 20;
};

// The largest request the master accepts (gRPC refuses larger ones with
// RESOURCE_EXHAUSTED): its legal requests are a few kilobytes at most.
inline constexpr int kMasterMaxRequestBytes = 1 << 20;

class Master {
 public:
  // Produces the dataset's chunks; called only when the store holds no state.
  using ChunkSource = std::function<StatusOr<std::vector<ChunkInfo>>()>;

  // Resumes the job in `store` if it holds one, else creates it from `chunks()` and
  // stores it. DATA_LOSS when the stored state exists but cannot be read (the store
  // keeps the previous copy, so this means both copies are bad): a job is never
  // silently restarted from scratch. `store` must outlive the Master.
  static StatusOr<std::unique_ptr<Master>> Open(const MasterOptions& options, StateStore* store, ChunkSource chunks);
  ~Master();

  bool resumed() const { return resumed_; }

  StatusOr<proto::RegisterTrainerResponse> RegisterTrainer(const proto::RegisterTrainerRequest& req);
  StatusOr<proto::RegisterPserverResponse> RegisterPserver(const proto::RegisterPserverRequest& req);
  StatusOr<proto::HeartbeatResponse> Heartbeat(const proto::HeartbeatRequest& req);
  StatusOr<proto::GetTaskResponse> GetTask(const proto::GetTaskRequest& req);
  StatusOr<proto::TaskFinishedResponse> TaskFinished(const proto::TaskFinishedRequest& req);
  StatusOr<proto::TaskFailedResponse> TaskFailed(const proto::TaskFailedRequest& req);
  StatusOr<proto::LeaveResponse> Leave(const proto::LeaveRequest& req);
  // The launcher saw the trainer's process exit: a Leave that says why.
  StatusOr<proto::TrainerExitedResponse> TrainerExited(const proto::TrainerExitedRequest& req);
  StatusOr<proto::MembershipResponse> GetMembership(const proto::MembershipRequest& req);
  StatusOr<proto::JobStatusResponse> JobStatus(const proto::JobStatusRequest& req);
  StatusOr<proto::ReplicaExitedResponse> ReplicaExited(const proto::ReplicaExitedRequest& req);
  // Sets the trainers the job is asked to run (JobStatusResponse.trainer_target), stored
  // like every change. INVALID_ARGUMENT outside 0 .. kMaxTrainerTarget.
  StatusOr<proto::ScaleTrainersResponse> ScaleTrainers(const proto::ScaleTrainersRequest& req);

  // The trainers' frequent calls without waiting for the disk: made and recorded, the
  // answer to be given only once Durable(ticket) returned OK (the gRPC service waits for
  // many calls' records at once on one thread: master/durable_replies.h).
  template <typename Resp>
  struct Unsynced {
    StatusOr<Resp> result;
    int64_t ticket = -1;  // -1: nothing to wait for
  };
  Unsynced<proto::HeartbeatResponse> HeartbeatUnsynced(const proto::HeartbeatRequest& req);
  Unsynced<proto::GetTaskResponse> GetTaskUnsynced(const proto::GetTaskRequest& req);
  Unsynced<proto::TaskFinishedResponse> TaskFinishedUnsynced(const proto::TaskFinishedRequest& req);
  // Returns once the records up to `ticket` are durable (-1: at once).
  Status Durable(int64_t ticket);

  // OK when `token` is what trainer_id's registration returned, or the id is unknown
  // (Membership::CheckToken).
  Status CheckTrainerToken(int64_t trainer_id, absl::string_view token) const;

  // Expires due leases now and stores the result (what the background thread does).
  Status ExpireNow();
  // The process is stopping (SIGTERM): from now on no lease expires, so the master drops
  // no trainer and promotes no replica on the way down (pl-launch stops the pservers
  // just before it; a master started again judges every lease afresh).
  void BeginStopping();
  // The state as it would be stored (for tests and diagnostics).
  proto::MasterState Snapshot() const;
  // A one-line summary: "pass 2 of 3, todo/pending/done/failed 4/1/5/0, 2 trainers".
  std::string Summary() const;

 private:
  // `pinned`: the lease clock's reading for the call in progress (-1: none), which the
  // components' clock returns; `quiet`: their log lines are dropped (a replay).
  Master(const MasterOptions& options, std::unique_ptr<MasterJournal> journal,
         std::shared_ptr<std::atomic<int64_t>> pinned, std::shared_ptr<std::atomic<bool>> quiet, TaskQueue queue,
         Membership membership);
  void StartExpiryThread();
  // After a restart: no trainer could renew a lease while no master ran.
  void GiveEveryLeaseAFullTermLocked(int64_t now_ms);
  void Log(const std::string& line) const;
  // Runs `body` as one call: the lease clock pinned to one reading, the call recorded
  // (RecordLocked) under the lock, then, outside it, waits for it to be on disk.
  template <typename Resp, typename Body>
  StatusOr<Resp> Run(proto::MasterEvent event, Body body);
  // Run without the wait: the answer and what to wait for.
  template <typename Resp, typename Body>
  Unsynced<Resp> RunUnsynced(proto::MasterEvent event, Body body);
  // A read that judges the leases first (an "expire" event).
  template <typename Resp, typename Read>
  StatusOr<Resp> CheckLeasesThenRead(Read read);
  // Records `event` (or the whole state); on failure restores what is stored and
  // returns UNAVAILABLE. Stores a snapshot when one is due. Returns what to Sync.
  StatusOr<int64_t> RecordLocked(proto::MasterEvent& event);
  // The snapshot, then the events after it.
  Status RestoreLocked(const MasterJournal::Stored& stored);
  // Makes `event`'s change again (its call with its clock reading, no log lines).
  Status ReplayLocked(const proto::MasterEvent& event);
  // The calls' bodies, with the lock held and the clock pinned.
  StatusOr<proto::RegisterTrainerResponse> RegisterTrainerLocked(const proto::RegisterTrainerRequest& req,
                                                                 const std::string& token_digest);
  StatusOr<proto::RegisterPserverResponse> RegisterPserverLocked(const proto::RegisterPserverRequest& req);
  StatusOr<proto::HeartbeatResponse> HeartbeatLocked(const proto::HeartbeatRequest& req);
  // Virtual trainers: how many tasks `trainer_id` may hold now (HeartbeatResponse.lease_slots);
  // 1 in other jobs.
  int32_t LeaseSlotsLocked(int64_t trainer_id) const;
  StatusOr<proto::GetTaskResponse> GetTaskLocked(const proto::GetTaskRequest& req);
  StatusOr<proto::TaskFinishedResponse> TaskFinishedLocked(const proto::TaskFinishedRequest& req);
  // TaskFinished's change, the leases already judged (GetTask's report rides on it too).
  Status FinishLocked(const proto::TaskFinishedRequest& req);
  StatusOr<proto::TaskFailedResponse> TaskFailedLocked(const proto::TaskFailedRequest& req);
  StatusOr<proto::LeaveResponse> LeaveLocked(const proto::LeaveRequest& req);
  StatusOr<proto::ReplicaExitedResponse> ReplicaExitedLocked(const proto::ReplicaExitedRequest& req);
  StatusOr<proto::ScaleTrainersResponse> ScaleTrainersLocked(const proto::ScaleTrainersRequest& req);
  StatusOr<proto::MembershipResponse> GetMembershipLocked() const;
  StatusOr<proto::JobStatusResponse> JobStatusLocked() const;
  // Drops expired trainers (returning their tasks) and expired task leases.
  void ExpireLocked();
  proto::MasterState SnapshotLocked() const;
  std::string SummaryLocked() const;
  void ExpiryLoop();

  const MasterOptions options_;
  const std::unique_ptr<MasterJournal> journal_;
  bool resumed_ = false;
  const std::shared_ptr<std::atomic<int64_t>> pinned_;
  const std::shared_ptr<std::atomic<bool>> quiet_;

  mutable std::mutex mu_;
  TaskQueue queue_;            // guarded by mu_
  Membership membership_;      // guarded by mu_
  int32_t trainer_target_ = -1;  // guarded by mu_: ScaleTrainers' target (-1: never set)
  std::string trainer_target_reason_;  // guarded by mu_
  int64_t tasks_returned_ = 0;     // guarded by mu_
  int64_t samples_retrained_ = 0;  // guarded by mu_
  proto::MasterEvent* current_ = nullptr;  // guarded by mu_: the call in progress
  bool replaying_ = false;     // guarded by mu_
  bool expiry_changed_ = false;  // guarded by mu_: the last ExpireLocked changed the state
  // guarded by mu_: when leases were last judged (monotonic_ms; -1: not yet)
  int64_t last_expiry_ms_ = -1;
  bool stopping_ = false;      // guarded by mu_
  // Waits for the storage (Durable) in flight, by start (monotonic_ms), and the longest
  // finished wait not yet seen by a lease check: a storage that stalls (a slow fsync, an
  // etcd election) holds the answers to every renewal, so leases are not judged while
  // it stalls, and each gets a full term after it.
  mutable std::mutex durable_mu_;
  std::multiset<int64_t> durable_waits_;  // guarded by durable_mu_
  int64_t durable_stalled_ms_ = 0;        // guarded by durable_mu_
  int64_t durable_counted_from_ = 0;      // guarded by durable_mu_: waits from then on count

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;          // guarded by stop_mu_
  std::thread expiry_thread_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_MASTER_SERVICE_H_
