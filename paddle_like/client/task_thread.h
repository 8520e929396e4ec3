// TaskThread: one long-lived thread that runs the closures handed to it, in order.
// The parameter client's per-step work for other pservers, and its background
// exchange, run on these: starting a thread for every step cost more than the work.
//
// Thread-safety: Run may be called from any thread; the destructor waits for the
// closures already handed over.
#ifndef PADDLE_LIKE_CLIENT_TASK_THREAD_H_
#define PADDLE_LIKE_CLIENT_TASK_THREAD_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "paddle_like/core/status.h"

namespace pl {

class TaskThread {
 public:
  TaskThread() : thread_([this] { Loop(); }) {}
  ~TaskThread() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  TaskThread(const TaskThread&) = delete;
  TaskThread& operator=(const TaskThread&) = delete;

  std::future<Status> Run(std::function<Status()> fn) {
    std::packaged_task<Status()> task(std::move(fn));
    std::future<Status> result = task.get_future();
    {
      std::lock_guard<std::mutex> l(mu_);
      tasks_.push_back(std::move(task));
    }
    wake_.notify_one();
    return result;
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      wake_.wait(l, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left
      std::packaged_task<Status()> task = std::move(tasks_.front());
      tasks_.pop_front();
      l.unlock();
      task();
      l.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<Status()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_TASK_THREAD_H_
