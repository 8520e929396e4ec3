#include "pserver/store/shard.h"

#include <algorithm>
#include <utility>

#include "paddle_like/core/log.h"
#include "paddle_like/dist/step_mask.h"
#include "paddle_like/rpc/request_limits.h"

namespace pl::pserver {

ParameterShard::ParameterShard(int index, int num_shards)
    : store_(index, num_shards),
      clock_(index),
      barrier_(&clock_),
      applier_(index, &clock_, [this](const PendingPush& push) {
        store_.Apply(push.resolved);
        CountApplied(push);
      }) {}

ParameterShard::~ParameterShard() { Shutdown(); }

void ParameterShard::Shutdown() {
  clock_.Shutdown();
  applier_.Close();
}

StatusOr<proto::InitResponse> ParameterShard::Init(const proto::InitRequest& request) {
  if (request.restore_size() > 0 || request.restore_ticket() != 0) return Restore(request);
  bool created = false;
  if (hook_ != nullptr) {
    int64_t position = 0;
    PL_RETURN_IF_ERROR(hook_->AwaitPrimary());
    {
      absl::MutexLock order(&order_mu_);
      PL_RETURN_IF_ERROR(hook_->CheckPrimary());
      PL_ASSIGN_OR_RETURN(created, store_.Init(request));
      PL_ASSIGN_OR_RETURN(position, hook_->ForwardInit(request));
    }
    PL_RETURN_IF_ERROR(hook_->WaitAcked(position, absl::Now() + absl::Seconds(30)));
  } else {
    PL_ASSIGN_OR_RETURN(created, store_.Init(request));
  }
  proto::InitResponse response;
  response.set_created(created);
  if (created) restore_ticket_.Open(absl::Now());
  // A trainer whose copy learned more than this shard ever applied: a copy from the
  // shard's life before it was made again from the seed. (A copy pulled from this shard,
  // even by a trainer that joined a moment ago, is at most its version: no ticket.)
  if (request.learned_version() > clock_.version()) {
    response.set_restore_ticket(restore_ticket_.Issue(absl::Now()));
  }
  response.set_version(clock_.version());
  return response;
}

StatusOr<proto::InitResponse> ParameterShard::Restore(const proto::InitRequest& request) {
  if (request.restore_size() == 0) {
    return absl::InvalidArgumentError("an Init with a restore ticket carries no values to restore");
  }
  PL_RETURN_IF_ERROR(store_.CheckInitialized());
  PL_RETURN_IF_ERROR(restore_ticket_.Redeem(request.restore_ticket(), absl::Now()));
  if (hook_ != nullptr) {
    // A replicated primary: the backups take the same values at the same point.
    int64_t position = 0;
    PL_RETURN_IF_ERROR(hook_->AwaitPrimary());
    {
      absl::MutexLock order(&order_mu_);
      PL_RETURN_IF_ERROR(hook_->CheckPrimary());
      PL_RETURN_IF_ERROR(store_.RestoreDense(request.restore(), request.learned_version()).status());
      PL_ASSIGN_OR_RETURN(position, hook_->ForwardInit(request));
    }
    PL_RETURN_IF_ERROR(hook_->WaitAcked(position, absl::Now() + absl::Seconds(30)));
  } else {
    absl::MutexLock order(&order_mu_);  // a snapshot sees the restore whole or not at all
    PL_RETURN_IF_ERROR(store_.RestoreDense(request.restore(), request.learned_version()).status());
  }
  restored_from_trainer_.store(std::max<int64_t>(1, request.learned_version()));
  proto::InitResponse response;
  response.set_restored(true);
  response.set_version(clock_.version());
  return response;
}

ShardCounters ParameterShard::Counters() const {
  ShardCounters c;
  c.version = clock_.version();
  c.dense_elements = store_.dense_elements();
  c.sparse_rows = store_.tables().rows();
  c.pushes_applied = pushes_applied_.load();
  c.pushes_rejected = pushes_rejected_.load();
  c.pushes_refused_norm = norm_guard_.refused();
  c.pulls = pulls_.load();
  c.sparse_rows_pulled = sparse_rows_pulled_.load();
  c.sparse_rows_pushed = sparse_rows_pushed_.load();
  return c;
}

// ---------------------------------------------------------------------------- Pull

Status ParameterShard::Pull(const proto::PullRequest& request, absl::Time deadline, PullFrame* frame,
                            const DenseDestination& dense_out) {
  if (hook_ != nullptr) PL_RETURN_IF_ERROR(hook_->AwaitPrimary());  // backups serve no reads
  if (request.min_version() > 0) PL_RETURN_IF_ERROR(clock_.WaitFor(request.min_version(), deadline));
  // Sync: the values and the version of one finished step.
  const SyncBarrier::StepHold hold = store_.sync() ? barrier_.HoldForRead() : SyncBarrier::StepHold();
  bool previous = false;
  if (request.exact_version()) {
    const int64_t now = clock_.version();  // stable while the hold lives
    if (!store_.sync()) return absl::FailedPreconditionError("a pull of an exact version is for sync mode only");
    if (now == request.min_version() + 1 && previous_of_.load() == request.min_version()) {
      previous = true;
    } else if (now != request.min_version()) {
      return absl::FailedPreconditionError(absl::StrCat("a pull of version ", request.min_version(),
                                                        " exactly: this shard is at version ", now,
                                                        " and keeps only the values its last step replaced"));
    }
  }
  PL_RETURN_IF_ERROR(store_.Read(request, frame, dense_out, previous));
  int64_t rows = 0;
  for (const proto::SparseRowsMsg& msg : request.sparse()) rows += msg.ids_size();
  sparse_rows_pulled_ += rows;
  ++pulls_;
  frame->header().set_version(previous ? request.min_version() : clock_.version());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------- Push

StatusOr<int64_t> ParameterShard::Push(PushFrame frame, absl::Time deadline, const DenseDestination& write_back) {
  if (hook_ != nullptr) PL_RETURN_IF_ERROR(hook_->AwaitPrimary());
  PL_RETURN_IF_ERROR(store_.CheckInitialized());
  const bool sync = store_.sync();  // fixed once initialised
  // The push owns its frame: a queued one outlives this call, and so does a virtual
  // trainer's micro-batch (summed at its step's end), whose payloads then must not lie
  // where the next push from its trainer lands (a region, or its shadow).
  auto push = std::make_unique<PendingPush>(std::move(frame));
  if (sync && !push->frame.header().step_expects().empty()) push->frame.OwnPayloads();
  // 1. Validate the whole push: a rejected one changes nothing.
  if (Status valid = Validate(push.get(), sync, write_back); !valid.ok()) {
    ++pushes_rejected_;
    return valid;
  }
  // 2. Sum it into its step (sync), queue it (deferred) or apply it; 3. acknowledge it
  // with the version. A replicated primary hands it to its backups first, in the
  // order it applies it, and acknowledges it once they have it.
  if (sync) return AddToStep(std::move(push), deadline);
  if (hook_ != nullptr) return PushReplicated(*push, deadline);
  const proto::PushRequest& header = push->frame.header();
  {
    absl::MutexLock l(&ledger_mu_);
    if (ledger_.Applied(header.client_id(), header.push_id())) return clock_.version();  // a retry
    ledger_.Record(header.client_id(), header.push_id());  // a queued push is applied, so it counts now
  }
  if (header.defer_apply() && !write_back) return applier_.Enqueue(std::move(push), deadline);
  return ApplyNow(*push);
}

Status ParameterShard::Validate(PendingPush* push, bool sync, const DenseDestination& write_back) {
  // Values in a trainer's shared region could change after the check: the check, the
  // update and the stream to the backups all read one private copy.
  push->frame.CopySharedPayloads();
  // Names are looked up, copied and quoted in errors: a long one stops here.
  PL_RETURN_IF_ERROR(rpc::CheckStringLengths(push->frame.header()));
  for (size_t i = 0; i < push->frame.dense().size(); ++i) {
    PL_RETURN_IF_ERROR(rpc::CheckNameLength(absl::StrCat("dense[", i, "].param"), push->frame.dense()[i].param));
  }
  PL_RETURN_IF_ERROR(store_.Resolve(push->frame, &push->resolved));
  if (Status bounded = norm_guard_.Admit(push->resolved.norms); !bounded.ok()) {
    bounded = Annotate(bounded, absl::StrCat("trainer ", push->frame.header().trainer_id()));
    // Reported: the first refusal, then every 100th (a trainer that keeps sending them
    // must not flood the log).
    if (const int64_t n = norm_guard_.refused(); n == 1 || n % 100 == 0) {
      log::Warning(absl::StrCat(bounded.message(), " (", n, " pushes refused so far)"));
    }
    return bounded;
  }
  if (!write_back) return absl::OkStatus();
  if (sync) return absl::FailedPreconditionError("a push that writes back its result is for async mode only");
  for (size_t i = 0; i < push->resolved.dense.size(); ++i) {
    ResolvedPush::Dense& d = push->resolved.dense[i];
    PL_ASSIGN_OR_RETURN(d.write_back, write_back(static_cast<int>(i), d.block->n));
  }
  return absl::OkStatus();
}

int64_t ParameterShard::ApplyNow(const PendingPush& push) {
  store_.Apply(push.resolved);
  CountApplied(push);
  return clock_.Advance();
}

void ParameterShard::CountApplied(const PendingPush& push) {
  ++pushes_applied_;
  sparse_rows_pushed_ += push.resolved.rows;
}

StatusOr<int64_t> ParameterShard::AddToStep(std::unique_ptr<PendingPush> push, absl::Time deadline) {
  const proto::PushRequest& request = push->frame.header();
  // A virtual trainer's micro-batch: admitted by its virtual trainer, against the step's mask.
  const bool micro_batch = !request.step_expects().empty();
  if (micro_batch && (request.step_expects().size() > kMaxVirtualTrainers / 8 ||
                      !StepMaskHas(request.step_expects(), request.virtual_trainer()))) {
    ++pushes_rejected_;
    return absl::InvalidArgumentError(absl::StrCat("a push of virtual trainer ", request.virtual_trainer(),
                                                   " with a step mask of ", request.step_expects().size(),
                                                   " bytes that leaves it out (or over ", kMaxVirtualTrainers / 8, ")"));
  }
  // A push for a later step waits for it (the trainer is ahead of the others).
  if (request.step() > clock_.version()) PL_RETURN_IF_ERROR(clock_.WaitFor(request.step(), deadline));
  // A replicated primary acknowledges once its backups have the push (or, for a
  // retry, everything forwarded so far, which includes the first copy).
  int64_t position = 0;
  {
    const SyncBarrier::Admission admission =
        micro_batch ? barrier_.Admit(request.virtual_trainer(), request.step(), &request.step_expects())
                    : barrier_.Admit(request.trainer_id(), request.step());
    switch (admission.kind) {
      case SyncBarrier::Admission::kStale:
        ++pushes_rejected_;  // its step finished without it
        return admission.version;
      case SyncBarrier::Admission::kRepeated:  // a retry (or another trainer's copy): counted once
        if (hook_ != nullptr) PL_RETURN_IF_ERROR(hook_->WaitAcked(hook_->last_position(), deadline));
        return admission.version;
      case SyncBarrier::Admission::kRefused:
        ++pushes_rejected_;
        return absl::FailedPreconditionError(admission.why);
      case SyncBarrier::Admission::kAdmitted:
        break;
    }
    CountApplied(*push);
    if (micro_batch) {
      // Forwarded as it comes (a backup stashes it too); summed at the step's end.
      if (hook_ != nullptr) {
        absl::MutexLock order(&order_mu_);
        PL_RETURN_IF_ERROR(hook_->CheckPrimary());
        PL_ASSIGN_OR_RETURN(position, hook_->ForwardPush(push->frame));
      }
      const int64_t v = request.virtual_trainer();
      stash_.Put(v, std::move(push));
    } else if (hook_ != nullptr) {
      PL_RETURN_IF_ERROR(AccumulateReplicated(*push, &position));
    } else {
      store_.Accumulate(push->resolved);
    }
  }  // the step may complete once the admission's hold is gone
  CompleteStepIfReady();
  if (hook_ != nullptr) PL_RETURN_IF_ERROR(hook_->WaitAcked(position, deadline));
  return clock_.version();
}

bool ParameterShard::AccumulateStash() {
  std::vector<std::unique_ptr<PendingPush>> pushes = stash_.TakeInOrder();
  for (const auto& push : pushes) {
    store_.Accumulate(push->resolved);
  }
  if (!pushes.empty()) previous_of_.store(clock_.version());
  return !pushes.empty();
}

void ParameterShard::CompleteStepIfReady() {
  barrier_.MaybeComplete([this](int contributors) { ApplyStep(contributors); });
}

void ParameterShard::SetLiveTrainers(const std::vector<int64_t>& trainer_ids) {
  barrier_.SetLive(trainer_ids);
  CompleteStepIfReady();
}

// ------------------------------------------------------------------ state in/out

Status ParameterShard::SaveState(const ByteWriter& write, ShardStore::Rows rows) const {
  // Sync: no step's update runs meanwhile, so the values are exactly those at the version.
  const SyncBarrier::StepHold hold = store_.sync() ? barrier_.HoldForRead() : SyncBarrier::StepHold();
  return WriteShardState(store_, clock_.version(), write, rows);
}

Status ParameterShard::ApplyStateDelta(const ByteReader& read) {
  PL_ASSIGN_OR_RETURN(const int64_t version, ApplyShardDelta(read, &store_));
  clock_.Set(version);
  return absl::OkStatus();
}

Status ParameterShard::LoadState(const ByteReader& read, const ScatterReader& scatter) {
  PL_ASSIGN_OR_RETURN(const int64_t version, ReadShardState(read, &store_, scatter));
  clock_.Set(version);
  return absl::OkStatus();
}

}  // namespace pl::pserver
