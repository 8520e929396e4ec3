#include "paddle_like/core/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace pl {
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
  HelperPool() = default;
  int size() const { return size_.load(std::memory_order_acquire); }
  // Starts helpers until there are `helpers` (a pserver sets its --apply_threads once at
  // start; a test may ask for more later).
  void Reserve(int helpers) {
    if (size() >= helpers) return;
    std::lock_guard<std::mutex> grow(grow_mu_);
    while (size() < helpers) {
      std::thread([this] { Work(); }).detach();
      size_.fetch_add(1, std::memory_order_release);
    }
  }

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
    // Wake only the helpers the job seats, less those spinning after the last job
    // (they see it themselves): waking all of a 16-core pool for a 4-thread job made
    // the other 12 fight for mu_ and then spin, and a push took 3x as long.
    const int sleepers = helpers - spinning_.load(std::memory_order_acquire);
    for (int k = 0; k < sleepers; ++k) wake_.notify_one();
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
    bool worked = false;  // on the last job it saw
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      // A push brings jobs in quick succession (validate, then apply): a helper that
      // worked on one stays awake a moment after it, since waking a sleeping thread
      // takes longer than the work. One that found no seat sleeps at once.
      if (generation_ == seen && linger_ && worked) {
        spinning_.fetch_add(1, std::memory_order_acq_rel);
        l.unlock();
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
        while (published_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < until) {
        }
        l.lock();
        spinning_.fetch_sub(1, std::memory_order_acq_rel);
      }
      wake_.wait(l, [&] { return generation_ != seen; });
      seen = generation_;
      worked = false;
      if (seats_ <= 0 || fn_ == nullptr) continue;
      worked = true;
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

  std::atomic<int> size_{0};
  std::mutex grow_mu_;  // Reserve
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
  std::atomic<int> spinning_{0};         // helpers spinning for the next job
};

HelperPool& Pool() {
  static HelperPool* pool = new HelperPool();
  return *pool;
}

std::atomic<int> g_apply_threads{0};  // 0: the cores

}  // namespace

void SetApplyThreads(int threads) { g_apply_threads.store(std::max(threads, 0)); }

int ApplyThreads() {
  const int set = g_apply_threads.load(std::memory_order_relaxed);
  return set > 0 ? set : Cores();
}

void ParallelFor(int64_t n, int threads, const std::function<void(int64_t)>& fn, bool another_follows) {
  if (threads > 1 && n > 1) Pool().Reserve(ApplyThreads() - 1);
  if (threads > 1 && n > 1 && Pool().size() > 0 &&
      Pool().TryRun(n, std::min<int64_t>(threads - 1, n - 1), fn, another_follows)) {
    return;
  }
  for (int64_t i = 0; i < n; ++i) fn(i);
}

int ThreadsForDense(int64_t floats) {
  return static_cast<int>(std::clamp<int64_t>(floats >> 17, 1, ApplyThreads()));
}

int ThreadsForRows(int64_t rows) {
  return static_cast<int>(std::clamp<int64_t>(rows >> 12, 1, ApplyThreads()));
}

}  // namespace pl
