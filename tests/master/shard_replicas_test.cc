// ShardReplicas, the master's map of replicated shards, on a clock the test turns:
// promotion on lease loss, fencing by epoch, and the restore of a shard that lost
// every replica by the one that comes back with the newest checkpoint.
#include "master/shard_replicas.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pl {
namespace {

constexpr int64_t kLeaseMs = 800;
constexpr int64_t kRestoreWaitMs = 3000;

class ShardReplicasTest : public ::testing::Test {
 protected:
  ShardReplicasTest() : map_(kLeaseMs, [this] { return now_ms_; }, kRestoreWaitMs) {}

  // One heartbeat of replica `id` of shard 0; returns the role it is given.
  proto::ReplicaInfo::Role Beat(uint64_t id, int64_t checkpoint_version = -1, int64_t version = 0) {
    proto::RegisterPserverRequest req;
    req.set_index(0);
    req.set_address(absl::StrCat("10.0.0.", id, ":7100"));
    req.set_replica_id(id);
    req.set_version(version);
    req.set_checkpoint_version(checkpoint_version);
    proto::RegisterPserverResponse resp;
    map_.Heartbeat(req, &resp, [this](const std::string& line) { log_.push_back(line); });
    epoch_ = resp.epoch();
    return resp.role();
  }
  // Reports `joiner` caught up, from primary `primary`.
  void CaughtUp(uint64_t primary, uint64_t joiner) {
    proto::RegisterPserverRequest req;
    req.set_index(0);
    req.set_address(absl::StrCat("10.0.0.", primary, ":7100"));
    req.set_replica_id(primary);
    req.set_epoch(epoch_);
    req.add_caught_up(joiner);
    proto::RegisterPserverResponse resp;
    map_.Heartbeat(req, &resp, [this](const std::string& line) { log_.push_back(line); });
  }
  void Advance(int64_t ms) {
    now_ms_ += ms;
    map_.Expire([this](const std::string& line) { log_.push_back(line); });
  }
  std::string Log() const { return absl::StrJoin(log_, "\n"); }

  int64_t now_ms_ = 1000;
  int64_t epoch_ = 0;
  ShardReplicas map_;
  std::vector<std::string> log_;
};

using Role = proto::ReplicaInfo::Role;

TEST_F(ShardReplicasTest, ANewShardsFirstReplicaIsPrimaryAtOnceAndTheNextJoins) {
  EXPECT_EQ(Beat(1), proto::ReplicaInfo::PRIMARY);
  EXPECT_EQ(epoch_, 1);
  EXPECT_EQ(Beat(2), proto::ReplicaInfo::JOINING);
  CaughtUp(1, 2);
  EXPECT_EQ(Beat(2), proto::ReplicaInfo::BACKUP);
  EXPECT_EQ(map_.Primary(0)->live_replicas(), 2);
}

TEST_F(ShardReplicasTest, APrimaryThatLosesItsLeaseIsReplacedByItsBackupInAHigherEpoch) {
  Beat(1);
  Beat(2);
  CaughtUp(1, 2);
  Advance(kLeaseMs / 2);
  Beat(2);  // only the backup keeps heartbeating
  Advance(kLeaseMs / 2 + 1);
  EXPECT_EQ(Beat(2), proto::ReplicaInfo::PRIMARY) << Log();
  EXPECT_EQ(epoch_, 2);
  EXPECT_EQ(Beat(1), proto::ReplicaInfo::REMOVED) << "the old primary is fenced out";
}

// pl-launch reaped the primary's process: its backup is promoted at once, with no lease
// to wait out; a backup that exits just leaves; an id not in the map changes nothing.
TEST_F(ShardReplicasTest, AReplicaKnownToHaveExitedLeavesAtOnceAndAPrimaryIsReplaced) {
  Beat(1);
  Beat(2);
  CaughtUp(1, 2);
  Beat(3);
  CaughtUp(1, 3);
  EXPECT_EQ(Beat(3), proto::ReplicaInfo::BACKUP);
  auto log = [this](const std::string& line) { log_.push_back(line); };
  EXPECT_FALSE(map_.Exited(0, 99, "pl-launch: gone", log));
  EXPECT_FALSE(map_.Exited(7, 1, "pl-launch: gone", log));
  EXPECT_EQ(map_.Primary(0)->live_replicas(), 3);

  EXPECT_TRUE(map_.Exited(0, 1, "pl-launch: pserver-0.0 killed by signal 9", log));  // no time passes
  EXPECT_EQ(Beat(2), proto::ReplicaInfo::PRIMARY) << Log();
  EXPECT_EQ(epoch_, 2);
  EXPECT_EQ(map_.Primary(0)->address(), "10.0.0.2:7100");
  EXPECT_NE(Log().find("primary replica 1 (10.0.0.1:7100) exited (pl-launch: pserver-0.0 killed by signal 9)"),
            std::string::npos)
      << Log();
  EXPECT_NE(Log().find("its primary is gone (pl-launch: pserver-0.0 killed by signal 9)"), std::string::npos)
      << Log();
  EXPECT_EQ(Beat(1), proto::ReplicaInfo::REMOVED) << "the dead id is fenced out";

  EXPECT_TRUE(map_.Exited(0, 3, "pl-launch: exited", log));
  EXPECT_EQ(Beat(2), proto::ReplicaInfo::PRIMARY);
  EXPECT_EQ(epoch_, 2) << "a backup's exit promotes nobody";
  EXPECT_EQ(map_.Primary(0)->live_replicas(), 1);
}

// A replica shutting down says so in its last heartbeat (`leaving`): taken out at once
// and told REMOVED; a leaving primary's backup is promoted.
TEST_F(ShardReplicasTest, ALeavingHeartbeatTakesTheReplicaOutAndPromotesItsBackup) {
  Beat(1);
  Beat(2);
  CaughtUp(1, 2);
  proto::RegisterPserverRequest req;
  req.set_index(0);
  req.set_address("10.0.0.1:7100");
  req.set_replica_id(1);
  req.set_epoch(1);
  req.set_leaving(true);
  proto::RegisterPserverResponse resp;
  map_.Heartbeat(req, &resp, [this](const std::string& line) { log_.push_back(line); });
  EXPECT_EQ(resp.role(), proto::ReplicaInfo::REMOVED);
  EXPECT_EQ(Beat(2), proto::ReplicaInfo::PRIMARY) << Log();
  EXPECT_EQ(epoch_, 2);
  EXPECT_NE(Log().find("its primary is gone (it is shutting down)"), std::string::npos) << Log();
  EXPECT_EQ(Beat(1), proto::ReplicaInfo::REMOVED);
}

// Both replicas lost. They come back one after the other, each with the newest
// checkpoint of its own disk; the one with the newer becomes primary, not the first.
TEST_F(ShardReplicasTest, AShardThatLostEveryReplicaIsRestoredByTheNewestCheckpointThatComesBack) {
  Beat(1);
  Beat(2);
  CaughtUp(1, 2);
  Advance(kLeaseMs + 1);  // both silent: gone
  ASSERT_FALSE(map_.Primary(0).has_value()) << Log();
  EXPECT_EQ(Beat(3, /*checkpoint_version=*/100), proto::ReplicaInfo::CANDIDATE) << Log();
  EXPECT_FALSE(map_.Primary(0).has_value()) << "no primary while candidates gather";
  Advance(100);
  EXPECT_EQ(Beat(3, 100), proto::ReplicaInfo::CANDIDATE);
  // The second is back: as many as the shard had, so the master decides now.
  EXPECT_EQ(Beat(4, /*checkpoint_version=*/250), proto::ReplicaInfo::PRIMARY) << Log();
  EXPECT_EQ(Beat(3, 100), proto::ReplicaInfo::JOINING);
  EXPECT_EQ(map_.Primary(0)->address(), "10.0.0.4:7100");
  EXPECT_EQ(epoch_, 2);
  EXPECT_NE(Log().find("restores its checkpoint of version 250"), std::string::npos) << Log();
}

// Issue 40: a shard whose primary had served version 300 and that comes back from a
// checkpoint of 250 lost the updates in between: a loss, taken once. One that comes
// back from what it served, or that never trained, lost nothing.
TEST_F(ShardReplicasTest, ARestoreOlderThanWhatThePrimaryServedIsALossAndTheVersionSurvivesAMasterRestart) {
  Beat(1, -1, /*version=*/300);
  Beat(2);
  CaughtUp(1, 2);
  proto::MembershipState state;
  state.set_num_pservers(1);
  map_.Serialize(&state);
  auto restarted = ShardReplicas::Deserialize(state, kLeaseMs, [this] { return now_ms_; });
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  map_ = std::move(*restarted);  // a restarted master still knows version 300
  Advance(kLeaseMs + 1);
  EXPECT_TRUE(map_.TakeLosses().empty());
  Beat(3, /*checkpoint_version=*/100);
  EXPECT_EQ(Beat(4, /*checkpoint_version=*/250), proto::ReplicaInfo::PRIMARY) << Log();
  std::vector<std::string> losses = map_.TakeLosses();
  ASSERT_EQ(losses.size(), 1u) << Log();
  EXPECT_EQ(losses[0], "shard 0 lost every replica and restored a checkpoint of version 250; its primary had "
                       "served version 300: the updates in between are lost");
  EXPECT_NE(Log().find("loss: shard 0 lost every replica"), std::string::npos) << Log();
  EXPECT_TRUE(map_.TakeLosses().empty());
}

// A shard that started over counts its versions from 0 again: a second loss names what
// the shard served since the first, not before it.
TEST_F(ShardReplicasTest, ASecondLossNamesTheVersionServedSinceTheFirst) {
  Beat(1, -1, /*version=*/300);
  Advance(kLeaseMs + 1);
  EXPECT_EQ(Beat(3, -1), proto::ReplicaInfo::PRIMARY) << Log();
  std::vector<std::string> losses = map_.TakeLosses();
  ASSERT_EQ(losses.size(), 1u) << Log();
  EXPECT_THAT(losses[0], ::testing::HasSubstr("started over from its seed (no checkpoint); its primary had served "
                                              "version 300"));
  Beat(3, -1, /*version=*/120);  // the new lineage, from 0
  proto::MembershipState state;  // what a restarted master keeps of it
  state.set_num_pservers(1);
  map_.Serialize(&state);
  auto restarted = ShardReplicas::Deserialize(state, kLeaseMs, [this] { return now_ms_; });
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  map_ = std::move(*restarted);
  Advance(kLeaseMs + 1);
  EXPECT_EQ(Beat(5, -1), proto::ReplicaInfo::PRIMARY) << Log();
  losses = map_.TakeLosses();
  ASSERT_EQ(losses.size(), 1u) << Log();
  EXPECT_THAT(losses[0], ::testing::HasSubstr("its primary had served version 120:"));
}

TEST_F(ShardReplicasTest, ARestoreOfWhatThePrimaryServedOrOfAShardThatNeverTrainedIsNoLoss) {
  Beat(1);  // version 0: nothing trained
  Advance(kLeaseMs + 1);
  EXPECT_EQ(Beat(3, -1), proto::ReplicaInfo::PRIMARY) << Log();  // the shard had one copy: all back
  EXPECT_TRUE(map_.TakeLosses().empty()) << Log();
  Beat(3, -1, /*version=*/40);
  Advance(kLeaseMs + 1);
  EXPECT_EQ(Beat(5, /*checkpoint_version=*/40), proto::ReplicaInfo::PRIMARY) << Log();
  EXPECT_TRUE(map_.TakeLosses().empty()) << Log();
}

// Restarted processes that registered (as joiners) before the dead ones' leases ran
// out are not more copies of the shard: two back of two is all of them.
TEST_F(ShardReplicasTest, RestartsThatJoinedBeforeTheDeadExpiredDoNotInflateTheCountToWaitFor) {
  Beat(1);
  Beat(2);
  CaughtUp(1, 2);
  EXPECT_EQ(Beat(3), proto::ReplicaInfo::JOINING);  // restarts of 1 and 2, too early
  EXPECT_EQ(Beat(4), proto::ReplicaInfo::JOINING);
  Advance(kLeaseMs + 1);  // 1 and 2 expire; 3 and 4 lose their source and are taken out
  EXPECT_EQ(Beat(3), proto::ReplicaInfo::REMOVED);
  EXPECT_EQ(Beat(5, 10), proto::ReplicaInfo::CANDIDATE) << Log();
  EXPECT_EQ(Beat(6, 20), proto::ReplicaInfo::PRIMARY) << Log();
}

TEST_F(ShardReplicasTest, WhenTheOthersDoNotComeBackTheBestCandidateRestoresAfterTheWait) {
  Beat(1);
  Beat(2);
  CaughtUp(1, 2);
  Advance(kLeaseMs + 1);
  EXPECT_EQ(Beat(3, -1), proto::ReplicaInfo::CANDIDATE);
  for (int64_t waited = 0; waited + 200 < kRestoreWaitMs; waited += 200) {
    Advance(200);
    ASSERT_EQ(Beat(3, -1), proto::ReplicaInfo::CANDIDATE) << "after " << waited + 200 << " ms";
  }
  Advance(400);
  EXPECT_EQ(Beat(3, -1), proto::ReplicaInfo::PRIMARY) << Log();
  EXPECT_NE(Log().find("restores no checkpoint"), std::string::npos) << Log();
}

TEST_F(ShardReplicasTest, CandidatesAreNotKeptInTheSavedMapAndRegisterAgainAfterAMasterRestart) {
  Beat(1);
  Beat(2);
  CaughtUp(1, 2);
  Advance(kLeaseMs + 1);
  Beat(3, 7);
  proto::MembershipState state;
  state.set_num_pservers(1);
  map_.Serialize(&state);
  auto restored = ShardReplicas::Deserialize(state, kLeaseMs, [this] { return now_ms_; });
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_FALSE(restored->Primary(0).has_value());
  proto::RegisterPserverRequest req;
  req.set_index(0);
  req.set_replica_id(3);
  req.set_address("10.0.0.3:7100");
  req.set_checkpoint_version(7);
  proto::RegisterPserverResponse resp;
  restored->Heartbeat(req, &resp, [](const std::string&) {});
  EXPECT_EQ(resp.role(), proto::ReplicaInfo::CANDIDATE);
}

}  // namespace
}  // namespace pl
