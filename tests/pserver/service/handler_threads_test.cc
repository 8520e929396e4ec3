// HandlerThreads: a task never waits behind a blocked one, idle threads are reused,
// and the destructor runs what is queued.
#include "pserver/service/handler_threads.h"

#include <gtest/gtest.h>

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace pl::pserver {
namespace {

TEST(HandlerThreadsTest, ABlockedTaskDoesNotHoldUpTheNext) {
  HandlerThreads threads;
  absl::Notification second_ran, first_done;
  // The first task waits for the second, as a sync Pull waits for another trainer's Push.
  threads.Run([&] {
    EXPECT_TRUE(second_ran.WaitForNotificationWithTimeout(absl::Seconds(30)));
    first_done.Notify();
  });
  threads.Run([&] { second_ran.Notify(); });
  EXPECT_TRUE(first_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(threads.num_threads(), 2);
}

TEST(HandlerThreadsTest, SequentialTasksReuseOneThread) {
  HandlerThreads threads;
  for (int i = 0; i < 50; ++i) {
    absl::Notification done;
    threads.Run([&] { done.Notify(); });
    done.WaitForNotification();
    // The thread counts as idle only once it is back in its loop; give it the moment.
    for (int spin = 0; spin < 30000 && threads.idle_threads() == 0; ++spin) absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(threads.num_threads(), 1);
}

TEST(HandlerThreadsTest, DestructorRunsEveryQueuedTask) {
  std::atomic<int> ran{0};
  {
    HandlerThreads threads;
    for (int i = 0; i < 20; ++i) threads.Run([&ran] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 20);
}

}  // namespace
}  // namespace pl::pserver
