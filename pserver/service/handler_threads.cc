#include "pserver/service/handler_threads.h"

#include <utility>

namespace pl::pserver {

HandlerThreads::~HandlerThreads() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    threads = std::move(threads_);
  }
  for (std::thread& t : threads) t.join();
}

void HandlerThreads::Run(std::function<void()> task) {
  absl::MutexLock l(&mu_);
  tasks_.push_back(std::move(task));
  if (idle_ > 0) {
    --idle_;  // a waiting thread takes it
  } else {
    threads_.emplace_back([this] { Loop(); });
  }
}

int HandlerThreads::num_threads() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(threads_.size());
}

int HandlerThreads::idle_threads() const {
  absl::MutexLock l(&mu_);
  return idle_;
}

bool HandlerThreads::HasWorkOrStopping() const { return !tasks_.empty() || stopping_; }

void HandlerThreads::Loop() {
  absl::MutexLock l(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &HandlerThreads::HasWorkOrStopping));
    if (tasks_.empty()) return;  // stopping, nothing left to run
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    task();
    task = nullptr;  // its captures go before the thread counts as idle
    mu_.Lock();
    ++idle_;
  }
}

}  // namespace pl::pserver
