// Backoff: the one retry policy of the clients (master, pservers). A caller that
// failed a retryable attempt asks whether to try again and waits: the waits start at
// `initial`, double on each failure up to `max`, and the caller gives up once the
// next wait would pass `give_up_after` from the start.
//
//   Backoff backoff(absl::Minutes(5));
//   while (true) {
//     Status s = Attempt();
//     if (s.ok() || !rpc::IsRetryable(s) || backoff.Expired()) return s;
//     backoff.Wait();
//   }
//
// The master's calls run this loop in MasterClient (master_client.h). A loop that runs
// for good (a watcher) calls Reset() after each success and waits NextWait() itself.
//
// Thread-safety: a Backoff belongs to one retry loop (not thread-safe).
#ifndef PADDLE_LIKE_CLIENT_BACKOFF_H_
#define PADDLE_LIKE_CLIENT_BACKOFF_H_

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"

namespace pl {

struct BackoffOptions {
  absl::Duration initial = absl::Milliseconds(100);  // the first wait
  absl::Duration max = absl::Seconds(2);             // waits double up to this
};

class Backoff {
 public:
  // `give_up_after` may be absl::InfiniteDuration() (a loop that never gives up).
  explicit Backoff(absl::Duration give_up_after, BackoffOptions options = {})
      : options_(options), give_up_after_(give_up_after), give_up_(absl::Now() + give_up_after),
        wait_(options.initial) {}

  // True once waiting again would pass the deadline: give up now.
  bool Expired() const { return absl::Now() + wait_ > give_up_; }
  // Sleeps NextWait().
  void Wait() { absl::SleepFor(NextWait()); }
  // The current wait, which it then doubles (up to max): for a caller that waits
  // itself, e.g. on a stop notification.
  absl::Duration NextWait() {
    const absl::Duration wait = wait_;
    wait_ = std::min(wait_ * 2, options_.max);
    return wait;
  }
  // After a success: the next failure waits `initial` again, and the give-up clock
  // starts anew.
  void Reset() {
    wait_ = options_.initial;
    give_up_ = absl::Now() + give_up_after_;
  }

 private:
  BackoffOptions options_;
  absl::Duration give_up_after_;
  absl::Time give_up_;
  absl::Duration wait_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_BACKOFF_H_
