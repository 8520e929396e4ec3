// ParameterShard's replicated paths: the primary's ordered forwarding, a backup's
// application of the stream, and the snapshot a joining replica starts from.
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/dist/page_warmer.h"
#include "pserver/store/shard.h"

namespace pl::pserver {
namespace {

constexpr char kSnapshotMagic[4] = {'P', 'L', 'S', '3'};
// A ledger holds a few ids per trainer; more than this is a corrupt length.
constexpr uint64_t kMaxSnapshotLedgerBytes = uint64_t{1} << 30;

void AppendU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

StatusOr<int64_t> ParameterShard::PushReplicated(const PendingPush& push, absl::Time deadline) {
  const proto::PushRequest& header = push.frame.header();
  int64_t position = 0;
  int64_t version = 0;
  // The streams may read push's gradients where they are until this call returns.
  std::shared_ptr<PushLoan> loan;
  SettleOnExit settle(&loan);
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
      PL_ASSIGN_OR_RETURN(position, hook_->ForwardBorrowedPush(push.frame, &loan));
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
    const bool micro_batches = AccumulateStash();
    store_.ApplyAccumulated(contributors, /*keep_previous=*/micro_batches);
    return;
  }
  // No push is summed into a step while its update runs (the barrier), so the stream
  // holds every push of this step before its end, and nothing of the next. The order
  // lock keeps an eviction (SweepRows) from landing in the middle of the update, where
  // the stream could not place it.
  absl::MutexLock order(&order_mu_);
  const bool micro_batches = AccumulateStash();
  store_.ApplyAccumulated(contributors, /*keep_previous=*/micro_batches);
  StatusOr<int64_t> position = hook_->ForwardStepComplete(contributors);
  if (snapshot_taker_) {
    SnapshotTaker take = std::move(snapshot_taker_);
    snapshot_taker_ = nullptr;
    if (!position.ok()) {
      take(position.status(), 0);
    } else {
      // The clock advances after this update.
      take(TakeSnapshot(clock_.version() + 1, std::move(snapshot_buffer_)), *position);
      snapshot_buffer_ = std::string();
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
  // A virtual trainer's micro-batch is kept until its step ends: not in the stream's
  // region (the primary writes the next entries there), nor holding its call.
  if (sync && !push->frame.header().step_expects().empty()) push->frame.OwnPayloads();
  // The primary checked the gradients' values and applied them: this replica applies
  // them as they are (checking again would cost a pass over them, and refusing one
  // would only make the replicas differ).
  if (Status valid = store_.Resolve(push->frame, &push->resolved, /*check_finite=*/false); !valid.ok()) {
    return Annotate(valid, "a push of the primary's stream does not fit this replica");
  }
  const proto::PushRequest& header = push->frame.header();
  if (sync) {
    const bool micro_batch = !header.step_expects().empty();
    const SyncBarrier::Admission admission =
        micro_batch ? barrier_.Admit(header.virtual_trainer(), header.step(), &header.step_expects())
                    : barrier_.Admit(header.trainer_id(), header.step());
    if (admission.kind != SyncBarrier::Admission::kAdmitted) {
      return absl::DataLossError(absl::StrCat("the primary's stream admits ", micro_batch ? "virtual trainer " : "trainer ",
                                              micro_batch ? header.virtual_trainer() : header.trainer_id(),
                                              " to step ", header.step(), " but this replica is at step ",
                                              admission.version, admission.why.empty() ? "" : ": ", admission.why));
    }
    CountApplied(*push);
    if (micro_batch) {
      stash_.Put(header.virtual_trainer(), std::move(push));
    } else {
      store_.Accumulate(push->resolved);
    }
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

Status ParameterShard::FollowInit(const proto::InitRequest& request) {
  // The primary's restore (it checked the ticket and the values) is applied as it is.
  if (request.restore_size() > 0) {
    PL_RETURN_IF_ERROR(store_.RestoreDense(request.restore(), request.learned_version()).status());
    restored_from_trainer_.store(std::max<int64_t>(1, request.learned_version()));
    return absl::OkStatus();
  }
  return store_.Init(request).status();
}

void ParameterShard::FollowStepComplete(int contributors) {
  barrier_.CompleteNow([this, contributors](int) {
    const bool micro_batches = AccumulateStash();
    store_.ApplyAccumulated(contributors, /*keep_previous=*/micro_batches);
  });
}

void ParameterShard::RequestSnapshot(SnapshotTaker take) {
  std::string buffer = SnapshotBuffer();  // before the lock: updates go on meanwhile
  absl::MutexLock order(&order_mu_);
  if (store_.sync()) {
    snapshot_taker_ = std::move(take);  // at the end of the next step (ApplyStep)
    snapshot_buffer_ = std::move(buffer);
    return;
  }
  // Async: every update goes through order_mu_, so the state is exactly the stream's
  // up to its last position.
  take(TakeSnapshot(clock_.version(), std::move(buffer)), hook_ == nullptr ? 0 : hook_->last_position());
}

std::string ParameterShard::SnapshotBuffer() const {
  size_t head_len = 0;
  if (store_.initialized()) {
    // A count, not a copy; a store that changes meanwhile only makes it an estimate.
    (void)WriteShardStateHead(store_, 0, [&head_len](const void*, size_t n) {
      head_len += n;
      return absl::OkStatus();
    });
  }
  size_t ledger_len = 0;
  {
    absl::MutexLock l(&ledger_mu_);
    ledger_len = ledger_.SerializedBytes();
  }
  // Room for rows that arrive before the lock, so the copy rarely has to grow it.
  const size_t expected = 4 + 8 + 8 + ledger_len + 8 + 8 + head_len;
  std::string buffer;
  buffer.reserve(expected + expected / 32 + 4096);
  PopulateForWrite(buffer.data(), buffer.capacity());
  return buffer;
}

// A snapshot: "PLS3", version, the ledger's length and bytes, the state's length, the
// length of its dense payload, the state (layout 4 of shard_serializer.h: the dense
// floats last). The ledger comes first so that a receiver reading the snapshot off a
// socket parses it before it starts filling the store; the dense floats come last so
// that it knows where each of them goes before they arrive. They are pinned, not
// copied (shard_snapshot.h): under the order lock this copies the rest alone, into a
// buffer made ready before it (SnapshotBuffer); the lengths go in once written.
StatusOr<ShardSnapshot> ParameterShard::TakeSnapshot(int64_t version, std::string head) const {
  const absl::Time start = absl::Now();
  std::string ledger;
  {
    absl::MutexLock l(&ledger_mu_);
    ledger = ledger_.Serialize();
  }
  head.clear();  // keeps the buffer's capacity and its pages
  head.append(kSnapshotMagic, 4);
  AppendU64(&head, static_cast<uint64_t>(version));
  AppendU64(&head, ledger.size());
  head += ledger;
  // The state's and its payload's lengths, written once both are known (below).
  const size_t lengths_at = head.size();
  AppendU64(&head, 0);
  AppendU64(&head, 0);
  const size_t state_at = head.size();
  if (store_.initialized()) {
    PL_RETURN_IF_ERROR(WriteShardStateHead(store_, version, [&head](const void* data, size_t n) {
      head.append(static_cast<const char*>(data), n);
      return absl::OkStatus();
    }));
  }
  const uint64_t head_len = head.size() - state_at;
  std::vector<ShardStore::DensePin> pins = store_.PinDense();
  uint64_t payload_len = 0;
  for (const ShardStore::DensePin& pin : pins) payload_len += pin.bytes;
  const uint64_t state_len = head_len + payload_len;
  std::memcpy(head.data() + lengths_at, &state_len, 8);
  std::memcpy(head.data() + lengths_at + 8, &payload_len, 8);
  ShardSnapshot snapshot(std::move(head), std::move(pins));
  snapshot.set_taken_in(absl::Now() - start);
  return snapshot;
}

namespace {

struct SnapshotHeader {
  uint64_t version = 0;
  std::string ledger;
  uint64_t state_len = 0;
  uint64_t payload_len = 0;  // the state's last bytes
};

Status BadSnapshot(absl::string_view why) { return absl::DataLossError(absl::StrCat("shard snapshot: ", why)); }

Status ReadSnapshotHeader(const ByteReader& read, SnapshotHeader* h) {
  char magic[4];
  PL_RETURN_IF_ERROR(read(magic, 4));
  if (std::memcmp(magic, kSnapshotMagic, 4) != 0) return BadSnapshot("no PLS3 header");
  uint64_t ledger_len = 0;
  PL_RETURN_IF_ERROR(read(&h->version, 8));
  PL_RETURN_IF_ERROR(read(&ledger_len, 8));
  if (ledger_len > kMaxSnapshotLedgerBytes) return BadSnapshot(absl::StrCat("a ledger of ", ledger_len, " bytes"));
  h->ledger.assign(ledger_len, '\0');
  PL_RETURN_IF_ERROR(read(h->ledger.data(), ledger_len));
  PL_RETURN_IF_ERROR(read(&h->state_len, 8));
  PL_RETURN_IF_ERROR(read(&h->payload_len, 8));
  if (h->payload_len > h->state_len) {
    return BadSnapshot(absl::StrCat("a payload of ", h->payload_len, " bytes in a state of ", h->state_len));
  }
  return absl::OkStatus();
}

// Reads from bytes in memory.
ByteReader MemoryReader(std::string_view bytes, size_t* at) {
  return [bytes, at](void* data, size_t n) -> Status {
    if (n > bytes.size() - *at) return BadSnapshot("truncated");
    std::memcpy(data, bytes.data() + *at, n);
    *at += n;
    return absl::OkStatus();
  };
}

}  // namespace

StatusOr<uint64_t> ParameterShard::SnapshotPayloadBytes(std::string_view snapshot) {
  size_t at = 0;
  SnapshotHeader h;
  PL_RETURN_IF_ERROR(ReadSnapshotHeader(MemoryReader(snapshot, &at), &h));
  if (h.state_len != snapshot.size() - at) {
    return BadSnapshot(absl::StrCat("a state of ", h.state_len, " bytes in ", snapshot.size() - at));
  }
  return h.payload_len;
}

Status ParameterShard::LoadSnapshot(std::string_view bytes) {
  size_t at = 0;
  Status s = LoadSnapshot(MemoryReader(bytes, &at));
  if (s.ok() && at != bytes.size()) return BadSnapshot("trailing bytes after the state");
  return s;
}

Status ParameterShard::LoadSnapshot(const ByteReader& read, const ScatterReader& scatter) {
  SnapshotHeader h;
  PL_RETURN_IF_ERROR(ReadSnapshotHeader(read, &h));
  PL_ASSIGN_OR_RETURN(PushLedger ledger, PushLedger::Parse(h.ledger));
  if (h.state_len > 0) {
    uint64_t left = h.state_len;
    ByteReader counted = [&](void* data, size_t n) -> Status {
      if (n > left) return BadSnapshot("state shorter than it says");
      left -= n;
      return read(data, n);
    };
    ScatterReader counted_scatter;
    if (scatter) {
      counted_scatter = [&](const ByteSpans& spans) -> Status {
        uint64_t total = 0;
        for (const absl::Span<char>& s : spans) total += s.size();
        if (total != h.payload_len || total > left) {
          return BadSnapshot(absl::StrCat("its blocks take ", total, " bytes of dense payload; it says ",
                                          h.payload_len));
        }
        left -= total;
        return scatter(spans);
      };
    }
    PL_RETURN_IF_ERROR(LoadState(counted, counted_scatter));
    if (left != 0) return BadSnapshot(absl::StrCat(left, " bytes of state left unread"));
  }
  clock_.Set(static_cast<int64_t>(h.version));
  absl::MutexLock l(&ledger_mu_);
  ledger_ = std::move(ledger);
  return absl::OkStatus();
}

int64_t ParameterShard::ledger_clients() const {
  absl::MutexLock l(&ledger_mu_);
  return static_cast<int64_t>(ledger_.clients());
}

}  // namespace pl::pserver
