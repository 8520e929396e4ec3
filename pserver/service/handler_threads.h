// HandlerThreads: the threads that run the pserver's Push and Pull handlers, off
// gRPC's callback threads (a callback must not block, and a sync-mode Pull waits for
// the other trainers' pushes). A task goes to an idle thread, or to a new one when
// none is idle, so a blocked handler never holds up another call: the thread policy
// of gRPC's synchronous server, which these handlers ran on before. Threads stay until
// the pool is destroyed (their number is the peak of concurrent calls).
//
// Thread-safety: Run is thread-safe; the destructor runs the queued tasks, then joins.
#ifndef PSERVER_SERVICE_HANDLER_THREADS_H_
#define PSERVER_SERVICE_HANDLER_THREADS_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace pl::pserver {

class HandlerThreads {
 public:
  HandlerThreads() = default;
  HandlerThreads(const HandlerThreads&) = delete;
  HandlerThreads& operator=(const HandlerThreads&) = delete;
  ~HandlerThreads();

  // Runs `task` on a thread of the pool at once (never behind another task).
  void Run(std::function<void()> task);
  // Threads started so far, and those of them waiting for a task (for tests).
  int num_threads() const;
  int idle_threads() const;

 private:
  void Loop();
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;  // waiting threads no queued task is promised to
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pl::pserver

#endif  // PSERVER_SERVICE_HANDLER_THREADS_H_
