// DurableReplies (master/durable_replies.h): an answer waits for its record to be
// durable, carries the wait's error, and none is lost when the class goes away.
#include "master/durable_replies.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace pl {
namespace {

// A journal whose records become durable only when the test says so.
class HeldDisk {
 public:
  Status Durable(int64_t ticket) {
    std::unique_lock<std::mutex> l(mu_);
    ++waits_;
    changed_.notify_all();
    changed_.wait(l, [&] { return durable_ >= ticket; });
    return ticket == failing_ ? absl::UnavailableError("disk full") : absl::OkStatus();
  }
  void MakeDurable(int64_t upto) {
    std::lock_guard<std::mutex> l(mu_);
    durable_ = upto;
    changed_.notify_all();
  }
  void WaitForAWait() {
    std::unique_lock<std::mutex> l(mu_);
    changed_.wait_for(l, std::chrono::seconds(10), [&] { return waits_ > 0; });
  }
  int64_t failing_ = -2;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  int64_t durable_ = 0;
  int waits_ = 0;
};

TEST(DurableRepliesTest, AnAnswerWaitsForItsRecordAndCarriesTheWaitsError) {
  HeldDisk disk;
  disk.failing_ = 3;
  std::mutex mu;
  std::vector<std::pair<int64_t, bool>> answered;
  {
    DurableReplies replies([&](int64_t t) { return disk.Durable(t); });
    for (int64_t ticket : {1, 2, 3}) {
      replies.Add(ticket, [&, ticket](const Status& stored) {
        std::lock_guard<std::mutex> l(mu);
        answered.emplace_back(ticket, stored.ok());
      });
    }
    disk.WaitForAWait();
    {
      std::lock_guard<std::mutex> l(mu);
      EXPECT_TRUE(answered.empty()) << "answered before its record was durable";
    }
    // Nothing to wait for: answered at once, on this thread.
    bool inline_answer = false;
    replies.Add(-1, [&](const Status& stored) { inline_answer = stored.ok(); });
    EXPECT_TRUE(inline_answer);
    disk.MakeDurable(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      std::lock_guard<std::mutex> l(mu);
      if (!answered.empty()) break;
    }
    {
      std::lock_guard<std::mutex> l(mu);
      ASSERT_EQ(answered.size(), 1u);
      EXPECT_EQ(answered[0], std::make_pair(int64_t{1}, true));
    }
    disk.MakeDurable(3);
  }  // the destructor gives what is still queued
  ASSERT_EQ(answered.size(), 3u);
  EXPECT_EQ(answered[1], std::make_pair(int64_t{2}, true));
  EXPECT_EQ(answered[2], std::make_pair(int64_t{3}, false));  // its wait failed: so does its answer
}

}  // namespace
}  // namespace pl
