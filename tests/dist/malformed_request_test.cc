// Malformed requests over gRPC to a real pl-pserver process: each gets a clear error
// (canonical code + a message naming what was wrong) and leaves the shard exactly as it
// was (every value pulled before and after is bit-identical, the version unchanged);
// a well-formed push afterwards still applies.
#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/nn/init.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/pserver.grpc.pb.h"
#include "paddle_like/testing/process.h"

namespace pl {
namespace {

using ::testing::HasSubstr;
using std::chrono::seconds;

constexpr int64_t kDenseNumel = 6;   // "w": shape [2, 3], one block
constexpr int64_t kDim = 2;          // "emb": rows of dim 2, ids < 100

proto::InitRequest MakeInit() {
  proto::InitRequest r;
  proto::ParamSpec* w = r.add_params();
  w->set_name("w");
  w->set_kind(proto::ParamSpec::DENSE);
  w->add_shape(2);
  w->add_shape(3);
  w->set_block_size(kDenseNumel);
  w->set_init_kind(static_cast<int>(InitSpec::Kind::kUniform));
  w->set_init_scale(0.5f);
  proto::ParamSpec* e = r.add_params();
  e->set_name("emb");
  e->set_kind(proto::ParamSpec::SPARSE);
  e->set_dim(kDim);
  e->set_num_rows(100);
  e->set_init_kind(static_cast<int>(InitSpec::Kind::kUniform));
  e->set_init_scale(0.5f);
  OptimizerSpec sgd;
  sgd.kind = OptimizerKind::kSGD;
  sgd.learning_rate = 0.1f;
  *r.mutable_optimizer() = OptimizerToProto(sgd);
  r.set_seed(11);
  return r;
}

void AddDense(proto::PushRequest* r, const std::string& param, int block, const std::vector<float>& g) {
  proto::DenseBlock* b = r->add_dense();
  b->set_param(param);
  b->set_block(block);
  SetFloats(b->mutable_values(), g.data(), static_cast<int64_t>(g.size()));
}

void AddRows(proto::PushRequest* r, const std::string& table, const std::vector<int64_t>& ids,
             const std::vector<float>& g) {
  proto::SparseRowsMsg* m = r->add_sparse();
  m->set_table(table);
  m->set_dim(kDim);
  for (int64_t id : ids) m->add_ids(id);
  SetFloats(m->mutable_values(), g.data(), static_cast<int64_t>(g.size()));
}

class MalformedRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto bin = testing::BinaryPath("pl-pserver");
    ASSERT_TRUE(bin.ok()) << bin.status();
    ASSERT_FALSE(dir_.path().empty());
    // A 1 MiB message limit so "oversized" is cheap to build.
    auto child = testing::Spawn({*bin, "--index", "0", "--num_pservers", "1", "--host", "127.0.0.1", "--port", "0",
                                 "--port_file", dir_.path() + "/port", "--max_message_mb", "1"},
                                log());
    ASSERT_TRUE(child.ok()) << child.status();
    pserver_ = std::move(*child);
    auto port = testing::WaitForPortFile(dir_.path() + "/port", seconds(20), pserver_.get());
    ASSERT_TRUE(port.ok()) << port.status() << "\n" << testing::ReadFileOrEmpty(log());
    stub_ = proto::ParameterServer::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", *port)));
    proto::InitResponse init;
    grpc::Status s = stub_->Init(rpc::MakeContext(seconds(5), /*wait_for_ready=*/true).get(), MakeInit(), &init);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_TRUE(init.created());
  }

  std::string log() const { return dir_.path() + "/pserver.log"; }

  // Every dense value and rows 1, 2, 3 (created by the first pull), as raw bytes.
  std::string PullAll() {
    proto::PullRequest req;
    req.add_dense()->set_param("w");
    proto::SparseRowsMsg* rows = req.add_sparse();
    rows->set_table("emb");
    for (int64_t id : {1, 2, 3}) rows->add_ids(id);
    proto::PullResponse resp;
    grpc::Status s = stub_->Pull(rpc::MakeContext(seconds(5), /*wait_for_ready=*/true).get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    resp.clear_version();
    return resp.SerializeAsString();
  }

  proto::StatsResponse Stats() {
    proto::StatsResponse stats;
    grpc::Status s = stub_->Stats(rpc::MakeContext(seconds(5), /*wait_for_ready=*/true).get(), proto::StatsRequest(), &stats);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return stats;
  }

  grpc::Status Push(const proto::PushRequest& req) {
    proto::PushResponse resp;
    return stub_->Push(rpc::MakeContext(seconds(10), /*wait_for_ready=*/true).get(), req, &resp);
  }

  testing::TempDir dir_{"pl-dist-malformed"};
  std::unique_ptr<ChildProcess> pserver_;
  std::unique_ptr<proto::ParameterServer::Stub> stub_;
};

TEST_F(MalformedRequestTest, EachBadPushIsRefusedClearlyAndChangesNothing) {
  const std::string before = PullAll();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> good_dense(kDenseNumel, 1.0f);

  struct Case {
    const char* what;
    proto::PushRequest req;
    grpc::StatusCode code;
    std::string fragment;
  };
  std::vector<Case> cases;
  {
    Case c{"wrong shape", {}, grpc::StatusCode::INVALID_ARGUMENT, "expected 6 gradient values, got 5"};
    AddDense(&c.req, "w", 0, {1, 2, 3, 4, 5});
    cases.push_back(std::move(c));
  }
  {
    // A long name is refused before it is looked up, copied or logged.
    Case c{"a name of 64 KB", {}, grpc::StatusCode::INVALID_ARGUMENT,
           "request field 'dense[0].param' is 65536 bytes, over its limit of 256"};
    AddDense(&c.req, std::string(1 << 16, 'w'), 0, good_dense);
    cases.push_back(std::move(c));
  }
  {
    Case c{"block out of range", {}, grpc::StatusCode::INVALID_ARGUMENT, "block 3 is outside [0, 1)"};
    AddDense(&c.req, "w", 3, good_dense);
    cases.push_back(std::move(c));
  }
  {
    Case c{"unknown parameter", {}, grpc::StatusCode::NOT_FOUND, "unknown dense parameter 'nope'"};
    AddDense(&c.req, "nope", 0, good_dense);
    cases.push_back(std::move(c));
  }
  {
    Case c{"unknown table", {}, grpc::StatusCode::NOT_FOUND, "unknown sparse table 'nope_table'"};
    AddRows(&c.req, "nope_table", {1}, {1, 1});
    cases.push_back(std::move(c));
  }
  {
    Case c{"dense NaN", {}, grpc::StatusCode::INVALID_ARGUMENT, "non-finite value (nan) at index 4"};
    std::vector<float> g = good_dense;
    g[4] = nan;
    AddDense(&c.req, "w", 0, g);
    cases.push_back(std::move(c));
  }
  {
    // A good dense block with a bad sparse part: the request is refused as a whole.
    Case c{"sparse Inf after a good block", {}, grpc::StatusCode::INVALID_ARGUMENT, "at row id 2"};
    AddDense(&c.req, "w", 0, good_dense);
    AddRows(&c.req, "emb", {1, 2}, {1, 1, inf, 1});
    cases.push_back(std::move(c));
  }
  {
    Case c{"row id out of range", {}, grpc::StatusCode::INVALID_ARGUMENT, "row id 100 (position 1) is outside [0, 100)"};
    AddRows(&c.req, "emb", {1, 100}, {1, 1, 1, 1});
    cases.push_back(std::move(c));
  }
  {
    Case c{"rows and values disagree", {}, grpc::StatusCode::INVALID_ARGUMENT, "2 ids of dim 2 need 4 gradient values, got 3"};
    AddRows(&c.req, "emb", {1, 2}, {1, 1, 1});
    cases.push_back(std::move(c));
  }
  {
    Case c{"payload not a multiple of 4 bytes", {}, grpc::StatusCode::INVALID_ARGUMENT, "23 bytes is not a whole number of float32 values"};
    proto::DenseBlock* b = c.req.add_dense();
    b->set_param("w");
    b->set_block(0);
    b->set_values(std::string(23, '\0'));
    cases.push_back(std::move(c));
  }
  {
    // 2 MiB against the pserver's 1 MiB limit: refused by gRPC before the handler.
    Case c{"oversized", {}, grpc::StatusCode::RESOURCE_EXHAUSTED, "larger than max"};
    AddDense(&c.req, "w", 0, std::vector<float>(512 * 1024, 0.5f));
    cases.push_back(std::move(c));
  }
  {
    // Under gRPC's limit but more than this model could ever push (6 values, 100 rows
    // of 2): refused before it is parsed.
    Case c{"larger than the model allows", {}, grpc::StatusCode::RESOURCE_EXHAUSTED,
           "bytes is larger than this shard's parameters allow"};
    AddRows(&c.req, "emb", std::vector<int64_t>(20000, 1), std::vector<float>(20000 * kDim, 0.5f));
    cases.push_back(std::move(c));
  }

  int64_t reached_handler = 0;
  for (const Case& c : cases) {
    grpc::Status s = Push(c.req);
    EXPECT_EQ(s.error_code(), c.code) << c.what << ": " << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.fragment)) << c.what;
    if (c.code != grpc::StatusCode::RESOURCE_EXHAUSTED) ++reached_handler;
    EXPECT_EQ(PullAll(), before) << c.what << " changed the shard";
  }
  proto::StatsResponse stats = Stats();
  EXPECT_EQ(stats.version(), 0);
  EXPECT_EQ(stats.pushes_applied(), 0);
  EXPECT_EQ(stats.pushes_rejected(), reached_handler);
  // The model's limit: every value and row this shard can hold, with a margin of tens of KB.
  EXPECT_GT(stats.largest_request_bytes(), 64 << 10);
  EXPECT_LT(stats.largest_request_bytes(), 80 << 10);

  // Still serving: a well-formed push applies (SGD, lr 0.1: w -= 0.1 * 1).
  proto::PushRequest ok;
  AddDense(&ok, "w", 0, good_dense);
  grpc::Status s = Push(ok);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_NE(PullAll(), before);
  EXPECT_EQ(Stats().version(), 1);
  EXPECT_TRUE(pserver_->running()) << testing::ReadFileOrEmpty(log());
}

TEST_F(MalformedRequestTest, BadPullsAndIncompatibleInitAreRefused) {
  const std::string before = PullAll();
  {
    proto::PullRequest req;
    req.add_dense()->set_param("nope");
    proto::PullResponse resp;
    grpc::Status s = stub_->Pull(rpc::MakeContext(seconds(5), /*wait_for_ready=*/true).get(), req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(s.error_message(), HasSubstr("unknown dense parameter 'nope'"));
  }
  {
    // A bad id after good ones: no row is created by the refused request.
    proto::PullRequest req;
    proto::SparseRowsMsg* rows = req.add_sparse();
    rows->set_table("emb");
    rows->add_ids(50);
    rows->add_ids(-1);
    proto::PullResponse resp;
    grpc::Status s = stub_->Pull(rpc::MakeContext(seconds(5), /*wait_for_ready=*/true).get(), req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(s.error_message(), HasSubstr("row id -1 (position 1)"));
    EXPECT_EQ(Stats().sparse_rows(), 0);  // a pull creates no rows, refused or not
  }
  {
    // The same parameter with another shape: refused, the held one is named.
    proto::InitRequest init = MakeInit();
    init.mutable_params(0)->set_shape(1, 4);
    proto::InitResponse resp;
    grpc::Status s = stub_->Init(rpc::MakeContext(seconds(5), /*wait_for_ready=*/true).get(), init, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(s.error_message(), HasSubstr("parameter 'w': this pserver holds dense shape [2, 3]"));
    EXPECT_THAT(s.error_message(), HasSubstr("the request has dense shape [2, 4]"));
  }
  {
    // No protocol version in the metadata.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
    proto::PushRequest req;
    AddDense(&req, "w", 0, std::vector<float>(kDenseNumel, 1.0f));
    proto::PushResponse resp;
    grpc::Status s = stub_->Push(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(s.error_message(), HasSubstr("protocol"));
  }
  EXPECT_EQ(PullAll(), before);
  EXPECT_EQ(Stats().version(), 0);
}

}  // namespace
}  // namespace pl
