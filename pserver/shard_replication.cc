// ParameterShard's replicated paths: the primary's ordered forwarding, a backup's
// application of the stream, and the snapshot a joining replica starts from.
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pserver/shard.h"

namespace pl::pserver {
namespace {

constexpr char kSnapshotMagic[4] = {'P', 'L', 'S', '2'};
// A ledger holds a few ids per trainer; more than this is a corrupt length.
constexpr uint64_t kMaxSnapshotLedgerBytes = uint64_t{1} << 30;

void AppendU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

StatusOr<int64_t> ParameterShard::PushReplicated(const PendingPush& push, absl::Time deadline) {
  const proto::PushRequest& header = push.frame.header();
  int64_t position = 0;
  int64_t version = 0;
  {
    absl::MutexLock order(&order_mu_);
    PL_RETURN_IF_ERROR(hook_->CheckPrimary());
    bool retry = false;
    {
      absl::MutexLock l(&ledger_mu_);
      retry = ledger_.Applied(header.client_id(), header.push_id());
    }
    if (retry) {
      // Applied before (maybe by the primary this one replaced): acknowledged once
      // everything forwarded so far, which includes it, is on the backups.
      position = hook_->last_position();
      version = clock_.version();
    } else {
      PL_ASSIGN_OR_RETURN(position, hook_->ForwardPush(push.frame));
      {
        absl::MutexLock l(&ledger_mu_);
        ledger_.Record(header.client_id(), header.push_id());
      }
      store_.Apply(push.resolved);
      CountApplied(push);
      version = clock_.Advance();
    }
  }
  PL_RETURN_IF_ERROR(hook_->WaitAcked(position, deadline));
  return version;
}

Status ParameterShard::AccumulateReplicated(const PendingPush& push, int64_t* position) {
  absl::MutexLock order(&order_mu_);
  PL_RETURN_IF_ERROR(hook_->CheckPrimary());
  PL_ASSIGN_OR_RETURN(*position, hook_->ForwardPush(push.frame));
  store_.Accumulate(push.resolved);
  return absl::OkStatus();
}

void ParameterShard::ApplyStep(int contributors) {
  if (hook_ == nullptr) {
    store_.ApplyAccumulated(contributors);
    return;
  }
  // No push is summed into a step while its update runs (the barrier), so the stream
  // holds every push of this step before its end, and nothing of the next. The order
  // lock keeps an eviction (SweepRows) from landing in the middle of the update, where
  // the stream could not place it.
  absl::MutexLock order(&order_mu_);
  store_.ApplyAccumulated(contributors);
  StatusOr<int64_t> position = hook_->ForwardStepComplete(contributors);
  if (snapshot_taker_) {
    SnapshotTaker take = std::move(snapshot_taker_);
    snapshot_taker_ = nullptr;
    if (!position.ok()) {
      take(position.status(), 0);
    } else {
      take(SnapshotBytes(clock_.version() + 1), *position);  // the clock advances after this update
    }
  }
}

void ParameterShard::SetFollowing(bool following) {
  barrier_.SetFollowing(following);
  if (!following) CompleteStepIfReady();
}

StatusOr<int64_t> ParameterShard::FollowPush(PushFrame frame) {
  PL_RETURN_IF_ERROR(store_.CheckInitialized());
  auto push = std::make_unique<PendingPush>(std::move(frame));
  const bool sync = store_.sync();
  if (Status valid = Validate(push.get(), sync, nullptr); !valid.ok()) {
    return Annotate(valid, "a push of the primary's stream does not fit this replica");
  }
  const proto::PushRequest& header = push->frame.header();
  if (sync) {
    const SyncBarrier::Admission admission = barrier_.Admit(header.trainer_id(), header.step());
    if (admission.kind != SyncBarrier::Admission::kAdmitted) {
      return absl::DataLossError(absl::StrCat("the primary's stream admits trainer ", header.trainer_id(),
                                              " to step ", header.step(), " but this replica is at step ",
                                              admission.version));
    }
    store_.Accumulate(push->resolved);
    CountApplied(*push);
    return clock_.version();
  }
  {
    absl::MutexLock l(&ledger_mu_);
    ledger_.Record(header.client_id(), header.push_id());
  }
  store_.Apply(push->resolved);
  CountApplied(*push);
  return clock_.Advance();
}

Status ParameterShard::FollowInit(const proto::InitRequest& request) { return store_.Init(request).status(); }

void ParameterShard::FollowStepComplete(int contributors) {
  barrier_.CompleteNow([this, contributors](int) { store_.ApplyAccumulated(contributors); });
}

void ParameterShard::RequestSnapshot(SnapshotTaker take) {
  absl::MutexLock order(&order_mu_);
  if (store_.sync()) {
    snapshot_taker_ = std::move(take);  // at the end of the next step (ApplyStep)
    return;
  }
  // Async: every update goes through order_mu_, so the state is exactly the stream's
  // up to its last position.
  take(SnapshotBytes(clock_.version()), hook_ == nullptr ? 0 : hook_->last_position());
}

// A snapshot: "PLS2", version, the ledger's length and bytes, the state's length and
// bytes (shard_serializer.h). The ledger comes first so that a receiver reading the
// snapshot off a socket parses it before it starts filling the store.
StatusOr<std::string> ParameterShard::SnapshotBytes(int64_t version) const {
  std::string ledger;
  {
    absl::MutexLock l(&ledger_mu_);
    ledger = ledger_.Serialize();
  }
  // Taken under the order lock, so pushes wait for it: one pass to size it, one copy
  // into a buffer allocated once (appending would copy a large shard again and again).
  size_t state_len = 0;
  if (store_.initialized()) {
    PL_RETURN_IF_ERROR(WriteShardState(store_, version, [&state_len](const void*, size_t n) {
      state_len += n;
      return absl::OkStatus();
    }));
  }
  std::string out;
  out.reserve(4 + 16 + ledger.size() + 8 + state_len);
  out.append(kSnapshotMagic, 4);
  AppendU64(&out, static_cast<uint64_t>(version));
  AppendU64(&out, ledger.size());
  out += ledger;
  AppendU64(&out, state_len);
  const size_t state_at = out.size();
  if (store_.initialized()) {
    PL_RETURN_IF_ERROR(WriteShardState(store_, version, [&out](const void* data, size_t n) {
      out.append(static_cast<const char*>(data), n);
      return absl::OkStatus();
    }));
  }
  if (out.size() != state_at + state_len) return absl::InternalError("shard snapshot: the state changed while copied");
  return out;
}

Status ParameterShard::LoadSnapshot(std::string_view bytes) {
  size_t at = 0;
  Status s = LoadSnapshot([&](void* data, size_t n) -> Status {
    if (n > bytes.size() - at) return absl::DataLossError("shard snapshot: truncated");
    std::memcpy(data, bytes.data() + at, n);
    at += n;
    return absl::OkStatus();
  });
  if (s.ok() && at != bytes.size()) return absl::DataLossError("shard snapshot: trailing bytes after the state");
  return s;
}

Status ParameterShard::LoadSnapshot(const ByteReader& read) {
  auto bad = [](const std::string& why) { return absl::DataLossError("shard snapshot: " + why); };
  char magic[4];
  PL_RETURN_IF_ERROR(read(magic, 4));
  if (std::memcmp(magic, kSnapshotMagic, 4) != 0) return bad("no PLS2 header");
  uint64_t version = 0, ledger_len = 0, state_len = 0;
  PL_RETURN_IF_ERROR(read(&version, 8));
  PL_RETURN_IF_ERROR(read(&ledger_len, 8));
  if (ledger_len > kMaxSnapshotLedgerBytes) return bad(absl::StrCat("a ledger of ", ledger_len, " bytes"));
  std::string ledger_bytes(ledger_len, '\0');
  PL_RETURN_IF_ERROR(read(ledger_bytes.data(), ledger_len));
  PL_ASSIGN_OR_RETURN(PushLedger ledger, PushLedger::Parse(ledger_bytes));
  PL_RETURN_IF_ERROR(read(&state_len, 8));
  if (state_len > 0) {
    uint64_t left = state_len;
    PL_RETURN_IF_ERROR(LoadState([&](void* data, size_t n) -> Status {
      if (n > left) return bad("state shorter than it says");
      left -= n;
      return read(data, n);
    }));
    if (left != 0) return bad(absl::StrCat(left, " bytes of state left unread"));
  }
  clock_.Set(static_cast<int64_t>(version));
  absl::MutexLock l(&ledger_mu_);
  ledger_ = std::move(ledger);
  return absl::OkStatus();
}

int64_t ParameterShard::ledger_clients() const {
  absl::MutexLock l(&ledger_mu_);
  return static_cast<int64_t>(ledger_.clients());
}

}  // namespace pl::pserver
