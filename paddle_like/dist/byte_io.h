// Where bytes go and come from when a shard's state is written, read or sent (a
// checkpoint, a joining replica's snapshot): callbacks that each move exactly n bytes or
// fail, so the same writer serves a file, a socket, a gRPC message or a shared region.
#ifndef PADDLE_LIKE_DIST_BYTE_IO_H_
#define PADDLE_LIKE_DIST_BYTE_IO_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/types/span.h"
#include "paddle_like/core/status.h"

namespace pl {

using ByteWriter = std::function<Status(const void* data, size_t n)>;
using ByteReader = std::function<Status(void* data, size_t n)>;
// Where a state's dense payload goes, in order: a reader given one fills every span with
// the payload's next bytes, in any order or at once (ScatterReader).
using ByteSpans = std::vector<absl::Span<char>>;
using ScatterReader = std::function<Status(const ByteSpans& spans)>;
// A snapshot's bytes [from, to), handed to `write` in order; it may be called for
// disjoint ranges at once (one per lane, one per window).
using SnapshotSource = std::function<Status(uint64_t from, uint64_t to, const ByteWriter& write)>;

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_BYTE_IO_H_
