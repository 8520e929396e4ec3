// The master's event log (master/master_journal.h) through the Master: a job's calls
// replayed from the log alone, from a snapshot plus the log, with a torn last record
// (dropped and reported), with a corrupt record in the middle (a one-line DATA_LOSS
// naming the log and the byte), bytes per event that do not grow with the job, and a
// log that cannot be written (the change refused and undone); a finish reported with
// the next lease (GetTaskRequest.finished).
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "master/master_service.h"
#include "paddle_like/store/local_dir_store.h"
#include "tests/master/test_util.h"

namespace pl {
namespace {

using ::testing::HasSubstr;
using pl::testing::FakeClock;
using pl::testing::MakeChunks;
using pl::testing::ScratchDir;

// A master on `dir` with its event log there too.
struct Job {
  Job(const std::string& dir, FakeClock& clock, int chunks, int64_t snapshot_bytes = int64_t{64} << 20) {
    auto s = LocalDirStore::Open(dir);
    EXPECT_TRUE(s.ok()) << s.status();
    store = std::move(s).value();
    MasterOptions o;
    o.queue.num_passes = 2;
    o.queue.seed = 3;
    o.num_pservers = 1;
    o.lease_ms = 1000;
    o.now_ms = clock.fn();
    o.expire_interval_ms = 0;
    o.log = [this](const std::string& line) { lines.push_back(line); };
    o.log_path = dir + "/master-events.log";
    o.snapshot_bytes = snapshot_bytes;
    auto m = Master::Open(o, store.get(), [chunks]() -> StatusOr<std::vector<ChunkInfo>> { return MakeChunks(chunks); });
    opened = m.status();
    if (m.ok()) master = std::move(m).value();
  }
  std::unique_ptr<LocalDirStore> store;
  std::vector<std::string> lines;
  Status opened;
  std::unique_ptr<Master> master;
};

// The state without what a restart changes on purpose (every lease gets a full term).
std::string Comparable(proto::MasterState s) {
  s.clear_last_seq();
  for (proto::TaskRecord& t : *s.mutable_queue()->mutable_tasks()) t.clear_lease_deadline_ms();
  for (proto::TrainerRecord& t : *s.mutable_membership()->mutable_trainers()) t.clear_lease_deadline_ms();
  return s.SerializeAsString();
}

// Registers trainers and runs tasks: leases, finishes, a failure, a return, heartbeats,
// a leave and a trainer dropped by its lease.
void Train(Master& m, FakeClock& clock, int rounds) {
  std::vector<int64_t> ids;
  for (const char* name : {"a", "b", "c"}) {
    proto::RegisterTrainerRequest r;
    r.set_name(name);
    ids.push_back(m.RegisterTrainer(r)->trainer_id());
  }
  for (int round = 0; round < rounds; ++round) {
    for (int64_t id : ids) {
      clock.now += 7;
      proto::GetTaskRequest get;
      get.set_trainer_id(id);
      auto task = m.GetTask(get);
      if (!task.ok() || task->result() != proto::GetTaskResponse::TASK) continue;
      proto::HeartbeatRequest beat;
      beat.set_trainer_id(id);
      beat.set_task_id(task->task().id());
      ASSERT_TRUE(m.Heartbeat(beat).ok());
      if ((round + id) % 5 == 0) {
        proto::TaskFailedRequest failed;
        failed.set_trainer_id(id);
        failed.set_task_id(task->task().id());
        failed.set_pass(task->task().pass());
        failed.set_reason("out of memory");
        failed.set_returned(round % 2 == 0);
        ASSERT_TRUE(m.TaskFailed(failed).ok());
      } else {
        proto::TaskFinishedRequest done;
        done.set_trainer_id(id);
        done.set_task_id(task->task().id());
        done.set_pass(task->task().pass());
        done.set_num_samples(10);
        ASSERT_TRUE(m.TaskFinished(done).ok());
      }
    }
  }
  proto::LeaveRequest leave;
  leave.set_trainer_id(ids[0]);
  ASSERT_TRUE(m.Leave(leave).ok());
  proto::GetTaskRequest get;
  get.set_trainer_id(ids[1]);
  ASSERT_TRUE(m.GetTask(get).ok());  // b holds a task, then falls silent
  clock.now += 5000;
  ASSERT_TRUE(m.ExpireNow().ok());  // b and c dropped, b's task back to todo
}

TEST(MasterJournalTest, ARestartReplaysTheLogToExactlyTheStateItLeft) {
  ScratchDir dir;
  FakeClock clock;
  proto::MasterState before;
  {
    Job job(dir.path(), clock, 12);
    ASSERT_TRUE(job.opened.ok()) << job.opened;
    Train(*job.master, clock, 4);
    before = job.master->Snapshot();
    EXPECT_GT(before.last_seq(), 20u);
  }
  Job again(dir.path(), clock, 12);
  ASSERT_TRUE(again.opened.ok()) << again.opened;
  EXPECT_TRUE(again.master->resumed());
  EXPECT_EQ(Comparable(again.master->Snapshot()), Comparable(before));
  EXPECT_THAT(absl::StrJoin(again.lines, "\n"), HasSubstr("events replayed"));
  // A second restart replays the first one's restart too, to the same state.
  proto::MasterState resumed = again.master->Snapshot();
  again.master.reset();
  again.store.reset();
  Job third(dir.path(), clock, 12);
  ASSERT_TRUE(third.opened.ok()) << third.opened;
  EXPECT_EQ(Comparable(third.master->Snapshot()), Comparable(resumed));
}

// GetTaskRequest.finished: the task trained reported in the call that leases the next.
proto::GetTaskRequest GetReporting(int64_t trainer, const proto::Task& done, int64_t samples) {
  proto::GetTaskRequest get;
  get.set_trainer_id(trainer);
  proto::TaskFinishedRequest& f = *get.mutable_finished();
  f.set_trainer_id(trainer);
  f.set_task_id(done.id());
  f.set_pass(done.pass());
  f.set_num_samples(samples);
  return get;
}

TEST(MasterJournalTest, AFinishReportedWithTheNextLeaseCountsOnceIsRefusedWhenNotOursAndIsReplayed) {
  ScratchDir dir;
  FakeClock clock;
  proto::MasterState before;
  {
    Job job(dir.path(), clock, 4);
    ASSERT_TRUE(job.opened.ok()) << job.opened;
    Master& m = *job.master;
    proto::RegisterTrainerRequest r;
    r.set_name("a");
    const int64_t a = m.RegisterTrainer(r)->trainer_id();
    r.set_name("b");
    const int64_t b = m.RegisterTrainer(r)->trainer_id();
    proto::GetTaskRequest get;
    get.set_trainer_id(a);
    auto first = m.GetTask(get);
    ASSERT_TRUE(first.ok() && first->result() == proto::GetTaskResponse::TASK);

    // One call: the first task counted with its samples, the next one leased.
    auto second = m.GetTask(GetReporting(a, first->task(), 10));
    ASSERT_TRUE(second.ok()) << second.status();
    ASSERT_EQ(second->result(), proto::GetTaskResponse::TASK);
    EXPECT_EQ(second->finish_refused(), "");
    EXPECT_NE(second->task().id(), first->task().id());
    EXPECT_EQ(m.JobStatus({})->done(), 1);
    EXPECT_EQ(m.JobStatus({})->samples_done(), 10);
    // Its reply lost, the same call again: the report counts once, the same task comes back.
    auto retried = m.GetTask(GetReporting(a, first->task(), 10));
    ASSERT_TRUE(retried.ok()) << retried.status();
    EXPECT_EQ(retried->task().id(), second->task().id());
    EXPECT_EQ(retried->finish_refused(), "");
    EXPECT_EQ(m.JobStatus({})->samples_done(), 10);

    // b reports a's task: not counted, said why, and b still gets a task of its own.
    auto from_b = m.GetTask(GetReporting(b, second->task(), 10));
    ASSERT_TRUE(from_b.ok()) << from_b.status();
    EXPECT_THAT(from_b->finish_refused(), HasSubstr("not leased to that trainer (it is leased to trainer " +
                                                    std::to_string(a) + ")"));
    ASSERT_EQ(from_b->result(), proto::GetTaskResponse::TASK);
    EXPECT_EQ(m.JobStatus({})->done(), 1);

    // A report in another trainer's name is refused whole: nothing counted, nothing leased.
    proto::GetTaskRequest forged = GetReporting(a, second->task(), 10);
    forged.set_trainer_id(b);
    auto refused = m.GetTask(forged);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("a trainer reports its own tasks"));
    EXPECT_EQ(m.JobStatus({})->done(), 1);
    EXPECT_EQ(m.JobStatus({})->pending(), 2);
    before = m.Snapshot();
  }
  Job again(dir.path(), clock, 4);  // the calls replayed from the log
  ASSERT_TRUE(again.opened.ok()) << again.opened;
  EXPECT_EQ(Comparable(again.master->Snapshot()), Comparable(before));
  EXPECT_EQ(again.master->JobStatus({})->samples_done(), 10);
}

TEST(MasterJournalTest, ADroppedTrainersReportWithItsLeaseDoesNotCount) {
  ScratchDir dir;
  FakeClock clock;
  Job job(dir.path(), clock, 2);
  ASSERT_TRUE(job.opened.ok()) << job.opened;
  Master& m = *job.master;
  proto::RegisterTrainerRequest r;
  r.set_name("a");
  const int64_t a = m.RegisterTrainer(r)->trainer_id();
  proto::GetTaskRequest get;
  get.set_trainer_id(a);
  auto task = m.GetTask(get);
  ASSERT_TRUE(task.ok() && task->result() == proto::GetTaskResponse::TASK);
  clock.now += 5000;  // silent past its lease: dropped, its task back in the queue
  auto late = m.GetTask(GetReporting(a, task->task(), 10));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("did not count"));
  EXPECT_EQ(m.JobStatus({})->done(), 0);
  EXPECT_EQ(m.JobStatus({})->samples_done(), 0);
  EXPECT_EQ(m.JobStatus({})->todo(), 2);
}

TEST(MasterJournalTest, ATrainerTargetIsStoredRefusedOutOfRangeAndSurvivesRestartsAndSnapshots) {
  ScratchDir dir;
  FakeClock clock;
  {
    Job job(dir.path(), clock, 4);
    ASSERT_TRUE(job.opened.ok()) << job.opened;
    EXPECT_FALSE(job.master->JobStatus({})->has_trainer_target());
    proto::ScaleTrainersRequest req;
    req.set_trainers(-1);
    EXPECT_EQ(job.master->ScaleTrainers(req).status().code(), absl::StatusCode::kInvalidArgument);
    req.set_trainers(kMaxTrainerTarget + 1);
    EXPECT_THAT(std::string(job.master->ScaleTrainers(req).status().message()), HasSubstr("trainers 100001"));
    req.set_trainers(3);
    req.set_reason("grow");
    auto resp = job.master->ScaleTrainers(req);
    ASSERT_TRUE(resp.ok()) << resp.status();
    EXPECT_FALSE(resp->has_previous());
    req.set_trainers(2);
    req.set_reason("reclaim");
    resp = job.master->ScaleTrainers(req);
    ASSERT_TRUE(resp.ok());
    EXPECT_EQ(resp->previous(), 3);
    EXPECT_THAT(absl::StrJoin(job.lines, "\n"), HasSubstr("trainer target 3 -> 2 (reclaim)"));
  }
  Job again(dir.path(), clock, 4);  // replays the two events from the log
  ASSERT_TRUE(again.opened.ok()) << again.opened;
  auto status = again.master->JobStatus({});
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->trainer_target(), 2);
  EXPECT_EQ(status->trainer_target_reason(), "reclaim");
  // And from a snapshot.
  proto::MasterState snap = again.master->Snapshot();
  EXPECT_EQ(snap.trainer_target(), 2);
}

TEST(MasterJournalTest, ReturnedTasksAndTheirPushedSamplesAreCountedAndSurviveARestart) {
  ScratchDir dir;
  FakeClock clock;
  {
    Job job(dir.path(), clock, 4);
    ASSERT_TRUE(job.opened.ok()) << job.opened;
    proto::RegisterTrainerRequest r;
    r.set_name("a");
    const int64_t id = job.master->RegisterTrainer(r)->trainer_id();
    proto::GetTaskRequest get;
    get.set_trainer_id(id);
    auto task = job.master->GetTask(get);
    ASSERT_TRUE(task.ok() && task->result() == proto::GetTaskResponse::TASK);
    proto::TaskFailedRequest back;
    back.set_trainer_id(id);
    back.set_task_id(task->task().id());
    back.set_pass(task->task().pass());
    back.set_returned(true);
    back.set_samples_pushed(7);
    ASSERT_TRUE(job.master->TaskFailed(back).ok());
    EXPECT_THAT(absl::StrJoin(job.lines, "\n"), HasSubstr("(7 of its samples pushed: trained again with it)"));
    auto status = job.master->JobStatus({});
    EXPECT_EQ(status->tasks_returned(), 1);
    EXPECT_EQ(status->samples_retrained(), 7);
    EXPECT_EQ(status->failed(), 0);  // a returned task is no failure
  }
  Job again(dir.path(), clock, 4);
  ASSERT_TRUE(again.opened.ok()) << again.opened;
  auto status = again.master->JobStatus({});
  EXPECT_EQ(status->tasks_returned(), 1);
  EXPECT_EQ(status->samples_retrained(), 7);
}

TEST(MasterJournalTest, SnapshotsInTheMiddleOfTheLogRestoreTheSame) {
  ScratchDir dir;
  FakeClock clock;
  proto::MasterState before;
  {
    Job job(dir.path(), clock, 12, /*snapshot_bytes=*/400);  // a snapshot every few events
    ASSERT_TRUE(job.opened.ok()) << job.opened;
    Train(*job.master, clock, 4);
    before = job.master->Snapshot();
    EXPECT_LT(std::filesystem::file_size(dir.path() + "/master-events.log"), 400u + 200u);
  }
  Job again(dir.path(), clock, 12, 400);
  ASSERT_TRUE(again.opened.ok()) << again.opened;
  EXPECT_EQ(Comparable(again.master->Snapshot()), Comparable(before));
}

TEST(MasterJournalTest, ATornLastRecordIsDroppedAndReportedAndTheRestIsKept) {
  ScratchDir dir;
  FakeClock clock;
  proto::MasterState before;
  {
    Job job(dir.path(), clock, 12);
    ASSERT_TRUE(job.opened.ok()) << job.opened;
    Train(*job.master, clock, 2);
    before = job.master->Snapshot();
  }
  {
    // A crash in the middle of writing the next record: its header says 200 bytes.
    std::ofstream out(dir.path() + "/master-events.log", std::ios::binary | std::ios::app);
    const uint32_t header[2] = {200, 12345};
    out.write(reinterpret_cast<const char*>(header), sizeof(header));
    out.write("half a rec", 10);
  }
  Job again(dir.path(), clock, 12);
  ASSERT_TRUE(again.opened.ok()) << again.opened;
  EXPECT_EQ(Comparable(again.master->Snapshot()), Comparable(before));
  EXPECT_THAT(absl::StrJoin(again.lines, "\n"), HasSubstr("its last 18 bytes are a record cut short"));
}

TEST(MasterJournalTest, ACorruptRecordInTheMiddleStopsTheRestoreNamingIt) {
  ScratchDir dir;
  FakeClock clock;
  {
    Job job(dir.path(), clock, 12);
    ASSERT_TRUE(job.opened.ok()) << job.opened;
    Train(*job.master, clock, 2);
  }
  const std::string path = dir.path() + "/master-events.log";
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(12);  // inside the first record's payload
    f.put('\x7f');
  }
  Job again(dir.path(), clock, 12);
  ASSERT_FALSE(again.opened.ok());
  EXPECT_EQ(again.opened.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(again.opened.message(), HasSubstr("the record at byte 0"));
  EXPECT_THAT(again.opened.message(), HasSubstr("fails its checksum"));
  EXPECT_THAT(again.opened.message(), HasSubstr(path));
}

// What one call writes is its own event, whatever the size of the job.
TEST(MasterJournalTest, BytesWrittenPerEventDoNotGrowWithTheJob) {
  auto per_heartbeat = [](int chunks) {
    ScratchDir dir;
    FakeClock clock;
    Job job(dir.path(), clock, chunks);
    EXPECT_TRUE(job.opened.ok()) << job.opened;
    proto::RegisterTrainerRequest r;
    r.set_name("t");
    const int64_t id = job.master->RegisterTrainer(r)->trainer_id();
    const auto size = [&] { return std::filesystem::file_size(dir.path() + "/master-events.log"); };
    const auto before = size();
    for (int i = 0; i < 100; ++i) {
      clock.now += 10;
      proto::HeartbeatRequest beat;
      beat.set_trainer_id(id);
      EXPECT_TRUE(job.master->Heartbeat(beat).ok());
    }
    return static_cast<double>(size() - before) / 100;
  };
  const double small = per_heartbeat(10), large = per_heartbeat(20000);
  std::cout << "[measured] bytes per heartbeat event: " << small << " (10 tasks), " << large << " (20000 tasks)"
            << std::endl;
  EXPECT_LT(small, 64);
  EXPECT_EQ(small, large);
}

// A log the master cannot write to (here: the file size limit) refuses the call with
// UNAVAILABLE and leaves the state as it was stored.
TEST(MasterJournalTest, ALogThatCannotBeWrittenRefusesTheChangeAndUndoesIt) {
  ScratchDir dir;
  FakeClock clock;
  Job job(dir.path(), clock, 12);
  ASSERT_TRUE(job.opened.ok()) << job.opened;
  proto::RegisterTrainerRequest r;
  r.set_name("t");
  const int64_t id = job.master->RegisterTrainer(r)->trainer_id();
  const proto::MasterState before = job.master->Snapshot();
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct sigaction ignore = {}, old_action = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &old_action), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = std::filesystem::file_size(dir.path() + "/master-events.log") + 4;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  proto::GetTaskRequest get;
  get.set_trainer_id(id);
  auto refused = job.master->GetTask(get);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  ASSERT_EQ(sigaction(SIGXFSZ, &old_action, nullptr), 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("master cannot store its state, the change was not made"));
  EXPECT_EQ(Comparable(job.master->Snapshot()), Comparable(before)) << "no task leased";
  // Writable again: the call goes through, and a restart sees it.
  ASSERT_TRUE(job.master->GetTask(get).ok());
  EXPECT_EQ(job.master->Snapshot().queue().todo_size(), before.queue().todo_size() - 1);
}

}  // namespace
}  // namespace pl
