// PushLoan: a primary's stream entry whose dense payloads point into the memory of the
// trainer's call that brought the push (its shared-memory region, or its received gRPC
// message) instead of into a copy, so each stream copies them once, straight into its
// replica's region or onto the wire. Copying every push first cost a primary 0.2-0.3
// ms per MB on its critical path (2 cores; benchmarks/README.md).
//
// The memory is the call's only until the call returns, so the call settles the loan
// before it does (Settle): it waits for the streams reading the payloads at that moment,
// and if any stream still holds the entry (a joiner that is behind, or one whose call
// failed) it makes the copy then, once for all of them. In the common case every stream
// in sync has sent the entry by then (the call waited for their acknowledgements) and
// nothing is copied.
//
// Thread-safety: thread-safe.
#ifndef PSERVER_STORE_PUSH_LOAN_H_
#define PSERVER_STORE_PUSH_LOAN_H_

#include <functional>
#include <memory>

#include "absl/synchronization/mutex.h"
#include "paddle_like/dist/dense_frame.h"

namespace pl::pserver {

class PushLoan {
 public:
  using Copier = std::function<std::shared_ptr<const PushFrame>()>;
  // `borrowed`: the entry with payloads in the lender's memory; `copy` makes the entry
  // with payloads of its own, and is called (by Settle) only while that memory lives.
  // `scribble_on_settle` (a test's fault, faults.h): Settle writes over the lender's
  // memory, as the lender's next use of it would.
  PushLoan(std::shared_ptr<const PushFrame> borrowed, Copier copy, bool scribble_on_settle = false);
  PushLoan(const PushLoan&) = delete;
  PushLoan& operator=(const PushLoan&) = delete;

  // The entry's frame to read payloads from while the Reading lives.
  class Reading {
   public:
    Reading() = default;
    Reading(Reading&& other) noexcept;
    Reading& operator=(Reading&& other) noexcept;
    ~Reading();
    const std::shared_ptr<const PushFrame>& frame() const { return frame_; }

   private:
    friend class PushLoan;
    Reading(PushLoan* loan, std::shared_ptr<const PushFrame> frame) : loan_(loan), frame_(std::move(frame)) {}
    PushLoan* loan_ = nullptr;
    std::shared_ptr<const PushFrame> frame_;
  };
  Reading Read();

  // The lender's memory is about to go: once the reads in progress end, copies the
  // entry if `self` (this loan) is held by anyone but the caller. Idempotent.
  static void Settle(const std::shared_ptr<PushLoan>& self);
  // Whether Settle had to copy (for tests and counters).
  bool copied() const;

 private:
  void EndRead();

  mutable absl::Mutex mu_;
  std::shared_ptr<const PushFrame> current_ ABSL_GUARDED_BY(mu_);
  Copier copy_ ABSL_GUARDED_BY(mu_);
  int readers_ ABSL_GUARDED_BY(mu_) = 0;
  bool settled_ ABSL_GUARDED_BY(mu_) = false;
  bool copied_ ABSL_GUARDED_BY(mu_) = false;
  const bool scribble_on_settle_;
};

// Settles a loan (if any) when it goes out of scope: on every way out of a call.
class SettleOnExit {
 public:
  explicit SettleOnExit(const std::shared_ptr<PushLoan>* loan) : loan_(loan) {}
  ~SettleOnExit() {
    if (*loan_ != nullptr) PushLoan::Settle(*loan_);
  }
  SettleOnExit(const SettleOnExit&) = delete;
  SettleOnExit& operator=(const SettleOnExit&) = delete;

 private:
  const std::shared_ptr<PushLoan>* loan_;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_PUSH_LOAN_H_
