#include "master/master_service.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/request_limits.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {
namespace {

int64_t WallClockMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StatusOr<std::unique_ptr<Master>> Master::Open(const MasterOptions& given, StateStore* store, ChunkSource chunks) {
  if (store == nullptr) return absl::InvalidArgumentError("master: no state store");
  MasterOptions options = given;
  if (!options.now_ms) options.now_ms = WallClockMs;
  if (!options.log) options.log = log::Info;
  TaskQueueOptions qopts = options.queue;
  qopts.lease_ms = options.lease_ms;
  auto log = options.log;

  StatusOr<std::string> stored = store->Get(kMasterStateKey);
  if (stored.ok()) {
    proto::MasterState state;
    if (!state.ParseFromString(*stored)) {
      return absl::DataLossError(absl::StrCat("master state '", kMasterStateKey, "' is not a MasterState message"));
    }
    if (state.format_version() != kMasterStateFormatVersion) {
      return absl::DataLossError(absl::StrCat("master state '", kMasterStateKey, "' has format version ",
                                              state.format_version(), ", this master reads ",
                                              kMasterStateFormatVersion));
    }
    PL_ASSIGN_OR_RETURN(TaskQueue queue, TaskQueue::Deserialize(state.queue(), options.now_ms, log));
    PL_ASSIGN_OR_RETURN(Membership membership, Membership::Deserialize(state.membership(), options.now_ms));
    const TaskQueueOptions& kept = queue.options();
    if (kept.num_passes != qopts.num_passes || kept.chunks_per_task != qopts.chunks_per_task ||
        kept.max_failures != qopts.max_failures || kept.seed != qopts.seed || kept.lease_ms != qopts.lease_ms ||
        membership.num_pservers() != options.num_pservers) {
      log(absl::StrCat("the resumed job keeps its own settings: passes ", kept.num_passes, ", chunks_per_task ",
                       kept.chunks_per_task, ", max_failures ", kept.max_failures, ", seed ", kept.seed, ", lease_ms ",
                       kept.lease_ms, ", num_pservers ", membership.num_pservers(), " (the flags that differ are ignored)"));
    }
    // Trainers could not renew their leases while no master ran: give every lease a
    // full term from now, so a restart costs no task and drops no live trainer.
    const int64_t grace_until = options.now_ms() + membership.lease_ms();
    membership.ExtendLeases(grace_until);
    queue.ExtendLeases(grace_until);
    std::unique_ptr<Master> m(new Master(options, store, std::move(queue), std::move(membership)));
    m->resumed_ = true;
    m->stored_bytes_ = *stored;
    log(absl::StrCat("resumed: ", m->Summary(), ", next trainer id ", m->membership_.next_trainer_id()));
    return m;
  }
  if (!absl::IsNotFound(stored.status())) return Annotate(stored.status(), "master: cannot read its state");

  if (!chunks) return absl::InvalidArgumentError("master: a new job needs a chunk source");
  PL_ASSIGN_OR_RETURN(std::vector<ChunkInfo> chunk_list, chunks());
  PL_ASSIGN_OR_RETURN(TaskQueue queue, TaskQueue::Create(chunk_list, qopts, options.now_ms, log));
  MembershipOptions mopts;
  mopts.lease_ms = options.lease_ms;
  mopts.num_pservers = options.num_pservers;
  mopts.pserver_lease_ms = options.pserver_lease_ms;
  PL_ASSIGN_OR_RETURN(Membership membership, Membership::Create(mopts, options.now_ms));
  std::unique_ptr<Master> m(new Master(options, store, std::move(queue), std::move(membership)));
  {
    std::lock_guard<std::mutex> lock(m->mu_);
    PL_RETURN_IF_ERROR(Annotate(m->CommitLocked(), "master: cannot store the new job"));
  }
  log(absl::StrCat("new job: ", chunk_list.size(), " chunks in ", m->queue_.num_tasks(), " tasks, ", qopts.num_passes,
                   " passes, ", options.num_pservers, " pservers"));
  return m;
}

Master::Master(const MasterOptions& options, StateStore* store, TaskQueue queue, Membership membership)
    : options_(options), store_(store), queue_(std::move(queue)), membership_(std::move(membership)) {
  if (options_.expire_interval_ms > 0) expiry_thread_ = std::thread([this] { ExpiryLoop(); });
}

Master::~Master() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (expiry_thread_.joinable()) expiry_thread_.join();
}

void Master::Log(const std::string& line) const { options_.log(line); }

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
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  return CommitLocked();
}

void Master::BeginStopping() {
  std::lock_guard<std::mutex> l(mu_);
  stopping_ = true;
}

void Master::ExpireLocked() {
  if (stopping_) return;
  // Leases are judged every expire_interval_ms. A much longer gap means the master
  // itself did not run (stopped, starved, its VM paused): nobody could renew a lease
  // with it meanwhile, so each gets a full term from now instead of every pserver and
  // trainer being dropped at once. Safe for fencing: a primary acts only within its
  // lease from its last answered heartbeat, so a later deadline here never lets two act.
  const auto now = std::chrono::steady_clock::now();
  const int64_t gap_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_expiry_).count();
  last_expiry_ = now;
  const int64_t stalled_ms = std::max<int64_t>(4 * options_.expire_interval_ms, options_.pserver_lease_ms / 2);
  if (options_.expire_interval_ms > 0 && gap_ms > stalled_ms) {
    const int64_t now_ms = options_.now_ms();
    membership_.ExtendLeases(now_ms + membership_.lease_ms(), now_ms + options_.pserver_lease_ms);
    queue_.ExtendLeases(now_ms + membership_.lease_ms());
    Log(absl::StrCat("the master did not run for ", gap_ms, " ms (stopped or starved): every lease gets a full "
                     "term from now rather than expiring"));
  }
  for (int64_t id : membership_.ExpireTrainers()) {
    int n = queue_.ReleaseTrainer(id, /*count_failure=*/true);
    Log(absl::StrCat("trainer ", id, " dropped: its lease expired", n > 0 ? absl::StrCat("; ", n, " task(s) back to todo") : ""));
  }
  int expired = queue_.ExpireLeases();
  if (expired > 0) Log(absl::StrCat(expired, " task lease(s) expired"));
  membership_.ExpireReplicas([this](const std::string& line) { Log(line); });
}

proto::MasterState Master::SnapshotLocked() const {
  proto::MasterState s;
  s.set_format_version(kMasterStateFormatVersion);
  *s.mutable_queue() = queue_.Serialize();
  *s.mutable_membership() = membership_.Serialize();
  return s;
}

Status Master::CommitLocked() {
  std::string bytes;
  if (!SnapshotLocked().SerializeToString(&bytes)) return absl::InternalError("master: cannot serialise its state");
  if (bytes == stored_bytes_) return absl::OkStatus();
  Status st = store_->Put(kMasterStateKey, bytes);
  if (st.ok()) {
    stored_bytes_ = std::move(bytes);
    return st;
  }
  // Undo the change so memory never runs ahead of the store.
  proto::MasterState last;
  if (!stored_bytes_.empty() && last.ParseFromString(stored_bytes_)) {
    auto q = TaskQueue::Deserialize(last.queue(), options_.now_ms, options_.log);
    auto m = Membership::Deserialize(last.membership(), options_.now_ms);
    if (q.ok() && m.ok()) {
      queue_ = std::move(q).value();
      membership_ = std::move(m).value();
    }
  }
  return absl::UnavailableError(absl::StrCat("master cannot store its state, the change was not made: ", st.message()));
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
  // The name goes into the master's state, which every change rewrites: a long one
  // would make each call slow for everyone.
  if (req.name().size() > kMaxTrainerNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("trainer name of ", req.name().size(), " bytes: at most ",
                                                   kMaxTrainerNameBytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  std::string token = rpc::NewTrainerToken();
  int64_t id = membership_.RegisterTrainer(req.name(), rpc::TokenDigest(token));
  PL_RETURN_IF_ERROR(CommitLocked());
  Log(absl::StrCat("trainer ", id, " (", req.name(), ") registered"));
  proto::RegisterTrainerResponse resp;
  resp.set_trainer_id(id);
  resp.set_token(std::move(token));
  resp.set_lease_ms(membership_.lease_ms());
  for (const proto::PserverInfo& p : membership_.pservers()) *resp.add_pservers() = p;
  resp.set_num_pservers(membership_.num_pservers());
  return resp;
}

StatusOr<proto::RegisterPserverResponse> Master::RegisterPserver(const proto::RegisterPserverRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
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
    PL_RETURN_IF_ERROR(CommitLocked());
    log_new_losses(/*replica=*/true);
    resp.set_num_pservers(membership_.num_pservers());
    return resp;
  }
  const int64_t before = membership_.pserver_generation(req.index());
  PL_ASSIGN_OR_RETURN(int64_t generation,
                      membership_.RegisterPserver(req.index(), req.address(), PserverReport::From(req),
                                                  /*job_trained=*/queue_.chunks_trained() > 0));
  PL_RETURN_IF_ERROR(CommitLocked());
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
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  proto::ReplicaExitedResponse resp;
  resp.set_known(membership_.ReplicaExited(req.index(), req.replica_id(),
                                           absl::StrCat("pl-launch: ", req.why().empty() ? "exited" : req.why()),
                                           [this](const std::string& line) { Log(line); }));
  PL_RETURN_IF_ERROR(CommitLocked());
  return resp;
}

StatusOr<proto::HeartbeatResponse> Master::Heartbeat(const proto::HeartbeatRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  proto::HeartbeatResponse resp;
  resp.set_known(membership_.Heartbeat(req.trainer_id()));
  if (resp.known() && req.task_id() != 0) queue_.RenewLease(req.trainer_id(), req.task_id());
  PL_RETURN_IF_ERROR(CommitLocked());
  return resp;
}

StatusOr<proto::GetTaskResponse> Master::GetTask(const proto::GetTaskRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  proto::GetTaskResponse resp;
  resp.set_num_passes(queue_.num_passes());
  if (queue_.job_done()) {  // also for unknown trainers: they only need to stop
    resp.set_result(proto::GetTaskResponse::JOB_DONE);
    resp.set_pass(queue_.pass());
    PL_RETURN_IF_ERROR(CommitLocked());
    return resp;
  }
  if (!membership_.Heartbeat(req.trainer_id())) {
    PL_RETURN_IF_ERROR(CommitLocked());
    return absl::NotFoundError(absl::StrCat("get task: trainer ", req.trainer_id(),
                                            " is not registered (its lease expired or the id is wrong); register again"));
  }
  TaskQueue::Lease lease = queue_.GetTask(req.trainer_id());
  PL_RETURN_IF_ERROR(CommitLocked());
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
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  membership_.Heartbeat(req.trainer_id());
  const int32_t pass_before = queue_.pass();
  Status st = queue_.TaskFinished(req.trainer_id(), req.task_id(), req.pass(), req.num_samples());
  PL_RETURN_IF_ERROR(CommitLocked());
  PL_RETURN_IF_ERROR(st);
  if (queue_.pass() != pass_before || queue_.job_done()) Log(SummaryLocked());
  return proto::TaskFinishedResponse();
}

StatusOr<proto::TaskFailedResponse> Master::TaskFailed(const proto::TaskFailedRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  membership_.Heartbeat(req.trainer_id());
  Status st = queue_.TaskFailed(req.trainer_id(), req.task_id(), req.pass(), req.returned(), req.reason());
  PL_RETURN_IF_ERROR(CommitLocked());
  PL_RETURN_IF_ERROR(st);
  if (req.returned()) {
    Log(absl::StrCat("trainer ", req.trainer_id(), " returned task ", req.task_id()));
  } else {
    Log(absl::StrCat("trainer ", req.trainer_id(), " failed task ", req.task_id(), ": ", req.reason()));
  }
  return proto::TaskFailedResponse();
}

StatusOr<proto::LeaveResponse> Master::Leave(const proto::LeaveRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  bool known = membership_.Leave(req.trainer_id());
  int n = queue_.ReleaseTrainer(req.trainer_id(), /*count_failure=*/false);
  PL_RETURN_IF_ERROR(CommitLocked());
  if (known) {
    Log(absl::StrCat("trainer ", req.trainer_id(), " left", n > 0 ? absl::StrCat("; ", n, " task(s) back to todo") : ""));
  }
  return proto::LeaveResponse();
}

StatusOr<proto::MembershipResponse> Master::GetMembership(const proto::MembershipRequest&) {
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  PL_RETURN_IF_ERROR(CommitLocked());
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
  std::lock_guard<std::mutex> lock(mu_);
  ExpireLocked();
  PL_RETURN_IF_ERROR(CommitLocked());
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
  return resp;
}

// ---- gRPC face ----

namespace {

template <typename Resp>
grpc::Status Reply(StatusOr<Resp> result, Resp* out) {
  if (!result.ok()) return rpc::ToGrpc(result.status());
  *out = std::move(result).value();
  return grpc::Status::OK;
}

}  // namespace

Status Master::CheckTrainerToken(int64_t trainer_id, absl::string_view token) const {
  std::lock_guard<std::mutex> lock(mu_);
  return membership_.CheckToken(trainer_id, token);
}

// A trainer's call about itself: from a trainer's certificate, carrying the token that
// trainer_id's registration returned.
grpc::Status MasterService::AuthorizeTrainerCall(const grpc::ServerContext* ctx, int64_t trainer_id,
                                                 absl::string_view method) const {
  grpc::Status s = rpc::Authorize(ctx, {rpc::kTrainers}, method);
  if (!s.ok()) return s;
  return rpc::ToGrpc(master_->CheckTrainerToken(trainer_id, rpc::CallerToken(ctx)));
}

// `authorized`: who may make the call (rpc/caller.h), an expression of ctx and req.
#define PL_MASTER_HANDLER(Name, Call, authorized)                                            \
  grpc::Status MasterService::Name(grpc::ServerContext* ctx, const proto::Name##Request* req, \
                                   proto::Name##Response* resp) {                          \
    grpc::Status ok = rpc::CheckProtocol(ctx);                                              \
    if (ok.ok()) ok = (authorized);                                                         \
    if (ok.ok()) ok = rpc::ToGrpc(rpc::CheckStringLengths(*req));                           \
    if (!ok.ok()) return rpc::LogIfRefused(ctx, std::move(ok));                                       \
    return Reply(master_->Call(*req), resp);                                                \
  }

PL_MASTER_HANDLER(RegisterTrainer, RegisterTrainer, rpc::Authorize(ctx, {rpc::kTrainers}, "RegisterTrainer"))
PL_MASTER_HANDLER(RegisterPserver, RegisterPserver,
                  rpc::Authorize(ctx, {rpc::PserverOf(req->index())}, absl::StrCat("RegisterPserver ", req->index())))
PL_MASTER_HANDLER(Heartbeat, Heartbeat, AuthorizeTrainerCall(ctx, req->trainer_id(), "Heartbeat"))
PL_MASTER_HANDLER(GetTask, GetTask, AuthorizeTrainerCall(ctx, req->trainer_id(), "GetTask"))
PL_MASTER_HANDLER(TaskFinished, TaskFinished, AuthorizeTrainerCall(ctx, req->trainer_id(), "TaskFinished"))
PL_MASTER_HANDLER(TaskFailed, TaskFailed, AuthorizeTrainerCall(ctx, req->trainer_id(), "TaskFailed"))
PL_MASTER_HANDLER(Leave, Leave, AuthorizeTrainerCall(ctx, req->trainer_id(), "Leave"))
PL_MASTER_HANDLER(Membership, GetMembership, rpc::AuthorizeJobProcess(ctx, "Membership"))
PL_MASTER_HANDLER(JobStatus, JobStatus, rpc::AuthorizeJobProcess(ctx, "JobStatus"))
// Only the supervisor that reaped the process knows it is gone.
PL_MASTER_HANDLER(ReplicaExited, ReplicaExited, rpc::Authorize(ctx, {rpc::kLaunchers}, "ReplicaExited"))

#undef PL_MASTER_HANDLER

}  // namespace pl
