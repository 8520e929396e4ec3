// Replicator, primary side: whether this process may act as the shard's primary
// (CheckPrimary, AwaitPrimary), forwarding updates into every backup's stream
// (Forward*), and waiting until the backups in sync hold them (WaitAcked). The
// heartbeat and the streams' lifecycle: replicator.cc; the backup side:
// replicator_backup.cc. See replicator.h.
#include "pserver/replication/replicator.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"

namespace pl::pserver {

namespace {

// The copy of a push that goes to the backups: the gradients inline (the primary's
// shared-memory region is not theirs).
// `borrow`: float32 gradients that lie in one piece are referenced where they are, not
// copied (PushLoan); *borrowed says whether any were.
std::shared_ptr<const PushFrame> StreamCopy(const PushFrame& push, bool borrow = false, bool* borrowed = nullptr) {
  auto copy = std::make_shared<PushFrame>();
  proto::PushRequest& h = copy->header();
  h = push.header();
  h.clear_shm_region();
  h.clear_shm_dense();
  h.clear_shm_write_back();
  h.clear_defer_apply();
  h.clear_link_seq();
  for (const DenseFramePayload& d : push.dense()) {
    if (d.exact_bf16) {
      // A trainer's bfloat16 push: forwarded as bfloat16, half the bytes; rounding its
      // decoded values gives back its own bytes, so the backups decode the same floats.
      if (const float* in_place = d.values.contiguous()) {
        copy->AddDenseBf16(d.param, d.block, in_place, d.values.size());
      } else {
        std::vector<float> gathered(d.values.size());
        d.values.CopyTo(gathered.data());
        copy->AddDenseBf16(d.param, d.block, gathered.data(), d.values.size());
      }
      continue;
    }
    if (const float* in_place = d.values.contiguous(); borrow && in_place != nullptr) {
      copy->AddDenseRef(d.param, d.block, in_place, d.values.size(), nullptr);
      *borrowed = true;
      continue;
    }
    float* values = copy->AddDenseBuffer(d.param, d.block, d.values.size());
    d.values.CopyTo(values);
  }
  return copy;
}

}  // namespace

// ------------------------------------------------------------------ primary

Status Replicator::CheckPrimary() const {
  absl::MutexLock l(&mu_);
  if (leaving_) return LeavingError();
  return CheckPrimaryLocked();
}

Status Replicator::AwaitPrimary() {
  absl::MutexLock l(&mu_);
  if (leaving_) return LeavingError();
  // A joiner too: the master may have counted it in sync, and promoted it, before it
  // heard it was a backup.
  const Role asked_as = role_;
  if ((asked_as != proto::ReplicaInfo::BACKUP && asked_as != proto::ReplicaInfo::JOINING) || fatal_ ||
      shard_ == nullptr) {
    return CheckPrimaryLocked();
  }
  HeartbeatSoon();
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (fatal_ || leaving_) return true;
    return role_ == proto::ReplicaInfo::PRIMARY && !draining_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&settled), kPromotionWait);
  if (leaving_) return LeavingError();
  return CheckPrimaryLocked();
}

Status Replicator::LeavingError() const {
  return absl::UnavailableError(
      absl::StrCat("pserver shard ", options_.index, ": this replica is shutting down: ask the master for the primary"));
}

Status Replicator::CheckPrimaryLocked() const {
  if (fatal_) return absl::UnavailableError(absl::StrCat("pserver shard ", options_.index, ": ", *fatal_));
  if (shard_ == nullptr) return absl::UnavailableError(absl::StrCat("pserver shard ", options_.index, ": starting"));
  if (role_ != proto::ReplicaInfo::PRIMARY) {
    return absl::UnavailableError(absl::StrCat("pserver shard ", options_.index, ": this replica is ", ReplicaRoleName(role_),
                                               ", not the primary: ask the master for the primary"));
  }
  if (draining_) {
    return absl::UnavailableError(absl::StrCat("pserver shard ", options_.index,
                                               ": taking over, applying the last updates it held as a backup"));
  }
  if (absl::Now() >= lease_until_) {
    return absl::UnavailableError(absl::StrCat("pserver shard ", options_.index,
                                               ": the primary's lease ran out (the master did not answer in time); "
                                               "refusing updates until it does, another replica may have taken over"));
  }
  return absl::OkStatus();
}

StatusOr<int64_t> Replicator::Append(StreamEntry entry) {
  entry.bytes = StreamEntryBytes(entry);  // once for every stream, outside mu_
  absl::MutexLock l(&mu_);
  PL_RETURN_IF_ERROR(CheckPrimaryLocked());
  if (leaving_) return LeavingError();  // an update in flight still gets its acks (WaitAcked)
  if (entry.position != position_ + 1) {
    return absl::InternalError(absl::StrCat("stream position ", entry.position, " after ", position_));
  }
  position_ = entry.position;
  for (auto& [id, stream] : streams_) stream->Append(entry);
  return position_;
}

StatusOr<int64_t> Replicator::ForwardPush(const PushFrame& push) { return ForwardBorrowedPush(push, nullptr); }

StatusOr<int64_t> Replicator::ForwardBorrowedPush(const PushFrame& push, std::shared_ptr<PushLoan>* loan) {
  int64_t position = 0;
  bool anyone = false;
  {
    absl::MutexLock l(&mu_);
    PL_RETURN_IF_ERROR(CheckPrimaryLocked());
    position = position_ + 1;  // stable: the shard's order lock is held by the caller
    anyone = !streams_.empty() || !snapshot_pending_.empty();
  }
  StreamEntry entry;
  entry.position = position;
  if (anyone) {
    bool borrowed = false;
    entry.push = StreamCopy(push, /*borrow=*/loan != nullptr, &borrowed);
    if (borrowed) {
      entry.loan = std::make_shared<PushLoan>(
          entry.push, [&push] { return StreamCopy(push); },
          options_.faults.scribble_settled_loans);
      *loan = entry.loan;
    }
  }
  return Append(std::move(entry));
}

StatusOr<int64_t> Replicator::ForwardInit(const proto::InitRequest& request) {
  StreamEntry entry;
  {
    absl::MutexLock l(&mu_);
    entry.position = position_ + 1;
  }
  entry.init = std::make_shared<proto::InitRequest>(request);
  return Append(std::move(entry));
}

StatusOr<int64_t> Replicator::ForwardStepComplete(int contributors) {
  StreamEntry entry;
  {
    absl::MutexLock l(&mu_);
    entry.position = position_ + 1;
  }
  entry.step_end = contributors;
  return Append(std::move(entry));
}

StatusOr<int64_t> Replicator::ForwardEviction(const proto::SparseRowsMsg& evicted, bool to_disk) {
  StreamEntry entry;
  {
    absl::MutexLock l(&mu_);
    PL_RETURN_IF_ERROR(CheckPrimaryLocked());
    entry.position = position_ + 1;
  }
  auto eviction = std::make_shared<proto::Eviction>();
  *eviction->mutable_rows() = evicted;
  eviction->set_to_disk(to_disk);
  entry.eviction = std::move(eviction);
  return Append(std::move(entry));
}

int64_t Replicator::last_position() const {
  absl::MutexLock l(&mu_);
  return position_;
}

bool Replicator::AckedLocked(int64_t position) const {
  for (uint64_t id : required_) {
    auto it = streams_.find(id);
    if (it == streams_.end()) continue;
    if (it->second->acked() >= position) continue;
    // A failed replica is waited for until the master has taken it out of the map, so
    // it can never be promoted while missing an acknowledged update.
    if (!it->second->failure().ok() && !in_map_.count(id)) continue;
    return false;
  }
  return true;
}

Status Replicator::WaitAcked(int64_t position, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  while (true) {
    PL_RETURN_IF_ERROR(CheckPrimaryLocked());
    if (AckedLocked(position)) {
      if (!acked_as_primary_) {
        // When a failover ends for the trainers (pl-bench: benchmarks/bench_replication.py).
        acked_as_primary_ = true;
        log::Info(absl::StrCat("shard ", options_.index, ": first update acknowledged as primary (epoch ", epoch_,
                               ", position ", position, ")"));
      }
      // Counted only while the master lists a backup in sync: one that would take over.
      if (options_.faults.die_after_acked_updates > 0 && backup_in_sync_ && ++acked_updates_ == options_.faults.die_after_acked_updates &&
          ::access(options_.faults.die_once_file.c_str(), F_OK) != 0) {
        (void)!::creat(options_.faults.die_once_file.c_str(), 0644);
        log::Warning(absl::StrCat("test hook: dying after acknowledged update ", acked_updates_, " (position ",
                                  position, ") before answering it"));
        ::raise(SIGKILL);
      }
      return absl::OkStatus();
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("pserver shard ", options_.index, ": the backups did not acknowledge position ", position));
    }
    progress_.WaitWithDeadline(&mu_, std::min(deadline, now + absl::Milliseconds(100)));
  }
}

}  // namespace pl::pserver
