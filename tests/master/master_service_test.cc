#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_join.h"
#include "master/master_grpc_service.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/store/local_dir_store.h"
#include "proto/master.grpc.pb.h"
#include "tests/master/test_util.h"

namespace pl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using pl::testing::FakeClock;
using pl::testing::MakeChunks;
using pl::testing::ScratchDir;

MasterOptions Options(FakeClock& clock, int passes = 2, int k = 1, int max_failures = 3) {
  MasterOptions o;
  o.queue.num_passes = passes;
  o.queue.chunks_per_task = k;
  o.queue.max_failures = max_failures;
  o.queue.seed = 11;
  o.num_pservers = 2;
  o.lease_ms = 1000;
  o.now_ms = clock.fn();
  o.expire_interval_ms = 0;  // tests drive expiry through the clock
  o.log = [](const std::string&) {};
  return o;
}

Master::ChunkSource Chunks(int n) {
  return [n]() -> StatusOr<std::vector<ChunkInfo>> { return MakeChunks(n); };
}
Master::ChunkSource NoChunks() {
  return []() -> StatusOr<std::vector<ChunkInfo>> {
    return absl::InternalError("the data must not be read when resuming");
  };
}

proto::RegisterTrainerRequest Named(const std::string& name) {
  proto::RegisterTrainerRequest r;
  r.set_name(name);
  return r;
}
proto::GetTaskRequest Get(int64_t trainer) {
  proto::GetTaskRequest r;
  r.set_trainer_id(trainer);
  return r;
}
proto::TaskFinishedRequest Finished(int64_t trainer, const proto::Task& t, int64_t samples) {
  proto::TaskFinishedRequest r;
  r.set_trainer_id(trainer);
  r.set_task_id(t.id());
  r.set_pass(t.pass());
  r.set_num_samples(samples);
  return r;
}

// The bytes in the store are exactly the master's current state.
void ExpectStored(LocalDirStore& store, const Master& m) {
  auto bytes = store.Get(kMasterStateKey);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, m.Snapshot().SerializeAsString());
}

TEST(MasterTest, EveryChangeIsStoredAndARestartResumesExactly) {
  ScratchDir dir;
  FakeClock clock;
  proto::MasterState before;
  int64_t held_task = 0;
  {
    auto store = LocalDirStore::Open(dir.path());
    ASSERT_TRUE(store.ok());
    auto m = Master::Open(Options(clock), store->get(), Chunks(5));
    ASSERT_TRUE(m.ok()) << m.status();
    Master& master = **m;
    EXPECT_FALSE(master.resumed());
    ExpectStored(**store, master);

    EXPECT_EQ(master.RegisterTrainer(Named("a"))->trainer_id(), 1);
    ExpectStored(**store, master);
    EXPECT_EQ(master.RegisterTrainer(Named("b"))->trainer_id(), 2);
    proto::RegisterPserverRequest ps;
    ps.set_index(1);
    ps.set_address("127.0.0.1:5001");
    EXPECT_EQ(master.RegisterPserver(ps)->generation(), 1);
    ExpectStored(**store, master);

    auto t1 = master.GetTask(Get(1));
    ASSERT_TRUE(t1.ok());
    ASSERT_EQ(t1->result(), proto::GetTaskResponse::TASK);
    ExpectStored(**store, master);
    ASSERT_TRUE(master.TaskFinished(Finished(1, t1->task(), 10)).ok());
    ExpectStored(**store, master);
    auto t2 = master.GetTask(Get(2));
    ASSERT_EQ(t2->result(), proto::GetTaskResponse::TASK);
    held_task = t2->task().id();
    ExpectStored(**store, master);
    before = master.Snapshot();
  }  // the master and its store go away, as in a crash after the last reply

  // Restarted at once, so the lease extension a restart grants changes no deadline and
  // the state must come back byte for byte (the extension has tests of its own below).
  auto store = LocalDirStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  auto m = Master::Open(Options(clock, /*passes=*/9), store->get(), NoChunks());
  ASSERT_TRUE(m.ok()) << m.status();
  Master& master = **m;
  EXPECT_TRUE(master.resumed());
  EXPECT_EQ(master.Snapshot().SerializeAsString(), before.SerializeAsString());

  auto status = master.JobStatus({});
  EXPECT_EQ(status->pass(), 1);
  EXPECT_EQ(status->num_passes(), 2);  // the job's own setting, not the new flag
  EXPECT_EQ(status->todo(), 3);
  EXPECT_EQ(status->pending(), 1);
  EXPECT_EQ(status->done(), 1);
  EXPECT_EQ(status->samples_done(), 10);
  EXPECT_EQ(status->chunks_trained(), 1);
  EXPECT_EQ(status->live_trainers(), 2);

  // Trainer 2 still holds its task; its retried GetTask gets the same one back.
  auto again = master.GetTask(Get(2));
  EXPECT_EQ(again->task().id(), held_task);
  // Ids keep increasing across the restart.
  EXPECT_EQ(master.RegisterTrainer(Named("c"))->trainer_id(), 3);
  auto mem = master.GetMembership({});
  ASSERT_EQ(mem->pservers_size(), 1);
  EXPECT_EQ(mem->pservers(0).index(), 1);
  EXPECT_EQ(mem->num_pservers(), 2);
}

// A master on its way down (SIGTERM; pl-launch stops the pservers just before it) drops
// no one and stores no such change: leases run out only for a master that stays.
TEST(MasterTest, AStoppingMasterLetsNoLeaseRunOut) {
  ScratchDir dir;
  FakeClock clock;
  auto store = LocalDirStore::Open(dir.path());
  auto m = Master::Open(Options(clock), store->get(), Chunks(2));
  ASSERT_TRUE(m.ok());
  ASSERT_EQ((*m)->RegisterTrainer(Named("a"))->trainer_id(), 1);
  ASSERT_TRUE((*m)->GetTask(Get(1)).ok());
  (*m)->BeginStopping();
  clock.now += 5000;  // well past the trainer's and the task's leases
  ASSERT_TRUE((*m)->ExpireNow().ok());
  // The trainer's task stays leased to it (a dropped trainer's goes back to todo).
  auto status = (*m)->JobStatus({});
  EXPECT_EQ(status->pending(), 1);
  EXPECT_EQ(status->todo(), 1);
  ExpectStored(**store, **m);
  // The same master, not stopping, would have dropped both.
  ScratchDir other_dir;
  auto other_store = LocalDirStore::Open(other_dir.path());
  auto other = Master::Open(Options(clock), other_store->get(), Chunks(2));
  ASSERT_TRUE(other.ok());
  ASSERT_EQ((*other)->RegisterTrainer(Named("a"))->trainer_id(), 1);
  ASSERT_TRUE((*other)->GetTask(Get(1)).ok());
  clock.now += 5000;
  ASSERT_TRUE((*other)->ExpireNow().ok());
  EXPECT_EQ((*other)->JobStatus({})->pending(), 0);
  EXPECT_EQ((*other)->JobStatus({})->todo(), 2);
}

TEST(MasterTest, LeasesGetAFullTermAfterARestartThenRunOut) {
  ScratchDir dir;
  FakeClock clock;
  int64_t task = 0;
  {
    auto store = LocalDirStore::Open(dir.path());
    auto m = Master::Open(Options(clock), store->get(), Chunks(2));
    ASSERT_TRUE(m.ok());
    ASSERT_EQ((*m)->RegisterTrainer(Named("a"))->trainer_id(), 1);
    task = (*m)->GetTask(Get(1))->task().id();
  }
  // The master was down for longer than a lease: nobody could heartbeat meanwhile, so
  // the restarted master gives every lease a full term from its start.
  clock.now += 1500;
  auto store = LocalDirStore::Open(dir.path());
  auto m = Master::Open(Options(clock), store->get(), NoChunks());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->ExpireNow().ok());
  auto status = (*m)->JobStatus({});
  EXPECT_EQ(status->live_trainers(), 1);
  EXPECT_EQ(status->pending(), 1);
  // A trainer that died with the old master is dropped when that term ends.
  clock.now += 1000;
  ASSERT_TRUE((*m)->ExpireNow().ok());
  status = (*m)->JobStatus({});
  EXPECT_EQ(status->live_trainers(), 0);
  EXPECT_EQ(status->pending(), 0);
  EXPECT_EQ(status->todo(), 2);
  ExpectStored(**store, **m);
  auto hb = (*m)->Heartbeat([] { proto::HeartbeatRequest r; r.set_trainer_id(1); return r; }());
  EXPECT_FALSE(hb->known());
  auto get = (*m)->GetTask(Get(1));
  EXPECT_EQ(get.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(get.status().message(), HasSubstr("register again"));
  // The task goes to the next trainer.
  int64_t id = (*m)->RegisterTrainer(Named("b"))->trainer_id();
  EXPECT_EQ(id, 2);
  auto next = (*m)->GetTask(Get(id));
  ASSERT_EQ(next->result(), proto::GetTaskResponse::TASK);
  // A heartbeat tells the trainer how many are live (local steps scale by it).
  auto beat = (*m)->Heartbeat([&] { proto::HeartbeatRequest r; r.set_trainer_id(id); return r; }());
  ASSERT_TRUE(beat.ok()) << beat.status();
  EXPECT_TRUE(beat->known());
  EXPECT_EQ(beat->live_trainers(), 1);
  (void)task;
}

TEST(MasterTest, ALiveTrainerKeepsItsTaskAcrossARestart) {
  ScratchDir dir;
  FakeClock clock;
  proto::Task task;
  {
    auto store = LocalDirStore::Open(dir.path());
    auto m = Master::Open(Options(clock), store->get(), Chunks(2));
    ASSERT_TRUE(m.ok());
    ASSERT_EQ((*m)->RegisterTrainer(Named("a"))->trainer_id(), 1);
    task = (*m)->GetTask(Get(1))->task();
  }
  clock.now += 1500;  // down longer than a lease
  auto store = LocalDirStore::Open(dir.path());
  auto m = Master::Open(Options(clock), store->get(), NoChunks());
  ASSERT_TRUE(m.ok()) << m.status();
  clock.now += 300;  // the trainer reconnects and carries on
  auto hb = (*m)->Heartbeat([&] { proto::HeartbeatRequest r; r.set_trainer_id(1); r.set_task_id(task.id()); return r; }());
  EXPECT_TRUE(hb->known());
  EXPECT_TRUE((*m)->TaskFinished(Finished(1, task, 10)).ok());
  EXPECT_EQ((*m)->JobStatus({})->done(), 1);
}

TEST(MasterTest, ExpiredTrainerIsDroppedAndItsTaskReturns) {
  ScratchDir dir;
  FakeClock clock;
  auto store = LocalDirStore::Open(dir.path());
  auto m = Master::Open(Options(clock, 1), store->get(), Chunks(1));
  ASSERT_TRUE(m.ok());
  Master& master = **m;
  ASSERT_EQ(master.RegisterTrainer(Named("a"))->trainer_id(), 1);
  ASSERT_EQ(master.RegisterTrainer(Named("b"))->trainer_id(), 2);
  auto t = master.GetTask(Get(1));
  ASSERT_EQ(t->result(), proto::GetTaskResponse::TASK);
  EXPECT_EQ(master.GetTask(Get(2))->result(), proto::GetTaskResponse::WAIT);
  // Trainer 2 keeps heartbeating, trainer 1 goes silent.
  for (int i = 0; i < 3; ++i) {
    clock.now += 400;
    proto::HeartbeatRequest hb;
    hb.set_trainer_id(2);
    EXPECT_TRUE(master.Heartbeat(hb)->known());
  }
  auto mem = master.GetMembership({});
  ASSERT_EQ(mem->trainers_size(), 1);
  EXPECT_EQ(mem->trainers(0).id(), 2);
  auto moved = master.GetTask(Get(2));
  ASSERT_EQ(moved->result(), proto::GetTaskResponse::TASK);
  EXPECT_EQ(moved->task().id(), t->task().id());
  ASSERT_TRUE(master.TaskFinished(Finished(2, moved->task(), 7)).ok());
  auto status = master.JobStatus({});
  EXPECT_TRUE(status->job_done());
  EXPECT_EQ(master.GetTask(Get(2))->result(), proto::GetTaskResponse::JOB_DONE);
  EXPECT_EQ(master.GetTask(Get(99))->result(), proto::GetTaskResponse::JOB_DONE);
}

TEST(MasterTest, ReturnedTaskAndFailuresThroughTheMaster) {
  ScratchDir dir;
  FakeClock clock;
  auto store = LocalDirStore::Open(dir.path());
  auto m = Master::Open(Options(clock, 1, 1, /*max_failures=*/2), store->get(), Chunks(1));
  ASSERT_TRUE(m.ok());
  Master& master = **m;
  ASSERT_EQ(master.RegisterTrainer(Named("a"))->trainer_id(), 1);
  auto t = master.GetTask(Get(1));
  proto::TaskFailedRequest ret;
  ret.set_trainer_id(1);
  ret.set_task_id(t->task().id());
  ret.set_pass(1);
  ret.set_returned(true);
  ASSERT_TRUE(master.TaskFailed(ret).ok());
  EXPECT_EQ(master.JobStatus({})->todo(), 1);
  proto::TaskFailedRequest fail = ret;
  fail.set_returned(false);
  fail.set_reason("bad chunk");
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(master.GetTask(Get(1))->result(), proto::GetTaskResponse::TASK);
    ASSERT_TRUE(master.TaskFailed(fail).ok());
  }
  auto status = master.JobStatus({});
  EXPECT_TRUE(status->job_done());
  EXPECT_EQ(status->failed(), 1);
  EXPECT_THAT(status->failed_task_ids(), ElementsAre(t->task().id()));
  // A report about a task the caller does not hold is refused, naming the task.
  auto stale = master.TaskFailed(fail);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
}

// A store whose writes can be made to fail: fault injection, as leveldb does with Env.
class FlakyStore final : public StateStore {
 public:
  explicit FlakyStore(StateStore* real) : real_(real) {}
  bool fail = false;
  Status Put(const std::string& key, absl::string_view value) override {
    if (fail) return absl::ResourceExhaustedError("disk full");
    return real_->Put(key, value);
  }
  StatusOr<std::string> Get(const std::string& key) override { return real_->Get(key); }
  Status Delete(const std::string& key) override { return real_->Delete(key); }
  StatusOr<std::vector<std::string>> List(const std::string& prefix) override { return real_->List(prefix); }

 private:
  StateStore* real_;
};

TEST(MasterTest, AChangeThatCannotBeStoredIsUndone) {
  ScratchDir dir;
  FakeClock clock;
  auto real = LocalDirStore::Open(dir.path());
  FlakyStore flaky(real->get());
  auto m = Master::Open(Options(clock), &flaky, Chunks(3));
  ASSERT_TRUE(m.ok());
  Master& master = **m;
  ASSERT_EQ(master.RegisterTrainer(Named("a"))->trainer_id(), 1);
  flaky.fail = true;
  auto r = master.RegisterTrainer(Named("b"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("disk full"));
  auto t = master.GetTask(Get(1));
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnavailable);
  flaky.fail = false;
  EXPECT_EQ(master.JobStatus({})->pending(), 0);  // the failed GetTask leased nothing
  EXPECT_EQ(master.RegisterTrainer(Named("b"))->trainer_id(), 2);
  ExpectStored(**real, master);
}

TEST(MasterTest, UnreadableStateIsAnErrorNotAFreshStart) {
  ScratchDir dir;
  FakeClock clock;
  {
    auto store = LocalDirStore::Open(dir.path());
    ASSERT_TRUE((*store)->Put(kMasterStateKey, "not a protobuf \xff\xff\xff").ok());
  }
  auto store = LocalDirStore::Open(dir.path());
  auto m = Master::Open(Options(clock), store->get(), Chunks(3));
  EXPECT_EQ(m.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(m.status().message(), HasSubstr("master/state"));

  ScratchDir empty_dir;
  auto store2 = LocalDirStore::Open(empty_dir.path());
  auto m2 = Master::Open(Options(clock), store2->get(), NoChunks());
  EXPECT_EQ(m2.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(m2.status().message(), HasSubstr("must not be read"));
}

TEST(MasterServiceTest, GrpcRoundTripAndProtocolCheck) {
  ScratchDir dir;
  auto store = LocalDirStore::Open(dir.path());
  MasterOptions o;
  o.queue.num_passes = 1;
  o.num_pservers = 1;
  o.lease_ms = 5000;
  o.log = [](const std::string&) {};
  auto m = Master::Open(o, store->get(), Chunks(2));  // real clock and expiry thread
  ASSERT_TRUE(m.ok()) << m.status();
  MasterService service(m->get());
  int port = 0;
  auto server = rpc::StartServer({}, {&service}, &port);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = proto::Master::NewStub(rpc::MakeChannel("127.0.0.1:" + std::to_string(port)));
  const auto timeout = std::chrono::seconds(10);

  proto::RegisterTrainerResponse reg;
  grpc::Status st = stub->RegisterTrainer(rpc::MakeContext(timeout, /*wait_for_ready=*/true).get(), Named("t"), &reg);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(reg.trainer_id(), 1);
  EXPECT_EQ(reg.lease_ms(), 5000);
  EXPECT_EQ(reg.num_pservers(), 1);

  ASSERT_FALSE(reg.token().empty());
  // A trainer's calls carry the token its registration returned (rpc/caller.h).
  auto as_trainer = [&](const std::string& token) {
    std::unique_ptr<grpc::ClientContext> ctx = rpc::MakeContext(timeout, /*wait_for_ready=*/true);
    if (!token.empty()) ctx->AddMetadata(rpc::kTrainerTokenKey, token);
    return ctx;
  };
  for (int i = 0; i < 2; ++i) {
    proto::GetTaskResponse task;
    st = stub->GetTask(as_trainer(reg.token()).get(), Get(reg.trainer_id()), &task);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(task.result(), proto::GetTaskResponse::TASK);
    EXPECT_EQ(task.num_passes(), 1);
    proto::TaskFinishedResponse fin;
    // Without the token, or with another one: refused, and the task stays pending.
    for (const std::string& wrong : {std::string(), std::string(32, 'a')}) {
      st = stub->TaskFinished(as_trainer(wrong).get(), Finished(reg.trainer_id(), task.task(), 10), &fin);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    }
    proto::JobStatusResponse pending;
    ASSERT_TRUE(stub->JobStatus(rpc::MakeContext(timeout, true).get(), {}, &pending).ok());
    EXPECT_EQ(pending.done(), i);
    EXPECT_EQ(pending.pending(), 1);
    // In the name of a trainer that is not registered (dropped, or never): refused with
    // NOT_FOUND, whatever token it carries, and not counted.
    for (const std::string& any : {std::string(), reg.token()}) {
      st = stub->TaskFinished(as_trainer(any).get(), Finished(reg.trainer_id() + 41, task.task(), 10), &fin);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
    }
    ASSERT_TRUE(stub->JobStatus(rpc::MakeContext(timeout, true).get(), {}, &pending).ok());
    EXPECT_EQ(pending.done(), i);
    st = stub->TaskFinished(as_trainer(reg.token()).get(), Finished(reg.trainer_id(), task.task(), 10), &fin);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  proto::GetTaskResponse done;
  ASSERT_TRUE(stub->GetTask(as_trainer(reg.token()).get(), Get(1), &done).ok());
  EXPECT_EQ(done.result(), proto::GetTaskResponse::JOB_DONE);
  proto::JobStatusResponse js;
  ASSERT_TRUE(stub->JobStatus(rpc::MakeContext(timeout, /*wait_for_ready=*/true).get(), {}, &js).ok());
  EXPECT_TRUE(js.job_done());
  EXPECT_EQ(js.done(), 2);
  EXPECT_EQ(js.samples_done(), 20);

  // A name longer than 256 bytes is refused, and no trainer registered.
  proto::RegisterTrainerResponse long_name;
  st = stub->RegisterTrainer(rpc::MakeContext(timeout, true).get(), Named(std::string(257, 'n')), &long_name);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_EQ(long_name.trainer_id(), 0);

  // An error crosses the wire with its code.
  proto::RegisterPserverRequest bad;
  bad.set_index(3);
  bad.set_address("x:1");
  proto::RegisterPserverResponse bad_resp;
  st = stub->RegisterPserver(rpc::MakeContext(timeout, /*wait_for_ready=*/true).get(), bad, &bad_resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("outside [0, 1)"));

  // A caller without the protocol metadata is refused before anything happens.
  grpc::ClientContext bare;
  bare.set_deadline(std::chrono::system_clock::now() + timeout);
  proto::RegisterTrainerResponse refused;
  st = stub->RegisterTrainer(&bare, Named("old"), &refused);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(st.error_message(), HasSubstr("pl-protocol-version"));
  EXPECT_EQ((*m)->Snapshot().membership().next_trainer_id(), 2);

  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

}  // namespace
// Issue 39's known defect: the machine stalls for 16 s in the middle of a lease check.
// Both clocks are fakes that model it: once armed, whichever clock is read first still
// reads the time before the stall, every later reading the time after it. The check
// must see the stall (it extends every lease) rather than drop a live trainer whose
// deadline passed only during the stall, as it did when it read the gap before the
// lease clock.
TEST(MasterTest, AStallInTheMiddleOfALeaseCheckExtendsTheLeasesAndDropsNoTrainer) {
  ScratchDir dir;
  auto store = LocalDirStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  struct StallingClocks {
    int64_t now = 1'700'000'000'000, mono = 5'000;
    bool armed = false, stalled = false;
    int64_t Read(int64_t before_ms) {
      if (armed && !stalled) {  // the first reading of the check: before the stall
        stalled = true;
        return before_ms;
      }
      return stalled ? before_ms + 16'000 : before_ms;
    }
  } clocks;
  std::vector<std::string> log;
  MasterOptions o;
  o.queue.num_passes = 1;
  o.num_pservers = 1;
  o.lease_ms = 3000;
  o.pserver_lease_ms = 800;
  o.expire_interval_ms = 100;  // the guard is on (the thread is not started by Open)
  o.now_ms = [&clocks] { return clocks.Read(clocks.now); };
  o.monotonic_ms = [&clocks] { return clocks.Read(clocks.mono); };
  o.log = [&log](const std::string& line) { log.push_back(line); };
  auto master = Master::Open(o, store->get(), Chunks(4));
  ASSERT_TRUE(master.ok()) << master.status();
  const int64_t id = (*master)->RegisterTrainer(Named("t"))->trainer_id();
  ASSERT_TRUE((*master)->ExpireNow().ok());
  // 2.9 s later (heartbeats every second were due, the lease is 3 s): the check stalls.
  clocks.now += 2'900;
  clocks.mono += 2'900;
  ASSERT_TRUE((*master)->ExpireNow().ok());
  clocks.now += 50;
  clocks.mono += 50;
  clocks.armed = true;
  ASSERT_TRUE((*master)->ExpireNow().ok());
  ASSERT_TRUE(clocks.stalled);
  clocks.now += 16'000;
  clocks.mono += 16'000;
  clocks.armed = clocks.stalled = false;
  const std::string all = absl::StrJoin(log, "\n");
  EXPECT_THAT(all, HasSubstr("the master did not run for")) << all;
  EXPECT_THAT(all, Not(HasSubstr("dropped: its lease expired"))) << all;
  proto::HeartbeatRequest beat;
  beat.set_trainer_id(id);
  EXPECT_TRUE((*master)->Heartbeat(beat).ok()) << "the trainer keeps its id";
}

}  // namespace pl
