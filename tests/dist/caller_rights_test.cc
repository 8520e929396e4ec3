// Per-caller rights (rpc/caller.h) on a real pl-master and pl-pserver running mutual
// TLS with certificates of one job CA: each process may make only its own calls. Every
// refused call is PERMISSION_DENIED (or UNAUTHENTICATED) and changes nothing — the
// master's membership and task counts, the pserver's counters and every value pulled
// are compared before and after — while the rightful callers' calls go through.
#include <chrono>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/data/record_file.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/nn/init.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"
#include "proto/master.grpc.pb.h"
#include "proto/pserver.grpc.pb.h"
#include "paddle_like/testing/process.h"

namespace pl {
namespace {

using ::testing::HasSubstr;
using std::chrono::seconds;

constexpr auto kTimeout = seconds(10);

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "") {
  std::unique_ptr<grpc::ClientContext> ctx = rpc::MakeContext(kTimeout, /*wait_for_ready=*/true);
  if (!token.empty()) ctx->AddMetadata(rpc::kTrainerTokenKey, token);
  return ctx;
}

proto::InitRequest MakeInit() {
  proto::InitRequest r;
  proto::ParamSpec* w = r.add_params();
  w->set_name("w");
  w->set_kind(proto::ParamSpec::DENSE);
  w->add_shape(4);
  w->set_block_size(4);
  w->set_init_kind(static_cast<int>(InitSpec::Kind::kUniform));
  w->set_init_scale(0.5f);
  OptimizerSpec sgd;
  sgd.kind = OptimizerKind::kSGD;
  sgd.learning_rate = 0.1f;
  *r.mutable_optimizer() = OptimizerToProto(sgd);
  r.set_seed(5);
  return r;
}

proto::PushRequest MakePush(int64_t trainer_id) {
  proto::PushRequest r;
  r.set_trainer_id(trainer_id);
  r.set_num_samples(1);
  proto::DenseBlock* b = r.add_dense();
  b->set_param("w");
  b->set_block(0);
  const float g[4] = {1, 2, 3, 4};
  SetFloats(b->mutable_values(), g, 4);
  return r;
}

// The trainer's push as the first entry of a primary's replication stream.
proto::ReplicateRequest MakeStreamCall(int64_t trainer_id) {
  proto::ReplicateRequest r;
  r.set_epoch(1);
  proto::ReplicaEntry* e = r.add_entries();
  e->set_position(1);
  *e->mutable_push() = MakePush(trainer_id);
  return r;
}

class CallerRightsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    tls_ = dir_.path() + "/tls";
    ASSERT_TRUE(rpc::EnsureJobCa(tls_, "rights test job").ok());
    for (const char* name : {"master", "pserver-0", "pserver-1", "trainer", "launch", "visitor"}) {
      ASSERT_TRUE(rpc::IssueCertificate(tls_, name).ok()) << name;
    }
    const std::string data = dir_.path() + "/data.plrec";
    RecordWriter w;
    ASSERT_TRUE(w.Open(data, /*records_per_chunk=*/5).ok());
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(w.Write("record " + std::to_string(i)).ok());
    ASSERT_TRUE(w.Close().ok());

    auto master_bin = testing::BinaryPath("pl-master");
    auto pserver_bin = testing::BinaryPath("pl-pserver");
    ASSERT_TRUE(master_bin.ok() && pserver_bin.ok());
    auto master = testing::Spawn({*master_bin, "--port", "0", "--port_file", dir_.path() + "/master.port",
                                  "--state_dir", dir_.path() + "/state", "--data", data, "--num_pservers", "1",
                                  "--lease_ms", "60000", "--tls_dir", tls_ + "/master"},
                                 dir_.path() + "/master.log");
    ASSERT_TRUE(master.ok()) << master.status();
    master_ = std::move(*master);
    auto master_port = testing::WaitForPortFile(dir_.path() + "/master.port", seconds(20), master_.get());
    ASSERT_TRUE(master_port.ok()) << testing::ReadFileOrEmpty(dir_.path() + "/master.log");
    master_address_ = absl::StrCat("127.0.0.1:", *master_port);
    auto pserver = testing::Spawn({*pserver_bin, "--index", "0", "--num_pservers", "1", "--port", "0", "--port_file",
                                   dir_.path() + "/pserver.port", "--master", master_address_, "--tls_dir",
                                   tls_ + "/pserver-0"},
                                  dir_.path() + "/pserver.log");
    ASSERT_TRUE(pserver.ok()) << pserver.status();
    pserver_ = std::move(*pserver);
    auto pserver_port = testing::WaitForPortFile(dir_.path() + "/pserver.port", seconds(20), pserver_.get());
    ASSERT_TRUE(pserver_port.ok()) << testing::ReadFileOrEmpty(dir_.path() + "/pserver.log");
    pserver_address_ = absl::StrCat("127.0.0.1:", *pserver_port);
  }

  void TearDown() override { rpc::UseInsecureTransport(); }

  // Stubs whose channels present `identity`'s certificate (files are read per channel).
  struct As {
    std::unique_ptr<proto::Master::Stub> master;
    std::unique_ptr<proto::ParameterServer::Stub> pserver;
  };
  As Caller(const std::string& identity) {
    EXPECT_TRUE(rpc::ConfigureTransportSecurity(tls_ + "/" + identity).ok());
    return As{proto::Master::NewStub(rpc::MakeChannel(master_address_)),
              proto::ParameterServer::NewStub(rpc::MakeChannel(pserver_address_))};
  }

  // What the refused calls must leave unchanged, as bytes.
  std::string Observed() {
    As launch = Caller("launch");
    proto::MembershipResponse members;
    EXPECT_TRUE(launch.master->Membership(Ctx().get(), {}, &members).ok());
    for (proto::TrainerInfo& t : *members.mutable_trainers()) t.clear_lease_deadline_ms();  // renewed by calls
    proto::JobStatusResponse status;
    EXPECT_TRUE(launch.master->JobStatus(Ctx().get(), {}, &status).ok());
    proto::StatsResponse stats;
    EXPECT_TRUE(launch.pserver->Stats(Ctx().get(), {}, &stats).ok());
    stats.clear_rss_bytes();
    stats.set_pulls(stats.pulls() - observations_++);  // less the pulls of earlier observations
    As trainer = Caller("trainer");
    proto::PullRequest pull;
    pull.add_dense()->set_param("w");
    proto::PullResponse values;
    EXPECT_TRUE(trainer.pserver->Pull(Ctx().get(), pull, &values).ok());
    return absl::StrCat(members.SerializeAsString(), "|", status.SerializeAsString(), "|", stats.SerializeAsString(),
                        "|", values.SerializeAsString());
  }

  int64_t observations_ = 0;
  testing::TempDir dir_{"pl-dist-rights"};
  std::string tls_, master_address_, pserver_address_;
  std::unique_ptr<ChildProcess> master_, pserver_;
};

#define EXPECT_DENIED(call)                                                                        \
  do {                                                                                             \
    const grpc::Status s_ = (call);                                                                \
    EXPECT_EQ(s_.error_code(), grpc::StatusCode::PERMISSION_DENIED) << #call << ": " << s_.error_message(); \
  } while (0)

TEST_F(CallerRightsTest, EachProcessMakesOnlyItsOwnCallsAndARefusedCallChangesNothing) {
  // The rightful calls: two trainers register (each gets its own token), the first
  // initialises the shard, pushes once and leases a task.
  As trainer = Caller("trainer");
  proto::RegisterTrainerRequest named;
  named.set_name("t");
  proto::RegisterTrainerResponse t1, t2;
  ASSERT_TRUE(trainer.master->RegisterTrainer(Ctx().get(), named, &t1).ok());
  ASSERT_TRUE(trainer.master->RegisterTrainer(Ctx().get(), named, &t2).ok());
  ASSERT_NE(t1.token(), t2.token());
  proto::InitResponse init;
  grpc::Status s = trainer.pserver->Init(Ctx().get(), MakeInit(), &init);
  ASSERT_TRUE(s.ok()) << s.error_message();
  proto::PushResponse pushed;
  ASSERT_TRUE(trainer.pserver->Push(Ctx().get(), MakePush(t1.trainer_id()), &pushed).ok());
  proto::GetTaskRequest get;
  get.set_trainer_id(t1.trainer_id());
  proto::GetTaskResponse task;
  ASSERT_TRUE(trainer.master->GetTask(Ctx(t1.token()).get(), get, &task).ok());
  ASSERT_EQ(task.result(), proto::GetTaskResponse::TASK);
  const std::string before = Observed();

  // A trainer re-registering pserver 0 at its own address; pserver 1 doing the same.
  proto::RegisterPserverRequest hijack;
  hijack.set_index(0);
  hijack.set_address("10.9.9.9:7777");
  proto::RegisterPserverResponse registered;
  trainer = Caller("trainer");
  EXPECT_DENIED(trainer.master->RegisterPserver(Ctx().get(), hijack, &registered));
  As other_shard = Caller("pserver-1");
  EXPECT_DENIED(other_shard.master->RegisterPserver(Ctx().get(), hijack, &registered));
  // Only a launcher, which reaped the process, may say a replica is gone.
  proto::ReplicaExitedRequest gone;
  gone.set_index(0);
  gone.set_replica_id(1);
  proto::ReplicaExitedResponse noted;
  EXPECT_DENIED(other_shard.master->ReplicaExited(Ctx().get(), gone, &noted));
  trainer = Caller("trainer");
  EXPECT_DENIED(trainer.master->ReplicaExited(Ctx().get(), gone, &noted));
  // Nor may a trainer say another trainer's process is gone (its token or none).
  proto::TrainerExitedRequest exited;
  exited.set_trainer_id(t1.trainer_id());
  proto::TrainerExitedResponse dropped;
  trainer = Caller("trainer");
  EXPECT_DENIED(trainer.master->TrainerExited(Ctx(t2.token()).get(), exited, &dropped));
  EXPECT_DENIED(trainer.master->TrainerExited(Ctx(t1.token()).get(), exited, &dropped));
  EXPECT_DENIED(other_shard.master->TrainerExited(Ctx().get(), exited, &dropped));

  // Trainer 2 finishing, failing or leaving trainer 1's task; a call carrying no token.
  trainer = Caller("trainer");
  proto::TaskFinishedRequest finish;
  finish.set_trainer_id(t1.trainer_id());
  finish.set_task_id(task.task().id());
  finish.set_pass(task.task().pass());
  finish.set_num_samples(10);
  proto::TaskFinishedResponse finished;
  EXPECT_DENIED(trainer.master->TaskFinished(Ctx(t2.token()).get(), finish, &finished));
  EXPECT_DENIED(trainer.master->TaskFinished(Ctx().get(), finish, &finished));
  proto::TaskFailedRequest fail;
  fail.set_trainer_id(t1.trainer_id());
  fail.set_task_id(task.task().id());
  fail.set_pass(task.task().pass());
  proto::TaskFailedResponse failed;
  EXPECT_DENIED(trainer.master->TaskFailed(Ctx(t2.token()).get(), fail, &failed));
  proto::LeaveRequest leave;
  leave.set_trainer_id(t1.trainer_id());
  proto::LeaveResponse left;
  EXPECT_DENIED(trainer.master->Leave(Ctx(t2.token()).get(), leave, &left));
  proto::HeartbeatRequest beat;
  beat.set_trainer_id(t1.trainer_id());
  proto::HeartbeatResponse beaten;
  EXPECT_DENIED(trainer.master->Heartbeat(Ctx(t2.token()).get(), beat, &beaten));

  // A pserver's or pl-launch's certificate training: Init, Push, Pull, Attach.
  for (const char* who : {"pserver-0", "launch", "master"}) {
    As intruder = Caller(who);
    EXPECT_DENIED(intruder.pserver->Push(Ctx().get(), MakePush(t1.trainer_id()), &pushed));
    EXPECT_DENIED(intruder.pserver->Init(Ctx().get(), MakeInit(), &init));
    proto::PullRequest pull;
    pull.add_dense()->set_param("w");
    proto::PullResponse pulled;
    EXPECT_DENIED(intruder.pserver->Pull(Ctx().get(), pull, &pulled));
    proto::AttachResponse attached;
    EXPECT_DENIED(intruder.pserver->Attach(Ctx().get(), proto::AttachRequest(), &attached));
    // Nor may a pserver or pl-launch act as a trainer at the master.
    proto::RegisterTrainerResponse reg;
    EXPECT_DENIED(intruder.master->RegisterTrainer(Ctx().get(), named, &reg));
  }
  // Another shard's process streaming updates into this one; a trainer sending a
  // snapshot of the shard.
  other_shard = Caller("pserver-1");
  proto::ReplicateResponse replicated;
  EXPECT_DENIED(other_shard.pserver->Replicate(Ctx().get(), MakeStreamCall(t1.trainer_id()), &replicated));
  trainer = Caller("trainer");
  EXPECT_DENIED(trainer.pserver->Replicate(Ctx().get(), MakeStreamCall(t1.trainer_id()), &replicated));
  proto::SnapshotAck ack;
  EXPECT_DENIED(trainer.pserver->InstallSnapshot(Ctx().get(), proto::SnapshotChunk(), &ack));
  // A certificate of this job's CA that names no role has no rights at all.
  As visitor = Caller("visitor");
  proto::JobStatusResponse status;
  EXPECT_DENIED(visitor.master->JobStatus(Ctx().get(), {}, &status));
  proto::StatsResponse stats;
  EXPECT_DENIED(visitor.pserver->Stats(Ctx().get(), {}, &stats));
  proto::CheckpointResponse checkpoint;
  EXPECT_DENIED(visitor.pserver->Checkpoint(Ctx().get(), {}, &checkpoint));

  EXPECT_EQ(Observed(), before) << "a refused call changed the job's state";

  // The rightful holder of the lease finishes it; the shard's own process may send the
  // stream (refused further in: this pserver is not replicated, not for its rights).
  trainer = Caller("trainer");
  s = trainer.master->TaskFinished(Ctx(t1.token()).get(), finish, &finished);
  EXPECT_TRUE(s.ok()) << s.error_message();
  As own_shard = Caller("pserver-0");
  s = own_shard.pserver->Replicate(Ctx().get(), MakeStreamCall(t1.trainer_id()), &replicated);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("not replicated"));
  // Refusals are in the servers' logs, naming the call and the caller's identity.
  EXPECT_THAT(testing::ReadFileOrEmpty(dir_.path() + "/master.log"),
              HasSubstr("RegisterPserver 0 may be called only by pserver-0; the caller's certificate names \"trainer\""));
  EXPECT_THAT(testing::ReadFileOrEmpty(dir_.path() + "/pserver.log"),
              HasSubstr("Push may be called only by the job's trainers; the caller's certificate names \"pserver-0\""));
}

TEST_F(CallerRightsTest, AProcessWhoseCertificateNamesAnotherIdentityExitsAtStart) {
  auto bin = testing::BinaryPath("pl-pserver");
  ASSERT_TRUE(bin.ok());
  const std::string log = dir_.path() + "/wrong.log";
  auto child = testing::Spawn({*bin, "--index", "1", "--num_pservers", "2", "--port", "0", "--tls_dir",
                               tls_ + "/pserver-0"},
                              log);
  ASSERT_TRUE(child.ok());
  ASSERT_TRUE((*child)->WaitFor(seconds(20)));
  EXPECT_EQ((*child)->exit_info().code, 2);
  EXPECT_THAT(testing::ReadFileOrEmpty(log), HasSubstr("this process is pserver-1 but its certificate"));
}

}  // namespace
}  // namespace pl
