// OnePserverTest: the fixture of the region tests (shared memory, dense links): one
// in-process pserver (ParameterShard + PserverService over gRPC on 127.0.0.1) and a
// way to make SGD clients of it.
#ifndef PADDLE_LIKE_TESTS_CLIENT_ONE_PSERVER_H_
#define PADDLE_LIKE_TESTS_CLIENT_ONE_PSERVER_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/rpc/rpc.h"
#include "pserver/service/pserver_service.h"
#include "pserver/store/shard.h"

namespace pl {

class OnePserverTest : public ::testing::Test {
 protected:
  // `links`: the pserver also takes dense links (OpenDenseLinks), as pl-pserver does.
  void Start(pserver::SharedRegionOptions options, bool links = false) {
    service_ = std::make_unique<pserver::PserverService>(&shard_, nullptr, "", options);
    if (links) {
      ASSERT_TRUE(service_->OpenDenseLinks("127.0.0.1").ok());
    }
    int port = 0;
    auto server = rpc::StartServer(rpc::ServerOptions(), {service_.get()}, &port);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    shard_.Shutdown();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  // SGD at 0.5, seed 9; `options` says how the dense blocks travel.
  std::unique_ptr<ParameterClient> SgdClient(Module* model, ParameterClientOptions o) {
    o.optimizer.kind = OptimizerKind::kSGD;
    o.optimizer.learning_rate = 0.5f;
    o.seed = 9;
    return std::make_unique<ParameterClient>(model, o, [this]() -> StatusOr<std::vector<std::string>> {
      return std::vector<std::string>{address_};
    });
  }

  pserver::ParameterShard shard_{0, 1};
  std::unique_ptr<pserver::PserverService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_TESTS_CLIENT_ONE_PSERVER_H_
