// NormGuard: keeps a push whose gradient is out of all proportion from reaching the
// parameters. A trainer's certificate (or a bug) can send finite values of 1e18, which
// the finite check lets through and which ruin Adam's moments for good; the guard
// refuses such a push, naming the parameter and both norms:
//
//   - relative: a parameter's gradient norm in this push above `max_ratio` times the
//     median of that parameter's last `window` accepted nonzero norms, once it has had
//     `warmup` of them (a healthy job's norms drift slowly; a spike of 100x is not
//     training; a zero norm, a layer that got no gradient, says nothing of the scale);
//   - absolute: above `max_norm`, when set.
//
// The norms are this shard's part of each parameter (its blocks, or the rows pushed to
// it), computed while the push is checked for non-finite values. A replica applies
// what its primary accepted and checks nothing.
//
// Thread-safety: thread-safe; one mutex around the histories.
#ifndef PSERVER_STORE_NORM_GUARD_H_
#define PSERVER_STORE_NORM_GUARD_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "paddle_like/core/status.h"

namespace pl::pserver {

struct NormGuardOptions {
  double max_norm = 0;    // pl-pserver --max_gradient_norm; 0: no absolute cap
  double max_ratio = 100; // pl-pserver --gradient_norm_ratio; 0: no relative bound
  int warmup = 20;        // accepted pushes of a parameter before the relative bound applies
  int window = 64;        // accepted pushes whose median is the reference
};

// INVALID_ARGUMENT naming the option out of range.
Status ValidateNormGuardOptions(const NormGuardOptions& options);

// One parameter's (or table's) gradient norm in one push.
struct ParamNorm {
  std::string name;
  double norm = 0;
};

class NormGuard {
 public:
  explicit NormGuard(NormGuardOptions options = {}) : options_(options) {}
  NormGuard(const NormGuard&) = delete;
  NormGuard& operator=(const NormGuard&) = delete;

  void set_options(const NormGuardOptions& options) {
    absl::MutexLock l(&mu_);
    options_ = options;
  }
  // OK, and the norms become part of their parameters' histories; or INVALID_ARGUMENT
  // naming the first parameter out of bounds with both norms, and nothing recorded.
  Status Admit(const std::vector<ParamNorm>& norms);
  int64_t refused() const { return refused_.load(std::memory_order_relaxed); }

 private:
  struct History {
    std::vector<double> recent;  // a ring of the last `window` accepted norms
    int64_t accepted = 0;
  };
  double MedianOf(const History& h) const;

  mutable absl::Mutex mu_;
  NormGuardOptions options_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, History> history_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> refused_{0};
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_NORM_GUARD_H_
