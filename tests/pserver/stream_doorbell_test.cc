// The doorbell between a primary's stream and a backup on its host: answers and
// refusals come back as the handler gave them, and a caller never waits out its timeout
// for a backup that closed the region, or whose process died mid-call.
#include "pserver/stream_doorbell.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pl::pserver {
namespace {

std::shared_ptr<SharedRegion> NewRegion(size_t payload = 64 << 10) {
  StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::Create(payload);
  EXPECT_TRUE(region.ok()) << region.status();
  return region.ok() ? *region : nullptr;
}

proto::PushRequest Header(int64_t position) {
  proto::PushRequest h;
  h.set_replica_seq(position);
  h.set_replica_epoch(7);
  proto::ShmBlock* b = h.add_shm_dense();
  b->set_param("fc1.weight");
  b->set_count(16);
  return h;
}

// Answers position * 10 for even positions and refuses odd ones, seeing what was sent.
StatusOr<int64_t> EvenOnly(const proto::PushRequest& h) {
  if (h.replica_epoch() != 7 || h.shm_dense_size() != 1 || h.shm_dense(0).param() != "fc1.weight") {
    return absl::InternalError("the header arrived changed");
  }
  if (h.replica_seq() % 2 != 0) return absl::FailedPreconditionError(absl::StrCat("odd position ", h.replica_seq()));
  return h.replica_seq() * 10;
}

TEST(StreamDoorbellTest, EachCallGetsTheHandlersAnswerOrItsRefusal) {
  std::shared_ptr<SharedRegion> region = NewRegion();
  std::atomic<int> calls{0};
  DoorbellServer server(region, [&](proto::PushRequest h, const std::shared_ptr<SharedRegion>& in) {
    ++calls;
    EXPECT_EQ(in, region);
    return EvenOnly(h);
  });
  StatusOr<std::unique_ptr<DoorbellCaller>> caller = DoorbellCaller::Connect(region);
  ASSERT_TRUE(caller.ok()) << caller.status();
  const std::atomic<bool> cancel{false};
  for (int64_t position = 1; position <= 50; ++position) {
    // The header goes after the call's blocks: anywhere in the payload that holds it.
    StatusOr<int64_t> answer = (*caller)->Call(Header(position), absl::Seconds(5), cancel, position * 100);
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
      (*caller)->Call(Header(2), absl::Seconds(5), cancel, static_cast<int64_t>(region->payload_bytes()) - 4);
  EXPECT_EQ(no_room.status().code(), absl::StatusCode::kUnimplemented) << no_room.status();
  EXPECT_EQ(calls.load(), 50);
}

TEST(StreamDoorbellTest, AClosedRegionAbortsAndAStuckOneTimesOutOrIsCancelled) {
  std::shared_ptr<SharedRegion> region = NewRegion();
  absl::Notification release;
  auto server = std::make_unique<DoorbellServer>(region, [&](proto::PushRequest h, const std::shared_ptr<SharedRegion>&) {
    if (h.replica_seq() == 3) release.WaitForNotificationWithTimeout(absl::Seconds(30));
    return StatusOr<int64_t>(h.replica_seq());
  });
  StatusOr<std::unique_ptr<DoorbellCaller>> caller = DoorbellCaller::Connect(region);
  ASSERT_TRUE(caller.ok()) << caller.status();
  std::atomic<bool> cancel{false};
  ASSERT_TRUE((*caller)->Call(Header(2), absl::Seconds(5), cancel, 0).ok());

  absl::Time start = absl::Now();
  StatusOr<int64_t> late = (*caller)->Call(Header(3), absl::Milliseconds(200), cancel, 0);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));

  std::thread stopper([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel = true;
  });
  start = absl::Now();
  StatusOr<int64_t> cancelled = (*caller)->Call(Header(4), absl::Seconds(30), cancel, 0);
  stopper.join();
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled) << cancelled.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));

  release.Notify();
  server.reset();  // answers what it holds, then closes the mailbox
  cancel = false;
  StatusOr<int64_t> closed = (*caller)->Call(Header(6), absl::Seconds(30), cancel, 0);
  EXPECT_EQ(closed.status().code(), absl::StatusCode::kAborted) << closed.status();
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
    DoorbellServer server(region, [](proto::PushRequest, const std::shared_ptr<SharedRegion>&) -> StatusOr<int64_t> {
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
  StatusOr<int64_t> answer = (*caller)->Call(Header(2), absl::Seconds(30), cancel, 0);
  const absl::Duration waited = absl::Now() - start;
  killer.join();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable) << answer.status();
  EXPECT_GE(waited, absl::Milliseconds(150));
  EXPECT_LT(waited, absl::Seconds(5));
}

}  // namespace
}  // namespace pl::pserver
