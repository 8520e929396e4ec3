#include "pserver/store/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace pl::pserver {
namespace {

// Read once: glibc answers hardware_concurrency by reading /sys/devices/system/cpu/online,
// an open and a read per call, and every push asks.
int Cores() {
  static const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return cores;
}

// Helper threads that wait for one job at a time. Never destroyed: pservers run until
// they exit, and a static destructor racing threads that still wait would be worse.
class HelperPool {
 public:
  explicit HelperPool(int helpers) {
    for (int t = 0; t < helpers; ++t) threads_.emplace_back([this] { Work(); });
    for (std::thread& t : threads_) t.detach();
  }
  int size() const { return static_cast<int>(threads_.size()); }

  // False when another caller holds the pool (the caller then works alone).
  bool TryRun(int64_t n, int helpers, const std::function<void(int64_t)>& fn, bool another_follows) {
    std::unique_lock<std::mutex> job(job_mu_, std::try_to_lock);
    if (!job.owns_lock()) return false;
    {
      std::lock_guard<std::mutex> l(mu_);
      fn_ = &fn;
      n_ = n;
      next_.store(0);
      seats_ = helpers;
      busy_ = 0;
      linger_ = another_follows;
      ++generation_;
      published_.store(generation_, std::memory_order_release);
    }
    wake_.notify_all();
    Drain(fn, n);
    std::unique_lock<std::mutex> l(mu_);
    seats_ = 0;  // helpers that wake up late must not start on a finished job
    done_.wait(l, [this] { return busy_ == 0; });
    fn_ = nullptr;
    return true;
  }

 private:
  void Drain(const std::function<void(int64_t)>& fn, int64_t n) {
    for (int64_t i = next_.fetch_add(1); i < n; i = next_.fetch_add(1)) fn(i);
  }
  void Work() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      // A push brings jobs in quick succession (validate, then apply): stay awake a
      // moment after one, since waking a sleeping thread takes longer than the work.
      if (generation_ == seen && linger_) {
        l.unlock();
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
        while (published_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < until) {
        }
        l.lock();
      }
      wake_.wait(l, [&] { return generation_ != seen; });
      seen = generation_;
      if (seats_ <= 0 || fn_ == nullptr) continue;
      --seats_;
      ++busy_;
      const std::function<void(int64_t)>* fn = fn_;
      const int64_t n = n_;
      l.unlock();
      Drain(*fn, n);
      l.lock();
      if (--busy_ == 0) done_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex job_mu_;  // one job at a time
  std::mutex mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  std::atomic<int64_t> next_{0};
  int seats_ = 0;  // helpers that may still join the current job
  int busy_ = 0;   // helpers working on it
  bool linger_ = false;  // another job follows this one at once
  uint64_t generation_ = 0;
  std::atomic<uint64_t> published_{0};  // generation_, for helpers that spin
};

HelperPool& Pool() {
  static HelperPool* pool = new HelperPool(std::min(Cores(), 4) - 1);
  return *pool;
}

}  // namespace

void ParallelFor(int64_t n, int threads, const std::function<void(int64_t)>& fn, bool another_follows) {
  if (threads > 1 && n > 1 && Pool().size() > 0 &&
      Pool().TryRun(n, std::min<int64_t>(threads - 1, n - 1), fn, another_follows)) {
    return;
  }
  for (int64_t i = 0; i < n; ++i) fn(i);
}

int ThreadsForDense(int64_t floats) {
  return static_cast<int>(std::clamp<int64_t>(floats >> 18, 1, std::min(Cores(), 4)));
}

int ThreadsForRows(int64_t rows) {
  return static_cast<int>(std::clamp<int64_t>(rows >> 12, 1, std::min(Cores(), 4)));
}

}  // namespace pl::pserver
