// StreamApplier: a backup's updates applied in stream order off the receiving thread,
// Drain waiting for all of them, room for only max_held updates and bytes, and a
// failure stopping it.
#include "pserver/replication/stream_applier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace pl::pserver {
namespace {

StreamApplier::Update At(int64_t position) {
  StreamApplier::Update u;
  u.position = position;
  u.init = std::make_unique<proto::InitRequest>();
  return u;
}

TEST(StreamApplierTest, AppliesInStreamOrderOffTheEnqueuingThreadAndDrainWaitsForAll) {
  std::vector<int64_t> seen;  // written by the applier's thread only, read after Drain
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  StreamApplier applier(
      [&](StreamApplier::Update& u) {
        if (std::this_thread::get_id() == caller) on_caller = true;
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // slower than the enqueuing
        seen.push_back(u.position);
        return absl::OkStatus();
      },
      [](const Status&) { FAIL() << "nothing fails here"; }, /*max_held=*/4);
  for (int64_t p = 1; p <= 50; ++p) applier.Enqueue(At(p));
  applier.Drain();
  ASSERT_EQ(seen.size(), 50u);
  for (int64_t p = 1; p <= 50; ++p) EXPECT_EQ(seen[p - 1], p);
  EXPECT_EQ(applier.applied(), 50);
  EXPECT_FALSE(on_caller);
}

TEST(StreamApplierTest, EnqueueWaitsForRoomWhenMaxHeldAreWaiting) {
  absl::Notification release;
  StreamApplier applier(
      [&](StreamApplier::Update&) {
        release.WaitForNotification();
        return absl::OkStatus();
      },
      [](const Status&) {}, /*max_held=*/2);
  applier.Enqueue(At(1));  // taken by the thread, blocked in apply
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  applier.Enqueue(At(2));
  applier.Enqueue(At(3));  // two held: full
  std::atomic<bool> fourth_in{false};
  std::thread producer([&] {
    applier.Enqueue(At(4));
    fourth_in = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(fourth_in) << "a third held update was taken in";
  release.Notify();
  producer.join();
  applier.Drain();
  EXPECT_EQ(applier.applied(), 4);
}

TEST(StreamApplierTest, EnqueueWaitsWhenTheHeldBytesWouldPassTheBound) {
  absl::Notification release;
  StreamApplier applier(
      [&](StreamApplier::Update&) {
        release.WaitForNotification();
        return absl::OkStatus();
      },
      [](const Status&) {}, /*max_held=*/100, /*max_held_bytes=*/1000);
  auto big = [](int64_t position) {
    StreamApplier::Update u = At(position);
    u.bytes = 600;
    return u;
  };
  applier.Enqueue(big(1));  // taken by the thread, blocked in apply
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  applier.Enqueue(big(2));  // held: 600 bytes
  std::atomic<bool> third_in{false};
  std::thread producer([&] {
    applier.Enqueue(big(3));  // 1200 > 1000: waits until update 2 is taken
    third_in = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(third_in) << "held 1200 bytes past a bound of 1000";
  release.Notify();
  producer.join();
  applier.Drain();
  EXPECT_EQ(applier.applied(), 3);
}

TEST(StreamApplierTest, AFailedUpdateIsReportedOnceAndNothingAfterItIsApplied) {
  std::atomic<int> failures{0};
  std::vector<int64_t> seen;
  StreamApplier applier(
      [&](StreamApplier::Update& u) {
        seen.push_back(u.position);
        return u.position == 3 ? absl::DataLossError("does not fit") : absl::OkStatus();
      },
      [&](const Status& s) {
        EXPECT_TRUE(absl::IsDataLoss(s)) << s;
        ++failures;
      });
  for (int64_t p = 1; p <= 10; ++p) applier.Enqueue(At(p));
  applier.Drain();  // returns: failed
  applier.Enqueue(At(11));
  applier.Drain();
  EXPECT_EQ(failures.load(), 1);
  EXPECT_EQ(applier.applied(), 2);
  EXPECT_EQ(seen.back(), 3);
}

}  // namespace
}  // namespace pl::pserver
