#include "paddle_like/dist/snapshot_lanes.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "paddle_like/dist/page_warmer.h"

namespace pl {
namespace {

constexpr size_t kPreambleBytes = 16;  // u32 lane | u32 lanes | u64 payload
constexpr size_t kMaxReplyMessage = 1024;
// A stranger (or a lane that stalls) gets a second for its handshake, token and preamble.
constexpr absl::Duration kPreambleWithin = absl::Seconds(1);

// Lane k's slice of the payload: [first, second).
std::pair<uint64_t, uint64_t> Slice(uint64_t payload, int k, int lanes) {
  return {payload * k / lanes, payload * (k + 1) / lanes};
}

// fn(k) for every lane, each on a thread of its own (k = 0 on this one). The first
// error shuts every lane down, so that the others, blocked on a peer that will never
// read or write again, end at once; it is the one returned.
Status OnEveryLane(const SnapshotLanes& lanes, const std::function<Status(int)>& fn) {
  absl::Mutex mu;
  Status first;
  auto run = [&](int k) {
    Status s = fn(k);
    if (s.ok()) return;
    absl::MutexLock l(&mu);
    if (!first.ok()) return;
    first = std::move(s);
    for (const auto& lane : lanes) lane->Shutdown();
  };
  std::vector<std::thread> threads;
  for (int k = 1; k < static_cast<int>(lanes.size()); ++k) threads.emplace_back(run, k);
  run(0);
  for (std::thread& t : threads) t.join();
  return first;
}

}  // namespace

int DefaultSnapshotLanes(bool tls) {
  if (tls) return 4;
  return std::clamp(static_cast<int>(std::thread::hardware_concurrency() / 4), 1, 4);
}

StatusOr<SnapshotLanes> DialLanes(const std::string& host, int port, int lanes, const std::string& token,
                                  uint64_t payload, absl::Duration timeout, const std::atomic<bool>* cancel,
                                  const std::string& peer) {
  lanes = std::clamp(lanes, 1, kMaxSnapshotLanes);
  // The certificates read once for all the lanes' handshakes.
  PL_ASSIGN_OR_RETURN(std::shared_ptr<const rpc::TlsContext> tls, rpc::BulkTlsContext(rpc::TlsSide::kClient));
  std::vector<StatusOr<std::unique_ptr<rpc::BulkConnection>>> dialled(lanes);
  // Each lane presents itself as soon as it is up: the joiner gives a connection a
  // moment only before it closes it as a stranger's.
  auto dial = [&](int k) {
    dialled[k] = rpc::BulkConnection::Dial(host, port, timeout, cancel, peer, tls);
    if (!dialled[k].ok()) return;
    std::string opening = token;
    const uint64_t preamble[2] = {static_cast<uint64_t>(k) | (static_cast<uint64_t>(lanes) << 32), payload};
    opening.append(reinterpret_cast<const char*>(preamble), kPreambleBytes);
    Status s = (*dialled[k])->Write(opening.data(), opening.size(), timeout);
    if (!s.ok()) dialled[k] = s;
  };
  std::vector<std::thread> threads;
  for (int k = 1; k < lanes; ++k) threads.emplace_back(dial, k);
  dial(0);
  for (std::thread& t : threads) t.join();
  SnapshotLanes out;
  for (auto& d : dialled) {
    if (!d.ok()) return d.status();
    out.push_back(*std::move(d));
  }
  return out;
}

Status SendOverLanes(const SnapshotLanes& lanes, uint64_t size, uint64_t payload, const SnapshotSource& snapshot,
                     absl::Duration idle) {
  const int n = static_cast<int>(lanes.size());
  if (n == 0 || payload > size) {
    return absl::InvalidArgumentError(
        absl::StrCat("a snapshot of ", size, " bytes with a payload of ", payload, " over ", n, " lanes"));
  }
  const uint64_t head = size - payload;
  PL_RETURN_IF_ERROR(OnEveryLane(lanes, [&](int k) -> Status {
    rpc::BulkConnection& lane = *lanes[k];
    const ByteWriter write = [&lane, idle](const void* data, size_t bytes) { return lane.Write(data, bytes, idle); };
    const auto [from, to] = Slice(payload, k, n);
    if (k == 0) return snapshot(0, head + to, write);  // the head, then its slice
    return snapshot(head + from, head + to, write);
  }));
  // The joiner answers once the shard is installed.
  uint32_t result[2] = {0, 0};
  PL_RETURN_IF_ERROR(lanes[0]->Read(result, sizeof(result), idle));
  std::string message(std::min<uint32_t>(result[1], kMaxReplyMessage), '\0');
  PL_RETURN_IF_ERROR(lanes[0]->Read(message.data(), message.size(), idle));
  if (result[0] != 0) {
    return absl::Status(static_cast<absl::StatusCode>(result[0]), absl::StrCat("snapshot over a socket: ", message));
  }
  return absl::OkStatus();
}

StatusOr<std::unique_ptr<LaneReceiver>> LaneReceiver::Accept(rpc::BulkListener* listener, int lanes,
                                                             absl::Time deadline) {
  lanes = std::clamp(lanes, 1, kMaxSnapshotLanes);
  // Each connection's handshake, token and preamble are vetted on a thread of its own,
  // so that K lanes' handshakes overlap instead of queueing one behind the other. At
  // most as many are vetted at once as lanes are still missing; a stranger's holds its
  // place for a second at most.
  absl::Mutex mu;
  SnapshotLanes got(lanes);
  int count = 0, vetting = 0;
  uint64_t payload = 0;
  auto vet = [&](std::unique_ptr<rpc::BulkConnection> conn) {
    uint64_t preamble[2] = {0, 0};
    const absl::Time within = std::min(deadline, absl::Now() + kPreambleWithin);
    const bool spoke = listener->Admit(*conn, within).ok() &&
                       conn->Read(preamble, kPreambleBytes, std::max(within - absl::Now(), absl::Milliseconds(1))).ok();
    const uint64_t lane = preamble[0] & 0xffffffffu;
    const uint64_t of = preamble[0] >> 32;
    absl::MutexLock l(&mu);
    --vetting;
    // Lanes of one sender agree on the count and the payload; anything else is closed.
    if (!spoke || of != static_cast<uint64_t>(lanes) || lane >= of || got[lane] != nullptr ||
        (count > 0 && preamble[1] != payload)) {
      return;
    }
    payload = preamble[1];
    got[lane] = std::move(conn);
    ++count;
  };
  std::vector<std::thread> vetters;
  Status status;
  while (true) {
    {
      absl::MutexLock l(&mu);
      auto settled = [&] { return count + vetting < lanes || count == lanes; };
      if (!mu.AwaitWithDeadline(absl::Condition(&settled), deadline)) {
        status = absl::UnavailableError("waiting for the snapshot's lanes: timed out");
        break;
      }
      if (count == lanes) break;
    }
    StatusOr<std::unique_ptr<rpc::BulkConnection>> conn = listener->NextConnection(deadline);
    if (!conn.ok()) {
      status = conn.status();
      break;
    }
    {
      absl::MutexLock l(&mu);
      ++vetting;
    }
    vetters.emplace_back(vet, *std::move(conn));
  }
  for (std::thread& t : vetters) t.join();
  PL_RETURN_IF_ERROR(status);
  return std::unique_ptr<LaneReceiver>(new LaneReceiver(std::move(got), payload));
}

Status LaneReceiver::Read(void* data, size_t n, absl::Duration idle) { return lanes_[0]->Read(data, n, idle); }

Status LaneReceiver::Scatter(const ByteSpans& spans, absl::Duration idle) {
  uint64_t total = 0;
  for (const absl::Span<char>& s : spans) total += s.size();
  if (total != payload_) {
    return absl::DataLossError(
        absl::StrCat("the snapshot's blocks take ", total, " bytes; its lanes carry ", payload_));
  }
  const int n = lanes();
  return OnEveryLane(lanes_, [&](int k) -> Status {
    const auto [from, to] = Slice(payload_, k, n);
    uint64_t at = 0;  // the payload offset of the span's start
    for (const absl::Span<char>& s : spans) {
      const uint64_t begin = std::max(at, from), end = std::min(at + s.size(), to);
      if (begin < end) {
        // The blocks are fresh memory: their pages in at once, not a fault per page.
        PopulateForWrite(s.data() + (begin - at), end - begin);
        PL_RETURN_IF_ERROR(lanes_[k]->Read(s.data() + (begin - at), end - begin, idle));
      }
      at += s.size();
      if (at >= to) break;
    }
    return absl::OkStatus();
  });
}

Status LaneReceiver::Reply(const Status& result, absl::Duration idle) {
  const std::string message = std::string(result.message()).substr(0, kMaxReplyMessage);
  const uint32_t head[2] = {static_cast<uint32_t>(result.code()), static_cast<uint32_t>(message.size())};
  std::string bytes(reinterpret_cast<const char*>(head), sizeof(head));
  bytes += message;
  return lanes_[0]->Write(bytes.data(), bytes.size(), idle);
}

}  // namespace pl
