// A primary sends its stream's dense blocks to the backup beside the gRPC calls
// (pserver/replication/replica_stream.h): through shared memory, the backup being on the same host,
// or, where the backup refuses shared memory (--noshm, as one on another host cannot
// open it), over a dense link. Entries of every size and dtype share that region: an
// entry larger than the region (sized from the first entry) brings a larger one, a
// bfloat16 push goes through it as bfloat16, and neither is reported as a failure or
// drops it. Every entry reaches the backup: promoted after the primary's SIGKILL, it
// holds the primary's values bit for bit, and they are the hand-computed SGD steps.
// Real pl-master and pl-pserver processes on 127.0.0.1; the trainer is a plain client
// of the ParameterServer service.
#include <signal.h>

#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "paddle_like/dist/bf16.h"
#include "tests/dist/one_replicated_shard.h"

namespace pl::dist_testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kA = 4096;  // one block each
constexpr int64_t kB = 8192;
constexpr float kLr = 0.5f;

struct Values {
  std::vector<float> a, b;
};

// The way under test: true, shared memory; false, the dense link.
class ReplicaStreamLinkTest : public OneReplicatedShardTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool shm() const { return GetParam(); }

  static void AddDense(proto::InitRequest* req, const std::string& name, int64_t n) {
    proto::ParamSpec* p = req->add_params();
    p->set_name(name);
    p->set_kind(proto::ParamSpec::DENSE);
    p->add_shape(n);
    p->set_block_size(n);
  }

  static proto::InitRequest Init() {
    proto::InitRequest req;
    AddDense(&req, "a", kA);
    AddDense(&req, "b", kB);
    req.mutable_optimizer()->set_name("sgd");
    req.mutable_optimizer()->set_learning_rate(kLr);
    req.set_seed(3);
    return req;
  }

  // Push `id`'s gradients, exact in bfloat16 too: a[i] = id (1 + i % 4) / 4, b[i] = id / 2.
  static std::vector<float> GradA(int64_t id) {
    std::vector<float> g(kA);
    for (int64_t i = 0; i < kA; ++i) g[i] = 0.25f * id * (1 + i % 4);
    return g;
  }
  static std::vector<float> GradB(int64_t id) { return std::vector<float>(kB, 0.5f * id); }

  static proto::PushRequest Push(int64_t id, bool with_b, bool bf16, uint64_t client = 78) {
    proto::PushRequest req;
    req.set_trainer_id(1);
    req.set_client_id(client);
    req.set_push_id(id);
    req.set_num_samples(1);
    proto::DenseBlock* a = req.add_dense();
    a->set_param("a");
    a->set_block(0);
    const std::vector<float> ga = GradA(id);
    if (bf16) {
      std::vector<uint16_t> half(kA);
      EncodeBf16(ga.data(), kA, half.data());
      a->set_bf16_values(half.data(), half.size() * 2);
    } else {
      a->set_values(ga.data(), ga.size() * 4);
    }
    if (with_b) {
      proto::DenseBlock* b = req.add_dense();
      b->set_param("b");
      b->set_block(0);
      const std::vector<float> gb = GradB(id);
      b->set_values(gb.data(), gb.size() * 4);
    }
    return req;
  }

  // Pushes `id`'s gradients of a and b and takes their SGD step in *expected.
  static void PushBoth(proto::ParameterServer::Stub* stub, int64_t id, Values* expected) {
    proto::PushResponse resp;
    grpc::Status st = stub->Push(rpc::MakeContext(std::chrono::seconds(10)).get(), Push(id, true, false), &resp);
    ASSERT_TRUE(st.ok()) << "push " << id << ": " << st.error_message();
    const std::vector<float> ga = GradA(id), gb = GradB(id);
    for (int64_t i = 0; i < kA; ++i) expected->a[i] -= kLr * ga[i];
    for (int64_t i = 0; i < kB; ++i) expected->b[i] -= kLr * gb[i];
  }

  static StatusOr<Values> Pull(proto::ParameterServer::Stub* stub) {
    proto::PullRequest req;
    req.add_dense()->set_param("a");
    req.add_dense()->set_param("b");
    proto::PullResponse resp;
    auto ctx = rpc::MakeContext(std::chrono::seconds(3));
    PL_RETURN_IF_ERROR(rpc::FromGrpc(stub->Pull(ctx.get(), req, &resp)));
    Values v;
    for (const proto::DenseBlock& blk : resp.dense()) {
      std::vector<float>& to = blk.param() == "a" ? v.a : v.b;
      to.resize(blk.values().size() / 4);
      std::memcpy(to.data(), blk.values().data(), blk.values().size());
    }
    if (static_cast<int64_t>(v.a.size()) != kA || static_cast<int64_t>(v.b.size()) != kB) {
      return absl::DataLossError("the pull lacks a parameter");
    }
    return v;
  }

  // The master, the primary and the backup (both --noshm for the link's way) with
  // PL_TEST_SLOW_STREAM_CALL_MS and PL_TEST_SLOW_APPLY_MS set if given, and the shard
  // initialised. Returns the
  // primary's address; *start: its values after Init.
  StatusOr<std::string> StartInitialisedShard(Values* start, const char* slow_stream_call_ms = nullptr,
                                              const char* slow_apply_ms = nullptr) {
    if (!shm()) pserver_flags_ = {"--noshm"};
    PL_RETURN_IF_ERROR(StartMaster(/*pserver_lease_ms=*/1000));
    // Read by the backup (and by the primary, which takes no stream calls).
    if (slow_stream_call_ms != nullptr) setenv("PL_TEST_SLOW_STREAM_CALL_MS", slow_stream_call_ms, 1);
    if (slow_apply_ms != nullptr) setenv("PL_TEST_SLOW_APPLY_MS", slow_apply_ms, 1);
    StatusOr<std::string> primary = StartPrimaryAndBackup(master_address_);
    unsetenv("PL_TEST_SLOW_STREAM_CALL_MS");
    unsetenv("PL_TEST_SLOW_APPLY_MS");
    PL_RETURN_IF_ERROR(primary.status());
    auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(*primary));
    proto::InitResponse init;
    PL_RETURN_IF_ERROR(rpc::FromGrpc(stub->Init(rpc::MakeContext(std::chrono::seconds(5)).get(), Init(), &init)));
    PL_ASSIGN_OR_RETURN(*start, Pull(stub.get()));
    return primary;
  }

  // SIGKILLs the primary at `primary`, waits for the master to name another and pulls
  // from it.
  StatusOr<Values> KillPrimaryAndPullFromTheNext(const std::string& primary) {
    PL_RETURN_IF_ERROR(primary_->Signal(SIGKILL));
    if (!primary_->WaitFor(std::chrono::seconds(10))) return absl::DeadlineExceededError("the primary did not die");
    const std::string next = NewPrimaryAddress(primary, std::chrono::seconds(20));
    if (next.empty()) {
      return absl::DeadlineExceededError("no new primary: " + testing::ReadFileOrEmpty(Path("master.log")));
    }
    auto promoted = proto::ParameterServer::NewStub(rpc::MakeChannel(next));
    StatusOr<Values> taken_over = absl::UnavailableError("not pulled");
    testing::WaitUntil(
        [&] {
          taken_over = Pull(promoted.get());
          return taken_over.ok();
        },
        std::chrono::seconds(10));
    return taken_over;
  }
};

TEST_P(ReplicaStreamLinkTest, EntriesOfEverySizeAndDtypeReachTheBackupWithoutDroppingTheRegion) {
  Values start;
  auto started = StartInitialisedShard(&start);
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string primary = *started;
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(primary));

  // 16 KB (the region is sized from it), 48 KB (larger), bfloat16, 48 KB again.
  struct Step {
    bool with_b, bf16;
  };
  const std::vector<Step> steps = {{false, false}, {true, false}, {false, true}, {true, false}};
  Values expected = start;
  for (size_t k = 0; k < steps.size(); ++k) {
    const int64_t id = static_cast<int64_t>(k) + 1;
    proto::PushResponse resp;
    grpc::Status st =
        stub->Push(rpc::MakeContext(std::chrono::seconds(5)).get(), Push(id, steps[k].with_b, steps[k].bf16), &resp);
    ASSERT_TRUE(st.ok()) << "push " << id << ": " << st.error_message();
    const std::vector<float> ga = GradA(id), gb = GradB(id);
    for (int64_t i = 0; i < kA; ++i) expected.a[i] -= kLr * ga[i];
    if (steps[k].with_b) {
      for (int64_t i = 0; i < kB; ++i) expected.b[i] -= kLr * gb[i];
    }
  }
  auto acknowledged = Pull(stub.get());
  ASSERT_TRUE(acknowledged.ok()) << acknowledged.status();
  for (int64_t i = 0; i < kA; ++i) ASSERT_NEAR(acknowledged->a[i], expected.a[i], 1e-5) << "a[" << i << "]";
  for (int64_t i = 0; i < kB; ++i) ASSERT_NEAR(acknowledged->b[i], expected.b[i], 1e-5) << "b[" << i << "]";

  // Every push went through the region, the bfloat16 one too (forwarded as it came,
  // half the bytes); only the Init went inline.
  auto stats = proto::ParameterServer::NewStub(rpc::MakeChannel(primary));
  proto::StatsResponse primary_stats;
  ASSERT_TRUE(stats->Stats(rpc::MakeContext(std::chrono::seconds(3)).get(), {}, &primary_stats).ok());
  EXPECT_EQ(primary_stats.stream_entries_shm(), shm() ? 4 : 0);
  EXPECT_EQ(primary_stats.stream_entries_linked(), shm() ? 0 : 4);
  EXPECT_EQ(primary_stats.stream_entries_inline(), 1);
  // Through shared memory each push's call was rung there, not made over gRPC.
  EXPECT_EQ(primary_stats.stream_calls_rung(), shm() ? 4 : 0);
  EXPECT_EQ(primary_stats.stream_dense_bytes(), (kA * 4) + (kA + kB) * 4 + (kA * 2) + (kA + kB) * 4);

  const std::string primary_log = testing::ReadFileOrEmpty(Path("ps-a.log"));
  if (shm()) {
    EXPECT_THAT(primary_log, HasSubstr("MB of shared memory"));
    EXPECT_THAT(primary_log, HasSubstr("the shared memory to replica"));
  } else {
    EXPECT_THAT(primary_log, HasSubstr("shares no memory with this process"));
    EXPECT_THAT(primary_log, HasSubstr("the dense link to replica"));
  }
  EXPECT_EQ(CountOf(primary_log, "grows from"), 1) << primary_log;
  EXPECT_THAT(primary_log, Not(HasSubstr("failed"))) << primary_log;

  // Promoted, the backup holds exactly what the primary acknowledged.
  StatusOr<Values> taken_over = KillPrimaryAndPullFromTheNext(primary);
  ASSERT_TRUE(taken_over.ok()) << taken_over.status() << "\n" << testing::ReadFileOrEmpty(Path("master.log"));
  EXPECT_EQ(taken_over->a, acknowledged->a);
  EXPECT_EQ(taken_over->b, acknowledged->b);
}

// Several clients push at once while the backup takes 300 ms over each stream call: the
// entries that queue behind a call go in the next one together, through the same
// region, and the backup applies every one of them in the primary's order.
TEST_P(ReplicaStreamLinkTest, EntriesThatQueueBehindACallGoInTheNextOneTogether) {
  Values start;
  auto started = StartInitialisedShard(&start, /*slow_stream_call_ms=*/"300");
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string primary = *started;
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(primary));

  constexpr int kClients = 4, kRounds = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto own = proto::ParameterServer::NewStub(rpc::MakeChannel(primary));
      for (int r = 1; r <= kRounds; ++r) {
        proto::PushResponse resp;
        if (!own->Push(rpc::MakeContext(std::chrono::seconds(20)).get(), Push(r, true, false, 100 + c), &resp).ok()) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  ASSERT_EQ(failures.load(), 0);

  // The hand-computed SGD steps (every client pushed each round's gradients once).
  Values expected = start;
  for (int r = 1; r <= kRounds; ++r) {
    const std::vector<float> ga = GradA(r), gb = GradB(r);
    for (int c = 0; c < kClients; ++c) {
      for (int64_t i = 0; i < kA; ++i) expected.a[i] -= kLr * ga[i];
      for (int64_t i = 0; i < kB; ++i) expected.b[i] -= kLr * gb[i];
    }
  }
  auto acknowledged = Pull(stub.get());
  ASSERT_TRUE(acknowledged.ok()) << acknowledged.status();
  for (int64_t i = 0; i < kA; ++i) ASSERT_NEAR(acknowledged->a[i], expected.a[i], 1e-4) << "a[" << i << "]";
  for (int64_t i = 0; i < kB; ++i) ASSERT_NEAR(acknowledged->b[i], expected.b[i], 1e-4) << "b[" << i << "]";

  // Every push went through the region, and fewer calls carried them: while one call
  // took 300 ms, the other clients' pushes queued behind it.
  proto::StatsResponse stats;
  ASSERT_TRUE(stub->Stats(rpc::MakeContext(std::chrono::seconds(3)).get(), {}, &stats).ok());
  constexpr int kPushes = kClients * kRounds;
  EXPECT_EQ(shm() ? stats.stream_entries_shm() : stats.stream_entries_linked(), kPushes);
  EXPECT_EQ(stats.stream_entries_inline(), 1);  // the Init
  EXPECT_LT(stats.stream_calls(), 1 + kPushes - kRounds) << "entries per call: " << (1.0 + kPushes) / stats.stream_calls();
  EXPECT_GE(stats.stream_calls(), 1 + kRounds);  // each client waits for its push before the next
  EXPECT_EQ(stats.stream_calls_rung(), shm() ? stats.stream_calls() - 1 : 0);  // all but the Init's
  const std::string primary_log = testing::ReadFileOrEmpty(Path("ps-a.log"));
  EXPECT_THAT(primary_log, Not(HasSubstr("failed"))) << primary_log;

  // Promoted, the backup holds exactly what the primary acknowledged.
  StatusOr<Values> taken_over = KillPrimaryAndPullFromTheNext(primary);
  ASSERT_TRUE(taken_over.ok()) << taken_over.status() << "\n" << testing::ReadFileOrEmpty(Path("master.log"));
  EXPECT_EQ(taken_over->a, acknowledged->a);
  EXPECT_EQ(taken_over->b, acknowledged->b);
}

// A backup that applies each entry 100 ms after it acknowledged it (a test hook) reads
// the entries it holds where they lie in the shared region; pushes go on meanwhile, and
// the primary writes each into the half of the region the last one did not use, coming
// back to a half only once the backup let go of what it held there. Promoted, the
// backup holds every push's hand-computed SGD step.
TEST_P(ReplicaStreamLinkTest, ABackupApplyingBehindItsAcknowledgementsIsNotWrittenOver) {
  Values start;
  auto started = StartInitialisedShard(&start, /*slow_stream_call_ms=*/nullptr, /*slow_apply_ms=*/"100");
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string primary = *started;
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(primary));
  Values expected = start;
  for (int64_t id = 1; id <= 8; ++id) ASSERT_NO_FATAL_FAILURE(PushBoth(stub.get(), id, &expected));
  proto::StatsResponse stats;
  ASSERT_TRUE(stub->Stats(rpc::MakeContext(std::chrono::seconds(3)).get(), {}, &stats).ok());
  EXPECT_EQ(stats.stream_calls_rung(), shm() ? 8 : 0);
  StatusOr<Values> taken_over = KillPrimaryAndPullFromTheNext(primary);
  ASSERT_TRUE(taken_over.ok()) << taken_over.status() << "\n" << testing::ReadFileOrEmpty(Path("master.log"));
  for (int64_t i = 0; i < kA; ++i) ASSERT_NEAR(taken_over->a[i], expected.a[i], 1e-5) << "a[" << i << "]";
  for (int64_t i = 0; i < kB; ++i) ASSERT_NEAR(taken_over->b[i], expected.b[i], 1e-5) << "b[" << i << "]";
}

// A replacement backup whose snapshot takes 2 s to install (a test hook) is not waited
// for meanwhile: the pushes of that time are acknowledged and their calls end
// while their entries still queue in its stream. Those entries borrowed the calls'
// gradients (pserver/store/push_loan.h), so each call copied its entry before it ended; a test
// hook turns the memory it came in to NaN as soon as the call is done with it, as the
// trainer's next push would overwrite its region. Promoted, the replacement holds every
// push's hand-computed SGD step.
TEST_P(ReplicaStreamLinkTest, EntriesQueuedForAJoinerOutliveTheCallsTheyCameIn) {
  Values start;
  // Each call's gradients turn to NaN the moment the call lets go of them.
  setenv("PL_TEST_SCRIBBLE_LENT_PUSHES", "1", 1);
  auto started = StartInitialisedShard(&start);
  unsetenv("PL_TEST_SCRIBBLE_LENT_PUSHES");
  ASSERT_TRUE(started.ok()) << started.status();
  const std::string primary = *started;
  auto stub = proto::ParameterServer::NewStub(rpc::MakeChannel(primary));
  Values expected = start;
  auto push = [&](int64_t id) { PushBoth(stub.get(), id, &expected); };
  ASSERT_NO_FATAL_FAILURE(push(1));
  ASSERT_NO_FATAL_FAILURE(push(2));

  ASSERT_TRUE(backup_->Signal(SIGKILL).ok());
  ASSERT_TRUE(backup_->WaitFor(std::chrono::seconds(10)));
  ASSERT_TRUE(MasterLogSays("lost its lease", std::chrono::seconds(20)));
  setenv("PL_TEST_SLOW_JOINER_MS", "50", 1);  // installs its snapshot 2 s late, 50 ms an entry after
  StatusOr<std::unique_ptr<ChildProcess>> joiner = StartPserver("ps-c", master_address_);
  unsetenv("PL_TEST_SLOW_JOINER_MS");
  ASSERT_TRUE(joiner.ok()) << joiner.status();
  backup_ = *std::move(joiner);
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return CountOf(testing::ReadFileOrEmpty(Path("ps-a.log")), "sending a snapshot") >= 2; },
      std::chrono::seconds(20)));
  const absl::Time pushing = absl::Now();
  for (int64_t id = 3; id <= 12; ++id) ASSERT_NO_FATAL_FAILURE(push(id));
  // Not waited for: the joiner was still installing its snapshot (else this test would
  // not test the copies, and says so).
  ASSERT_LT(absl::Now() - pushing, absl::Milliseconds(1800)) << "the pushes waited for the joiner";
  ASSERT_TRUE(testing::WaitUntil(
      [&] { return CountOf(testing::ReadFileOrEmpty(Path("master.log")), "now a backup in sync") >= 2; },
      std::chrono::seconds(30)))
      << testing::ReadFileOrEmpty(Path("master.log"));

  StatusOr<Values> taken_over = KillPrimaryAndPullFromTheNext(primary);
  ASSERT_TRUE(taken_over.ok()) << taken_over.status() << "\n" << testing::ReadFileOrEmpty(Path("master.log"));
  for (int64_t i = 0; i < kA; ++i) ASSERT_NEAR(taken_over->a[i], expected.a[i], 1e-5) << "a[" << i << "]";
  for (int64_t i = 0; i < kB; ++i) ASSERT_NEAR(taken_over->b[i], expected.b[i], 1e-5) << "b[" << i << "]";
}

INSTANTIATE_TEST_SUITE_P(Ways, ReplicaStreamLinkTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("SharedMemory") : std::string("DenseLink");
                         });

}  // namespace
}  // namespace pl::dist_testing
