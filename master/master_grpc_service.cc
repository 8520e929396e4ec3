#include "master/master_grpc_service.h"

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/request_limits.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {

namespace {

template <typename Resp>
grpc::Status Reply(StatusOr<Resp> result, Resp* out) {
  if (!result.ok()) return rpc::ToGrpc(result.status());
  *out = std::move(result).value();
  return grpc::Status::OK;
}

}  // namespace

MasterService::MasterService(Master* master)
    : master_(master), replies_([master](int64_t ticket) { return master->Durable(ticket); }) {}

// A trainer's call about itself: from a trainer's certificate, carrying the token that
// trainer_id's registration returned.
grpc::Status MasterService::AuthorizeTrainerCall(const grpc::ServerContextBase* ctx, int64_t trainer_id,
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
PL_MASTER_HANDLER(TaskFailed, TaskFailed, AuthorizeTrainerCall(ctx, req->trainer_id(), "TaskFailed"))
PL_MASTER_HANDLER(Leave, Leave, AuthorizeTrainerCall(ctx, req->trainer_id(), "Leave"))
PL_MASTER_HANDLER(Membership, GetMembership, rpc::AuthorizeJobProcess(ctx, "Membership"))
PL_MASTER_HANDLER(JobStatus, JobStatus, rpc::AuthorizeJobProcess(ctx, "JobStatus"))
// Only the supervisor that reaped the process knows it is gone.
PL_MASTER_HANDLER(ReplicaExited, ReplicaExited, rpc::Authorize(ctx, {rpc::kLaunchers}, "ReplicaExited"))
// The same for a trainer: a trainer certificate cannot drop another trainer.
PL_MASTER_HANDLER(TrainerExited, TrainerExited, rpc::Authorize(ctx, {rpc::kLaunchers}, "TrainerExited"))
// Sizing the job is the operator's (pl-launch --control, pl-autoscale): a trainer
// certificate cannot shrink a job to nothing.
PL_MASTER_HANDLER(ScaleTrainers, ScaleTrainers, rpc::Authorize(ctx, {rpc::kLaunchers}, "ScaleTrainers"))

#undef PL_MASTER_HANDLER

template <typename Resp>
void MasterService::ReplyWhenDurable(grpc::ServerUnaryReactor* reactor, Master::Unsynced<Resp> done, Resp* out) {
  replies_.Add(done.ticket, [reactor, out, result = std::move(done.result)](const Status& stored) {
    if (!stored.ok()) {
      reactor->Finish(rpc::ToGrpc(stored));
    } else {
      reactor->Finish(Reply(result, out));
    }
  });
}

// The same checks as PL_MASTER_HANDLER's, then the call made at once and answered once
// it is stored.
#define PL_MASTER_DURABLE_HANDLER(Name)                                                                \
  grpc::ServerUnaryReactor* MasterService::Name(grpc::CallbackServerContext* ctx,                      \
                                                const proto::Name##Request* req, proto::Name##Response* resp) { \
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();                                         \
    grpc::Status ok = rpc::CheckProtocol(ctx);                                                         \
    if (ok.ok()) ok = AuthorizeTrainerCall(ctx, req->trainer_id(), #Name);                             \
    if (ok.ok()) ok = rpc::ToGrpc(rpc::CheckStringLengths(*req));                                      \
    if (!ok.ok()) {                                                                                    \
      reactor->Finish(rpc::LogIfRefused(ctx, std::move(ok)));                                          \
      return reactor;                                                                                  \
    }                                                                                                  \
    ReplyWhenDurable(reactor, master_->Name##Unsynced(*req), resp);                                    \
    return reactor;                                                                                    \
  }

PL_MASTER_DURABLE_HANDLER(Heartbeat)
PL_MASTER_DURABLE_HANDLER(GetTask)
PL_MASTER_DURABLE_HANDLER(TaskFinished)

#undef PL_MASTER_DURABLE_HANDLER

}  // namespace pl
