// One real etcd member for a test suite (paddle_like/testing/etcd_server.h), and a
// client of it; each test works under a prefix of its own.
#ifndef PADDLE_LIKE_TESTS_ETCD_ETCD_FIXTURE_H_
#define PADDLE_LIKE_TESTS_ETCD_ETCD_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "paddle_like/etcd/etcd_client.h"
#include "paddle_like/testing/etcd_server.h"

namespace pl::etcd {

class EtcdFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new process::TempDir("pl-etcd-test");
    auto started = testing::EtcdServer::Start(dir_->path());
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = started->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << "etcd did not start";
    auto c = EtcdClient::Connect(server_->endpoint());
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(c).value();
    prefix_ = std::string("/t/") + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  // Writes `value` at `key` unconditionally (as an operator or a bug might).
  void RawPut(const std::string& key, const std::string& value) {
    etcdserverpb::TxnRequest txn;
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
    ASSERT_TRUE(client_->Txn(txn).ok());
  }

  static inline process::TempDir* dir_ = nullptr;
  static inline testing::EtcdServer* server_ = nullptr;
  std::unique_ptr<EtcdClient> client_;
  std::string prefix_;
};

}  // namespace pl::etcd

#endif  // PADDLE_LIKE_TESTS_ETCD_ETCD_FIXTURE_H_
