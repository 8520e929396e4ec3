// pl::Backoff: the doubling waits, the give-up deadline, and Reset after a success.
#include "paddle_like/client/backoff.h"

#include <gtest/gtest.h>

namespace pl {
namespace {

BackoffOptions Options(absl::Duration initial, absl::Duration max) {
  BackoffOptions o;
  o.initial = initial;
  o.max = max;
  return o;
}

TEST(BackoffTest, WaitsDoubleUpToMax) {
  Backoff backoff(absl::InfiniteDuration(), Options(absl::Milliseconds(100), absl::Milliseconds(500)));
  EXPECT_EQ(backoff.NextWait(), absl::Milliseconds(100));
  EXPECT_EQ(backoff.NextWait(), absl::Milliseconds(200));
  EXPECT_EQ(backoff.NextWait(), absl::Milliseconds(400));
  EXPECT_EQ(backoff.NextWait(), absl::Milliseconds(500));
  EXPECT_EQ(backoff.NextWait(), absl::Milliseconds(500));
  EXPECT_FALSE(backoff.Expired());  // an infinite give-up never expires
}

TEST(BackoffTest, ResetStartsTheWaitsAgain) {
  Backoff backoff(absl::InfiniteDuration(), Options(absl::Milliseconds(10), absl::Seconds(1)));
  backoff.NextWait();
  backoff.NextWait();
  EXPECT_EQ(backoff.NextWait(), absl::Milliseconds(40));
  backoff.Reset();
  EXPECT_EQ(backoff.NextWait(), absl::Milliseconds(10));
  EXPECT_EQ(backoff.NextWait(), absl::Milliseconds(20));
}

TEST(BackoffTest, ExpiresWhenTheNextWaitWouldPassTheDeadline) {
  Backoff backoff(absl::Milliseconds(250), Options(absl::Milliseconds(100), absl::Seconds(1)));
  EXPECT_FALSE(backoff.Expired());  // 100 ms fits in 250
  backoff.Wait();                   // slept 100, next 200: 300 > 250
  EXPECT_TRUE(backoff.Expired());
}

TEST(BackoffTest, ResetRestartsTheGiveUpClock) {
  Backoff backoff(absl::Milliseconds(250), Options(absl::Milliseconds(100), absl::Seconds(1)));
  backoff.Wait();
  ASSERT_TRUE(backoff.Expired());
  backoff.Reset();  // 100 ms from now fits in a fresh 250
  EXPECT_FALSE(backoff.Expired());
}

}  // namespace
}  // namespace pl
