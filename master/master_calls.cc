// The Master's calls (master_service.h): each runs under the master's lock with the
// lease clock pinned to one reading, is recorded in its journal, and is answered once
// the record is durable (Run), or hands that wait to its caller (RunUnsynced). The
// state's life around them (open, restore, replay, expiry, snapshots) is in
// master_service.cc.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "master/master_journal.h"
#include "master/master_service.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {

template <typename Resp, typename Body>
Master::Unsynced<Resp> Master::RunUnsynced(proto::MasterEvent event, Body body) {
  Unsynced<Resp> out;
  std::lock_guard<std::mutex> lock(mu_);
  event.set_now_ms(options_.now_ms());
  current_ = &event;
  pinned_->store(event.now_ms());
  out.result = body();
  current_ = nullptr;
  pinned_->store(-1);
  // A lease check alone that changed nothing needs no event (a replay without it
  // ends the same): reads answer without waiting for the disk.
  if (!event.expire() || expiry_changed_) {
    StatusOr<int64_t> ticket = RecordLocked(event);
    if (!ticket.ok()) {
      out.result = ticket.status();
    } else {
      out.ticket = *ticket;
    }
  }
  return out;
}

template <typename Resp, typename Body>
StatusOr<Resp> Master::Run(proto::MasterEvent event, Body body) {
  Unsynced<Resp> done = RunUnsynced<Resp>(std::move(event), std::move(body));
  // Outside the lock: calls in flight share one fsync.
  PL_RETURN_IF_ERROR(Durable(done.ticket));
  return std::move(done.result);
}

Status Master::Durable(int64_t ticket) {
  if (ticket < 0) return absl::OkStatus();
  const int64_t start = options_.monotonic_ms();
  std::multiset<int64_t>::iterator wait;
  {
    std::lock_guard<std::mutex> l(durable_mu_);
    wait = durable_waits_.insert(start);
  }
  Status stored = journal_->Sync(ticket);
  const int64_t took = options_.monotonic_ms() - start;
  std::lock_guard<std::mutex> l(durable_mu_);
  durable_waits_.erase(wait);
  if (start >= durable_counted_from_) durable_stalled_ms_ = std::max(durable_stalled_ms_, took);
  return stored;
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
  const int32_t V = queue_.virtual_trainers();
  if (V > 0) {
    // Refused before anything changes: a trainer that would cut its micro-batches
    // otherwise would make the job's result depend on who computes them.
    if (req.micro_batch() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trainer ", req.name(), ": this job trains ", V, " virtual trainers (pl-master --virtual_trainers), and a "
          "trainer registering with it must give its micro-batch (pl-trainer does; this one gave none)"));
    }
    if (Status fixed = queue_.FixMicroBatch(req.micro_batch()); !fixed.ok()) {
      return Annotate(fixed, absl::StrCat("trainer ", req.name(), " refused"));
    }
  }
  int64_t id = membership_.RegisterTrainer(req.name(), token_digest);
  Log(absl::StrCat("trainer ", id, " (", req.name(), ") registered"));
  proto::RegisterTrainerResponse resp;
  if (V > 0) {
    proto::ConsistentSchedule* schedule = resp.mutable_schedule();
    schedule->set_virtual_trainers(V);
    schedule->set_micro_batch(queue_.micro_batch());
    for (int64_t records : queue_.task_records()) schedule->add_task_records(records);
    schedule->set_num_passes(queue_.num_passes());
  }
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
    if (std::optional<std::string> amended = membership_.NoteRestoredFromTrainer(req.index(), req.restored_from_trainer())) {
      Log("loss, amended: " + *amended);
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
  Unsynced<proto::HeartbeatResponse> done = HeartbeatUnsynced(req);
  PL_RETURN_IF_ERROR(Durable(done.ticket));
  return std::move(done.result);
}

Master::Unsynced<proto::HeartbeatResponse> Master::HeartbeatUnsynced(const proto::HeartbeatRequest& req) {
  proto::MasterEvent event;
  *event.mutable_heartbeat() = req;
  return RunUnsynced<proto::HeartbeatResponse>(std::move(event), [&] { return HeartbeatLocked(req); });
}

StatusOr<proto::HeartbeatResponse> Master::HeartbeatLocked(const proto::HeartbeatRequest& req) {
  ExpireLocked();
  proto::HeartbeatResponse resp;
  resp.set_known(membership_.Heartbeat(req.trainer_id()));
  if (resp.known() && queue_.virtual_trainers() > 0) {
    queue_.RenewLeases(req.trainer_id());
  } else if (resp.known() && req.task_id() != 0) {
    queue_.RenewLease(req.trainer_id(), req.task_id());
  }
  resp.set_live_trainers(membership_.num_live_trainers());
  if (resp.known()) resp.set_lease_slots(LeaseSlotsLocked(req.trainer_id()));
  return resp;
}

int32_t Master::LeaseSlotsLocked(int64_t trainer_id) const {
  const int32_t V = queue_.virtual_trainers();
  if (V == 0) return 1;
  // The V tasks dealt out over the live trainers in id order, the first V mod P taking
  // one more: the same answer for every trainer that asks with the same membership.
  std::vector<int64_t> ids;
  for (const proto::TrainerInfo& t : membership_.live_trainers()) ids.push_back(t.id());
  std::sort(ids.begin(), ids.end());
  const auto it = std::find(ids.begin(), ids.end(), trainer_id);
  if (it == ids.end()) return 0;
  const int64_t rank = it - ids.begin(), P = static_cast<int64_t>(ids.size());
  return static_cast<int32_t>(V / P + (rank < V % P ? 1 : 0));
}

StatusOr<proto::GetTaskResponse> Master::GetTask(const proto::GetTaskRequest& req) {
  Unsynced<proto::GetTaskResponse> done = GetTaskUnsynced(req);
  PL_RETURN_IF_ERROR(Durable(done.ticket));
  return std::move(done.result);
}

Master::Unsynced<proto::GetTaskResponse> Master::GetTaskUnsynced(const proto::GetTaskRequest& req) {
  proto::MasterEvent event;
  *event.mutable_get_task() = req;
  return RunUnsynced<proto::GetTaskResponse>(std::move(event), [&] { return GetTaskLocked(req); });
}

StatusOr<proto::GetTaskResponse> Master::GetTaskLocked(const proto::GetTaskRequest& req) {
  ExpireLocked();
  proto::GetTaskResponse resp;
  resp.set_num_passes(queue_.num_passes());
  const int32_t V = queue_.virtual_trainers();
  if (req.slot() < 0 || (V == 0 && req.slot() != 0) || (V > 0 && req.slot() >= V)) {
    return absl::InvalidArgumentError(absl::StrCat("get task: trainer ", req.trainer_id(), " asks with lease slot ",
                                                   req.slot(), "; this job has slots 0..", std::max(V, 1) - 1));
  }
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
  resp.set_lease_slots(LeaseSlotsLocked(req.trainer_id()));
  // A slot beyond the caller's share leases nothing new (one it still holds is given
  // again, so that a retry learns what it must give back).
  const bool beyond_share =
      V > 0 && req.slot() >= resp.lease_slots() && queue_.TaskInSlot(req.trainer_id(), req.slot()) == 0;
  TaskQueue::Lease lease;
  if (!beyond_share) lease = queue_.GetTask(req.trainer_id(), req.slot());
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
  Unsynced<proto::TaskFinishedResponse> done = TaskFinishedUnsynced(req);
  PL_RETURN_IF_ERROR(Durable(done.ticket));
  return std::move(done.result);
}

Master::Unsynced<proto::TaskFinishedResponse> Master::TaskFinishedUnsynced(const proto::TaskFinishedRequest& req) {
  proto::MasterEvent event;
  *event.mutable_task_finished() = req;
  return RunUnsynced<proto::TaskFinishedResponse>(std::move(event), [&] { return TaskFinishedLocked(req); });
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
  if (req.returned() && req.resumable() && queue_.virtual_trainers() > 0) {
    // Whoever leases it next goes on from the job's step: nothing is trained twice.
    ++tasks_returned_;
    Log(absl::StrCat("trainer ", req.trainer_id(), " handed task ", req.task_id(), " on (",
                     req.reason().empty() ? "returned" : req.reason(), "): it goes on from the job's step"));
  } else if (req.returned()) {
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

StatusOr<proto::TrainerExitedResponse> Master::TrainerExited(const proto::TrainerExitedRequest& req) {
  proto::MasterEvent event;
  proto::LeaveRequest& leave = *event.mutable_leave();
  leave.set_trainer_id(req.trainer_id());
  leave.set_exited(req.why().empty() ? "its process exited" : req.why());
  const proto::LeaveRequest as_leave = leave;
  return Run<proto::TrainerExitedResponse>(std::move(event), [&]() -> StatusOr<proto::TrainerExitedResponse> {
    PL_ASSIGN_OR_RETURN(proto::LeaveResponse left, LeaveLocked(as_leave));
    proto::TrainerExitedResponse resp;
    resp.set_known(left.known());
    return resp;
  });
}

StatusOr<proto::LeaveResponse> Master::LeaveLocked(const proto::LeaveRequest& req) {
  ExpireLocked();
  bool known = membership_.Leave(req.trainer_id());
  int n = queue_.ReleaseTrainer(req.trainer_id(), /*count_failure=*/false);
  if (known) {
    const std::string back = n > 0 ? absl::StrCat("; ", n, " task(s) back to todo") : "";
    Log(req.exited().empty() ? absl::StrCat("trainer ", req.trainer_id(), " left", back)
                             : absl::StrCat("trainer ", req.trainer_id(), " dropped: its process exited (",
                                            req.exited(), ")", back));
  }
  proto::LeaveResponse resp;
  resp.set_known(known);
  return resp;
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
