#include "pserver/store/norm_guard.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pl::pserver {

Status ValidateNormGuardOptions(const NormGuardOptions& o) {
  if (!(o.max_norm >= 0) || !std::isfinite(o.max_norm)) {
    return absl::InvalidArgumentError(absl::StrCat("--max_gradient_norm: ", o.max_norm, " is not a finite value >= 0"));
  }
  if (!(o.max_ratio == 0 || o.max_ratio > 1) || !std::isfinite(o.max_ratio)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gradient_norm_ratio: ", o.max_ratio, " must be 0 (off) or a finite value > 1"));
  }
  if (o.warmup < 1 || o.window < 1) {
    return absl::InvalidArgumentError(absl::StrCat("norm guard: warmup ", o.warmup, " and window ", o.window,
                                                   " must be >= 1"));
  }
  return absl::OkStatus();
}

double NormGuard::MedianOf(const History& h) const {
  std::vector<double> v = h.recent;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

Status NormGuard::Admit(const std::vector<ParamNorm>& norms) {
  absl::MutexLock l(&mu_);
  for (const ParamNorm& p : norms) {
    if (options_.max_norm > 0 && p.norm > options_.max_norm) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return absl::InvalidArgumentError(absl::StrFormat(
          "push refused: the gradient of '%s' has norm %g here, above the cap %g (pl-pserver --max_gradient_norm)",
          p.name, p.norm, options_.max_norm));
    }
    if (options_.max_ratio <= 0) continue;
    auto it = history_.find(p.name);
    if (it == history_.end() || it->second.accepted < options_.warmup) continue;
    const double median = MedianOf(it->second);
    if (p.norm > options_.max_ratio * median) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return absl::InvalidArgumentError(absl::StrFormat(
          "push refused: the gradient of '%s' has norm %g here, more than %gx the median %g of its last %d "
          "accepted pushes (pl-pserver --gradient_norm_ratio)",
          p.name, p.norm, options_.max_ratio, median, static_cast<int>(it->second.recent.size())));
    }
  }
  for (const ParamNorm& p : norms) {
    // A zero gradient says nothing of the parameter's scale (a layer that got none this
    // step): kept out, or a parameter that mostly gets none would refuse its first real one.
    if (!(p.norm > 0)) continue;
    History& h = history_[p.name];
    const size_t window = static_cast<size_t>(options_.window);
    if (h.recent.size() < window) {
      h.recent.push_back(p.norm);
    } else {
      h.recent[static_cast<size_t>(h.accepted) % window] = p.norm;
    }
    ++h.accepted;
  }
  return absl::OkStatus();
}

}  // namespace pl::pserver
