// A joining replica's snapshot through each dense channel (DenseChannel::SendSnapshot,
// paddle_like/client/dense_channel.h) into a real SnapshotReceiver, the primary's calls
// made in process: through shared memory a window at a time (ShmDenseChannel), over
// sockets of its own and in gRPC pieces (GrpcDenseChannel). Each installs the same shard
// the primary holds; a joiner that takes no shared memory gets it another way with
// nothing lost; a bad window, a bad snapshot and a receiver that stops end the transfer
// with the cause, at both ends.
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "paddle_like/client/grpc_dense_channel.h"
#include "paddle_like/client/region_dense_channel.h"
#include "pserver/replication/snapshot_receiver.h"
#include "pserver/replication/snapshot_windows.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"
#include "tests/pserver/snapshot_test_util.h"

namespace pl::pserver {
namespace {
using snapshot_testing::Adam;
using snapshot_testing::ExpectSameShard;
using snapshot_testing::SnapshotOf;
using testing::AddDense;
using testing::AddRows;
using testing::DenseSpec;
using testing::MakeInit;
using testing::PullBlock;
using testing::SparseSpec;

constexpr int64_t kBigBlocks = 20;
constexpr int64_t kBigBlock = 8192;  // floats: the snapshot is about 2 MB, Adam's slots included

// The shard of snapshot_test_util.h's Train ("w" and "emb") and a larger "big", so that
// a small region takes many windows, after three Adam steps.
void TrainLarge(ParameterShard* shard) {
  ASSERT_TRUE(shard
                  ->Init(MakeInit({DenseSpec("w", {300}, 64), SparseSpec("emb", 4),
                                   DenseSpec("big", {kBigBlocks * kBigBlock}, kBigBlock)},
                                  Adam(), 5))
                  .ok());
  for (int step = 0; step < 3; ++step) {
    proto::PushRequest r;
    r.set_client_id(9);
    r.set_push_id(step + 1);
    for (int b = 0; b < 5; ++b) AddDense(&r, "w", b, std::vector<float>(b == 4 ? 44 : 64, 0.1f * (step + 1)));
    for (int b = 0; b < kBigBlocks; ++b) AddDense(&r, "big", b, std::vector<float>(kBigBlock, 0.01f * (b - step)));
    AddRows(&r, "emb", 4, {3 + step, 70 + step, 1001 + step}, std::vector<float>(12, -0.5f));
    ASSERT_TRUE(shard->Push(PushFrame::FromProtoRef(r)).ok());
  }
}

std::shared_ptr<SharedRegion> Region(size_t payload_bytes) {
  StatusOr<std::shared_ptr<SharedRegion>> region = SharedRegion::Create(payload_bytes);
  EXPECT_TRUE(region.ok()) << region.status();
  return region.ok() ? *region : nullptr;
}

class SnapshotChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(TrainLarge(&primary_));
    bytes_ = SnapshotOf(&primary_);
    ASSERT_GT(bytes_.size(), size_t{1} << 20);
  }

  // A joiner's receiver into joiner_; `shared_memory`: whether it takes the offer.
  void MakeReceiver(bool shared_memory) {
    SnapshotReceiver::Options o;
    o.index = 0;
    o.lanes = 4;
    o.shared_memory = shared_memory;
    SnapshotReceiver::Hooks hooks;
    hooks.accept = [this](const proto::SnapshotChunk&) -> StatusOr<ParameterShard*> { return joiner_.get(); };
    hooks.check_offer = [](const proto::SnapshotChunk&) { return absl::OkStatus(); };
    hooks.installed = [this](int64_t position) { installed_at_ = position; };
    hooks.fatal = [this](const std::string& why) {
      absl::MutexLock l(&fatal_mu_);
      fatal_ = why;
    };
    receiver_ = std::make_unique<SnapshotReceiver>(o, hooks, &follow_mu_);
  }

  // The primary's transfer of `bytes` (the trained shard's unless given); its calls go
  // to the receiver, naming `region` (the one the joiner finds by the call's id).
  SnapshotTransfer Transfer(std::shared_ptr<SharedRegion> region, const std::string* bytes = nullptr) {
    const std::string& b = bytes != nullptr ? *bytes : bytes_;
    SnapshotTransfer t;
    t.header.set_replica_epoch(3);
    t.header.set_seq(41);
    t.header.set_total(static_cast<int64_t>(b.size()));
    t.header.set_replica_id(77);
    StatusOr<uint64_t> payload = ParameterShard::SnapshotPayloadBytes(b);
    t.payload = payload.ok() ? *payload : 0;
    t.read = [&b](uint64_t from, uint64_t to, const ByteWriter& write) { return write(b.data() + from, to - from); };
    t.install = [this, region](const proto::SnapshotChunk& chunk, proto::SnapshotAck* ack) {
      ++calls_;
      return receiver_->OnChunk(chunk, chunk.shm_region() != 0 ? region : nullptr, ack);
    };
    t.host = "127.0.0.1";
    t.timeout = absl::Seconds(10);
    t.how = &how_;
    return t;
  }

  // The joiner holds what the primary holds: every block of "big", then "w" and "emb"
  // with one more step on both (the optimizer's state came too).
  void ExpectInstalled() {
    EXPECT_EQ(installed_at_, 41);
    EXPECT_TRUE(receiver_->installed());
    ASSERT_TRUE(joiner_->initialized());
    for (int b = 0; b < kBigBlocks; ++b) {
      ASSERT_EQ(PullBlock(primary_, "big", b), PullBlock(*joiner_, "big", b)) << "block " << b;
    }
    ExpectSameShard(&primary_, joiner_.get());
    absl::MutexLock l(&fatal_mu_);
    EXPECT_EQ(fatal_, "");
  }

  // The primary's offer of a 128 KB region (id 12) alone, taken by the joiner.
  void OfferSharedMemory(std::shared_ptr<SharedRegion>* region, SnapshotTransfer* t) {
    *region = Region(128 << 10);
    ASSERT_NE(*region, nullptr);
    *t = Transfer(*region);
    proto::SnapshotChunk open = t->header;
    open.set_shm_region(12);
    open.set_shm_open(true);
    proto::SnapshotAck ack;
    ASSERT_TRUE(t->install(open, &ack).ok());
    ASSERT_TRUE(ack.shm_taken());
  }

  std::string fatal() {
    absl::MutexLock l(&fatal_mu_);
    return fatal_;
  }

  ParameterShard primary_{0, 1};
  std::unique_ptr<ParameterShard> joiner_ = std::make_unique<ParameterShard>(0, 1);
  std::string bytes_;
  absl::Mutex follow_mu_;
  absl::Mutex fatal_mu_;
  std::string fatal_ ABSL_GUARDED_BY(fatal_mu_);
  std::atomic<int64_t> installed_at_{-1};
  std::atomic<int> calls_{0};
  std::string how_;
  std::unique_ptr<SnapshotReceiver> receiver_;  // last: stopped before the members it uses go
};

TEST_F(SnapshotChannelTest, SharedMemoryCarriesItAWindowAtATimeIntoTheBlocks) {
  MakeReceiver(/*shared_memory=*/true);
  // 64 KB halves: the 2 MB snapshot takes 31 windows, two in flight.
  std::shared_ptr<SharedRegion> region = Region(128 << 10);
  ASSERT_NE(region, nullptr);
  ShmDenseChannel channel({}, region, /*region_id=*/12);
  const Status sent = channel.SendSnapshot(Transfer(region));
  ASSERT_TRUE(sent.ok()) << sent;
  EXPECT_EQ(how_, "through shared memory");
  const int64_t windows = (static_cast<int64_t>(bytes_.size()) + (64 << 10) - 1) / (64 << 10);
  EXPECT_EQ(calls_, 1 + windows);  // the offer, then one call a window
  ASSERT_NO_FATAL_FAILURE(ExpectInstalled());
}

TEST_F(SnapshotChannelTest, SocketsAndPiecesInstallTheSameShard) {
  for (int lanes : {3, 0}) {
    SCOPED_TRACE(lanes);
    receiver_.reset();
    joiner_ = std::make_unique<ParameterShard>(0, 1);
    bytes_ = SnapshotOf(&primary_);  // ExpectInstalled took both a step further
    installed_at_ = -1;
    MakeReceiver(/*shared_memory=*/true);
    GrpcDenseChannel channel(WireDtype::kFloat32, nullptr);
    SnapshotTransfer t = Transfer(nullptr);
    t.lanes = lanes;
    t.piece_bytes = 100 << 10;  // 21 pieces, 4 in flight
    const Status sent = channel.SendSnapshot(t);
    ASSERT_TRUE(sent.ok()) << sent;
    EXPECT_EQ(how_, lanes > 0 ? "over 3 sockets" : "in pieces");
    ASSERT_NO_FATAL_FAILURE(ExpectInstalled());
  }
}

TEST_F(SnapshotChannelTest, AJoinerThatTakesNoSharedMemoryGetsItAnotherWay) {
  MakeReceiver(/*shared_memory=*/false);
  std::shared_ptr<SharedRegion> region = Region(128 << 10);
  ASSERT_NE(region, nullptr);
  ShmDenseChannel shm({}, region, 12);
  const SnapshotTransfer t = Transfer(region);
  const Status refused = shm.SendSnapshot(t);
  EXPECT_TRUE(absl::IsUnimplemented(refused)) << refused;
  EXPECT_EQ(calls_, 1);  // the offer alone: no byte went
  EXPECT_FALSE(joiner_->initialized());
  EXPECT_EQ(fatal(), "");
  GrpcDenseChannel grpc(WireDtype::kFloat32, nullptr);
  ASSERT_TRUE(grpc.SendSnapshot(t).ok());
  ASSERT_NO_FATAL_FAILURE(ExpectInstalled());
}

TEST_F(SnapshotChannelTest, ARegionTooSmallForAWindowIsRefusedBeforeAnyCall) {
  MakeReceiver(/*shared_memory=*/true);
  std::shared_ptr<SharedRegion> region = Region(4096);  // halves of 2 KB
  ASSERT_NE(region, nullptr);
  ShmDenseChannel channel({}, region, 12);
  const Status sent = channel.SendSnapshot(Transfer(region));
  EXPECT_TRUE(absl::IsUnimplemented(sent)) << sent;
  EXPECT_EQ(calls_, 0);
}

TEST_F(SnapshotChannelTest, AWindowOutsideTheRegionIsRefusedAndTheRightOnesStillInstall) {
  MakeReceiver(/*shared_memory=*/true);
  std::shared_ptr<SharedRegion> region;
  SnapshotTransfer t;
  ASSERT_NO_FATAL_FAILURE(OfferSharedMemory(&region, &t));
  proto::SnapshotChunk bad = t.header;
  bad.set_shm_region(12);
  bad.set_offset(0);
  bad.set_shm_offset(100 << 10);
  bad.set_shm_bytes(64 << 10);  // past the region's 128 KB
  proto::SnapshotAck ack;
  const Status refused = t.install(bad, &ack);
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(std::string(refused.message()).find("outside"), std::string::npos) << refused;
  EXPECT_FALSE(joiner_->initialized());
  // The primary's real windows, after the stray one: nothing of it was taken.
  ShmDenseChannel channel({}, region, 12);
  const Status sent = channel.SendSnapshot(t);
  ASSERT_TRUE(sent.ok()) << sent;
  ASSERT_NO_FATAL_FAILURE(ExpectInstalled());
}

TEST_F(SnapshotChannelTest, ABadSnapshotEndsTheTransferWithTheJoinersCause) {
  MakeReceiver(/*shared_memory=*/true);
  std::shared_ptr<SharedRegion> region = Region(128 << 10);
  ASSERT_NE(region, nullptr);
  // Its first bytes (the layout's magic) garbled: the install fails at once, and the
  // primary's windows, waiting their turn, end with the joiner's cause.
  std::string bad = bytes_;
  bad[0] ^= 0x5a;
  bad[1] ^= 0x5a;
  ShmDenseChannel channel({}, region, 12);
  const Status sent = channel.SendSnapshot(Transfer(region, &bad));
  EXPECT_FALSE(sent.ok());
  EXPECT_FALSE(joiner_->initialized());
  EXPECT_NE(fatal(), "");
  EXPECT_NE(fatal().find("cannot install the primary's snapshot"), std::string::npos) << fatal();
}

TEST_F(SnapshotChannelTest, StoppingTheReceiverEndsAnInstallWaitingForWindows) {
  MakeReceiver(/*shared_memory=*/true);
  std::shared_ptr<SharedRegion> region;
  SnapshotTransfer t;
  ASSERT_NO_FATAL_FAILURE(OfferSharedMemory(&region, &t));
  // The install waits for a window that never comes (30 s before it gives up).
  const absl::Time start = absl::Now();
  receiver_->Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_FALSE(joiner_->initialized());
  EXPECT_EQ(fatal(), "");  // stopped, not a bad snapshot
}

// The windows alone: a window's call returns only once the install has read it, and the
// windows are taken in snapshot order whatever order their calls come in.
TEST(SnapshotWindows, ACallReturnsOnceItsWindowIsReadAndWindowsGoInOrder) {
  std::shared_ptr<SharedRegion> region = Region(8192);
  ASSERT_NE(region, nullptr);
  std::memcpy(region->payload(), "abcd", 4);
  std::memcpy(region->payload() + 4096, "efgh", 4);
  SnapshotWindows windows(region, 8, absl::Seconds(10));
  std::atomic<bool> second_returned{false};
  Status second;
  std::thread late([&] {
    second = windows.Deliver(4, 4096, 4);  // comes first, goes second
    second_returned = true;
  });
  Status first;
  std::thread early([&] { first = windows.Deliver(0, 0, 4); });
  char got[8] = {};
  ASSERT_TRUE(windows.Read(got, 2).ok());
  EXPECT_FALSE(second_returned);
  ASSERT_TRUE(windows.Read(got + 2, 6).ok());  // across both windows
  early.join();
  EXPECT_TRUE(first.ok()) << first;
  EXPECT_EQ(std::string(got, 8), "abcdefgh");
  // The last window's call waits for the install's end, and returns its status.
  EXPECT_FALSE(second_returned);
  windows.Finish(absl::DataLossError("the install's own cause"));
  late.join();
  EXPECT_TRUE(absl::IsDataLoss(second)) << second;
}

}  // namespace
}  // namespace pl::pserver
