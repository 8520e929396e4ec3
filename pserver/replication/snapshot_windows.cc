#include "pserver/replication/snapshot_windows.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/dist/page_warmer.h"

namespace pl::pserver {

SnapshotWindows::SnapshotWindows(std::shared_ptr<SharedRegion> region, uint64_t total, absl::Duration idle)
    : total_(total), region_bytes_(region->payload_bytes()), idle_(idle), region_(std::move(region)) {}

Status SnapshotWindows::Deliver(uint64_t offset, uint64_t region_offset, uint64_t bytes) {
  if (bytes == 0 || offset > total_ || bytes > total_ - offset || region_offset > region_bytes_ ||
      bytes > region_bytes_ - region_offset) {
    return absl::InvalidArgumentError(absl::StrCat("a snapshot window of ", bytes, " bytes at ", offset, " (at ",
                                                   region_offset, " of the region) lies outside the snapshot of ",
                                                   total_, " bytes or the region of ", region_bytes_));
  }
  absl::MutexLock l(&mu_);
  auto its_turn = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return cancelled_ || finished_ || (position_ == offset && window_ == nullptr);
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&its_turn), idle_)) {
    return absl::DeadlineExceededError(absl::StrCat("the snapshot window at byte ", offset, " waited ",
                                                    absl::FormatDuration(idle_), " for the ones before it"));
  }
  if (cancelled_) return absl::CancelledError("the snapshot's install stopped");
  if (finished_) {
    return result_.ok() ? absl::FailedPreconditionError(
                              absl::StrCat("the snapshot was installed before its window at byte ", offset))
                        : result_;
  }
  window_ = region_->payload() + region_offset;
  window_left_ = bytes;
  const bool last = offset + bytes == total_;
  // Read out (or, the last, installed): the install moves while bytes come, so the
  // wait bounds a stall, not the whole window.
  auto read_out = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return cancelled_ || finished_ || (!last && position_ >= offset + bytes);
  };
  uint64_t seen = position_;
  while (!mu_.AwaitWithTimeout(absl::Condition(&read_out), idle_)) {
    if (position_ == seen) {
      return absl::DeadlineExceededError(absl::StrCat("the install read nothing of the snapshot window at byte ",
                                                      offset, " for ", absl::FormatDuration(idle_)));
    }
    seen = position_;
  }
  if (cancelled_) return absl::CancelledError("the snapshot's install stopped");
  if (finished_ && position_ < offset + bytes) {
    return result_.ok() ? absl::DataLossError(absl::StrCat("the snapshot ended at byte ", position_,
                                                           " inside its window at byte ", offset))
                        : result_;
  }
  return last ? result_ : absl::OkStatus();
}

Status SnapshotWindows::Read(void* data, size_t n) {
  char* out = static_cast<char*>(data);
  while (n > 0) {
    const char* from = nullptr;
    size_t k = 0;
    {
      absl::MutexLock l(&mu_);
      auto ready = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return cancelled_ || window_left_ > 0; };
      if (!mu_.AwaitWithTimeout(absl::Condition(&ready), idle_)) {
        return absl::DeadlineExceededError(absl::StrCat("no window of the snapshot came for ",
                                                        absl::FormatDuration(idle_), " (at byte ", position_, ")"));
      }
      if (cancelled_) return absl::CancelledError("the snapshot's install stopped");
      from = window_;
      k = static_cast<size_t>(std::min<uint64_t>(n, window_left_));
    }
    // The window stays put while unread (its call waits), so the copy runs unlocked.
    std::memcpy(out, from, k);
    out += k;
    n -= k;
    absl::MutexLock l(&mu_);
    position_ += k;
    window_left_ -= k;
    window_ = window_left_ > 0 ? window_ + k : nullptr;
  }
  return absl::OkStatus();
}

Status SnapshotWindows::Scatter(const ByteSpans& spans) {
  for (const absl::Span<char>& span : spans) {
    // The fresh blocks' pages in with one call, not a fault per page inside the copy.
    PopulateForWrite(span.data(), span.size());
    PL_RETURN_IF_ERROR(Read(span.data(), span.size()));
  }
  return absl::OkStatus();
}

void SnapshotWindows::Finish(const Status& result) {
  absl::MutexLock l(&mu_);
  finished_ = true;
  result_ = result;
  region_.reset();
}

void SnapshotWindows::Cancel() {
  absl::MutexLock l(&mu_);
  cancelled_ = true;
}

}  // namespace pl::pserver
