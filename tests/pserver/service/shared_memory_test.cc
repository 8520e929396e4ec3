// Shared-memory regions between a trainer and a pserver on one host: the segment
// itself, the pserver's table of them, and the service refusing malformed uses while
// leaving the shard unchanged.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "paddle_like/dist/shared_region.h"
#include "paddle_like/rpc/rpc.h"
#include "pserver/service/pserver_service.h"
#include "pserver/service/shared_regions.h"
#include "tests/pserver/pserver_test_util.h"

namespace pl::pserver {
namespace {

using testing::DenseSpec;
using testing::MakeInit;
using testing::Sgd;

proto::AttachRequest AttachFor(const SharedRegion& region, uint64_t client_id = 1) {
  proto::AttachRequest r;
  r.set_trainer_id(1);
  r.set_client_id(client_id);
  r.set_shm_name(region.name());
  r.set_shm_bytes(static_cast<int64_t>(region.total_bytes()));
  r.set_nonce(region.nonce());
  return r;
}

TEST(SharedRegionTest, BothMappingsSeeTheSameBytesAndTheNameGoesAway) {
  auto created = SharedRegion::Create(1024);
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<SharedRegion> a = *created;
  auto opened = SharedRegion::Open(a->name(), a->total_bytes());
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<SharedRegion> b = *opened;
  EXPECT_NE(a->nonce(), 0u);
  EXPECT_EQ(b->nonce(), a->nonce());
  b->set_answer(77);
  EXPECT_EQ(a->answer(), 77u);
  auto fa = a->Floats(64, 4);
  ASSERT_TRUE(fa.ok());
  (*fa)[3] = 2.5f;
  EXPECT_FLOAT_EQ((*b->Floats(64, 4))[3], 2.5f);

  a->Unlink();  // the memory stays while mapped; the name is gone
  EXPECT_TRUE(absl::IsNotFound(SharedRegion::Open(a->name(), a->total_bytes()).status()));
  (*fa)[0] = 1.0f;
  EXPECT_FLOAT_EQ((*b->Floats(64, 1))[0], 1.0f);
}

TEST(SharedRegionTest, OpenAndSpansRefuseWhatIsNotTheirs) {
  auto a = SharedRegion::Create(256);
  ASSERT_TRUE(a.ok());
  // Only names Create makes: no path elsewhere in /proc, /dev/shm or the file system.
  const std::string key = (*a)->name().substr((*a)->name().find('@'));
  for (const std::string& bad : {std::string("/etc/passwd"), std::string("/pl-shm-../x"), std::string("x"),
                                 "/proc/1/fd/../../etc/passwd" + key, "/proc/self/fd/0" + key,
                                 std::string("/proc/1/fd/3")}) {
    Status s = SharedRegion::Open(bad, (*a)->total_bytes()).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << ": " << s;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(SharedRegion::Open((*a)->name(), (*a)->total_bytes() + 4096).status()));
  EXPECT_TRUE(absl::IsNotFound(SharedRegion::Open("/proc/999999999/fd/3" + key, 8192).status()));
  // The same path from another host (another boot id or mount namespace) is refused
  // before anything is opened.
  const std::string elsewhere = (*a)->name().substr(0, (*a)->name().find('@')) + "@00ff-1";
  EXPECT_TRUE(absl::IsNotFound(SharedRegion::Open(elsewhere, (*a)->total_bytes()).status()));
  EXPECT_TRUE((*a)->Floats(0, 64).ok());                       // exactly the payload
  EXPECT_TRUE(absl::IsInvalidArgument((*a)->Floats(4, 64).status()));  // one float past it
  EXPECT_TRUE(absl::IsInvalidArgument((*a)->Floats(2, 1).status()));   // misaligned
  EXPECT_TRUE(absl::IsInvalidArgument((*a)->Floats(-4, 1).status()));
  EXPECT_TRUE(absl::IsInvalidArgument((*a)->Floats(0, int64_t{1} << 62).status()));  // no overflow
}

// Issue 40: a region is a memfd sealed against shrinking and growing, so neither side
// can truncate the memory the other maps (a pserver touching a truncated mapping dies of
// SIGBUS); Open refuses memory without those seals.
TEST(SharedRegionTest, ARegionsSizeCannotChangeAndUnsealedMemoryIsRefused) {
  auto a = SharedRegion::Create(1 << 20);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = SharedRegion::Open((*a)->name(), (*a)->total_bytes());
  ASSERT_TRUE(b.ok()) << b.status();
  const std::string path = (*a)->name().substr(0, (*a)->name().find('@'));
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  EXPECT_NE(::ftruncate(fd, 4096), 0) << "a region's size cannot shrink";
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(fd, 8 << 20), 0) << "nor grow";
  ::close(fd);
  (*b)->payload()[(1 << 20) - 1] = 7;  // the last byte is still there
  EXPECT_EQ((*a)->payload()[(1 << 20) - 1], 7);

  // An unsealed memfd with the right size and magic, named as Create names: refused.
  const int loose = ::memfd_create("loose", MFD_CLOEXEC);
  ASSERT_GE(loose, 0);
  ASSERT_EQ(::ftruncate(loose, static_cast<off_t>((*a)->total_bytes())), 0);
  ASSERT_EQ(::pwrite(loose, "PLSHM001", 8, 0), 8);
  const std::string named = absl::StrCat("/proc/", ::getpid(), "/fd/", loose, (*a)->name().substr((*a)->name().find('@')));
  const Status refused = SharedRegion::Open(named, (*a)->total_bytes()).status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_NE(std::string(refused.message()).find("not sealed"), std::string::npos) << refused;
  ::close(loose);
}

TEST(SharedRegionTableTest, AttachChecksTheNonceAndDropsReplacedIdleAndExcessRegions) {
  SharedRegionOptions o;
  o.max_regions = 2;
  o.idle_timeout = absl::Hours(1);
  SharedRegionTable table(o);
  auto r1 = SharedRegion::Create(64), r2 = SharedRegion::Create(64), r3 = SharedRegion::Create(64);
  ASSERT_TRUE(r1.ok() && r2.ok() && r3.ok());

  proto::AttachRequest wrong = AttachFor(**r1);
  wrong.set_nonce(wrong.nonce() + 2);
  EXPECT_TRUE(absl::IsFailedPrecondition(table.Attach(wrong).status()));

  auto id1 = table.Attach(AttachFor(**r1, /*client_id=*/1));
  ASSERT_TRUE(id1.ok()) << id1.status();
  EXPECT_EQ((*r1)->answer(), *id1);  // the answer shows in the trainer's mapping
  auto id1b = table.Attach(AttachFor(**r2, /*client_id=*/1));  // the same client again
  ASSERT_TRUE(id1b.ok());
  EXPECT_TRUE(absl::IsAborted(table.Find(*id1).status()));  // replaced
  EXPECT_EQ(table.Count(false).regions, 1);

  auto id2 = table.Attach(AttachFor(**r1, /*client_id=*/2));
  ASSERT_TRUE(id2.ok());
  ASSERT_TRUE(table.Find(*id1b).ok());  // now the more recently used of the two
  auto id3 = table.Attach(AttachFor(**r3, /*client_id=*/3));
  ASSERT_TRUE(id3.ok());
  EXPECT_EQ(table.Count(false).regions, 2);
  EXPECT_TRUE(absl::IsAborted(table.Find(*id2).status()));  // the least recently used went
  EXPECT_TRUE(table.Find(*id1b).ok());

  SharedRegionOptions off;
  off.enabled = false;
  EXPECT_TRUE(absl::IsFailedPrecondition(SharedRegionTable(off).Attach(AttachFor(**r1)).status()));

  SharedRegionOptions quick;
  quick.idle_timeout = absl::ZeroDuration();
  SharedRegionTable idle(quick);
  auto id = idle.Attach(AttachFor(**r1));
  ASSERT_TRUE(id.ok());
  absl::SleepFor(absl::Milliseconds(2));
  idle.DropIdle();
  EXPECT_EQ(idle.Count(false).regions, 0);
  EXPECT_TRUE(absl::IsAborted(idle.Find(*id).status()));
}

TEST(SharedRegionTableTest, LinkedRegionsStopAtTheirCapAndAClientsNewOneReplacesItsOld) {
  SharedRegionOptions o;
  o.max_link_bytes = 30000;
  SharedRegionTable table(o);
  auto linked = [&](uint64_t client) {
    proto::AttachRequest r;
    r.set_client_id(client);
    r.set_shm_bytes(SharedRegion::kHeaderBytes + 8192);  // 12288 bytes
    r.set_link_lanes(2);
    return table.AttachLinked(r);
  };
  ASSERT_TRUE(linked(1).ok());
  ASSERT_TRUE(linked(2).ok());
  const auto third = linked(3);
  EXPECT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_NE(third.status().message().find("past their cap of"), std::string::npos) << third.status();
  // Client 2 again: its new region replaces its old one, so the total stays under the cap.
  ASSERT_TRUE(linked(2).ok());
  EXPECT_EQ(table.Count(/*linked=*/true).regions, 2);
  EXPECT_EQ(table.Count(/*linked=*/true).bytes, 2 * 12288);
  EXPECT_EQ(table.Count(/*linked=*/false).regions, 0);
}

// One pserver (async SGD, lr 0.5, w: 2 blocks of 4) behind a real gRPC server; the
// test talks to it with the generated stub, as a trainer would.
class SharedMemoryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(shard_.Init(MakeInit({DenseSpec("w", {8}, 4)}, Sgd(0.5f))).ok());
    int port = 0;
    auto server = rpc::StartServer(rpc::ServerOptions(), {&service_}, &port);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = proto::ParameterServer::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port)));
    auto region = SharedRegion::Create(1024);
    ASSERT_TRUE(region.ok());
    region_ = *region;
    proto::AttachResponse r;
    auto ctx = rpc::MakeContext(std::chrono::seconds(10), /*wait_for_ready=*/true);
    ASSERT_TRUE(stub_->Attach(ctx.get(), AttachFor(*region_), &r).ok());
    region_id_ = r.region();
  }
  void TearDown() override {
    shard_.Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  std::vector<float> Values() {
    proto::PullRequest req;
    for (int b = 0; b < 2; ++b) {
      proto::DenseBlock* blk = req.add_dense();
      blk->set_param("w");
      blk->set_block(b);
    }
    proto::PullResponse resp;
    EXPECT_TRUE(shard_.Pull(req, absl::InfiniteFuture(), &resp).ok());
    std::vector<float> out;
    for (const proto::DenseBlock& blk : resp.dense()) {
      const float* f = reinterpret_cast<const float*>(blk.values().data());
      out.insert(out.end(), f, f + blk.values().size() / 4);
    }
    return out;
  }
  // A push of both blocks from the region: block b's 4 gradients at byte offset 16*b,
  // its new values (write-back) at 32 + 16*b.
  proto::PushRequest ShmPush(bool write_back) {
    proto::PushRequest req;
    req.set_shm_region(region_id_);
    req.set_shm_write_back(write_back);
    for (int b = 0; b < 2; ++b) {
      proto::ShmBlock* blk = req.add_shm_dense();
      blk->set_param("w");
      blk->set_block(b);
      blk->set_offset(16 * b);
      blk->set_count(4);
      blk->set_write_offset(32 + 16 * b);
    }
    return req;
  }
  Status Push(const proto::PushRequest& req) {
    proto::PushResponse resp;
    auto ctx = rpc::MakeContext(std::chrono::seconds(10), /*wait_for_ready=*/true);
    return rpc::FromGrpc(stub_->Push(ctx.get(), req, &resp));
  }
  float* Payload() { return reinterpret_cast<float*>(region_->payload()); }

  ParameterShard shard_{0, 1};
  PserverService service_{&shard_, nullptr};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
  std::shared_ptr<SharedRegion> region_;
  uint64_t region_id_ = 0;
};

TEST_F(SharedMemoryServiceTest, APushWithWriteBackAppliesOnceAndPutsTheNewValuesInTheRegion) {
  const std::vector<float> before = Values();
  for (int i = 0; i < 8; ++i) Payload()[i] = static_cast<float>(i);
  ASSERT_TRUE(Push(ShmPush(/*write_back=*/true)).ok());
  const std::vector<float> after = Values();
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(after[i], before[i] - 0.5f * i) << i;  // SGD, lr 0.5
    EXPECT_FLOAT_EQ(Payload()[8 + i], after[i]) << i;      // written where it was told
    EXPECT_FLOAT_EQ(Payload()[i], static_cast<float>(i));  // the gradients stay (for a retry)
  }
  EXPECT_EQ(shard_.Counters().pushes_applied, 1);
  EXPECT_EQ(service_.StatsNow().shm_regions(), 1);
}

TEST_F(SharedMemoryServiceTest, APullWritesTheBlocksWhereItIsToldTo) {
  proto::PullRequest req;
  req.set_shm_region(region_id_);
  for (int b = 0; b < 2; ++b) {
    proto::DenseBlock* blk = req.add_dense();
    blk->set_param("w");
    blk->set_block(b);
    req.add_shm_offsets(64 + 32 * b);  // not adjacent: the offsets are the pserver's guide
  }
  proto::PullResponse resp;
  auto ctx = rpc::MakeContext(std::chrono::seconds(10), /*wait_for_ready=*/true);
  ASSERT_TRUE(stub_->Pull(ctx.get(), req, &resp).ok());
  EXPECT_EQ(resp.dense_size(), 0);
  const std::vector<float> values = Values();
  for (int i = 0; i < 4; ++i) {
    EXPECT_FLOAT_EQ(Payload()[16 + i], values[i]);
    EXPECT_FLOAT_EQ(Payload()[24 + i], values[4 + i]);
  }
}

TEST_F(SharedMemoryServiceTest, MalformedSharedMemoryRequestsAreRefusedAndChangeNothing) {
  const std::vector<float> before = Values();
  for (int i = 0; i < 8; ++i) Payload()[i] = 1.0f;

  proto::PushRequest unknown = ShmPush(false);
  unknown.set_shm_region(region_id_ + 1);
  EXPECT_TRUE(absl::IsAborted(Push(unknown))) << "an unknown region tells the trainer to attach again";

  proto::PushRequest outside = ShmPush(false);
  outside.mutable_shm_dense(1)->set_offset(1024 - 8);  // 4 floats from 8 bytes before the end
  Status s = Push(outside);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("outside the region"), std::string::npos) << s;

  proto::PushRequest write_outside = ShmPush(true);
  write_outside.mutable_shm_dense(0)->set_write_offset(1024);
  EXPECT_TRUE(absl::IsInvalidArgument(Push(write_outside)));

  proto::PushRequest short_block = ShmPush(false);
  short_block.mutable_shm_dense(0)->set_count(3);
  EXPECT_TRUE(absl::IsInvalidArgument(Push(short_block)));

  proto::PushRequest deferred = ShmPush(true);
  deferred.set_defer_apply(true);
  EXPECT_TRUE(absl::IsInvalidArgument(Push(deferred)));

  Payload()[5] = std::numeric_limits<float>::quiet_NaN();
  s = Push(ShmPush(true));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_FLOAT_EQ(Payload()[8], 0.0f);  // nothing written back either

  proto::PushRequest both = ShmPush(false);
  testing::AddDense(&both, "w", 0, {1, 1, 1, 1});
  EXPECT_TRUE(absl::IsInvalidArgument(Push(both)));

  proto::PullRequest pull;
  pull.set_shm_region(region_id_);
  pull.add_dense()->set_param("w");
  EXPECT_TRUE(absl::IsInvalidArgument(rpc::FromGrpc([&] {
    proto::PullResponse resp;
    auto ctx = rpc::MakeContext(std::chrono::seconds(10), /*wait_for_ready=*/true);
    return stub_->Pull(ctx.get(), pull, &resp);  // no offset for its block
  }())));

  EXPECT_EQ(Values(), before);
  EXPECT_EQ(shard_.Counters().pushes_applied, 0);
}

}  // namespace
}  // namespace pl::pserver
