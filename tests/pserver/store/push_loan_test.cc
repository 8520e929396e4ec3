// PushLoan: a stream reads a push's gradients where the trainer's call left them until
// the call settles the loan; a stream that still holds the entry then reads a copy, and
// what it reads no longer changes when the lender's memory does.
#include "pserver/store/push_loan.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace pl::pserver {
namespace {

// An entry whose payload points into `lender` (borrowed) and a loan whose copier
// copies `lender` as it is when called; `copies` counts the calls.
std::shared_ptr<PushLoan> Lend(std::vector<float>* lender, std::atomic<int>* copies) {
  auto borrowed = std::make_shared<PushFrame>();
  borrowed->AddDenseRef("w", 0, lender->data(), static_cast<int64_t>(lender->size()), nullptr);
  return std::make_shared<PushLoan>(borrowed, [lender, copies] {
    ++*copies;
    auto own = std::make_shared<PushFrame>();
    own->AddDenseCopy("w", 0, lender->data(), static_cast<int64_t>(lender->size()));
    return std::shared_ptr<const PushFrame>(own);
  });
}

std::vector<float> ValuesOf(const PushFrame& frame) {
  std::vector<float> out(frame.dense()[0].values.size());
  frame.dense()[0].values.CopyTo(out.data());
  return out;
}

TEST(PushLoanTest, NothingIsCopiedWhenNoStreamStillHoldsTheEntry) {
  std::vector<float> lender = {1, 2, 3};
  std::atomic<int> copies{0};
  std::shared_ptr<PushLoan> loan = Lend(&lender, &copies);
  {
    PushLoan::Reading r = loan->Read();  // a stream sends it, then lets go
    EXPECT_EQ(r.frame()->dense()[0].values.contiguous(), lender.data());
  }
  PushLoan::Settle(loan);
  PushLoan::Settle(loan);  // idempotent
  EXPECT_EQ(copies.load(), 0);
  EXPECT_FALSE(loan->copied());
}

TEST(PushLoanTest, AStreamStillHoldingTheEntryReadsACopyThatOutlivesTheLendersMemory) {
  std::vector<float> lender = {1, 2, 3};
  std::atomic<int> copies{0};
  std::shared_ptr<PushLoan> loan = Lend(&lender, &copies);
  std::shared_ptr<PushLoan> behind = loan;  // a joiner's stream that has not sent it yet
  PushLoan::Settle(loan);
  EXPECT_EQ(copies.load(), 1);
  EXPECT_TRUE(loan->copied());
  lender.assign({9, 9, 9});  // the trainer's next push lands in the same memory
  PushLoan::Reading r = behind->Read();
  EXPECT_NE(r.frame()->dense()[0].values.contiguous(), lender.data());
  EXPECT_EQ(ValuesOf(*r.frame()), (std::vector<float>{1, 2, 3}));
}

TEST(PushLoanTest, SettleWaitsForAReadInProgress) {
  std::vector<float> lender = {1, 2, 3};
  std::atomic<int> copies{0};
  std::shared_ptr<PushLoan> loan = Lend(&lender, &copies);
  std::shared_ptr<PushLoan> stream_copy = loan;
  absl::Notification reading, done_reading;
  std::atomic<bool> settled{false};
  std::vector<float> seen;
  std::thread stream([&] {
    PushLoan::Reading r = stream_copy->Read();
    reading.Notify();
    absl::SleepFor(absl::Milliseconds(200));  // a slow copy into the replica's region
    seen = ValuesOf(*r.frame());
    EXPECT_FALSE(settled.load()) << "settled while the stream still read the lender's memory";
  });
  reading.WaitForNotification();
  PushLoan::Settle(loan);
  settled = true;
  stream.join();
  EXPECT_EQ(seen, (std::vector<float>{1, 2, 3}));
}

}  // namespace
}  // namespace pl::pserver
