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
  PL_ASSIGN_OR_RETURN(MasterJournal::Stored stored, journal->Load());
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
    for (const proto::MasterEvent& e : stored.events) PL_RETURN_IF_ERROR(m->ReplayLocked(e));
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
                                              : absl::StrCat(" (", stored.events.size(), " events replayed)")));
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

Status Master::ExpireNow() {
  proto::MasterEvent event;
  event.set_expire(true);
  return Run<bool>(std::move(event), [this]() -> StatusOr<bool> {
           ExpireLocked();
           return true;
         })
      .status();
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
  if (replaying_) {
    stall_now_ms = current_->stall_now_ms();
  } else {
    const int64_t mono_ms = options_.monotonic_ms();
    gap_ms = last_expiry_ms_ < 0 ? 0 : mono_ms - last_expiry_ms_;
    last_expiry_ms_ = mono_ms;
    const int64_t stalled_ms = std::max<int64_t>(4 * options_.expire_interval_ms, options_.pserver_lease_ms / 2);
    if (options_.expire_interval_ms > 0 && gap_ms > stalled_ms) {
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
    Log(absl::StrCat("the master did not run for ", gap_ms, " ms (stopped or starved): every lease gets a full "
                     "term from now rather than expiring"));
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

template <typename Resp, typename Body>
StatusOr<Resp> Master::Run(proto::MasterEvent event, Body body) {
  int64_t ticket = -1;
  StatusOr<Resp> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    event.set_now_ms(options_.now_ms());
    current_ = &event;
    pinned_->store(event.now_ms());
    result = body();
    current_ = nullptr;
    pinned_->store(-1);
    // A lease check alone that changed nothing needs no event (a replay without it
    // ends the same): reads answer without waiting for the disk.
    if (!event.expire() || expiry_changed_) {
      PL_ASSIGN_OR_RETURN(ticket, RecordLocked(event));
    }
  }
  // Outside the lock: calls in flight share one fsync.
  PL_RETURN_IF_ERROR(journal_->Sync(ticket));
  return result;
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

StatusOr<proto::RegisterTrainerResponse> Master::RegisterTrainer(const proto::RegisterTrainerRequest& req) {
  // The name goes into the master's state and its log: a long one would make every
  // call slow for everyone.
  if (req.name().size() > kMaxTrainerNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("trainer name of ", req.name().size(), " bytes: at most ",
                                                   kMaxTrainerNameBytes));
  }
  std::string token = rpc::NewTrainerToken();
  proto::MasterEvent event;
  *event.mutable_register_trainer() = req;
  event.set_token_digest(rpc::TokenDigest(token));  // the log keeps the digest, never the token
  StatusOr<proto::RegisterTrainerResponse> resp = Run<proto::RegisterTrainerResponse>(
      std::move(event), [&] { return RegisterTrainerLocked(req, rpc::TokenDigest(token)); });
  if (resp.ok()) resp->set_token(std::move(token));
  return resp;
}

StatusOr<proto::RegisterTrainerResponse> Master::RegisterTrainerLocked(const proto::RegisterTrainerRequest& req,
                                                                       const std::string& token_digest) {
  ExpireLocked();
  int64_t id = membership_.RegisterTrainer(req.name(), token_digest);
  Log(absl::StrCat("trainer ", id, " (", req.name(), ") registered"));
  proto::RegisterTrainerResponse resp;
  resp.set_trainer_id(id);
  resp.set_lease_ms(membership_.lease_ms());
  for (const proto::PserverInfo& p : membership_.pservers()) *resp.add_pservers() = p;
  resp.set_num_pservers(membership_.num_pservers());
  return resp;
}

StatusOr<proto::RegisterPserverResponse> Master::RegisterPserver(const proto::RegisterPserverRequest& req) {
  proto::MasterEvent event;
  *event.mutable_register_pserver() = req;
  return Run<proto::RegisterPserverResponse>(std::move(event), [&] { return RegisterPserverLocked(req); });
}

StatusOr<proto::RegisterPserverResponse> Master::RegisterPserverLocked(const proto::RegisterPserverRequest& req) {
  ExpireLocked();
  const size_t losses_before = membership_.losses().size();
  const std::map<int32_t, int64_t> refused_before = membership_.pushes_refused();
  // Each loss is logged once, when it is first known (its line in the job's status stays).
  // (A replicated shard's loss is logged where it happens, in the map's log.)
  auto log_new_losses = [&](bool replica) {
    for (size_t i = losses_before; !replica && i < membership_.losses().size(); ++i) {
      Log("loss: " + membership_.losses()[i]);
    }
    for (const auto& [index, count] : membership_.pushes_refused()) {
      auto was = refused_before.find(index);
      if (count > 0 && (was == refused_before.end() || was->second == 0)) {
        Log(absl::StrCat("loss: pserver ", index, " refuses pushes whose gradients are out of bounds (", count,
                         " so far; its log names the parameter and the trainer)"));
      }
    }
  };
  if (req.replica_id() != 0) {
    proto::RegisterPserverResponse resp;
    // The copies leaving a finished job are no failover: the map changes, the log and
    // the failover events stay quiet.
    const bool quiet = req.leaving() && queue_.job_done();
    PL_RETURN_IF_ERROR(membership_.HeartbeatReplica(req, &resp, [this, quiet](const std::string& line) {
      if (!quiet) Log(line);
    }));
    log_new_losses(/*replica=*/true);
    resp.set_num_pservers(membership_.num_pservers());
    return resp;
  }
  const int64_t before = membership_.pserver_generation(req.index());
  PL_ASSIGN_OR_RETURN(int64_t generation,
                      membership_.RegisterPserver(req.index(), req.address(), PserverReport::From(req),
                                                  /*job_trained=*/queue_.chunks_trained() > 0));
  log_new_losses(/*replica=*/false);
  // Pservers re-register every second (so a restarted master learns them): log changes only.
  if (generation != before) {
    Log(absl::StrCat("pserver ", req.index(), " at ", req.address(), " registered (generation ", generation, ")"));
  }
  proto::RegisterPserverResponse resp;
  resp.set_num_pservers(membership_.num_pservers());
  resp.set_generation(generation);
  return resp;
}

StatusOr<proto::ReplicaExitedResponse> Master::ReplicaExited(const proto::ReplicaExitedRequest& req) {
  proto::MasterEvent event;
  *event.mutable_replica_exited() = req;
  return Run<proto::ReplicaExitedResponse>(std::move(event), [&] { return ReplicaExitedLocked(req); });
}

StatusOr<proto::ReplicaExitedResponse> Master::ReplicaExitedLocked(const proto::ReplicaExitedRequest& req) {
  ExpireLocked();
  proto::ReplicaExitedResponse resp;
  resp.set_known(membership_.ReplicaExited(req.index(), req.replica_id(),
                                           absl::StrCat("pl-launch: ", req.why().empty() ? "exited" : req.why()),
                                           [this](const std::string& line) { Log(line); }));
  return resp;
}

StatusOr<proto::HeartbeatResponse> Master::Heartbeat(const proto::HeartbeatRequest& req) {
  proto::MasterEvent event;
  *event.mutable_heartbeat() = req;
  return Run<proto::HeartbeatResponse>(std::move(event), [&] { return HeartbeatLocked(req); });
}

StatusOr<proto::HeartbeatResponse> Master::HeartbeatLocked(const proto::HeartbeatRequest& req) {
  ExpireLocked();
  proto::HeartbeatResponse resp;
  resp.set_known(membership_.Heartbeat(req.trainer_id()));
  if (resp.known() && req.task_id() != 0) queue_.RenewLease(req.trainer_id(), req.task_id());
  resp.set_live_trainers(membership_.num_live_trainers());
  return resp;
}

StatusOr<proto::GetTaskResponse> Master::GetTask(const proto::GetTaskRequest& req) {
  proto::MasterEvent event;
  *event.mutable_get_task() = req;
  return Run<proto::GetTaskResponse>(std::move(event), [&] { return GetTaskLocked(req); });
}

StatusOr<proto::GetTaskResponse> Master::GetTaskLocked(const proto::GetTaskRequest& req) {
  ExpireLocked();
  proto::GetTaskResponse resp;
  resp.set_num_passes(queue_.num_passes());
  if (req.has_finished()) {
    const proto::TaskFinishedRequest& finished = req.finished();
    if (finished.trainer_id() != req.trainer_id()) {
      return absl::InvalidArgumentError(absl::StrCat("get task: trainer ", req.trainer_id(), " reports task ",
                                                     finished.task_id(), " as finished by trainer ",
                                                     finished.trainer_id(), " (a trainer reports its own tasks)"));
    }
    // A dropped trainer's tasks went back to the queue: its report cannot count, and it
    // must register again before it leases (as GetTask alone says).
    if (!queue_.job_done() && !membership_.Heartbeat(req.trainer_id())) {
      return absl::NotFoundError(absl::StrCat("get task: trainer ", req.trainer_id(),
                                              " is not registered (its lease expired or the id is wrong; task ",
                                              finished.task_id(), " it reports did not count); register again"));
    }
    Status st = FinishLocked(finished);
    if (absl::IsFailedPrecondition(st) || absl::IsNotFound(st)) {
      resp.set_finish_refused(std::string(st.message()));
    } else if (!st.ok()) {
      return st;
    }
  }
  if (queue_.job_done()) {  // also for unknown trainers: they only need to stop
    resp.set_result(proto::GetTaskResponse::JOB_DONE);
    resp.set_pass(queue_.pass());
    return resp;
  }
  if (!membership_.Heartbeat(req.trainer_id())) {
    return absl::NotFoundError(absl::StrCat("get task: trainer ", req.trainer_id(),
                                            " is not registered (its lease expired or the id is wrong); register again"));
  }
  TaskQueue::Lease lease = queue_.GetTask(req.trainer_id());
  switch (lease.result) {
    case TaskQueue::Result::kTask:
      resp.set_result(proto::GetTaskResponse::TASK);
      *resp.mutable_task() = std::move(lease.task);
      break;
    case TaskQueue::Result::kWait:
      resp.set_result(proto::GetTaskResponse::WAIT);
      break;
    case TaskQueue::Result::kJobDone:
      resp.set_result(proto::GetTaskResponse::JOB_DONE);
      break;
  }
  resp.set_pass(queue_.pass());
  return resp;
}

StatusOr<proto::TaskFinishedResponse> Master::TaskFinished(const proto::TaskFinishedRequest& req) {
  proto::MasterEvent event;
  *event.mutable_task_finished() = req;
  return Run<proto::TaskFinishedResponse>(std::move(event), [&] { return TaskFinishedLocked(req); });
}

StatusOr<proto::TaskFinishedResponse> Master::TaskFinishedLocked(const proto::TaskFinishedRequest& req) {
  ExpireLocked();
  PL_RETURN_IF_ERROR(FinishLocked(req));
  return proto::TaskFinishedResponse();
}

Status Master::FinishLocked(const proto::TaskFinishedRequest& req) {
  membership_.Heartbeat(req.trainer_id());
  const int32_t pass_before = queue_.pass();
  PL_RETURN_IF_ERROR(queue_.TaskFinished(req.trainer_id(), req.task_id(), req.pass(), req.num_samples()));
  if (queue_.pass() != pass_before || queue_.job_done()) Log(SummaryLocked());
  return absl::OkStatus();
}

StatusOr<proto::TaskFailedResponse> Master::TaskFailed(const proto::TaskFailedRequest& req) {
  proto::MasterEvent event;
  *event.mutable_task_failed() = req;
  return Run<proto::TaskFailedResponse>(std::move(event), [&] { return TaskFailedLocked(req); });
}

StatusOr<proto::TaskFailedResponse> Master::TaskFailedLocked(const proto::TaskFailedRequest& req) {
  ExpireLocked();
  membership_.Heartbeat(req.trainer_id());
  Status st = queue_.TaskFailed(req.trainer_id(), req.task_id(), req.pass(), req.returned(), req.reason());
  PL_RETURN_IF_ERROR(st);
  if (req.returned()) {
    ++tasks_returned_;
    samples_retrained_ += std::max<int64_t>(0, req.samples_pushed());
    Log(absl::StrCat("trainer ", req.trainer_id(), " returned task ", req.task_id(),
                     req.samples_pushed() > 0 ? absl::StrCat(" (", req.samples_pushed(), " of its samples pushed: "
                                                             "trained again with it)")
                                              : ""));
  } else {
    Log(absl::StrCat("trainer ", req.trainer_id(), " failed task ", req.task_id(), ": ", req.reason()));
  }
  return proto::TaskFailedResponse();
}

StatusOr<proto::LeaveResponse> Master::Leave(const proto::LeaveRequest& req) {
  proto::MasterEvent event;
  *event.mutable_leave() = req;
  return Run<proto::LeaveResponse>(std::move(event), [&] { return LeaveLocked(req); });
}

StatusOr<proto::LeaveResponse> Master::LeaveLocked(const proto::LeaveRequest& req) {
  ExpireLocked();
  bool known = membership_.Leave(req.trainer_id());
  int n = queue_.ReleaseTrainer(req.trainer_id(), /*count_failure=*/false);
  if (known) {
    Log(absl::StrCat("trainer ", req.trainer_id(), " left", n > 0 ? absl::StrCat("; ", n, " task(s) back to todo") : ""));
  }
  return proto::LeaveResponse();
}

template <typename Resp, typename Read>
StatusOr<Resp> Master::CheckLeasesThenRead(Read read) {
  proto::MasterEvent event;
  event.set_expire(true);  // the lease check is the change; the read is none
  return Run<Resp>(std::move(event), [&]() -> StatusOr<Resp> {
    ExpireLocked();
    return read();
  });
}

StatusOr<proto::MembershipResponse> Master::GetMembership(const proto::MembershipRequest&) {
  return CheckLeasesThenRead<proto::MembershipResponse>([this] { return GetMembershipLocked(); });
}

StatusOr<proto::MembershipResponse> Master::GetMembershipLocked() const {
  proto::MembershipResponse resp;
  for (const proto::TrainerInfo& t : membership_.live_trainers()) {
    proto::TrainerInfo* info = resp.add_trainers();
    *info = t;
    info->set_task_id(queue_.TaskHeldBy(t.id()));
  }
  for (const proto::PserverInfo& p : membership_.pservers()) *resp.add_pservers() = p;
  resp.set_num_pservers(membership_.num_pservers());
  return resp;
}

StatusOr<proto::JobStatusResponse> Master::JobStatus(const proto::JobStatusRequest&) {
  return CheckLeasesThenRead<proto::JobStatusResponse>([this] { return JobStatusLocked(); });
}

StatusOr<proto::JobStatusResponse> Master::JobStatusLocked() const {
  proto::JobStatusResponse resp;
  resp.set_pass(queue_.pass());
  resp.set_num_passes(queue_.num_passes());
  resp.set_todo(queue_.todo());
  resp.set_pending(queue_.pending());
  resp.set_done(queue_.done());
  resp.set_failed(queue_.failed());
  resp.set_samples_done(queue_.samples_done());
  resp.set_job_done(queue_.job_done());
  for (int64_t id : queue_.failed_task_ids()) resp.add_failed_task_ids(id);
  for (const std::string& loss : membership_.LossLines()) resp.add_losses(loss);
  for (const auto& [index, count] : membership_.pushes_refused()) resp.set_pushes_refused(resp.pushes_refused() + count);
  resp.set_live_trainers(static_cast<int64_t>(membership_.live_trainers().size()));
  resp.set_chunks_trained(queue_.chunks_trained());
  resp.set_num_nodes(options_.num_nodes);
  resp.set_num_pservers(membership_.num_pservers());
  resp.set_replicas(options_.replicas);
  if (options_.replicas > 1) resp.set_shards_below_copies(membership_.replicas().degraded(options_.replicas));
  if (trainer_target_ >= 0) {
    resp.set_trainer_target(trainer_target_);
    resp.set_trainer_target_reason(trainer_target_reason_);
  }
  resp.set_tasks_returned(tasks_returned_);
  resp.set_samples_retrained(samples_retrained_);
  return resp;
}

StatusOr<proto::ScaleTrainersResponse> Master::ScaleTrainers(const proto::ScaleTrainersRequest& req) {
  if (req.trainers() < 0 || req.trainers() > kMaxTrainerTarget) {
    return absl::InvalidArgumentError(
        absl::StrCat("ScaleTrainers: trainers ", req.trainers(), " is outside 0 .. ", kMaxTrainerTarget));
  }
  proto::MasterEvent event;
  *event.mutable_scale_trainers() = req;
  return Run<proto::ScaleTrainersResponse>(std::move(event), [&] { return ScaleTrainersLocked(req); });
}

StatusOr<proto::ScaleTrainersResponse> Master::ScaleTrainersLocked(const proto::ScaleTrainersRequest& req) {
  ExpireLocked();
  proto::ScaleTrainersResponse resp;
  if (trainer_target_ >= 0) resp.set_previous(trainer_target_);
  resp.set_live_trainers(static_cast<int64_t>(membership_.live_trainers().size()));
  if (req.trainers() != trainer_target_) {
    Log(absl::StrCat("trainer target ", trainer_target_ < 0 ? "unset" : absl::StrCat(trainer_target_), " -> ",
                     req.trainers(), req.reason().empty() ? "" : absl::StrCat(" (", req.reason(), ")")));
  }
  trainer_target_ = req.trainers();
  trainer_target_reason_ = req.reason();
  return resp;
}

Status Master::CheckTrainerToken(int64_t trainer_id, absl::string_view token) const {
  std::lock_guard<std::mutex> lock(mu_);
  return membership_.CheckToken(trainer_id, token);
}

}  // namespace pl
