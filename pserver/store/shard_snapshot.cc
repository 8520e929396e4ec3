#include "pserver/store/shard_snapshot.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pl::pserver {

ShardSnapshot::ShardSnapshot(std::string head, std::vector<ShardStore::DensePin> pins)
    : head_(std::move(head)), size_(head_.size()) {
  parts_.reserve(pins.size());
  for (ShardStore::DensePin& pin : pins) {
    auto part = std::make_unique<Part>();
    part->at = size_ - head_.size();
    part->unsent = pin.bytes;
    size_ += pin.bytes;
    part->pin = std::move(pin);
    parts_.push_back(std::move(part));
  }
}

ShardSnapshot& ShardSnapshot::operator=(ShardSnapshot&& other) noexcept {
  if (this != &other) {
    Release();
    head_ = std::move(other.head_);
    parts_ = std::move(other.parts_);
    size_ = other.size_;
    taken_in_ = other.taken_in_;
    other.size_ = 0;
  }
  return *this;
}

Status ShardSnapshot::Send(uint64_t from, uint64_t to, const ByteWriter& write) {
  if (from > to || to > size_) {
    return absl::OutOfRangeError(absl::StrCat("bytes [", from, ", ", to, ") of a snapshot of ", size_));
  }
  if (from < head_.size()) {
    const uint64_t end = std::min<uint64_t>(to, head_.size());
    PL_RETURN_IF_ERROR(write(head_.data() + from, end - from));
    from = end;
  }
  if (from == to) return absl::OkStatus();
  const uint64_t base = head_.size();
  // The first block holding byte `from`: the last one starting at or before it.
  auto it = std::upper_bound(parts_.begin(), parts_.end(), from - base,
                             [](uint64_t offset, const std::unique_ptr<Part>& p) { return offset < p->at; });
  for (--it; from < to; ++it) {
    Part& part = **it;
    const uint64_t begin = from - base - part.at;
    const uint64_t n = std::min<uint64_t>(part.pin.bytes - begin, to - from);
    PL_RETURN_IF_ERROR(write(reinterpret_cast<const char*>(part.pin.data.get()) + begin, n));
    from += n;
    // Written means copied out (into the kernel, or the cipher's buffer): the block may
    // go back to updating in place once all of it is.
    uint64_t unsent = part.unsent.load();
    uint64_t left = 0;
    do {
      left = unsent > n ? unsent - n : 0;
    } while (unsent > 0 && !part.unsent.compare_exchange_weak(unsent, left));
    if (unsent > 0 && left == 0) ShardStore::Unpin(part.pin);
  }
  return absl::OkStatus();
}

std::string ShardSnapshot::Bytes() const {
  std::string out;
  out.reserve(size_);
  out += head_;
  for (const auto& part : parts_) out.append(reinterpret_cast<const char*>(part->pin.data.get()), part->pin.bytes);
  return out;
}

void ShardSnapshot::Release() {
  for (const auto& part : parts_) {
    if (part->unsent.exchange(0) > 0) ShardStore::Unpin(part->pin);
  }
  parts_.clear();
  head_.clear();
  size_ = 0;
}

}  // namespace pl::pserver
