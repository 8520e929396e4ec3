// RestoreTicket: who may give a shard that lost every copy its values back. When an
// Init creates the shard from the seed, the shard opens for a restore for kWindow. The
// first Init in that time from a trainer whose copy has learned more than the shard has
// applied (its learned_version above the shard's version: a copy of the shard's life
// before) gets the one ticket; with it that trainer alone may send its copy of
// the shard's dense values (InitRequest.restore), once. Anyone else, a second restore,
// and one after the window are refused: a trainer certificate cannot overwrite the
// parameters of a shard that serves.
//
// Thread-safety: thread-safe.
#ifndef PSERVER_STORE_RESTORE_TICKET_H_
#define PSERVER_STORE_RESTORE_TICKET_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"

namespace pl::pserver {

class RestoreTicket {
 public:
  // Long enough for the trainers' retries to reach a shard that came back, and for a
  // copy of 100s of MB to arrive.
  static constexpr absl::Duration kWindow = absl::Seconds(30);

  // The shard was created from the seed: a restore may be asked for until now + kWindow.
  void Open(absl::Time now);
  // The ticket (never 0) if the shard is open and none was issued yet; else 0.
  uint64_t Issue(absl::Time now);
  // OK with the ticket spent, or FAILED_PRECONDITION saying why not.
  Status Redeem(uint64_t ticket, absl::Time now);

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t ticket_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time until_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_RESTORE_TICKET_H_
