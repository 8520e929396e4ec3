// The doorbell between a primary's stream and a backup on its host: answers and
// refusals come back as the handler gave them, and a caller never waits out its timeout
// for a backup that closed the region, or whose process died mid-call.
#include "paddle_like/dist/stream_doorbell.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pl {
namespace {

std::shared_ptr<SharedRegion> NewRegion(size_t payload = 64 << 10) {
  StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::Create(payload);
  EXPECT_TRUE(region.ok()) << region.status();
  return region.ok() ? *region : nullptr;
}

proto::ReplicateRequest Header(int64_t position) {
  proto::ReplicateRequest h;
  h.set_epoch(7);
  proto::ReplicaEntry* e = h.add_entries();
  e->set_position(position);
  proto::ShmBlock* b = e->mutable_push()->add_shm_dense();
  b->set_param("fc1.weight");
  b->set_count(16);
  return h;
}

// A call over the whole payload, its header at free_from.
StatusOr<int64_t> Ring(DoorbellCaller& caller, const proto::ReplicateRequest& header, absl::Duration timeout,
                       const std::atomic<bool>& cancel, int64_t free_from) {
  return caller.Call(header, timeout, cancel, kHalf0 | kHalf1, free_from, std::numeric_limits<int64_t>::max());
}

// Answers position * 10 for even positions and refuses odd ones, seeing what was sent.
StatusOr<int64_t> EvenOnly(const proto::ReplicateRequest& h) {
  if (h.epoch() != 7 || h.entries_size() != 1 || h.entries(0).push().shm_dense_size() != 1 ||
      h.entries(0).push().shm_dense(0).param() != "fc1.weight") {
    return absl::InternalError("the header arrived changed");
  }
  const int64_t position = h.entries(0).position();
  if (position % 2 != 0) return absl::FailedPreconditionError(absl::StrCat("odd position ", position));
  return position * 10;
}

TEST(StreamDoorbellTest, EachCallGetsTheHandlersAnswerOrItsRefusal) {
  std::shared_ptr<SharedRegion> region = NewRegion();
  std::atomic<int> calls{0};
  DoorbellServer server(region, [&](proto::ReplicateRequest h, const std::shared_ptr<SharedRegion>& in, const std::shared_ptr<const void>&) {
    ++calls;
    EXPECT_EQ(in, region);
    return EvenOnly(h);
  });
  StatusOr<std::unique_ptr<DoorbellCaller>> caller = DoorbellCaller::Connect(region);
  ASSERT_TRUE(caller.ok()) << caller.status();
  const std::atomic<bool> cancel{false};
  for (int64_t position = 1; position <= 50; ++position) {
    // The header goes after the call's blocks: anywhere in the payload that holds it.
    StatusOr<int64_t> answer = Ring(**caller, Header(position), absl::Seconds(5), cancel, position * 100);
    if (position % 2 == 0) {
      ASSERT_TRUE(answer.ok()) << answer.status();
      EXPECT_EQ(*answer, position * 10);
    } else {
      EXPECT_EQ(answer.status().code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_EQ(answer.status().message(), absl::StrCat("odd position ", position));
    }
  }
  EXPECT_EQ(calls.load(), 50);

  // No room after the blocks: the caller is told to call over gRPC, and nothing rings.
  StatusOr<int64_t> no_room =
      Ring(**caller, Header(2), absl::Seconds(5), cancel, static_cast<int64_t>(region->payload_bytes()) - 4);
  EXPECT_EQ(no_room.status().code(), absl::StatusCode::kUnimplemented) << no_room.status();
  EXPECT_EQ(calls.load(), 50);
}

TEST(StreamDoorbellTest, AClosedRegionAbortsAndAStuckOneTimesOutOrIsCancelled) {
  std::shared_ptr<SharedRegion> region = NewRegion();
  absl::Notification release;
  auto server = std::make_unique<DoorbellServer>(region, [&](proto::ReplicateRequest h, const std::shared_ptr<SharedRegion>&, const std::shared_ptr<const void>&) {
    if (h.entries(0).position() == 3) release.WaitForNotificationWithTimeout(absl::Seconds(30));
    return StatusOr<int64_t>(h.entries(0).position());
  });
  StatusOr<std::unique_ptr<DoorbellCaller>> caller = DoorbellCaller::Connect(region);
  ASSERT_TRUE(caller.ok()) << caller.status();
  std::atomic<bool> cancel{false};
  ASSERT_TRUE(Ring(**caller, Header(2), absl::Seconds(5), cancel, 0).ok());

  absl::Time start = absl::Now();
  StatusOr<int64_t> late = Ring(**caller, Header(3), absl::Milliseconds(200), cancel, 0);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));

  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel = true;
  });
  start = absl::Now();
  StatusOr<int64_t> cancelled = Ring(**caller, Header(4), absl::Seconds(30), cancel, 0);
  stopper.join();
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled) << cancelled.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));

  release.Notify();
  server.reset();  // answers what it holds, then closes the mailbox
  cancel = false;
  StatusOr<int64_t> closed = Ring(**caller, Header(6), absl::Seconds(30), cancel, 0);
  EXPECT_EQ(closed.status().code(), absl::StatusCode::kAborted) << closed.status();
}

// The backup answers a call and keeps reading its blocks in place (its applier holds
// the entries): the primary may write the next call into the other half at once, but
// into that half only once the backup let go of them.
TEST(StreamDoorbellTest, AHalfIsWrittenAgainOnlyOnceTheBackupReleasedIt) {
  std::shared_ptr<SharedRegion> region = NewRegion();
  absl::Mutex mu;
  std::shared_ptr<const void> kept;  // what the backup's applier would hold
  DoorbellServer server(region, [&](proto::ReplicateRequest h, const std::shared_ptr<SharedRegion>&,
                                    const std::shared_ptr<const void>& hold) -> StatusOr<int64_t> {
    if (h.entries(0).position() == 1) {
      absl::MutexLock l(&mu);
      kept = hold;
    }
    return h.entries(0).position();
  });
  StatusOr<std::unique_ptr<DoorbellCaller>> caller = DoorbellCaller::Connect(region);
  ASSERT_TRUE(caller.ok()) << caller.status();
  const std::atomic<bool> cancel{false};
  const int64_t half = static_cast<int64_t>(region->payload_bytes()) / 2;
  ASSERT_TRUE((*caller)->AwaitFree(kHalf0, absl::Seconds(1), cancel).ok());
  ASSERT_TRUE((*caller)->Call(Header(1), absl::Seconds(5), cancel, kHalf0, 64, half).ok());
  ASSERT_TRUE((*caller)->AwaitFree(kHalf1, absl::Seconds(1), cancel).ok());
  ASSERT_TRUE((*caller)->Call(Header(2), absl::Seconds(5), cancel, kHalf1, half + 64, 2 * half).ok());
  ASSERT_TRUE((*caller)->AwaitFree(kHalf1, absl::Seconds(1), cancel).ok()) << "call 2 kept nothing";

  Status held = (*caller)->AwaitFree(kHalf0, absl::Milliseconds(100), cancel);
  EXPECT_EQ(held.code(), absl::StatusCode::kDeadlineExceeded) << held;
  std::thread applier([&] {
    absl::SleepFor(absl::Milliseconds(200));
    absl::MutexLock l(&mu);
    kept.reset();
  });
  const absl::Time start = absl::Now();
  Status freed = (*caller)->AwaitFree(kHalf0 | kHalf1, absl::Seconds(10), cancel);
  const absl::Duration waited = absl::Now() - start;
  applier.join();
  EXPECT_TRUE(freed.ok()) << freed;
  EXPECT_GE(waited, absl::Milliseconds(150));
  EXPECT_LT(waited, absl::Seconds(5));
}

// The backup's process is SIGKILLed while it holds a call: the caller learns it from the
// process's pidfd at once, not after its 30 s timeout.
TEST(StreamDoorbellTest, ABackupKilledMidCallIsSeenAtOnce) {
  std::shared_ptr<SharedRegion> region = NewRegion();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The backup: serves the same segment and never answers.
    DoorbellServer server(region, [](proto::ReplicateRequest, const std::shared_ptr<SharedRegion>&, const std::shared_ptr<const void>&) -> StatusOr<int64_t> {
      ::pause();
      return 0;
    });
    const char byte = 1;
    (void)!::write(ready[1], &byte, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  StatusOr<std::unique_ptr<DoorbellCaller>> caller = DoorbellCaller::Connect(region);
  ASSERT_TRUE(caller.ok()) << caller.status();

  std::thread killer([child] {
    absl::SleepFor(absl::Milliseconds(200));
    ::kill(child, SIGKILL);
  });
  const std::atomic<bool> cancel{false};
  const absl::Time start = absl::Now();
  StatusOr<int64_t> answer = Ring(**caller, Header(2), absl::Seconds(30), cancel, 0);
  const absl::Duration waited = absl::Now() - start;
  killer.join();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable) << answer.status();
  EXPECT_GE(waited, absl::Milliseconds(150));
  EXPECT_LT(waited, absl::Seconds(5));
}

}  // namespace
}  // namespace pl
