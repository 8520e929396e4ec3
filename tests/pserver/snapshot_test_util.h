// Shards for the snapshot tests (snapshot_test.cc, shard_snapshot_test.cc): a small
// trained one, and a comparison that takes the optimizer's state into account.
#ifndef TESTS_PSERVER_SNAPSHOT_TEST_UTIL_H_
#define TESTS_PSERVER_SNAPSHOT_TEST_UTIL_H_

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "pserver/store/shard.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver::snapshot_testing {
using testing::AddDense;
using testing::AddRows;
using testing::DenseSpec;
using testing::MakeInit;
using testing::SparseSpec;

inline OptimizerSpec Adam() {
  OptimizerSpec o;
  o.kind = OptimizerKind::kAdam;
  o.learning_rate = 0.01f;
  return o;
}

// Pushes one more Adam step to both and compares every value: equal only when the
// values and the optimizer's slots and step counts all came across.
inline void ExpectSameShard(ParameterShard* a, ParameterShard* b);

// A shard with a dense parameter, a sparse table and some Adam steps on both.
inline void Train(ParameterShard* shard) {
  ASSERT_TRUE(shard->Init(MakeInit({DenseSpec("w", {300}, 64), SparseSpec("emb", 4)}, Adam(), 5)).ok());
  for (int step = 0; step < 3; ++step) {
    proto::PushRequest r;
    r.set_client_id(9);
    r.set_push_id(step + 1);
    for (int b = 0; b < 5; ++b) AddDense(&r, "w", b, std::vector<float>(b == 4 ? 44 : 64, 0.1f * (step + 1)));
    AddRows(&r, "emb", 4, {3 + step, 70 + step, 1001 + step}, std::vector<float>(12, -0.5f));
    ASSERT_TRUE(shard->Push(PushFrame::FromProtoRef(r)).ok());
  }
}

inline void ExpectSameShard(ParameterShard* a, ParameterShard* b) {
  ASSERT_EQ(a->version(), b->version());
  for (int round = 0; round < 2; ++round) {
    for (int block = 0; block < 5; ++block) {
      ASSERT_EQ(testing::PullBlock(*a, "w", block), testing::PullBlock(*b, "w", block)) << "block " << block;
    }
    const std::vector<int64_t> ids = {3, 4, 5, 70, 71, 72, 1001, 1002, 1003};
    ASSERT_EQ(testing::PullRows(*a, "emb", ids), testing::PullRows(*b, "emb", ids));
    if (round == 1) break;
    proto::PushRequest r;
    r.set_client_id(10);
    r.set_push_id(1);
    for (int blk = 0; blk < 5; ++blk) AddDense(&r, "w", blk, std::vector<float>(blk == 4 ? 44 : 64, -0.3f));
    AddRows(&r, "emb", 4, {4, 71, 1003}, std::vector<float>(12, 0.25f));
    ASSERT_TRUE(a->Push(PushFrame::FromProtoRef(r)).ok());
    ASSERT_TRUE(b->Push(PushFrame::FromProtoRef(r)).ok());
  }
}

// A snapshot's bytes, as a joiner receives them.
inline std::string SnapshotOf(ParameterShard* shard) {
  std::string bytes;
  shard->RequestSnapshot([&bytes](StatusOr<ShardSnapshot> s, int64_t) {
    ASSERT_TRUE(s.ok()) << s.status();
    bytes = s->Bytes();
  });
  return bytes;
}

}  // namespace pl::pserver::snapshot_testing

#endif  // TESTS_PSERVER_SNAPSHOT_TEST_UTIL_H_
