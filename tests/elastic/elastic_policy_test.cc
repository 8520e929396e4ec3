// ElasticPolicy on a fake clock: admission, minimums, fair share by fulfillment,
// the reclaim bound, hysteresis and cooldown, and bad input.
#include "paddle_like/elastic/elastic_policy.h"

#include <gtest/gtest.h>

namespace pl::elastic {
namespace {

constexpr int64_t kCooldown = 5000;
constexpr int64_t kSettle = 1000;

ElasticPolicy MakePolicy() { return ElasticPolicy(PolicyOptions{kCooldown, kSettle}); }

const JobDecision& Find(const Plan& plan, const std::string& name) {
  for (const JobDecision& d : plan.jobs) {
    if (d.name == name) return d;
  }
  ADD_FAILURE() << "no decision for " << name;
  static JobDecision none;
  return none;
}

int Target(const Plan& plan, const std::string& name) { return Find(plan, name).target; }

// Decides every 250 ms from `from` to `to` (inclusive), returning the last plan.
Plan RunUntil(ElasticPolicy& policy, int64_t from, int64_t to) {
  Plan plan;
  for (int64_t t = from; t <= to; t += 250) plan = policy.Decide(t);
  return plan;
}

TEST(ElasticPolicyTest, AdmitsAtMinimumAtOnceThenGrowsToMaximumAfterSettling) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(8).ok());
  ASSERT_TRUE(policy.AddJob({"a", 2, 6, 0}).ok());
  Plan plan = policy.Decide(0);
  EXPECT_EQ(Target(plan, "a"), 2);
  EXPECT_EQ(Find(plan, "a").reason, Reason::kAdmitted);
  EXPECT_EQ(Find(plan, "a").share, 6);
  // Off its share since 0, but within the cooldown of its admission: no growth yet.
  plan = RunUntil(policy, 250, kCooldown - 250);
  EXPECT_EQ(Target(plan, "a"), 2);
  plan = policy.Decide(kCooldown);
  EXPECT_EQ(Target(plan, "a"), 6);
  EXPECT_EQ(Find(plan, "a").reason, Reason::kGrow);
  EXPECT_EQ(plan.assigned, 6);  // never above its maximum, though 8 slots are there
}

TEST(ElasticPolicyTest, SharesSpareSlotsByFulfillmentOfEachMaximum) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(10).ok());
  ASSERT_TRUE(policy.AddJob({"small", 1, 4, 0}).ok());
  ASSERT_TRUE(policy.AddJob({"big", 1, 12, 0}).ok());
  Plan plan = RunUntil(policy, 0, 20000);
  // Hand-computed from (1,1): the 8 spare slots go big, big, small, big, big, big, small, big
  // (each to the lower share/max, ties to small, the earlier arrival) -> small 3, big 7.
  EXPECT_EQ(plan.assigned, 10);
  const int small = Target(plan, "small"), big = Target(plan, "big");
  EXPECT_EQ(small + big, 10);
  // The fulfillment ratios differ by at most one slot's worth.
  const double rs = small / 4.0, rb = big / 12.0;
  EXPECT_LE(rs - rb, 1.0 / 4.0 + 1e-9);
  EXPECT_LE(rb - rs, 1.0 / 12.0 + 1e-9);
  EXPECT_EQ(small, 3);
  EXPECT_EQ(big, 7);
}

TEST(ElasticPolicyTest, HigherPriorityIsServedFirstAndLowerKeepsItsMinimum) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(8).ok());
  ASSERT_TRUE(policy.AddJob({"low", 2, 8, 0}).ok());
  Plan plan = RunUntil(policy, 0, 10000);
  EXPECT_EQ(Target(plan, "low"), 8);
  // A higher-priority job arrives: its minimum is reclaimed at once from low's extras.
  ASSERT_TRUE(policy.AddJob({"high", 3, 8, 5}).ok());
  plan = policy.Decide(10250);
  EXPECT_EQ(Target(plan, "high"), 3);
  EXPECT_EQ(Target(plan, "low"), 5);
  EXPECT_EQ(Find(plan, "low").reason, Reason::kReclaim);
  EXPECT_LE(plan.assigned, 8);
  // Later high takes every slot above low's minimum, never low's minimum.
  plan = RunUntil(policy, 10500, 30000);
  EXPECT_EQ(Target(plan, "high"), 6);
  EXPECT_EQ(Target(plan, "low"), 2);
}

TEST(ElasticPolicyTest, ReclaimsWithinOneDecisionIgnoringCooldownLowestPriorityFirst) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(12).ok());
  ASSERT_TRUE(policy.AddJob({"hi", 1, 6, 1}).ok());
  ASSERT_TRUE(policy.AddJob({"lo", 1, 6, 0}).ok());
  Plan plan = RunUntil(policy, 0, 10000);
  ASSERT_EQ(Target(plan, "hi"), 6);
  ASSERT_EQ(Target(plan, "lo"), 6);
  // Online services take 5 slots; the very next decision (still in lo's and hi's
  // cooldown, not settled) gives them back, all from the lower priority.
  ASSERT_TRUE(policy.SetCapacity(7).ok());
  plan = policy.Decide(10250);
  EXPECT_EQ(plan.assigned, 7);
  EXPECT_EQ(Target(plan, "hi"), 6);
  EXPECT_EQ(Target(plan, "lo"), 1);
  EXPECT_EQ(Find(plan, "lo").reason, Reason::kReclaim);
}

TEST(ElasticPolicyTest, CapacityBelowMinimumsIsReportedAndNeverCutsAMinimum) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(6).ok());
  ASSERT_TRUE(policy.AddJob({"a", 3, 4, 0}).ok());
  ASSERT_TRUE(policy.AddJob({"b", 3, 4, 0}).ok());
  Plan plan = RunUntil(policy, 0, 10000);
  ASSERT_EQ(Target(plan, "a") + Target(plan, "b"), 6);
  ASSERT_TRUE(policy.SetCapacity(2).ok());
  plan = policy.Decide(10250);
  EXPECT_TRUE(plan.over_committed);
  EXPECT_EQ(plan.sum_minimums, 6);
  EXPECT_EQ(Target(plan, "a"), 3);
  EXPECT_EQ(Target(plan, "b"), 3);
  EXPECT_NE(plan.Summary().find("over-committed"), std::string::npos) << plan.Summary();
  // A job that arrives now waits: its minimum does not fit.
  ASSERT_TRUE(policy.AddJob({"c", 1, 2, 0}).ok());
  plan = policy.Decide(10500);
  EXPECT_EQ(Target(plan, "c"), 0);
  EXPECT_EQ(Find(plan, "c").reason, Reason::kQueued);
}

TEST(ElasticPolicyTest, QueueIsFifoWithinAPriorityAndAdmitsWhenSlotsFree) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(4).ok());
  ASSERT_TRUE(policy.AddJob({"first", 3, 3, 0}).ok());
  ASSERT_TRUE(policy.AddJob({"second", 2, 2, 0}).ok());
  ASSERT_TRUE(policy.AddJob({"third", 1, 1, 0}).ok());  // would fit, but second arrived earlier
  Plan plan = policy.Decide(0);
  EXPECT_EQ(Target(plan, "first"), 3);
  EXPECT_EQ(Target(plan, "second"), 0);
  EXPECT_EQ(Target(plan, "third"), 0);
  ASSERT_TRUE(policy.RemoveJob("first").ok());
  plan = policy.Decide(250);  // admission is immediate
  EXPECT_EQ(Target(plan, "second"), 2);
  EXPECT_EQ(Target(plan, "third"), 1);
}

TEST(ElasticPolicyTest, FlappingCapacityDoesNotThrash) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(4).ok());
  ASSERT_TRUE(policy.AddJob({"a", 1, 8, 0}).ok());
  Plan plan = RunUntil(policy, 0, 10000);
  ASSERT_EQ(Target(plan, "a"), 4);
  // Spare capacity that appears for under settle_ms at a time is never grown into.
  int changes = 0;
  for (int64_t t = 10250; t <= 39500; t += 250) {  // ends at capacity 4
    ASSERT_TRUE(policy.SetCapacity((t / 750) % 2 ? 8 : 4).ok());
    plan = policy.Decide(t);
    if (Find(plan, "a").changed()) ++changes;
  }
  EXPECT_EQ(changes, 0);
  // Capacity that stays is grown into after settle_ms (and the cooldown).
  ASSERT_TRUE(policy.SetCapacity(8).ok());
  plan = policy.Decide(40250);
  EXPECT_EQ(Target(plan, "a"), 4);
  plan = RunUntil(policy, 40500, 40250 + kSettle - 250);
  EXPECT_EQ(Target(plan, "a"), 4);
  plan = policy.Decide(40250 + kSettle);
  EXPECT_EQ(Target(plan, "a"), 8);
}

TEST(ElasticPolicyTest, CooldownSpacesAJobsChangesButNotItsReclaims) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(4).ok());
  ASSERT_TRUE(policy.AddJob({"a", 1, 8, 0}).ok());
  Plan plan = RunUntil(policy, 0, 10000);
  ASSERT_EQ(Target(plan, "a"), 4);  // changed at kCooldown = 5000
  ASSERT_TRUE(policy.SetCapacity(6).ok());
  plan = RunUntil(policy, 10250, 12000);
  ASSERT_EQ(Target(plan, "a"), 6);
  const int64_t grew_at = [&] {
    // It grew once settled (at 10250 + kSettle).
    return 10250 + kSettle;
  }();
  // More capacity within the cooldown of that growth: waits out the cooldown.
  ASSERT_TRUE(policy.SetCapacity(8).ok());
  plan = RunUntil(policy, 12250, grew_at + kCooldown - 250);
  EXPECT_EQ(Target(plan, "a"), 6);
  plan = policy.Decide(grew_at + kCooldown);
  EXPECT_EQ(Target(plan, "a"), 8);
  // A reclaim right after that change is not delayed.
  ASSERT_TRUE(policy.SetCapacity(3).ok());
  plan = policy.Decide(grew_at + kCooldown + 250);
  EXPECT_EQ(Target(plan, "a"), 3);
}

TEST(ElasticPolicyTest, RebalancesToANewJobOnceSettled) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(8).ok());
  ASSERT_TRUE(policy.AddJob({"a", 1, 8, 0}).ok());
  Plan plan = RunUntil(policy, 0, 10000);
  ASSERT_EQ(Target(plan, "a"), 8);
  ASSERT_TRUE(policy.AddJob({"b", 1, 8, 0}).ok());
  plan = policy.Decide(10250);
  EXPECT_EQ(Target(plan, "b"), 1);   // admitted at its minimum at once
  EXPECT_EQ(Target(plan, "a"), 7);   // reclaimed for b's minimum
  EXPECT_EQ(Find(plan, "a").share, 4);
  plan = RunUntil(policy, 10500, 30000);
  EXPECT_EQ(Target(plan, "a"), 4);
  EXPECT_EQ(Target(plan, "b"), 4);
  EXPECT_EQ(plan.assigned, 8);
}

TEST(ElasticPolicyTest, AdoptedJobsKeepTheirTrainersOnARestartedController) {
  ElasticPolicy policy = MakePolicy();
  ASSERT_TRUE(policy.SetCapacity(8).ok());
  ASSERT_TRUE(policy.AddJob({"a", 1, 8, 0}).ok());
  ASSERT_TRUE(policy.AddJob({"b", 1, 8, 0}).ok());
  ASSERT_TRUE(policy.Adopt("a", 5).ok());
  ASSERT_TRUE(policy.Adopt("b", 3).ok());
  Plan plan = policy.Decide(0);
  EXPECT_EQ(Target(plan, "a"), 5);
  EXPECT_EQ(Target(plan, "b"), 3);
  EXPECT_FALSE(Find(plan, "a").changed());
}

TEST(ElasticPolicyTest, BadInputNamesTheField) {
  ElasticPolicy policy = MakePolicy();
  Status s = policy.AddJob({"x", 3, 2, 0});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "job 'x': min_trainers 3 is above max_trainers 2");
  EXPECT_EQ(policy.AddJob({"y", 0, 0, 0}).message(), "job 'y': max_trainers 0 is below 1");
  EXPECT_EQ(policy.AddJob({"", 1, 1, 0}).message(), "job name: empty");
  EXPECT_EQ(policy.SetCapacity(-1).code(), absl::StatusCode::kInvalidArgument);
  s = policy.RemoveJob("ghost");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "unknown job 'ghost'");
  EXPECT_EQ(policy.UpdateJob({"ghost", 1, 2, 0}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(policy.ReportRunning("ghost", 1).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(policy.AddJob({"z", 1, 2, 0}).ok());
  EXPECT_EQ(policy.AddJob({"z", 1, 2, 0}).code(), absl::StatusCode::kAlreadyExists);
  // A rejected update loses nothing: the job keeps its good bounds.
  ASSERT_TRUE(policy.SetCapacity(4).ok());
  EXPECT_FALSE(policy.UpdateJob({"z", 5, 2, 0}).ok());
  Plan plan = RunUntil(policy, 0, 10000);
  EXPECT_EQ(Target(plan, "z"), 2);
}

}  // namespace
}  // namespace pl::elastic
