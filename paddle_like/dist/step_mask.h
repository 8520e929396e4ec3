// StepMask: the set of virtual trainers whose micro-batches one sync step takes, as it
// travels in every push of that step (PushRequest.step_expects): bit v of byte v / 8,
// least significant first, no trailing zero bytes (so two masks of one set are equal
// strings). Jobs of virtual trainers: docs/consistent-training.md.
//
// Thread-safety: free functions over values.
#ifndef PADDLE_LIKE_DIST_STEP_MASK_H_
#define PADDLE_LIKE_DIST_STEP_MASK_H_

#include <cstdint>
#include <string>
#include <vector>

namespace pl {

// The most virtual trainers a job may have: a mask is at most kMaxVirtualTrainers / 8
// bytes in every push.
inline constexpr int32_t kMaxVirtualTrainers = 4096;

// The mask of `members` (each in 0 .. kMaxVirtualTrainers - 1; others are left out).
inline std::string StepMask(const std::vector<int64_t>& members) {
  std::string mask;
  for (int64_t v : members) {
    if (v < 0 || v >= kMaxVirtualTrainers) continue;
    if (static_cast<int64_t>(mask.size()) <= v / 8) mask.resize(v / 8 + 1, '\0');
    mask[v / 8] = static_cast<char>(static_cast<unsigned char>(mask[v / 8]) | (1u << (v % 8)));
  }
  while (!mask.empty() && mask.back() == '\0') mask.pop_back();
  return mask;
}

inline bool StepMaskHas(const std::string& mask, int64_t v) {
  return v >= 0 && v / 8 < static_cast<int64_t>(mask.size()) &&
         ((static_cast<unsigned char>(mask[v / 8]) >> (v % 8)) & 1u) != 0;
}

inline std::vector<int64_t> StepMaskMembers(const std::string& mask) {
  std::vector<int64_t> members;
  for (int64_t v = 0; v < static_cast<int64_t>(mask.size()) * 8; ++v) {
    if (StepMaskHas(mask, v)) members.push_back(v);
  }
  return members;
}

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_STEP_MASK_H_
