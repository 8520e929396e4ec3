// Ticker: runs a function at once (or, with `at_once` false, first after a `period`),
// then every `period`, and a last time when destroyed,
// on a thread of its own, for the samplers of processes whose main thread only waits for
// signals (pl-master): the first sample is there before anyone scrapes, and the last one
// records the state the process stopped in.
//
// Thread-safety: construct and destroy from one thread; `fn` runs on the ticker's thread.
#ifndef PADDLE_LIKE_METRICS_TICKER_H_
#define PADDLE_LIKE_METRICS_TICKER_H_

#include <functional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace pl::metrics {

class Ticker {
 public:
  Ticker(absl::Duration period, std::function<void()> fn, bool at_once = true)
      : thread_([this, period, at_once, fn = std::move(fn)] {
          if (at_once) fn();
          while (!stop_.WaitForNotificationWithTimeout(period)) fn();
          fn();
        }) {}
  // Stops after one last call of `fn` (and the one under way, if any).
  ~Ticker() {
    stop_.Notify();
    thread_.join();
  }
  Ticker(const Ticker&) = delete;
  Ticker& operator=(const Ticker&) = delete;

 private:
  absl::Notification stop_;
  std::thread thread_;  // last: starts once stop_ exists
};

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_TICKER_H_
