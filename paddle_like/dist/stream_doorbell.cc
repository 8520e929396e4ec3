#include "paddle_like/dist/stream_doorbell.h"

#include <linux/futex.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"

namespace pl {
namespace {

// The mailbox, at SharedRegion::mailbox(). The futex words are shared between
// processes (no FUTEX_PRIVATE_FLAG). A call's request is the serialised ReplicateRequest,
// written into the payload after the call's blocks; the answer's message is cut to
// kMessageBytes.
struct Mailbox {
  std::atomic<uint32_t> rung;      // futex: calls rung by the primary
  std::atomic<uint32_t> answered;  // futex: calls answered by the backup
  std::atomic<uint32_t> closed;    // 1 once the backup stopped serving
  uint32_t request_bytes;
  int64_t request_at;       // offset in the payload
  // The halves of the payload the call's blocks lie in (kHalf0 | kHalf1), and, per half,
  // the last call whose blocks there the backup no longer reads (futex words).
  uint32_t request_halves;
  std::atomic<uint32_t> released[2];
  int32_t code;             // the answer: absl::StatusCode, 0 for OK
  uint32_t message_bytes;
  int64_t version;
  int64_t server_pid;
  uint64_t server_pid_ns;   // inode of the backup's pid namespace
  char message[1024];
};
static_assert(sizeof(Mailbox) <= SharedRegion::kMailboxBytes);
static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == 4,
              "the futex words are plain 32-bit words in shared memory");
constexpr size_t kMessageBytes = sizeof(Mailbox::message);

Mailbox* MailboxOf(const SharedRegion& region) { return reinterpret_cast<Mailbox*>(region.mailbox()); }

// Sleeps while `word` holds `expected`, at most `timeout` (a wake, a change or a signal
// may end it sooner: callers re-check).
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, absl::Duration timeout) {
  const struct timespec ts = absl::ToTimespec(std::max(timeout, absl::ZeroDuration()));
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

uint64_t PidNamespace() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

// How often a waiting side looks beyond its futex (the backup's process, a cancel).
constexpr absl::Duration kWatchEvery = absl::Milliseconds(10);

// A hold on call `call`'s blocks: marks its halves released when the last copy goes
// (a non-null object, so that holders can tell it from no hold).
struct BlocksHeld {
  std::shared_ptr<SharedRegion> region;
  uint32_t halves = 0;
  uint32_t call = 0;
  ~BlocksHeld() {
    Mailbox* box = MailboxOf(*region);
    for (int h = 0; h < 2; ++h) {
      if ((halves & (1u << h)) == 0) continue;
      box->released[h].store(call, std::memory_order_release);
      FutexWakeAll(&box->released[h]);
    }
  }
};

std::shared_ptr<const void> HoldBlocks(std::shared_ptr<SharedRegion> region, uint32_t halves, uint32_t call) {
  auto held = std::make_shared<BlocksHeld>();
  held->region = std::move(region);
  held->halves = halves;
  held->call = call;
  return held;
}

}  // namespace

// ------------------------------------------------------------------ backup's end

DoorbellServer::DoorbellServer(std::shared_ptr<SharedRegion> region, Handler handler)
    : region_(std::move(region)), handler_(std::move(handler)), last_rung_ns_(absl::GetCurrentTimeNanos()) {
  Mailbox* box = MailboxOf(*region_);
  box->server_pid = ::getpid();
  box->server_pid_ns = PidNamespace();
  box->closed.store(0, std::memory_order_release);
  // Read here, not on the thread: a call rung before the thread runs is still new to it.
  const uint32_t seen = box->rung.load(std::memory_order_acquire);
  thread_ = std::thread([this, seen] { Run(seen); });
}

DoorbellServer::~DoorbellServer() {
  stop_ = true;
  Mailbox* box = MailboxOf(*region_);
  FutexWakeAll(&box->rung);  // our own thread, if it sleeps
  thread_.join();
  box->closed.store(1, std::memory_order_release);
  FutexWakeAll(&box->answered);  // a caller waiting for an answer that will not come
}

absl::Time DoorbellServer::last_rung() const { return absl::FromUnixNanos(last_rung_ns_.load()); }

void DoorbellServer::Run(uint32_t seen) {
  Mailbox* box = MailboxOf(*region_);
  while (!stop_) {
    const uint32_t rung = box->rung.load(std::memory_order_acquire);
    if (rung == seen) {
      FutexWait(&box->rung, seen, absl::Milliseconds(50));
      continue;
    }
    seen = rung;
    last_rung_ns_ = absl::GetCurrentTimeNanos();
    StatusOr<int64_t> answer = absl::InvalidArgumentError("no request");
    const int64_t at = box->request_at;
    const uint32_t n = box->request_bytes;
    // Released when the handler and whatever it kept of the call are done with it.
    std::shared_ptr<const void> hold = HoldBlocks(region_, box->request_halves & (kHalf0 | kHalf1), rung);
    proto::ReplicateRequest header;
    if (at < 0 || at > static_cast<int64_t>(region_->payload_bytes()) ||
        n > region_->payload_bytes() - static_cast<size_t>(at)) {
      answer = absl::InvalidArgumentError(absl::StrCat("a doorbell request of ", n, " bytes at ", at,
                                                       " lies outside the region's payload"));
    } else if (!header.ParseFromArray(region_->payload() + at, static_cast<int>(n))) {
      answer = absl::InvalidArgumentError("a doorbell request that does not parse as a ReplicateRequest");
    } else {
      answer = handler_(std::move(header), region_, hold);
    }
    hold.reset();
    box->code = static_cast<int32_t>(answer.status().code());
    box->version = answer.ok() ? *answer : 0;
    const absl::string_view message = answer.status().message();
    box->message_bytes = static_cast<uint32_t>(std::min(message.size(), kMessageBytes));
    std::memcpy(box->message, message.data(), box->message_bytes);
    box->answered.store(rung, std::memory_order_release);
    FutexWakeAll(&box->answered);
  }
}

// ------------------------------------------------------------------ primary's end

StatusOr<std::unique_ptr<DoorbellCaller>> DoorbellCaller::Connect(std::shared_ptr<SharedRegion> region) {
  const Mailbox* box = MailboxOf(*region);
  const uint64_t ours = PidNamespace();
  if (box->server_pid <= 0 || box->server_pid_ns == 0 || box->server_pid_ns != ours) {
    return absl::FailedPreconditionError(
        absl::StrCat("the replica runs in another pid namespace (", box->server_pid_ns, ", this one ", ours,
                     "): its process cannot be watched"));
  }
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, static_cast<pid_t>(box->server_pid), 0));
  if (pidfd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot watch the replica's process ", box->server_pid, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<DoorbellCaller>(new DoorbellCaller(std::move(region), pidfd));
}

DoorbellCaller::DoorbellCaller(std::shared_ptr<SharedRegion> region, int pidfd)
    : region_(std::move(region)), pidfd_(pidfd) {}

DoorbellCaller::~DoorbellCaller() { ::close(pidfd_); }

bool DoorbellCaller::BackupExited() const {
  struct pollfd p = {pidfd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

Status DoorbellCaller::Await(std::atomic<uint32_t>* word, const std::function<bool(uint32_t)>& done,
                             absl::Time deadline, const std::atomic<bool>& cancel, absl::string_view awaited) const {
  const Mailbox* box = MailboxOf(*region_);
  while (true) {
    const uint32_t now_holds = word->load(std::memory_order_acquire);
    if (done(now_holds)) return absl::OkStatus();
    if (box->closed.load(std::memory_order_acquire) != 0) {
      return absl::AbortedError(absl::StrCat("the replica let the region go before ", awaited, ": attach again"));
    }
    if (cancel) return absl::CancelledError("the stream is stopping");
    if (BackupExited()) {
      return absl::UnavailableError(absl::StrCat("the replica's process (", box->server_pid, ") ended before ", awaited));
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::DeadlineExceededError(absl::StrCat("the replica did not ", awaited, " in time"));
    FutexWait(word, now_holds, std::min(kWatchEvery, deadline - now));
  }
}

Status DoorbellCaller::AwaitFree(uint32_t halves, absl::Duration timeout, const std::atomic<bool>& cancel) {
  Mailbox* box = MailboxOf(*region_);
  const absl::Time deadline = absl::Now() + timeout;
  for (int h = 0; h < 2; ++h) {
    if ((halves & (1u << h)) == 0) continue;
    const uint32_t last = last_use_[h];
    PL_RETURN_IF_ERROR(Await(&box->released[h], [last](uint32_t released) { return released == last; }, deadline,
                             cancel, "applying the entries it holds in the region"));
  }
  return absl::OkStatus();
}

StatusOr<int64_t> DoorbellCaller::Call(const proto::ReplicateRequest& header, absl::Duration timeout,
                                       const std::atomic<bool>& cancel, uint32_t halves, int64_t free_from,
                                       int64_t free_to) {
  Mailbox* box = MailboxOf(*region_);
  if (box->closed.load(std::memory_order_acquire) != 0) {
    return absl::AbortedError("the replica let the region go: attach again");
  }
  const int64_t at = (std::max<int64_t>(free_from, 0) + 7) & ~int64_t{7};
  const size_t n = header.ByteSizeLong();
  free_to = std::min<int64_t>(free_to, static_cast<int64_t>(region_->payload_bytes()));
  if (at > free_to || static_cast<int64_t>(n) > free_to - at) {
    return absl::UnimplementedError("the call's header does not fit after its blocks");
  }
  if (!header.SerializeToArray(region_->payload() + at, static_cast<int>(n))) {
    return absl::InternalError("a stream call's header did not serialise");
  }
  box->request_at = at;
  box->request_bytes = static_cast<uint32_t>(n);
  box->request_halves = halves;
  const uint32_t call = box->rung.load(std::memory_order_relaxed) + 1;
  // From here the backup may hold these halves until it releases this call.
  for (int h = 0; h < 2; ++h) {
    if ((halves & (1u << h)) != 0) last_use_[h] = call;
  }
  box->rung.store(call, std::memory_order_release);
  FutexWakeAll(&box->rung);
  PL_RETURN_IF_ERROR(Await(&box->answered, [call](uint32_t answered) { return answered == call; },
                           absl::Now() + timeout, cancel, "answering a doorbell call"));
  const auto code = static_cast<absl::StatusCode>(box->code);
  if (code == absl::StatusCode::kOk) return box->version;
  return Status(code, std::string(box->message, std::min<size_t>(box->message_bytes, kMessageBytes)));
}

}  // namespace pl
