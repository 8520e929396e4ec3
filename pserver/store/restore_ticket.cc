#include "pserver/store/restore_ticket.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace pl::pserver {

void RestoreTicket::Open(absl::Time now) {
  absl::MutexLock l(&mu_);
  open_ = true;
  ticket_ = 0;
  until_ = now + kWindow;
}

uint64_t RestoreTicket::Issue(absl::Time now) {
  absl::MutexLock l(&mu_);
  if (!open_ || now > until_) return 0;
  open_ = false;  // one ticket per creation
  std::random_device random;
  while (ticket_ == 0) ticket_ = (uint64_t{random()} << 32) | random();
  return ticket_;
}

Status RestoreTicket::Redeem(uint64_t ticket, absl::Time now) {
  absl::MutexLock l(&mu_);
  if (ticket_ == 0 || ticket != ticket_) {
    return absl::FailedPreconditionError(
        "a restore of this shard's values is taken only with the ticket an Init got once the shard was created "
        "again from the seed, once; this request's ticket is not that");
  }
  ticket_ = 0;  // spent, whatever follows
  if (now > until_) {
    return absl::FailedPreconditionError(absl::StrCat("the restore came more than ", absl::FormatDuration(kWindow),
                                                      " after the shard was created"));
  }
  return absl::OkStatus();
}

}  // namespace pl::pserver
