// ShardSnapshot (pserver/store/shard_snapshot.h): a primary's snapshot pins its dense blocks
// instead of copying them; updates made meanwhile copy a block first, so the snapshot
// still sends the shard as it was when taken, and each block goes back to updating in
// place once its bytes have been sent.
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pserver/store/shard.h"
#include "pserver/store/shard_snapshot.h"
#include "tests/pserver/pserver_test_util.h"
#include "tests/pserver/snapshot_test_util.h"

namespace pl::pserver {

class ShardSnapshotTestAccess {
 public:
  static std::string Buffer(const ParameterShard& s) { return s.SnapshotBuffer(); }
  static StatusOr<ShardSnapshot> Take(const ParameterShard& s, std::string buffer) {
    return s.TakeSnapshot(s.version(), std::move(buffer));
  }
};

namespace {
using snapshot_testing::ExpectSameShard;
using snapshot_testing::Train;
using testing::AddDense;

// Every dense block of "w" moves by the same push.
void PushDense(ParameterShard* shard, int64_t push_id) {
  proto::PushRequest r;
  r.set_client_id(11);
  r.set_push_id(push_id);
  for (int b = 0; b < 5; ++b) AddDense(&r, "w", b, std::vector<float>(b == 4 ? 44 : 64, 0.7f));
  ASSERT_TRUE(shard->Push(PushFrame::FromProtoRef(r)).ok());
}

ShardSnapshot Take(ParameterShard* shard) {
  ShardSnapshot out;
  shard->RequestSnapshot([&out](StatusOr<ShardSnapshot> s, int64_t) {
    ASSERT_TRUE(s.ok()) << s.status();
    out = *std::move(s);
  });
  return out;
}

std::string Sent(ShardSnapshot* s, uint64_t from, uint64_t to) {
  std::string out;
  Status st = s->Send(from, to, [&out](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return absl::OkStatus();
  });
  EXPECT_TRUE(st.ok()) << st;
  return out;
}

TEST(ShardSnapshot, SendsTheShardAsItWasWhenTakenWhileUpdatesGoOn) {
  ParameterShard a(0, 1), twin(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  ASSERT_NO_FATAL_FAILURE(Train(&twin));
  ShardSnapshot snapshot = Take(&a);
  const std::string taken = snapshot.Bytes();
  for (int i = 1; i <= 3; ++i) ASSERT_NO_FATAL_FAILURE(PushDense(&a, i));
  // The shard moved on; the snapshot did not.
  EXPECT_NE(testing::PullBlock(a, "w", 0), testing::PullBlock(twin, "w", 0));
  EXPECT_EQ(Sent(&snapshot, 0, snapshot.size()), taken);
  // What it sent is the twin that had none of the later pushes; the shard's own updates
  // (on the copies the pushes made) went on exactly as on a shard never snapshotted.
  ParameterShard joiner(0, 1), before(0, 1);
  ASSERT_TRUE(joiner.LoadSnapshot(taken).ok());
  ASSERT_NO_FATAL_FAILURE(Train(&before));
  ExpectSameShard(&before, &joiner);
  for (int i = 1; i <= 3; ++i) ASSERT_NO_FATAL_FAILURE(PushDense(&twin, i));
  ExpectSameShard(&a, &twin);
}

TEST(ShardSnapshot, ABlockUpdatesInPlaceAgainOnceItsBytesAreSent) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  ShardSnapshot snapshot = Take(&a);
  const std::string taken = snapshot.Bytes();
  const uint64_t head = snapshot.size() - snapshot.payload_bytes();
  const uint64_t block0 = 64 * 3 * sizeof(float);  // value and Adam's 2 slots
  // Block 0 and half of block 1 sent; then every block is updated.
  Sent(&snapshot, 0, head + block0 + block0 / 2);
  ASSERT_NO_FATAL_FAILURE(PushDense(&a, 1));
  const std::string now = snapshot.Bytes();
  // Block 0 was released, so the update went into the buffer the snapshot still points
  // at; block 1 was still pinned, so the update took a copy and left it as it was.
  EXPECT_NE(now.substr(head, block0), taken.substr(head, block0));
  EXPECT_EQ(now.substr(head + block0), taken.substr(head + block0));
  float value = 0;
  std::memcpy(&value, now.data() + head, sizeof(float));
  EXPECT_EQ(value, testing::PullBlock(a, "w", 0)[0]);
  // The rest is still the snapshot's, whatever was updated meanwhile.
  EXPECT_EQ(Sent(&snapshot, head + block0 + block0 / 2, snapshot.size()), taken.substr(head + block0 + block0 / 2));
}

TEST(ShardSnapshot, TwoJoinersSnapshotsEachHoldTheBlocksUntilReleased) {
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  ShardSnapshot snapshot = Take(&a);
  const std::string taken = snapshot.Bytes();
  ShardSnapshot second = Take(&a);  // two joiners at once: each holds its own pin
  snapshot.Release();
  EXPECT_TRUE(snapshot.empty());
  ASSERT_NO_FATAL_FAILURE(PushDense(&a, 1));
  EXPECT_EQ(second.Bytes(), taken);  // the other still held the blocks: copied, not changed
  second.Release();
  ASSERT_NO_FATAL_FAILURE(PushDense(&a, 2));
  ParameterShard twin(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&twin));
  for (int i = 1; i <= 2; ++i) ASSERT_NO_FATAL_FAILURE(PushDense(&twin, i));
  ExpectSameShard(&a, &twin);
}

TEST(ShardSnapshot, AHeadThatOutgrowsItsBufferIsStillWhole) {
  // The buffer is sized before the order lock; rows that arrive in between make the head
  // longer than it, and the lengths in the header are the written ones.
  ParameterShard a(0, 1);
  ASSERT_NO_FATAL_FAILURE(Train(&a));
  for (const bool grown : {true, false}) {
    SCOPED_TRACE(grown);
    std::string buffer = ShardSnapshotTestAccess::Buffer(a);
    const size_t room = buffer.capacity();
    if (grown) {
      proto::PushRequest r;
      r.set_client_id(12);
      r.set_push_id(1);
      std::vector<int64_t> ids;
      for (int64_t id = 5000; id < 5000 + static_cast<int64_t>(room); id += 7) ids.push_back(id);
      testing::AddRows(&r, "emb", 4, ids, std::vector<float>(ids.size() * 4, 0.125f));
      ASSERT_TRUE(a.Push(PushFrame::FromProtoRef(r)).ok());
    }
    StatusOr<ShardSnapshot> s = ShardSnapshotTestAccess::Take(a, std::move(buffer));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->size() > room, grown);
    ParameterShard b(0, 1);
    const Status loaded = b.LoadSnapshot(s->Bytes());
    ASSERT_TRUE(loaded.ok()) << loaded;
    ExpectSameShard(&a, &b);
    if (grown) {
      const std::vector<int64_t> ids = {5000, 5007, 5000 + 7 * 100};
      EXPECT_EQ(testing::PullRows(a, "emb", ids), testing::PullRows(b, "emb", ids));
    }
  }
}

}  // namespace
}  // namespace pl::pserver
