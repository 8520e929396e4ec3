// etcd as pl-launch runs it for a job's masters: mutual TLS with the job's CA, and only a
// certificate naming "master" admitted as a client. A trainer's certificate (the one an
// insider running user code holds), plaintext, and a "master" certificate of another CA
// are all refused: no job process but a master can read or write the job's state.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "paddle_like/etcd/etcd_client.h"
#include "paddle_like/etcd/etcd_member.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/testing/etcd_server.h"

namespace pl::etcd {
namespace {

class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(rpc::EnsureJobCa(dir_.path() + "/tls", "job").ok());
    for (const char* name : {"master", "trainer"}) ASSERT_TRUE(rpc::IssueCertificate(dir_.path() + "/tls", name).ok());
    ASSERT_TRUE(rpc::IssueCertificateForHosts(dir_.path() + "/tls", kEtcdIdentity, {"127.0.0.1"}).ok());
    auto started = testing::EtcdServer::Start(dir_.path(), Tls(kEtcdIdentity), Tls("master"));
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(started).value();
  }
  std::string Tls(const std::string& identity) const { return dir_.path() + "/tls/" + identity; }

  // A Put, and a Range of it back, as the client of `tls_dir` ("" plaintext).
  Status PutAndRead(const std::string& tls_dir) {
    PL_ASSIGN_OR_RETURN(auto client, EtcdClient::Connect(server_->endpoint(), absl::Milliseconds(1500), tls_dir));
    etcdserverpb::TxnRequest txn;
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key("/job/state");
    put->set_value("ok");
    PL_RETURN_IF_ERROR(client->Txn(txn).status());
    etcdserverpb::RangeRequest range;
    range.set_key("/job/state");
    return client->Range(range).status();
  }

  process::TempDir dir_{"pl-etcd-tls"};
  std::unique_ptr<testing::EtcdServer> server_;
};

TEST_F(EtcdTlsTest, OnlyTheMastersCertificateIsAdmitted) {
  EXPECT_TRUE(PutAndRead(Tls("master")).ok());
  Status trainer = PutAndRead(Tls("trainer"));
  EXPECT_FALSE(trainer.ok()) << "a trainer's certificate reached the job's state";
  Status plaintext = PutAndRead("");
  EXPECT_FALSE(plaintext.ok()) << "a plaintext client reached the job's state";
  // A "master" of another CA.
  ASSERT_TRUE(rpc::EnsureJobCa(dir_.path() + "/other", "another job").ok());
  ASSERT_TRUE(rpc::IssueCertificate(dir_.path() + "/other", "master").ok());
  Status stranger = PutAndRead(dir_.path() + "/other/master");
  EXPECT_FALSE(stranger.ok()) << "another CA's master reached the job's state";
}

TEST_F(EtcdTlsTest, AMissingCertificateFileIsNamed) {
  auto client = EtcdClient::Connect(server_->endpoint(), absl::Seconds(1), dir_.path() + "/tls/nobody");
  EXPECT_TRUE(absl::IsNotFound(client.status()));
  EXPECT_THAT(client.status().message(), ::testing::HasSubstr("nobody/ca.crt"));
}

}  // namespace
}  // namespace pl::etcd
