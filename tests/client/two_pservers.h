// TwoPservers: the fixture of the pserver-client tests, two in-process parameter
// servers (ParameterShard + PserverService over gRPC on 127.0.0.1), and two small models.
#ifndef PADDLE_LIKE_TESTS_CLIENT_TWO_PSERVERS_H_
#define PADDLE_LIKE_TESTS_CLIENT_TWO_PSERVERS_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/nn/nn.h"
#include "paddle_like/rpc/rpc.h"
#include "pserver/service/pserver_service.h"
#include "pserver/store/shard.h"

namespace pl {

// Embedding(100 rows, dim 2) -> flatten -> Linear(4 -> 3): one sparse, two dense parameters.
class TinyModel : public Module {
 public:
  TinyModel() : Module("TinyModel") {
    emb = RegisterModule("emb", std::make_shared<Embedding>(100, 2));
    fc = RegisterModule("fc", std::make_shared<Linear>(4, 3));
  }
  std::shared_ptr<Embedding> emb;
  std::shared_ptr<Linear> fc;
};

class TwoPservers : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 2; ++i) {
      shards_.push_back(std::make_unique<pserver::ParameterShard>(i, 2));
      services_.push_back(std::make_unique<pserver::PserverService>(shards_[i].get(), nullptr));
      int port = 0;
      rpc::ServerOptions o;
      auto server = rpc::StartServer(o, {services_[i].get()}, &port);
      ASSERT_TRUE(server.ok()) << server.status();
      servers_.push_back(std::move(*server));
      addresses_.push_back(absl::StrCat("127.0.0.1:", port));
    }
  }
  void TearDown() override {
    for (auto& s : shards_) s->Shutdown();
    for (auto& s : servers_) s->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  std::unique_ptr<ParameterClient> Client(Module* model, int64_t trainer_id) {
    ParameterClientOptions o;
    o.num_pservers = 2;
    o.optimizer.kind = OptimizerKind::kSGD;
    o.optimizer.learning_rate = 0.5f;
    o.seed = 9;
    auto client = std::make_unique<ParameterClient>(
        model, o, [this]() -> StatusOr<std::vector<std::string>> { return addresses_; });
    client->set_trainer_id(trainer_id);
    return client;
  }

  std::vector<std::unique_ptr<pserver::ParameterShard>> shards_;
  std::vector<std::unique_ptr<pserver::PserverService>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<std::string> addresses_;
};

// Linear(4 -> 3): dense parameters only.
class DenseModel : public Module {
 public:
  DenseModel() : Module("DenseModel") { fc = RegisterModule("fc", std::make_shared<Linear>(4, 3)); }
  std::shared_ptr<Linear> fc;
};

}  // namespace pl

#endif  // PADDLE_LIKE_TESTS_CLIENT_TWO_PSERVERS_H_
