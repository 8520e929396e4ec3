#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "master/membership.h"
#include "paddle_like/rpc/caller.h"
#include "tests/master/test_util.h"

namespace pl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using pl::testing::FakeClock;

Membership Make(FakeClock& clock, int pservers = 2) {
  MembershipOptions o;
  o.lease_ms = 1000;
  o.num_pservers = pservers;
  auto m = Membership::Create(o, clock.fn());
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(m).value();
}

std::vector<int64_t> LiveIds(const Membership& m) {
  std::vector<int64_t> ids;
  for (const auto& t : m.live_trainers()) ids.push_back(t.id());
  return ids;
}

TEST(MembershipTest, HeartbeatsKeepTrainersAndExpiryDropsThem) {
  FakeClock clock;
  Membership m = Make(clock);
  EXPECT_EQ(m.RegisterTrainer("host:1"), 1);
  EXPECT_EQ(m.RegisterTrainer("host:2"), 2);
  clock.now += 600;
  EXPECT_TRUE(m.Heartbeat(1));
  clock.now += 600;  // trainer 2's lease ran out, trainer 1's did not
  EXPECT_THAT(LiveIds(m), ElementsAre(1));
  EXPECT_FALSE(m.Heartbeat(2));  // too late: it must register again
  EXPECT_THAT(m.ExpireTrainers(), ElementsAre(2));
  EXPECT_THAT(m.ExpireTrainers(), ElementsAre());
  EXPECT_EQ(m.RegisterTrainer("host:2"), 3);  // ids are never reused
  EXPECT_EQ(m.live_trainers()[0].address(), "host:1");
  EXPECT_TRUE(m.Leave(1));
  EXPECT_FALSE(m.Leave(1));
  EXPECT_THAT(LiveIds(m), ElementsAre(3));
}

// The count every heartbeat answers with: exact whether or not an expiry pass has run
// since a lease ran out (it counts without walking the trainers only while none can
// have run out).
TEST(MembershipTest, TheLiveCountLeavesOutALeaseRunOutBeforeAnyExpiryPass) {
  FakeClock clock;
  Membership m = Make(clock);
  m.RegisterTrainer("host:1");
  m.RegisterTrainer("host:2");
  m.RegisterTrainer("host:3");
  EXPECT_EQ(m.num_live_trainers(), 3);
  clock.now += 600;
  EXPECT_TRUE(m.Heartbeat(1));
  EXPECT_TRUE(m.Heartbeat(2));
  EXPECT_EQ(m.num_live_trainers(), 3);
  clock.now += 600;  // trainer 3's lease ran out; nothing expired it yet
  EXPECT_EQ(m.num_live_trainers(), 2);
  EXPECT_THAT(m.ExpireTrainers(), ElementsAre(3));
  EXPECT_EQ(m.num_live_trainers(), 2);
  clock.now += 500;  // and then the others'
  EXPECT_EQ(m.num_live_trainers(), 0);
}

// Issue 40: a report in the name of a dropped or never-registered trainer is refused
// (NOT_FOUND: register again), with or without a token; a live trainer's own token
// passes and another's does not.
TEST(MembershipTest, OnlyARegisteredTrainersOwnTokenSpeaksForIt) {
  FakeClock clock;
  Membership m = Make(clock);
  EXPECT_EQ(m.RegisterTrainer("host:1", rpc::TokenDigest("token-1")), 1);
  EXPECT_EQ(m.RegisterTrainer("host:2", rpc::TokenDigest("token-2")), 2);
  EXPECT_TRUE(m.CheckToken(1, "token-1").ok());
  EXPECT_EQ(m.CheckToken(1, "token-2").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(m.CheckToken(1, "").code(), absl::StatusCode::kPermissionDenied);
  for (const char* token : {"", "token-1"}) {
    const Status never = m.CheckToken(7, token);
    EXPECT_EQ(never.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(never.message(), ::testing::HasSubstr("register again"));
  }
  clock.now += 600;
  EXPECT_TRUE(m.Heartbeat(1));
  clock.now += 600;  // trainer 2's lease ran out
  EXPECT_THAT(m.ExpireTrainers(), ElementsAre(2));
  EXPECT_EQ(m.CheckToken(2, "token-2").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.CheckToken(2, "").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(m.CheckToken(1, "token-1").ok());
}

// Issue 40: a pserver process that began without state, replacing another at its index
// after the job trained, is a loss the master records (and keeps across a restart); a
// periodic re-registration, a restart that restored a checkpoint, or one before any
// training is not.
// A pserver that is not replicated, as it tells the master who it is and what it restored.
PserverReport Report(uint64_t incarnation, bool started_empty, int64_t restored_version = -1, int64_t version = 0,
                     int64_t pushes_refused = 0) {
  PserverReport r;
  r.incarnation = incarnation;
  r.started_empty = started_empty;
  r.restored_version = restored_version;
  r.version = version;
  r.pushes_refused = pushes_refused;
  return r;
}

TEST(MembershipTest, APserverRestartedEmptyAfterTrainingIsRecordedAsALoss) {
  FakeClock clock;
  Membership m = Make(clock);
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(11, /*started_empty=*/true), /*job_trained=*/false).ok());
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(11, true), true).ok());   // the same process, re-registering
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(12, true), false).ok());  // restarted before any training
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(13, false, 0), true).ok());  // restarted from a checkpoint
  EXPECT_TRUE(m.losses().empty());
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(14, true), true).ok());   // restarted empty after training
  ASSERT_EQ(m.losses().size(), 1u);
  EXPECT_THAT(m.losses()[0], HasSubstr("pserver 0 restarted without its state"));
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(14, true), true).ok());   // its next re-registrations: once
  EXPECT_EQ(m.losses().size(), 1u);
  auto restored = Membership::Deserialize(m.Serialize(), clock.fn());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->losses(), m.losses());
  // A restarted master remembers the incarnation: the same process is no new loss.
  ASSERT_TRUE(restored->RegisterPserver(0, "h:1", Report(14, true), true).ok());
  EXPECT_EQ(restored->losses().size(), 1u);
}

// A shard that lost its state and then took a trainer's copy of its dense values: the
// loss's line says so, once, and no other line (another index, another kind) changes.
TEST(MembershipTest, ALossLineSaysWhenATrainerGaveTheShardItsValuesBack) {
  FakeClock clock;
  Membership m = Make(clock, /*pservers=*/11);
  ASSERT_TRUE(m.RegisterPserver(1, "h:1", Report(31, true), false).ok());
  ASSERT_TRUE(m.RegisterPserver(10, "h:9", Report(91, true), false).ok());
  ASSERT_TRUE(m.RegisterPserver(10, "h:9", Report(92, true), true).ok());  // pserver 10 lost its state
  ASSERT_TRUE(m.RegisterPserver(1, "h:2", Report(32, true), true).ok());   // pserver 1 lost its state
  ASSERT_EQ(m.losses().size(), 2u);
  EXPECT_EQ(m.NoteRestoredFromTrainer(1, 0), std::nullopt);
  const std::optional<std::string> amended = m.NoteRestoredFromTrainer(1, 417);
  ASSERT_TRUE(amended.has_value());
  EXPECT_THAT(*amended, HasSubstr("pserver 1 restarted without its state"));
  EXPECT_THAT(*amended, HasSubstr("a trainer then gave it its copy of the dense values (version 417)"));
  EXPECT_EQ(m.losses()[1], *amended);
  EXPECT_THAT(m.losses()[0], Not(HasSubstr("gave it its copy"))) << "pserver 10's line is another's";
  EXPECT_EQ(m.NoteRestoredFromTrainer(1, 417), std::nullopt) << "once";
  EXPECT_EQ(m.losses()[1], *amended);

  // A shard that went before the master heard it had trained (no version, no task
  // finished): the trainer's copy had learned, so the loss gets a line of its own.
  const std::optional<std::string> added = m.NoteRestoredFromTrainer(0, 55);
  ASSERT_TRUE(added.has_value());
  ASSERT_EQ(m.losses().size(), 3u);
  EXPECT_THAT(m.losses()[2], HasSubstr("pserver 0 restarted without its state"));
  EXPECT_THAT(m.losses()[2], HasSubstr("a trainer then gave it its copy of the dense values (version 55)"));
  EXPECT_EQ(m.NoteRestoredFromTrainer(0, 55), std::nullopt);
  EXPECT_EQ(m.losses().size(), 3u);
}

// A process that reported a version above 0 had learned state, finished task or not:
// its replacement that began empty is a loss.
TEST(MembershipTest, APserverThatReportedAVersionAndCameBackEmptyIsALossBeforeAnyTaskFinished) {
  FakeClock clock;
  Membership m = Make(clock);
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(51, true, -1, /*version=*/5), /*job_trained=*/false).ok());
  ASSERT_TRUE(m.RegisterPserver(0, "h:2", Report(52, true), /*job_trained=*/false).ok());
  ASSERT_EQ(m.losses().size(), 1u);
  EXPECT_THAT(m.losses()[0], HasSubstr("pserver 0 restarted without its state"));
}

// A restart that restored a checkpoint older than the version its index had reported
// lost the updates in between; one that restored the newest version it served did not.
TEST(MembershipTest, APserverRestoredFromAnOlderCheckpointThanItServedIsALoss) {
  FakeClock clock;
  Membership m = Make(clock);
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(21, true, -1, /*version=*/0), false).ok());
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(21, true, -1, /*version=*/40), true).ok());
  // Restarted from a checkpoint of exactly what it had served: nothing lost.
  ASSERT_TRUE(m.RegisterPserver(0, "h:2", Report(22, false, /*restored=*/40, 40), true).ok());
  EXPECT_TRUE(m.losses().empty());
  ASSERT_TRUE(m.RegisterPserver(0, "h:2", Report(22, false, 40, 75), true).ok());
  ASSERT_TRUE(m.RegisterPserver(0, "h:3", Report(23, false, /*restored=*/60, 60), true).ok());
  ASSERT_EQ(m.losses().size(), 1u);
  EXPECT_THAT(m.losses()[0], HasSubstr("pserver 0 restarted from a checkpoint of version 60, older than the "
                                       "version 75 it had served"));
  // The version served survives a master restart.
  auto restored = Membership::Deserialize(m.Serialize(), clock.fn());
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->RegisterPserver(0, "h:3", Report(23, false, 60, 90), true).ok());
  ASSERT_TRUE(restored->RegisterPserver(0, "h:4", Report(24, false, 80, 80), true).ok());
  ASSERT_EQ(restored->losses().size(), 2u);
  EXPECT_THAT(restored->losses()[1], HasSubstr("version 80, older than the version 90"));
}

// Refused pushes are summed over the processes of an index (each reports its own count
// since it started) and become one loss line per index; a master restart keeps them.
TEST(MembershipTest, RefusedPushesAreCountedPerIndexAcrossRestartsAsALoss) {
  FakeClock clock;
  Membership m = Make(clock, 2);
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(31, true)).ok());
  EXPECT_TRUE(m.LossLines().empty());
  // (Version 0: it applied nothing, so its restart loses nothing but the refusals.)
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(31, true, -1, 0, /*refused=*/2)).ok());
  ASSERT_TRUE(m.RegisterPserver(0, "h:1", Report(31, true, -1, 0, /*refused=*/3)).ok());
  ASSERT_TRUE(m.RegisterPserver(0, "h:2", Report(32, true, -1, 0, /*refused=*/1)).ok());  // restarted
  ASSERT_TRUE(m.RegisterPserver(1, "h:5", Report(41, true)).ok());
  EXPECT_EQ(m.pushes_refused(), (std::map<int32_t, int64_t>{{0, 4}}));
  ASSERT_EQ(m.LossLines().size(), 1u);  // the restart before training is no loss; the refusals are
  EXPECT_THAT(m.LossLines()[0], HasSubstr("pserver 0 refused 4 push(es) whose gradients were out of bounds"));
  auto restored = Membership::Deserialize(m.Serialize(), clock.fn());
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->pushes_refused(), m.pushes_refused());
  EXPECT_EQ(restored->LossLines(), m.LossLines());
}

TEST(MembershipTest, PserverRejoinKeepsItsIndexAndBumpsGeneration) {
  FakeClock clock;
  Membership m = Make(clock, 2);
  EXPECT_EQ(*m.RegisterPserver(1, "10.0.0.2:7000"), 1);
  EXPECT_EQ(*m.RegisterPserver(0, "10.0.0.1:7000"), 1);
  EXPECT_EQ(*m.RegisterPserver(1, "10.0.0.9:7001"), 2);  // restarted elsewhere
  std::vector<proto::PserverInfo> ps = m.pservers();
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].index(), 0);
  EXPECT_EQ(ps[1].index(), 1);
  EXPECT_EQ(ps[1].address(), "10.0.0.9:7001");
  EXPECT_EQ(ps[1].generation(), 2);
  auto out = m.RegisterPserver(2, "x:1");
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("index 2 outside [0, 2)"));
  EXPECT_EQ(m.RegisterPserver(-1, "x:1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.RegisterPserver(0, "").status().message(), HasSubstr("empty address"));
}

TEST(MembershipTest, SerializeKeepsTheIdCounterAndLeases) {
  FakeClock clock;
  Membership m = Make(clock);
  m.RegisterTrainer("a");
  m.RegisterTrainer("b");
  ASSERT_TRUE(m.Leave(2));
  ASSERT_TRUE(m.RegisterPserver(0, "p:1").ok());
  auto r = Membership::Deserialize(m.Serialize(), clock.fn());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->Serialize().SerializeAsString(), m.Serialize().SerializeAsString());
  EXPECT_EQ(r->RegisterTrainer("c"), 3);
  EXPECT_EQ(*r->RegisterPserver(0, "p:2"), 2);
  clock.now += 1000;  // deadlines survive as wall-clock times
  EXPECT_THAT(r->ExpireTrainers(), ElementsAre(1, 3));

  proto::MembershipState bad = m.Serialize();
  bad.set_next_trainer_id(1);  // below a listed trainer id
  auto rb = Membership::Deserialize(bad, clock.fn());
  EXPECT_EQ(rb.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(rb.status().message(), HasSubstr("trainer id 1 outside"));
}

}  // namespace
}  // namespace pl
