// A joining replica's snapshot (ParameterShard::RequestSnapshot / LoadSnapshot) and the
// sockets it may travel on (paddle_like/rpc/bulk_socket.h, paddle_like/dist/snapshot_lanes.h): a loaded
// snapshot is the same shard byte for byte, a bad one leaves the shard fresh, over
// several lanes each slice lands in its blocks, and over a socket (plain and mutual
// TLS) only the primary that holds the token and the shard's certificate gets its
// bytes in.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "paddle_like/dist/snapshot_lanes.h"
#include "paddle_like/rpc/bulk_socket.h"
#include "paddle_like/rpc/tls.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"
#include "tests/pserver/snapshot_test_util.h"
#include "tests/testing/process_tls.h"

namespace pl::pserver {
namespace {
using testing::AddDense;
using snapshot_testing::ExpectSameShard;
using snapshot_testing::SnapshotOf;
using snapshot_testing::Train;

// A string's bytes as a snapshot source (snapshot_lanes.h).
SnapshotSource FromString(const std::string& bytes) {
  return [&bytes](uint64_t from, uint64_t to, const ByteWriter& write) {
    return write(bytes.data() + from, to - from);
  };
}

TEST(Snapshot, LoadsAShardThatGoesOnIdentically) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  const std::string bytes = SnapshotOf(&a);
  ParameterShard b(0, 1);
  ASSERT_TRUE(b.LoadSnapshot(bytes).ok());
  EXPECT_EQ(b.ledger_clients(), 1);
  // The ledger came too: a retried push is recognised as applied.
  proto::PushRequest retry;
  retry.set_client_id(9);
  retry.set_push_id(3);
  AddDense(&retry, "w", 0, std::vector<float>(64, 1.0f));
  const int64_t before = b.version();
  ASSERT_TRUE(b.Push(PushFrame::FromProtoRef(retry)).ok());
  EXPECT_EQ(b.version(), before);
  ExpectSameShard(&a, &b);
}

TEST(Snapshot, ABadSnapshotIsRefusedAndLeavesTheShardFresh) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  const std::string bytes = SnapshotOf(&a);
  ParameterShard b(0, 1);
  // Cut inside the dense blocks: the parameters exist by then, half filled.
  Status cut = b.LoadSnapshot(std::string_view(bytes).substr(0, bytes.size() - 200));
  EXPECT_TRUE(absl::IsDataLoss(cut)) << cut;
  EXPECT_FALSE(b.initialized());
  std::string wrong = bytes;
  wrong[1] = 'X';
  Status magic = b.LoadSnapshot(wrong);
  EXPECT_TRUE(absl::IsDataLoss(magic)) << magic;
  EXPECT_NE(magic.message().find("PLS3"), std::string::npos) << magic;
  // Nothing of the failed attempts stays: the whole snapshot loads after them.
  ASSERT_TRUE(b.LoadSnapshot(bytes).ok());
  ExpectSameShard(&a, &b);
}

// The primary's side in a thread: dial, token, bytes; the joiner's side loads off the socket.
struct Transfer {
  Status sent;    // the primary's
  Status loaded;  // the joiner's
};

// Both ends succeeded and the joiner now holds the primary's shard.
void ExpectDelivered(const Transfer& t, ParameterShard* primary, ParameterShard* joiner) {
  ASSERT_TRUE(t.sent.ok()) << t.sent;
  ASSERT_TRUE(t.loaded.ok()) << t.loaded;
  ExpectSameShard(primary, joiner);
}
Transfer SendAndLoad(const std::string& bytes, const std::string& token_to_send, const std::string& dial_peer,
                   const std::string& listen_peer, ParameterShard* into) {
  std::atomic<bool> cancel{false};
  StatusOr<std::unique_ptr<rpc::BulkListener>> listener = rpc::BulkListener::Open("127.0.0.1", &cancel, listen_peer);
  if (!listener.ok()) return {listener.status(), listener.status()};
  Status sent;
  const std::string token = token_to_send.empty() ? (*listener)->token() : token_to_send;
  std::thread primary([&] {
    StatusOr<std::unique_ptr<rpc::BulkConnection>> c =
        rpc::BulkConnection::Dial("127.0.0.1", (*listener)->port(), absl::Seconds(5), &cancel, dial_peer);
    if (!c.ok()) {
      sent = c.status();
      return;
    }
    sent = (*c)->Write(token.data(), token.size(), absl::Seconds(5));
    if (sent.ok()) sent = (*c)->Write(bytes.data(), bytes.size(), absl::Seconds(5));
    char done = 0;
    if (sent.ok()) sent = (*c)->Read(&done, 1, absl::Seconds(5));
  });
  StatusOr<std::unique_ptr<rpc::BulkConnection>> conn = (*listener)->Accept(absl::Now() + absl::Seconds(3));
  Status loaded = conn.status();
  if (conn.ok()) {
    loaded = into->LoadSnapshot([&](void* d, size_t n) { return (*conn)->Read(d, n, absl::Seconds(5)); });
    const char done = 1;
    if (loaded.ok()) loaded = (*conn)->Write(&done, 1, absl::Seconds(5));
  }
  cancel = true;  // a refused primary may still be waiting
  primary.join();
  return {sent, loaded};
}

TEST(SnapshotSocket, CarriesTheSnapshotStraightIntoTheShard) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  ParameterShard b(0, 1);
  const Transfer t = SendAndLoad(SnapshotOf(&a), "", "", "", &b);
  ASSERT_NO_FATAL_FAILURE(ExpectDelivered(t, &a, &b));
}

TEST(SnapshotSocket, AConnectionWithoutTheTokenIsClosedUnread) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  ParameterShard b(0, 1);
  const Transfer t = SendAndLoad(SnapshotOf(&a), std::string(rpc::kBulkTokenBytes, 'x'), "", "", &b);
  EXPECT_FALSE(t.sent.ok());
  EXPECT_TRUE(absl::IsUnavailable(t.loaded)) << t.loaded;  // no connection with the token came
  EXPECT_FALSE(b.initialized());
}

TEST(SnapshotSocket, ACancelEndsAWaitingAcceptAtOnce) {
  std::atomic<bool> cancel{false};
  auto listener = rpc::BulkListener::Open("127.0.0.1", &cancel, "");
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel = true;
  });
  const absl::Time start = absl::Now();
  auto conn = (*listener)->Accept(absl::Now() + absl::Seconds(60));
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(conn.status())) << conn.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));  // bounded by the 60 s deadline otherwise
}

TEST(Snapshot, EndsWithItsDenseFloats) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  const std::string bytes = SnapshotOf(&a);
  StatusOr<uint64_t> payload = ParameterShard::SnapshotPayloadBytes(bytes);
  ASSERT_TRUE(payload.ok()) << payload.status();
  EXPECT_EQ(*payload, 300u * 3 * sizeof(float));  // "w": 300 values and Adam's 2 slots of each
  // Its last float is the last block's second slot, as a pull of that block does not
  // show; the first of the payload is block 0's first value, which a pull does.
  float first = 0;
  std::memcpy(&first, bytes.data() + bytes.size() - *payload, sizeof(float));
  EXPECT_EQ(first, testing::PullBlock(a, "w", 0)[0]);
  EXPECT_TRUE(absl::IsDataLoss(ParameterShard::SnapshotPayloadBytes(bytes.substr(0, bytes.size() - 1)).status()));
}

// The primary's side of a snapshot over `lanes` lanes in a thread, with `payload` in
// its preambles (the true one unless given), the joiner's side here; with TLS both
// ends hold the certificate of `peer`.
Transfer SendAndLoadOverLanes(const std::string& bytes, int lanes, ParameterShard* into, int64_t payload = -1,
                              const std::string& peer = "", int silent_strangers = 0,
                              absl::Duration accept_within = absl::Seconds(5)) {
  std::atomic<bool> cancel{false};
  StatusOr<std::unique_ptr<rpc::BulkListener>> listener = rpc::BulkListener::Open("127.0.0.1", &cancel, peer);
  if (!listener.ok()) return {listener.status(), listener.status()};
  // Connections that never speak, queued before the primary's lanes.
  std::vector<int> strangers;
  for (int i = 0; i < silent_strangers; ++i) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>((*listener)->port()));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    strangers.push_back(::socket(AF_INET, SOCK_STREAM, 0));
    if (::connect(strangers.back(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
      for (int fd : strangers) ::close(fd);
      return {absl::InternalError("stranger cannot connect"), absl::InternalError("stranger cannot connect")};
    }
  }
  StatusOr<uint64_t> true_payload = ParameterShard::SnapshotPayloadBytes(bytes);
  if (!true_payload.ok()) return {true_payload.status(), true_payload.status()};
  Status sent;
  std::thread primary([&] {
    const uint64_t announced = payload < 0 ? *true_payload : payload;
    StatusOr<SnapshotLanes> c = DialLanes("127.0.0.1", (*listener)->port(), lanes, (*listener)->token(), announced,
                                          absl::Seconds(5), &cancel, peer);
    sent = c.ok() ? SendOverLanes(*c, bytes.size(), announced, FromString(bytes), absl::Seconds(5)) : c.status();
  });
  StatusOr<std::unique_ptr<LaneReceiver>> in = LaneReceiver::Accept(listener->get(), lanes, absl::Now() + accept_within);
  Status loaded = in.status();
  if (in.ok()) {
    loaded = into->LoadSnapshot([&](void* d, size_t n) { return (*in)->Read(d, n, absl::Seconds(5)); },
                                [&](const ByteSpans& spans) { return (*in)->Scatter(spans, absl::Seconds(5)); });
    (void)(*in)->Reply(loaded, absl::Seconds(5));
  }
  cancel = true;
  primary.join();
  for (int fd : strangers) ::close(fd);
  return {sent, loaded};
}

TEST(SnapshotLanes, EachSliceLandsInItsBlocks) {
  // 3600 bytes of floats in 5 blocks: 3 lanes cut blocks in the middle, 7 lanes more so.
  for (int lanes : {1, 3, 7}) {
    SCOPED_TRACE(lanes);
    ParameterShard a(0, 1);
    ASSERT_NO_FATAL_FAILURE(Train(&a));
    ParameterShard b(0, 1);
    const Transfer t = SendAndLoadOverLanes(SnapshotOf(&a), lanes, &b);
    ASSERT_NO_FATAL_FAILURE(ExpectDelivered(t, &a, &b));
  }
}

TEST(SnapshotLanes, APayloadOtherThanTheBlocksIsRefusedAtBothEnds) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  const std::string bytes = SnapshotOf(&a);
  ParameterShard b(0, 1);
  const Transfer t = SendAndLoadOverLanes(bytes, 3, &b, /*payload=*/300 * 3 * 4 - 8);
  EXPECT_TRUE(absl::IsDataLoss(t.loaded)) << t.loaded;
  EXPECT_TRUE(absl::IsDataLoss(t.sent)) << t.sent;  // the joiner's answer
  EXPECT_FALSE(b.initialized());
  ASSERT_TRUE(SendAndLoadOverLanes(bytes, 3, &b).loaded.ok());  // and the shard takes the right one after
  ExpectSameShard(&a, &b);
}

TEST(SnapshotLanes, SilentStrangersAreVettedBesideEachOtherNotOneAfterTheOther) {
  // Three connections that never speak fill the three vetting places for their second
  // each, together; vetted one after the other they would take 3 s, past the deadline.
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  ParameterShard b(0, 1);
  const Transfer t = SendAndLoadOverLanes(SnapshotOf(&a), 3, &b, -1, "", /*silent_strangers=*/3,
                                          /*accept_within=*/absl::Milliseconds(2500));
  ASSERT_NO_FATAL_FAILURE(ExpectDelivered(t, &a, &b));
}

TEST(SnapshotLanes, ALaneThatDiesEndsTheInstallAtOnce) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  const std::string bytes = SnapshotOf(&a);
  const uint64_t payload = *ParameterShard::SnapshotPayloadBytes(bytes);
  std::atomic<bool> cancel{false};
  auto listener = rpc::BulkListener::Open("127.0.0.1", &cancel, "");
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::atomic<bool> receiver_done{false};
  // A primary that sends half of each lane's slice, then loses lane 2 while the other
  // two stay open and silent: their reads end with lane 2's, not after their 30 s.
  std::thread primary([&] {
    StatusOr<SnapshotLanes> c =
        DialLanes("127.0.0.1", (*listener)->port(), 3, (*listener)->token(), payload, absl::Seconds(5), &cancel, "");
    ASSERT_TRUE(c.ok()) << c.status();
    const size_t head = bytes.size() - payload;
    ASSERT_TRUE((*c)[0]->Write(bytes.data(), head + payload / 6, absl::Seconds(5)).ok());
    ASSERT_TRUE((*c)[1]->Write(bytes.data() + head + payload / 3, payload / 6, absl::Seconds(5)).ok());
    ASSERT_TRUE((*c)[2]->Write(bytes.data() + head + 2 * payload / 3, payload / 6, absl::Seconds(5)).ok());
    (*c)[2].reset();
    // Lanes 0 and 1 stay open and silent until the receiver is done, or for 25 s.
    for (int i = 0; i < 250 && !receiver_done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  });
  auto in = LaneReceiver::Accept(listener->get(), 3, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(in.ok()) << in.status();
  ParameterShard b(0, 1);
  const absl::Time start = absl::Now();
  const Status loaded =
      b.LoadSnapshot([&](void* d, size_t n) { return (*in)->Read(d, n, absl::Seconds(30)); },
                     [&](const ByteSpans& spans) { return (*in)->Scatter(spans, absl::Seconds(30)); });
  const absl::Duration took = absl::Now() - start;
  receiver_done = true;
  primary.join();
  EXPECT_TRUE(absl::IsUnavailable(loaded)) << loaded;
  EXPECT_NE(loaded.message().find("closed with"), std::string::npos) << loaded;
  EXPECT_LT(took, absl::Seconds(20));  // not the 25 s lanes 0 and 1 stay silent
  EXPECT_FALSE(b.initialized());
}

using SnapshotSocketTls = ::pl::testing::ProcessTlsTest;  // this process is pserver-0 of a fresh job

TEST_F(SnapshotSocketTls, TheShardsOwnReplicasGetTheBytesThrough) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  ParameterShard b(0, 1);
  const Transfer t = SendAndLoad(SnapshotOf(&a), "", "pserver-0", "pserver-0", &b);
  ASSERT_NO_FATAL_FAILURE(ExpectDelivered(t, &a, &b));
}

TEST_F(SnapshotSocketTls, AnotherShardsCertificateIsRefusedByBothEnds) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  const std::string bytes = SnapshotOf(&a);
  ParameterShard b(0, 1);
  // The primary expects shard 1's replica; this one's certificate says pserver-0.
  Transfer t = SendAndLoad(bytes, "", "pserver-1", "pserver-0", &b);
  EXPECT_TRUE(absl::IsPermissionDenied(t.sent)) << t.sent;
  EXPECT_NE(t.sent.message().find("\"pserver-0\", not \"pserver-1\""), std::string::npos) << t.sent;
  EXPECT_TRUE(absl::IsUnavailable(t.loaded)) << t.loaded;
  EXPECT_FALSE(b.initialized());
  // The joiner expects shard 1's primary: it closes the connection unread.
  t = SendAndLoad(bytes, "", "pserver-0", "pserver-1", &b);
  EXPECT_FALSE(t.sent.ok());
  EXPECT_TRUE(absl::IsUnavailable(t.loaded)) << t.loaded;
  EXPECT_FALSE(b.initialized());
}

TEST_F(SnapshotSocketTls, LanesEachRunTheirOwnTls) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  ParameterShard b(0, 1);
  const Transfer t = SendAndLoadOverLanes(SnapshotOf(&a), 3, &b, /*payload=*/-1, "pserver-0");
  ASSERT_NO_FATAL_FAILURE(ExpectDelivered(t, &a, &b));
}

}  // namespace
}  // namespace pl::pserver
