#include "pserver/store/push_loan.h"

#include <cstring>
#include <utility>

namespace pl::pserver {

PushLoan::PushLoan(std::shared_ptr<const PushFrame> borrowed, Copier copy, bool scribble_on_settle)
    : current_(std::move(borrowed)), copy_(std::move(copy)), scribble_on_settle_(scribble_on_settle) {}

PushLoan::Reading::Reading(Reading&& other) noexcept
    : loan_(std::exchange(other.loan_, nullptr)), frame_(std::move(other.frame_)) {}

PushLoan::Reading& PushLoan::Reading::operator=(Reading&& other) noexcept {
  if (this != &other) {
    if (loan_ != nullptr) loan_->EndRead();
    loan_ = std::exchange(other.loan_, nullptr);
    frame_ = std::move(other.frame_);
  }
  return *this;
}

PushLoan::Reading::~Reading() {
  if (loan_ != nullptr) loan_->EndRead();
}

PushLoan::Reading PushLoan::Read() {
  absl::MutexLock l(&mu_);
  ++readers_;
  return Reading(this, current_);
}

void PushLoan::EndRead() {
  absl::MutexLock l(&mu_);
  --readers_;
}

void PushLoan::Settle(const std::shared_ptr<PushLoan>& self) {
  PushLoan& loan = *self;
  absl::MutexLock l(&loan.mu_);
  if (loan.settled_) return;
  auto idle = [&loan]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(loan.mu_) { return loan.readers_ == 0; };
  loan.mu_.Await(absl::Condition(&idle));
  // Read under the lock: a stream takes or drops the entry without it, but no holder
  // but the caller means none can appear (only holders copy it); a count that is
  // falling as this reads it only costs a copy nobody needed.
  const std::shared_ptr<const PushFrame> borrowed = loan.current_;
  if (self.use_count() > 1) {
    loan.current_ = loan.copy_();
    loan.copied_ = true;
  }
  if (loan.scribble_on_settle_) {
    for (const DenseFramePayload& d : borrowed->dense()) {
      d.values.ForEachPiece([](const char* data, size_t n) { std::memset(const_cast<char*>(data), 0xff, n); });
    }
  }
  loan.copy_ = nullptr;
  loan.settled_ = true;
}

bool PushLoan::copied() const {
  absl::MutexLock l(&mu_);
  return copied_;
}

}  // namespace pl::pserver
