// The Master's state over its life (master_service.h): opened new or resumed from its
// journal, events replayed, leases expired by its thread, snapshots recorded. Its calls
// are in master_calls.cc.
#include "master/master_service.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "master/master_journal.h"
#include "paddle_like/core/log.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {
namespace {

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TaskQueue::Clock PinnedClock(std::shared_ptr<std::atomic<int64_t>> pinned, std::function<int64_t()> now) {
  return [pinned = std::move(pinned), now = std::move(now)] {
    const int64_t p = pinned->load();
    return p >= 0 ? p : now();
  };
}

TaskQueue::Logger QuietableLog(std::shared_ptr<std::atomic<bool>> quiet, std::function<void(const std::string&)> log) {
  return [quiet = std::move(quiet), log = std::move(log)](const std::string& line) {
    if (!quiet->load()) log(line);
  };
}

}  // namespace

StatusOr<std::unique_ptr<Master>> Master::Open(const MasterOptions& given, StateStore* store, ChunkSource chunks) {
  MasterOptions options = given;
  if (!options.now_ms) options.now_ms = WallClockMs;
  if (!options.monotonic_ms) {
    options.monotonic_ms = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  if (!options.log) options.log = log::Info;
  PL_ASSIGN_OR_RETURN(std::unique_ptr<MasterJournal> journal,
                      options.event_log != nullptr
                          ? MasterJournal::Open(store, options.event_log, options.snapshot_bytes, options.log)
                          : MasterJournal::Open(store, options.log_path, options.snapshot_bytes, options.log));
  const auto opened = std::chrono::steady_clock::now();
  auto ms_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t).count();
  };
  PL_ASSIGN_OR_RETURN(MasterJournal::Stored stored, journal->Load());
  const int64_t load_ms = ms_since(opened);
  auto pinned = std::make_shared<std::atomic<int64_t>>(-1);
  auto quiet = std::make_shared<std::atomic<bool>>(false);
  const TaskQueue::Clock clock = PinnedClock(pinned, options.now_ms);
  const TaskQueue::Logger component_log = QuietableLog(quiet, options.log);
  if (stored.snapshot) {
    PL_ASSIGN_OR_RETURN(TaskQueue queue, TaskQueue::Deserialize(stored.snapshot->queue(), clock, component_log));
    PL_ASSIGN_OR_RETURN(Membership membership, Membership::Deserialize(stored.snapshot->membership(), clock));
    std::unique_ptr<Master> m(new Master(options, std::move(journal), pinned, quiet, std::move(queue),
                                         std::move(membership)));
    std::lock_guard<std::mutex> lock(m->mu_);
    const int64_t rebuild_ms = ms_since(opened) - load_ms;
    const auto replay_start = std::chrono::steady_clock::now();
    for (const proto::MasterEvent& e : stored.events) PL_RETURN_IF_ERROR(m->ReplayLocked(e));
    const int64_t replay_ms = ms_since(replay_start);
    const TaskQueueOptions& kept = m->queue_.options();
    const TaskQueueOptions& asked = options.queue;
    if (kept.num_passes != asked.num_passes || kept.chunks_per_task != asked.chunks_per_task ||
        kept.max_failures != asked.max_failures || kept.seed != asked.seed || kept.lease_ms != options.lease_ms ||
        m->membership_.num_pservers() != options.num_pservers) {
      m->Log(absl::StrCat("the resumed job keeps its own settings: passes ", kept.num_passes, ", chunks_per_task ",
                          kept.chunks_per_task, ", max_failures ", kept.max_failures, ", seed ", kept.seed,
                          ", lease_ms ", kept.lease_ms, ", num_pservers ", m->membership_.num_pservers(),
                          " (the flags that differ are ignored)"));
    }
    // Trainers could not renew their leases while no master ran: give every lease a
    // full term from now, so a restart costs no task and drops no live trainer. One more
    // event (a snapshot of a large job would cost the restart a second or more).
    proto::MasterEvent restart;
    restart.set_restart(true);
    restart.set_now_ms(options.now_ms());
    m->GiveEveryLeaseAFullTermLocked(restart.now_ms());
    m->resumed_ = true;
    if (m->journal_->logging()) {
      PL_ASSIGN_OR_RETURN(int64_t ticket, m->RecordLocked(restart));
      PL_RETURN_IF_ERROR(Annotate(m->journal_->Sync(ticket), "master: cannot store its state"));
    } else {
      PL_RETURN_IF_ERROR(Annotate(m->journal_->WriteSnapshot(m->SnapshotLocked()), "master: cannot store its state"));
    }
    m->Log(absl::StrCat("resumed: ", m->SummaryLocked(), ", next trainer id ", m->membership_.next_trainer_id(),
                        stored.events.empty() ? std::string()
                                              : absl::StrCat(" (", stored.events.size(), " events replayed)"),
                        " in ", ms_since(opened), " ms (read ", load_ms, ", rebuilt ", rebuild_ms, ", replayed ",
                        replay_ms, ")"));
    m->StartExpiryThread();
    return m;
  }
  if (!chunks) return absl::InvalidArgumentError("master: a new job needs a chunk source");
  PL_ASSIGN_OR_RETURN(std::vector<ChunkInfo> chunk_list, chunks());
  TaskQueueOptions qopts = options.queue;
  qopts.lease_ms = options.lease_ms;
  PL_ASSIGN_OR_RETURN(TaskQueue queue, TaskQueue::Create(chunk_list, qopts, clock, component_log));
  MembershipOptions mopts;
  mopts.lease_ms = options.lease_ms;
  mopts.num_pservers = options.num_pservers;
  mopts.pserver_lease_ms = options.pserver_lease_ms;
  PL_ASSIGN_OR_RETURN(Membership membership, Membership::Create(mopts, clock));
  std::unique_ptr<Master> m(
      new Master(options, std::move(journal), pinned, quiet, std::move(queue), std::move(membership)));
  std::lock_guard<std::mutex> lock(m->mu_);
  PL_RETURN_IF_ERROR(Annotate(m->journal_->WriteSnapshot(m->SnapshotLocked()), "master: cannot store the new job"));
  m->Log(absl::StrCat("new job: ", chunk_list.size(), " chunks in ", m->queue_.num_tasks(), " tasks, ",
                      qopts.num_passes, " passes, ", options.num_pservers, " pservers"));
  m->StartExpiryThread();
  return m;
}

void Master::GiveEveryLeaseAFullTermLocked(int64_t now_ms) {
  const int64_t grace_until = now_ms + membership_.lease_ms();
  membership_.ExtendLeases(grace_until);
  queue_.ExtendLeases(grace_until);
}

void Master::StartExpiryThread() {
  if (options_.expire_interval_ms > 0) expiry_thread_ = std::thread([this] { ExpiryLoop(); });
}

Status Master::RestoreLocked(const MasterJournal::Stored& stored) {
  const TaskQueue::Clock clock = PinnedClock(pinned_, options_.now_ms);
  PL_ASSIGN_OR_RETURN(queue_, TaskQueue::Deserialize(stored.snapshot->queue(), clock, QuietableLog(quiet_, options_.log)));
  PL_ASSIGN_OR_RETURN(membership_, Membership::Deserialize(stored.snapshot->membership(), clock));
  trainer_target_ = stored.snapshot->has_trainer_target() ? stored.snapshot->trainer_target() : -1;
  trainer_target_reason_ = stored.snapshot->trainer_target_reason();
  tasks_returned_ = stored.snapshot->tasks_returned();
  samples_retrained_ = stored.snapshot->samples_retrained();
  for (const proto::MasterEvent& e : stored.events) PL_RETURN_IF_ERROR(ReplayLocked(e));
  return absl::OkStatus();
}

Master::Master(const MasterOptions& options, std::unique_ptr<MasterJournal> journal,
               std::shared_ptr<std::atomic<int64_t>> pinned, std::shared_ptr<std::atomic<bool>> quiet, TaskQueue queue,
               Membership membership)
    : options_(options),
      journal_(std::move(journal)),
      pinned_(std::move(pinned)),
      quiet_(std::move(quiet)),
      queue_(std::move(queue)),
      membership_(std::move(membership)) {}

Master::~Master() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (expiry_thread_.joinable()) expiry_thread_.join();
}

void Master::Log(const std::string& line) const {
  if (!quiet_->load()) options_.log(line);
}

void Master::ExpiryLoop() {
  std::unique_lock<std::mutex> stop_lock(stop_mu_);
  while (!stop_cv_.wait_for(stop_lock, std::chrono::milliseconds(options_.expire_interval_ms), [this] { return stop_; })) {
    stop_lock.unlock();
    Status st = ExpireNow();
    if (!st.ok()) Log(absl::StrCat("lease expiry not stored (will retry): ", st.message()));
    stop_lock.lock();
  }
}

void Master::BeginStopping() {
  std::lock_guard<std::mutex> l(mu_);
  stopping_ = true;
}

void Master::ExpireLocked() {
  // A stopping master (SIGTERM) judges no lease; its calls say so to a replay (-1).
  expiry_changed_ = false;
  if (replaying_ ? current_->stall_now_ms() < 0 : stopping_) {
    current_->set_stall_now_ms(-1);
    return;
  }
  // Leases are judged every expire_interval_ms. A much longer gap means the master
  // itself did not run (stopped, starved, its VM paused): nobody could renew a lease
  // with it meanwhile, so each gets a full term from now instead of every pserver and
  // trainer being dropped at once. Safe for fencing: a primary acts only within its
  // lease from its last answered heartbeat, so a later deadline here never lets two act.
  // The call's one reading of the lease clock (Run) is taken before the gap is: a stall
  // after it shows in this gap (or the next) instead of slipping between the guard and
  // the expiry (a trainer was once dropped 39 ms before the guard noticed a 16 s
  // stall). A stall seen extends the leases from a fresh reading, which the event keeps
  // for a replay.
  int64_t now_ms = pinned_->load();
  int64_t stall_now_ms = 0;
  int64_t gap_ms = 0;
  int64_t storage_ms = 0;
  if (replaying_) {
    stall_now_ms = current_->stall_now_ms();
  } else {
    const int64_t mono_ms = options_.monotonic_ms();
    gap_ms = last_expiry_ms_ < 0 ? 0 : mono_ms - last_expiry_ms_;
    last_expiry_ms_ = mono_ms;
    const int64_t stalled_ms = std::max<int64_t>(4 * options_.expire_interval_ms, options_.pserver_lease_ms / 2);
    // The storage: a wait in flight this long holds renewals' answers (a pserver sends
    // its next heartbeat once the last is answered), so no lease is judged now; one that
    // took this long gives every lease a full term, as a stall of the master does.
    // A stall of the master explains the waits that spanned it: only later ones count.
    const bool master_stalled = options_.expire_interval_ms > 0 && gap_ms > stalled_ms;
    {
      std::lock_guard<std::mutex> l(durable_mu_);
      if (master_stalled) {
        durable_counted_from_ = mono_ms;
        durable_stalled_ms_ = 0;
      }
      auto oldest = durable_waits_.lower_bound(durable_counted_from_);
      if (oldest != durable_waits_.end() && mono_ms - *oldest > stalled_ms) {
        current_->set_stall_now_ms(-1);
        return;
      }
      storage_ms = std::exchange(durable_stalled_ms_, 0);
    }
    if (storage_ms <= stalled_ms) storage_ms = 0;
    if (master_stalled || storage_ms > 0) {
      stall_now_ms = options_.now_ms();
      current_->set_stall_now_ms(stall_now_ms);
    }
  }
  if (stall_now_ms > 0) {
    expiry_changed_ = true;
    now_ms = stall_now_ms;
    pinned_->store(now_ms);  // the rest of the call acts after the stall too
    membership_.ExtendLeases(now_ms + membership_.lease_ms(), now_ms + options_.pserver_lease_ms);
    queue_.ExtendLeases(now_ms + membership_.lease_ms());
    Log(storage_ms > 0 ? absl::StrCat("the master's storage took ", storage_ms, " ms to make a change durable (the "
                                      "answers to renewals waited for it): every lease gets a full term from now "
                                      "rather than expiring")
                       : absl::StrCat("the master did not run for ", gap_ms, " ms (stopped or starved): every lease "
                                      "gets a full term from now rather than expiring"));
  }
  for (int64_t id : membership_.ExpireTrainers(now_ms)) {
    expiry_changed_ = true;
    int n = queue_.ReleaseTrainer(id, /*count_failure=*/true);
    Log(absl::StrCat("trainer ", id, " dropped: its lease expired", n > 0 ? absl::StrCat("; ", n, " task(s) back to todo") : ""));
  }
  int expired = queue_.ExpireLeases(now_ms);
  if (expired > 0) Log(absl::StrCat(expired, " task lease(s) expired"));
  expiry_changed_ |= expired > 0;
  expiry_changed_ |= membership_.ExpireReplicas([this](const std::string& line) { Log(line); }, now_ms);
}

proto::MasterState Master::SnapshotLocked() const {
  proto::MasterState s;
  s.set_format_version(kMasterStateFormatVersion);
  s.set_last_seq(journal_->last_seq());
  *s.mutable_queue() = queue_.Serialize();
  *s.mutable_membership() = membership_.Serialize();
  if (trainer_target_ >= 0) {
    s.set_trainer_target(trainer_target_);
    s.set_trainer_target_reason(trainer_target_reason_);
  }
  s.set_tasks_returned(tasks_returned_);
  s.set_samples_retrained(samples_retrained_);
  return s;
}

StatusOr<int64_t> Master::RecordLocked(proto::MasterEvent& event) {
  StatusOr<int64_t> ticket = journal_->Record(event, [this] { return SnapshotLocked(); });
  if (!ticket.ok()) {
    // Undo the call: memory never runs ahead of what is stored.
    StatusOr<MasterJournal::Stored> stored = journal_->Load();
    if (stored.ok() && stored->snapshot) {
      Status restored = RestoreLocked(*stored);
      if (!restored.ok()) Log(absl::StrCat("could not undo a change that was not stored: ", restored.message()));
    }
    return absl::UnavailableError(
        absl::StrCat("master cannot store its state, the change was not made: ", ticket.status().message()));
  }
  if (journal_->SnapshotDue()) {
    // The snapshot makes the log's events redundant; a failed one leaves them in place.
    if (Status st = journal_->WriteSnapshot(SnapshotLocked()); !st.ok()) {
      Log(absl::StrCat("snapshot not stored (the event log keeps growing until one is): ", st.message()));
    } else {
      return int64_t{-1};  // stored with the snapshot
    }
  }
  return ticket;
}

Status Master::ReplayLocked(const proto::MasterEvent& recorded) {
  proto::MasterEvent e = recorded;
  current_ = &e;
  pinned_->store(e.now_ms());
  quiet_->store(true);
  replaying_ = true;
  Status st;
  switch (e.call_case()) {
    case proto::MasterEvent::kRegisterTrainer: (void)RegisterTrainerLocked(e.register_trainer(), e.token_digest()); break;
    case proto::MasterEvent::kRegisterPserver: (void)RegisterPserverLocked(e.register_pserver()); break;
    case proto::MasterEvent::kHeartbeat: (void)HeartbeatLocked(e.heartbeat()); break;
    case proto::MasterEvent::kGetTask: (void)GetTaskLocked(e.get_task()); break;
    case proto::MasterEvent::kTaskFinished: (void)TaskFinishedLocked(e.task_finished()); break;
    case proto::MasterEvent::kTaskFailed: (void)TaskFailedLocked(e.task_failed()); break;
    case proto::MasterEvent::kLeave: (void)LeaveLocked(e.leave()); break;
    case proto::MasterEvent::kReplicaExited: (void)ReplicaExitedLocked(e.replica_exited()); break;
    case proto::MasterEvent::kExpire: ExpireLocked(); break;
    case proto::MasterEvent::kRestart: GiveEveryLeaseAFullTermLocked(e.now_ms()); break;
    case proto::MasterEvent::kScaleTrainers: (void)ScaleTrainersLocked(e.scale_trainers()); break;
    default:
      st = absl::DataLossError(absl::StrCat("master event ", e.seq(), " records no call this master knows"));
  }
  replaying_ = false;
  quiet_->store(false);
  pinned_->store(-1);
  current_ = nullptr;
  return st;
}

proto::MasterState Master::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return SnapshotLocked();
}

std::string Master::SummaryLocked() const {
  return absl::StrCat("pass ", queue_.pass(), " of ", queue_.num_passes(), queue_.job_done() ? " (job done)" : "",
                      ", todo/pending/done/failed ", queue_.todo(), "/", queue_.pending(), "/", queue_.done(), "/",
                      queue_.failed(), ", ", membership_.live_trainers().size(), " live trainers, ",
                      membership_.pservers().size(), " of ", membership_.num_pservers(), " pservers registered");
}

std::string Master::Summary() const {
  std::lock_guard<std::mutex> lock(mu_);
  return SummaryLocked();
}

}  // namespace pl
