// Replicator, backup side: holding the primary's stream in order (CheckEntry, OnPush,
// OnInit), applying it on the StreamApplier's thread (ApplyFollowed), and a joiner's
// snapshot arriving in pieces (OnSnapshotChunk). See replicator.h.
#include "pserver/replicator.h"

#include <cstring>
#include <memory>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/log.h"

namespace pl::pserver {

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
  if (!snapshot_installed_ && role_ != proto::ReplicaInfo::BACKUP) {
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

StatusOr<int64_t> Replicator::OnPush(PushFrame frame) {
  absl::MutexLock follow(&follow_mu_);
  bool duplicate = false;
  const int64_t position = frame.header().replica_seq();
  PL_RETURN_IF_ERROR(CheckEntry(frame.header().replica_epoch(), position, &duplicate));
  ParameterShard* shard = nullptr;
  {
    absl::MutexLock l(&mu_);
    shard = shard_;
  }
  if (shard == nullptr) return absl::UnavailableError("replica starting");
  if (duplicate) return shard->version();
  // Held in order is acknowledged: the applier's thread applies it while the next
  // update travels (stream_applier.h).
  StreamApplier::Update update;
  update.position = position;
  update.push = std::make_unique<PushFrame>(std::move(frame));
  for (const DenseFramePayload& d : update.push->dense()) update.bytes += d.values.num_bytes();
  applier_->Enqueue(std::move(update));
  absl::MutexLock l(&mu_);
  position_ = position;
  return shard->version();
}

Status Replicator::ApplyFollowed(StreamApplier::Update& update) {
  ParameterShard* shard = nullptr;
  {
    absl::MutexLock l(&mu_);
    shard = shard_;
  }
  if (update.init) return shard->FollowInit(*update.init);
  if (update.push->header().has_evicted()) {
    return shard->FollowEviction(update.push->header().evicted(), update.push->header().evicted_to_disk());
  }
  if (const int c = update.push->header().complete_step_contributors(); c > 0) {
    shard->FollowStepComplete(c);
    return absl::OkStatus();
  }
  return shard->FollowPush(std::move(*update.push)).status();
}

Status Replicator::OnInit(const proto::InitRequest& request) {
  absl::MutexLock follow(&follow_mu_);
  bool duplicate = false;
  PL_RETURN_IF_ERROR(CheckEntry(request.replica_epoch(), request.replica_seq(), &duplicate));
  ParameterShard* shard = nullptr;
  {
    absl::MutexLock l(&mu_);
    shard = shard_;
  }
  if (shard == nullptr) return absl::UnavailableError("replica starting");
  if (duplicate) return absl::OkStatus();
  StreamApplier::Update update;
  update.position = request.replica_seq();
  update.init = std::make_unique<proto::InitRequest>(request);
  applier_->Enqueue(std::move(update));
  absl::MutexLock l(&mu_);
  position_ = request.replica_seq();
  return absl::OkStatus();
}

StatusOr<int64_t> Replicator::OnSnapshotChunk(const proto::SnapshotChunk& chunk) {
  absl::MutexLock follow(&follow_mu_);
  ParameterShard* shard = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (chunk.replica_id() != replica_id_) {
      return absl::InvalidArgumentError(absl::StrCat("a snapshot for replica ", absl::Hex(chunk.replica_id()),
                                                      " reached replica ", absl::Hex(replica_id_)));
    }
    if (role_ != proto::ReplicaInfo::JOINING || chunk.replica_epoch() < epoch_) {
      return absl::FailedPreconditionError(absl::StrCat("shard ", options_.index, ": a snapshot of epoch ",
                                                        chunk.replica_epoch(), " reached a ", ReplicaRoleName(role_),
                                                        " replica of epoch ", epoch_));
    }
    epoch_ = chunk.replica_epoch();
    shard = shard_;
  }
  if (shard == nullptr) return absl::UnavailableError("replica starting");
  if (snapshot_installed_) {
    SetFatal("a second snapshot arrived after one was installed; restart to join afresh");
    return absl::FailedPreconditionError("snapshot already installed");
  }
  // Pieces come several at a time, in any order: each lands at its offset in a buffer
  // of the announced size, and the snapshot is installed once all its bytes are in.
  const int64_t total = chunk.total();
  if (snapshot_total_ == 0) {
    if (total <= 0 || total >= (int64_t{1} << 40)) {
      return absl::InvalidArgumentError(absl::StrCat("a snapshot piece announces a size of ", total, " bytes"));
    }
    snapshot_buffer_.reset(new char[total]);  // not zeroed: every byte is written once
    snapshot_total_ = total;
    snapshot_received_ = 0;
    snapshot_offsets_.clear();
  }
  const int64_t n = static_cast<int64_t>(chunk.data().size());
  if (total != snapshot_total_ || chunk.offset() < 0 || n > total - chunk.offset() ||
      !snapshot_offsets_.insert(chunk.offset()).second) {
    return absl::FailedPreconditionError(absl::StrCat("a snapshot piece of ", n, " bytes at ", chunk.offset(),
                                                      " does not fit the snapshot of ", snapshot_total_,
                                                      " bytes under way (or came twice)"));
  }
  std::memcpy(snapshot_buffer_.get() + chunk.offset(), chunk.data().data(), n);
  snapshot_received_ += n;
  const int64_t received = snapshot_received_;
  if (received < snapshot_total_) return received;
  const absl::Time load_start = absl::Now();
  if (Status s = shard->LoadSnapshot(std::string_view(snapshot_buffer_.get(), snapshot_total_)); !s.ok()) {
    SetFatal(absl::StrCat("cannot install the primary's snapshot: ", s.message()));
    return s;
  }
  snapshot_buffer_.reset();
  snapshot_total_ = 0;
  snapshot_installed_ = true;
  {
    absl::MutexLock l(&mu_);
    position_ = chunk.seq();
  }
  log::Info(absl::StrFormat("shard %d: installed the primary's snapshot (%.1f MB, version %d, position %d; loading "
                            "it took %s)",
                            options_.index, received / 1e6, shard->version(), chunk.seq(),
                            absl::FormatDuration(absl::Now() - load_start)));
  return received;
}

}  // namespace pl::pserver
