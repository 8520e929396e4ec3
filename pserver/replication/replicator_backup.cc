// Replicator, backup side: holding the primary's stream in order (CheckEntry, OnEntry)
// and applying it on the StreamApplier's thread (ApplyFollowed); whether a joiner takes
// a snapshot (its receipt: snapshot_receiver.h). See replicator.h.
#include "pserver/replication/replicator.h"

#include <cstring>
#include <memory>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/log.h"

namespace pl::pserver {
namespace {

Status RefuseEpoch(int index, int64_t epoch, proto::ReplicaInfo::Role role, int64_t own_epoch) {
  return absl::FailedPreconditionError(absl::StrCat("shard ", index, ": a snapshot of epoch ", epoch, " reached a ",
                                                    ReplicaRoleName(role), " replica of epoch ", own_epoch));
}

}  // namespace

// ------------------------------------------------------------------ backup

Status Replicator::CheckEntry(int64_t epoch, int64_t position, bool* duplicate) {
  absl::MutexLock l(&mu_);
  *duplicate = false;
  if (fatal_) return absl::FailedPreconditionError(*fatal_);
  if (role_ == proto::ReplicaInfo::PRIMARY) {
    return absl::FailedPreconditionError(absl::StrCat("shard ", options_.index, ": this replica is the primary of epoch ",
                                                      epoch_, "; refusing a stream of epoch ", epoch));
  }
  if (epoch < epoch_) {
    return absl::FailedPreconditionError(absl::StrCat("shard ", options_.index, ": a stream of epoch ", epoch,
                                                      " is older than epoch ", epoch_, ": its sender is no longer primary"));
  }
  epoch_ = epoch;
  if (!snapshots_->installed() && role_ != proto::ReplicaInfo::BACKUP) {
    return absl::FailedPreconditionError(absl::StrCat("shard ", options_.index, ": joining, no snapshot installed yet"));
  }
  if (position <= position_) {
    *duplicate = true;
    return absl::OkStatus();
  }
  if (position != position_ + 1) {
    return absl::OutOfRangeError(absl::StrCat("shard ", options_.index, ": stream position ", position,
                                              " after ", position_, ": an entry is missing"));
  }
  return absl::OkStatus();
}

StatusOr<int64_t> Replicator::OnEntry(int64_t epoch, StreamApplier::Update update) {
  absl::MutexLock follow(&follow_mu_);
  bool duplicate = false;
  const int64_t position = update.position;
  PL_RETURN_IF_ERROR(CheckEntry(epoch, position, &duplicate));
  ParameterShard* shard = nullptr;
  {
    absl::MutexLock l(&mu_);
    shard = AttachedShardLocked();
  }
  if (shard == nullptr) return absl::UnavailableError("replica starting");
  if (duplicate) return shard->version();
  if (update.push && snapshots_->joined_trained() && options_.faults.slow_joiner > absl::ZeroDuration()) {
    absl::SleepFor(options_.faults.slow_joiner);
  }
  // Held in order is acknowledged: the applier's thread applies it while the next
  // update travels (stream_applier.h).
  applier_->Enqueue(std::move(update));
  absl::MutexLock l(&mu_);
  position_ = position;
  return shard->version();
}

Status Replicator::ApplyFollowed(StreamApplier::Update& update) {
  if (options_.faults.slow_apply > absl::ZeroDuration()) absl::SleepFor(options_.faults.slow_apply);
  ParameterShard* shard = nullptr;
  {
    absl::MutexLock l(&mu_);
    shard = AttachedShardLocked();
  }
  if (update.init) return shard->FollowInit(*update.init);
  if (update.eviction) return shard->FollowEviction(update.eviction->rows(), update.eviction->to_disk());
  if (update.step_end > 0) {
    shard->FollowStepComplete(update.step_end);
    return absl::OkStatus();
  }
  return shard->FollowPush(std::move(*update.push)).status();
}

// ------------------------------------------------------------------ joiner

StatusOr<ParameterShard*> Replicator::AcceptSnapshot(const proto::SnapshotChunk& chunk) {
  absl::MutexLock l(&mu_);
  if (chunk.replica_id() != replica_id_) {
    return absl::InvalidArgumentError(absl::StrCat("a snapshot for replica ", absl::Hex(chunk.replica_id()),
                                                    " reached replica ", absl::Hex(replica_id_)));
  }
  if (role_ != proto::ReplicaInfo::JOINING || chunk.replica_epoch() < epoch_) {
    return RefuseEpoch(options_.index, chunk.replica_epoch(), role_, epoch_);
  }
  epoch_ = chunk.replica_epoch();
  ParameterShard* shard = AttachedShardLocked();
  if (shard == nullptr) return absl::UnavailableError("replica starting");
  return shard;
}

Status Replicator::CheckSnapshotOffer(const proto::SnapshotChunk& chunk) const {
  absl::MutexLock l(&mu_);
  if (role_ != proto::ReplicaInfo::JOINING || chunk.replica_epoch() < epoch_) {
    return RefuseEpoch(options_.index, chunk.replica_epoch(), role_, epoch_);
  }
  return absl::OkStatus();
}

}  // namespace pl::pserver
