// StepSchedule: every trainer of a job of virtual trainers derives the same steps from
// the master's ConsistentSchedule (docs/consistent-training.md).
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "paddle_like/dist/step_mask.h"
#include "trainer/consistent_steps.h"

namespace pl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

proto::ConsistentSchedule Schedule(std::vector<int64_t> records, int64_t micro_batch, int32_t passes) {
  proto::ConsistentSchedule s;
  s.set_virtual_trainers(static_cast<int32_t>(records.size()));
  s.set_micro_batch(micro_batch);
  s.set_num_passes(passes);
  for (int64_t r : records) s.add_task_records(r);
  return s;
}

// Tasks of 100, 100 and 70 records in micro-batches of 32: 4, 4 and 3 micro-batches, so
// a pass is 4 steps, the last of which takes only the first two tasks.
TEST(StepScheduleTest, AStepTakesAMicroBatchOfEveryTaskThatHasOneLeft) {
  auto s = StepSchedule::From(Schedule({100, 100, 70}, 32, 2));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->virtual_trainers(), 3);
  EXPECT_EQ(s->steps_per_pass(), 4);
  EXPECT_EQ(s->total_steps(), 8);
  EXPECT_EQ(s->batches(3), 3);
  EXPECT_EQ(s->first_step(2), 4);
  EXPECT_THAT(StepMaskMembers(s->expects(0)), ElementsAre(0, 1, 2));
  EXPECT_THAT(StepMaskMembers(s->expects(2)), ElementsAre(0, 1, 2));
  EXPECT_THAT(StepMaskMembers(s->expects(3)), ElementsAre(0, 1));
  EXPECT_THAT(StepMaskMembers(s->expects(7)), ElementsAre(0, 1));  // pass 2's last step
  EXPECT_EQ(s->expects(4), s->expects(0));
}

TEST(StepScheduleTest, RefusesAScheduleThatIsNotOne) {
  EXPECT_THAT(StepSchedule::From(Schedule({}, 32, 1)).status().message(), HasSubstr("is not one"));
  EXPECT_THAT(StepSchedule::From(Schedule({10}, 0, 1)).status().message(), HasSubstr("micro-batch 0"));
  EXPECT_THAT(StepSchedule::From(Schedule({10}, 8, 0)).status().message(), HasSubstr("0 passes"));
  auto empty_task = StepSchedule::From(Schedule({10, 0}, 8, 1));
  EXPECT_EQ(empty_task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty_task.status().message(), HasSubstr("task 2 has no records"));
  proto::ConsistentSchedule short_tasks = Schedule({10, 10}, 8, 1);
  short_tasks.set_virtual_trainers(3);
  EXPECT_THAT(StepSchedule::From(short_tasks).status().message(), HasSubstr("3 virtual trainers, 2 tasks"));
}

}  // namespace
}  // namespace pl
