#include "paddle_like/dist/dense_link.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pl {
namespace {

struct FrameHeader {
  uint64_t seq;
  uint32_t ranges;
  uint32_t zero;
};
struct RangeOnWire {
  uint64_t offset;
  uint64_t bytes;
};
static_assert(sizeof(FrameHeader) == 16 && sizeof(RangeOnWire) == 16);

// More ranges than a region has blocks is a broken or hostile peer.
constexpr uint32_t kMaxRangesPerFrame = 1 << 20;

// Lane k's share of `ranges` laid end to end: bytes [total·k/K, total·(k+1)/K).
std::vector<DenseLink::Range> ShareOf(const std::vector<DenseLink::Range>& ranges, int64_t total, int k, int lanes) {
  const int64_t from = total * k / lanes, to = total * (k + 1) / lanes;
  std::vector<DenseLink::Range> out;
  int64_t at = 0;
  for (const DenseLink::Range& r : ranges) {
    const int64_t begin = std::max(at, from), end = std::min(at + r.bytes, to);
    if (begin < end) {
      out.push_back({r.offset + (begin - at), end - begin, r.source == nullptr ? nullptr : r.source + (begin - at)});
    }
    at += r.bytes;
    if (at >= to) break;
  }
  return out;
}

}  // namespace

int DefaultDenseLinkLanes(bool tls) { return tls ? 4 : 2; }

StatusOr<std::unique_ptr<DenseLink>> DenseLink::Start(Lanes out, Lanes in, std::shared_ptr<SharedRegion> region,
                                                    absl::Duration idle) {
  if (out.empty() || out.size() != in.size() || out.size() > static_cast<size_t>(kMaxDenseLinkLanes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a dense link needs 1 to ", kMaxDenseLinkLanes, " lanes each way, not ", out.size(), " and ", in.size()));
  }
  if (region == nullptr) return absl::InvalidArgumentError("a dense link needs a region");
  for (auto& lane : out) lane->set_purpose("dense link");
  for (auto& lane : in) lane->set_purpose("dense link");
  std::unique_ptr<DenseLink> link(new DenseLink(std::move(out), std::move(in), std::move(region), idle));
  const int k = link->lanes();
  for (int i = 0; i < k; ++i) link->threads_.emplace_back(&DenseLink::ReadLane, link.get(), i);
  for (int i = 0; i < k; ++i) link->threads_.emplace_back(&DenseLink::WriteLane, link.get(), i);
  return link;
}

DenseLink::DenseLink(Lanes out, Lanes in, std::shared_ptr<SharedRegion> region, absl::Duration idle)
    : out_(std::move(out)), in_(std::move(in)), region_(std::move(region)), idle_(idle) {
  absl::MutexLock l(&mu_);
  job_ranges_.resize(out_.size());
}

DenseLink::~DenseLink() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  for (const auto& lane : out_) lane->Shutdown();
  for (const auto& lane : in_) lane->Shutdown();
  for (std::thread& t : threads_) t.join();
}

void DenseLink::Break(Status why) {
  {
    absl::MutexLock l(&mu_);
    if (!error_.ok()) return;
    error_ = stopping_ ? absl::CancelledError("the dense link was closed") : std::move(why);
  }
  for (const auto& lane : out_) lane->Shutdown();
  for (const auto& lane : in_) lane->Shutdown();
}

Status DenseLink::status() const {
  absl::MutexLock l(&mu_);
  return error_;
}

Status DenseLink::Send(uint64_t seq, const std::vector<Range>& ranges) {
  PL_RETURN_IF_ERROR(StartSend(seq, ranges));
  return FinishSend();
}

// send_mu_ is held from an OK StartSend to its FinishSend.
Status DenseLink::StartSend(uint64_t seq, const std::vector<Range>& ranges) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  const int64_t size = static_cast<int64_t>(region_->payload_bytes());
  int64_t total = 0;
  for (const Range& r : ranges) {
    if (r.offset < 0 || r.bytes < 0 || r.offset > size || r.bytes > size - r.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense link: range [", r.offset, ", +", r.bytes, ") is outside the region's ", size, " bytes"));
    }
    total += r.bytes;
  }
  send_mu_.Lock();
  absl::MutexLock l(&mu_);
  if (!error_.ok()) {
    send_mu_.Unlock();
    return error_;
  }
  const int k = lanes();
  for (int i = 0; i < k; ++i) job_ranges_[i] = ShareOf(ranges, total, i, k);
  job_seq_ = seq;
  job_done_ = 0;
  ++job_;
  return absl::OkStatus();
}

Status DenseLink::FinishSend() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  Status result;
  {
    absl::MutexLock l(&mu_);
    const int k = lanes();
    auto finished = [this, k]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return job_done_ == k || !error_.ok(); };
    mu_.Await(absl::Condition(&finished));
    result = error_;
  }
  send_mu_.Unlock();
  return result;
}

void DenseLink::WriteLane(int k) {
  uint64_t seen = 0;
  rpc::BulkConnection& lane = *out_[k];
  while (true) {
    uint64_t seq;
    std::vector<Range> ranges;
    {
      absl::MutexLock l(&mu_);
      auto has_job = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !error_.ok() || job_ != seen; };
      mu_.Await(absl::Condition(&has_job));
      if (stopping_ || !error_.ok()) return;
      seen = job_;
      seq = job_seq_;
      ranges = job_ranges_[k];
    }
    // Header and range list in one write, so a small send is one segment.
    std::vector<char> head(sizeof(FrameHeader) + ranges.size() * sizeof(RangeOnWire));
    const FrameHeader h{seq, static_cast<uint32_t>(ranges.size()), 0};
    std::memcpy(head.data(), &h, sizeof(h));
    for (size_t i = 0; i < ranges.size(); ++i) {
      const RangeOnWire w{static_cast<uint64_t>(ranges[i].offset), static_cast<uint64_t>(ranges[i].bytes)};
      std::memcpy(head.data() + sizeof(h) + i * sizeof(w), &w, sizeof(w));
    }
    Status s = lane.Write(head.data(), head.size(), idle_);
    for (size_t i = 0; s.ok() && i < ranges.size(); ++i) {
      const char* from = ranges[i].source != nullptr ? ranges[i].source : region_->payload() + ranges[i].offset;
      s = lane.Write(from, static_cast<size_t>(ranges[i].bytes), idle_);
    }
    if (!s.ok()) Break(std::move(s));
    absl::MutexLock l(&mu_);
    ++job_done_;
  }
}

void DenseLink::ReadLane(int k) {
  while (true) {
    Status s = ReadFrame(k);
    if (!s.ok()) {
      Break(std::move(s));
      return;
    }
  }
}

Status DenseLink::ReadFrame(int k) {
  rpc::BulkConnection& lane = *in_[k];
  FrameHeader h;
  // Between frames a link may idle for as long as the trainer computes.
  PL_RETURN_IF_ERROR(lane.Read(&h, sizeof(h), absl::InfiniteDuration()));
  if (h.ranges > kMaxRangesPerFrame || h.zero != 0) {
    return absl::DataLossError(absl::StrCat("dense link: a frame announces ", h.ranges, " ranges"));
  }
  std::vector<RangeOnWire> ranges(h.ranges);
  PL_RETURN_IF_ERROR(lane.Read(ranges.data(), ranges.size() * sizeof(RangeOnWire), idle_));
  const uint64_t size = region_->payload_bytes();
  for (const RangeOnWire& r : ranges) {
    if (r.offset > size || r.bytes > size - r.offset) {
      return absl::DataLossError(
          absl::StrCat("dense link: range [", r.offset, ", +", r.bytes, ") is outside the region's ", size, " bytes"));
    }
    PL_RETURN_IF_ERROR(lane.Read(region_->payload() + r.offset, r.bytes, idle_));
  }
  absl::MutexLock l(&mu_);
  int& lanes_in = arriving_[h.seq];
  if (++lanes_in == static_cast<int>(in_.size())) {
    arriving_.erase(h.seq);
    landed_.insert(h.seq);
    while (landed_.size() > kRememberedSends) {
      forgotten_ = std::max(forgotten_, *landed_.begin());
      landed_.erase(landed_.begin());
    }
  }
  return absl::OkStatus();
}

Status DenseLink::WaitFor(uint64_t seq, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  auto landed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !error_.ok() || seq <= forgotten_ || landed_.count(seq) > 0;
  };
  if (!mu_.AwaitWithDeadline(absl::Condition(&landed), deadline)) {
    return absl::DeadlineExceededError(absl::StrCat("dense link: send ", seq, " did not arrive in time"));
  }
  return error_;
}

}  // namespace pl
