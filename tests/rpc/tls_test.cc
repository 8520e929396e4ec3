// Mutual TLS (paddle_like/rpc/tls.h) with certificates of a job's own CA
// (certificates.h), against a real pserver service on 127.0.0.1: the job's processes
// get answers; a stranger with no certificate, with one from another job's CA, or with
// an expired one from this job's CA gets none.
#include "paddle_like/rpc/tls.h"

#include <gtest/gtest.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/rpc.h"
#include "proto/pserver.grpc.pb.h"
#include "pserver/service/pserver_service.h"
#include "pserver/store/shard.h"

namespace pl::rpc {
namespace {

namespace fs = std::filesystem;

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// TLS credentials with DIR's key and certificate, trusting the CA at `root` (DIR's own
// ca.crt when empty), for a client that is not this process.
std::shared_ptr<grpc::ChannelCredentials> CredentialsFrom(const std::string& dir, const std::string& root = "") {
  grpc::experimental::IdentityKeyCertPair pair{Read(dir + "/tls.key"), Read(dir + "/tls.crt")};
  auto provider = std::make_shared<grpc::experimental::StaticDataCertificateProvider>(
      Read(root.empty() ? dir + "/ca.crt" : root), std::vector<grpc::experimental::IdentityKeyCertPair>{pair});
  grpc::experimental::TlsChannelCredentialsOptions o;
  o.set_certificate_provider(provider);
  o.watch_root_certs();
  o.watch_identity_key_cert_pairs();
  o.set_check_call_host(false);
  o.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
  return grpc::experimental::TlsCredentials(o);
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pl-tls-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(EnsureJobCa(dir_, "job-a").ok());
    ASSERT_TRUE(IssueCertificate(dir_, "pserver-0").ok());
    ASSERT_TRUE(IssueCertificate(dir_, "trainer").ok());
    ASSERT_TRUE(ConfigureTransportSecurity(dir_ + "/pserver-0").ok());
    shard_ = std::make_unique<pserver::ParameterShard>(0, 1);
    service_ = std::make_unique<pserver::PserverService>(shard_.get(), nullptr);
    int port = 0;
    auto server = StartServer(ServerOptions{}, {service_.get()}, &port);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    shard_->Shutdown();
    UseInsecureTransport();
    fs::remove_all(dir_);
  }
  // Stats through `credentials`, with a deadline: a refused handshake never answers.
  grpc::Status Stats(std::shared_ptr<grpc::ChannelCredentials> credentials) {
    auto stub = proto::ParameterServer::NewStub(grpc::CreateChannel(address_, credentials));
    auto ctx = MakeContext(std::chrono::milliseconds(3000), /*wait_for_ready=*/false);
    proto::StatsRequest req;
    proto::StatsResponse resp;
    return stub->Stats(ctx.get(), req, &resp);
  }

  std::string dir_;
  std::unique_ptr<pserver::ParameterShard> shard_;
  std::unique_ptr<pserver::PserverService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(TlsTest, TheJobsOwnProcessesAreAnswered) {
  EXPECT_EQ(TransportDescription(), "mutual TLS (" + dir_ + "/pserver-0)");
  EXPECT_TRUE(Stats(CredentialsFrom(dir_ + "/trainer")).ok());
  // And through rpc.h's own channel (this process's identity).
  auto stub = proto::ParameterServer::NewStub(MakeChannel(address_));
  auto ctx = MakeContext(std::chrono::milliseconds(3000));
  proto::StatsRequest req;
  proto::StatsResponse resp;
  EXPECT_TRUE(stub->Stats(ctx.get(), req, &resp).ok());
}

TEST_F(TlsTest, AStrangerWithoutACertificateIsRefused) {
  grpc::Status s = Stats(grpc::InsecureChannelCredentials());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  // TLS without a client certificate: the server requires one.
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = Read(dir_ + "/ca/ca.crt");
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("pserver-0");
  auto stub = proto::ParameterServer::NewStub(grpc::CreateCustomChannel(address_, grpc::SslCredentials(ssl), args));
  auto ctx = MakeContext(std::chrono::milliseconds(3000));
  proto::StatsRequest req;
  proto::StatsResponse resp;
  s = stub->Stats(ctx.get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, ACertificateOfAnotherJobsCaIsRefused) {
  const std::string other = dir_ + "/other";
  ASSERT_TRUE(EnsureJobCa(other, "job-b").ok());
  ASSERT_TRUE(IssueCertificate(other, "trainer").ok());
  // It trusts this job's CA (so it would accept the server); the server refuses it.
  grpc::Status s = Stats(CredentialsFrom(other + "/trainer", dir_ + "/ca/ca.crt"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(TlsTest, AnExpiredCertificateOfThisJobIsRefused) {
  ASSERT_TRUE(IssueCertificate(dir_, "expired", absl::Hours(1), absl::Now() - absl::Hours(3)).ok());
  grpc::Status s = Stats(CredentialsFrom(dir_ + "/expired"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

// Kubernetes rotates a Secret by swapping its files in place: a running server uses the
// new key, certificate and CA for the handshakes after the swap, without a restart.
TEST_F(TlsTest, ARunningServerTakesUpRotatedCertificates) {
  const std::string next = dir_ + "/next";
  ASSERT_TRUE(EnsureJobCa(next, "job-a, next year").ok());
  ASSERT_TRUE(IssueCertificate(next, "pserver-0").ok());
  ASSERT_TRUE(IssueCertificate(next, "trainer").ok());
  EXPECT_EQ(Stats(CredentialsFrom(next + "/trainer")).error_code(), grpc::StatusCode::UNAVAILABLE);
  ASSERT_TRUE(Stats(CredentialsFrom(dir_ + "/trainer")).ok());
  // The swap, as atomic as Kubernetes makes it: the whole directory at once.
  fs::rename(dir_ + "/pserver-0", dir_ + "/pserver-0.old");
  fs::rename(next + "/pserver-0", dir_ + "/pserver-0");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4 * kCertificateRefreshSeconds);
  grpc::Status s;
  do {
    s = Stats(CredentialsFrom(next + "/trainer"));
    if (!s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (!s.ok() && std::chrono::steady_clock::now() < deadline);
  EXPECT_TRUE(s.ok()) << "the server still refuses the new CA's trainer: " << s.error_message();
  // And the old CA's certificates are no longer accepted.
  EXPECT_EQ(Stats(CredentialsFrom(dir_ + "/trainer")).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, KeysAreTheOwnersAndBadFilesAreNamed) {
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/trainer/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/ca/ca.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ofstream(dir_ + "/trainer/tls.crt") << "not a certificate";
  Status s = ConfigureTransportSecurity(dir_ + "/trainer");
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("trainer/tls.crt is not a PEM certificate"), std::string::npos) << s;
  s = ConfigureTransportSecurity(dir_ + "/nobody");
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  // What was configured before stays.
  EXPECT_EQ(TransportDescription(), "mutual TLS (" + dir_ + "/pserver-0)");
}

}  // namespace
}  // namespace pl::rpc

namespace pl::rpc {
namespace {

// A process that dials before its peer listens (a node waiting for the job's master)
// connects once the peer is up, as it does without TLS.
TEST(TlsStartupTest, AClientThatDialsBeforeTheServerListensConnectsOnceItDoes) {
  const std::string dir = fs::temp_directory_path() / ("pl-tls-early-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ASSERT_TRUE(EnsureJobCa(dir, "job").ok());
  ASSERT_TRUE(IssueCertificate(dir, "pserver-0").ok());
  ASSERT_TRUE(ConfigureTransportSecurity(dir + "/pserver-0").ok());
  // A free port: bind one, note it, let it go.
  int port = 0;
  {
    pserver::ParameterShard probe_shard(0, 1);
    pserver::PserverService probe(&probe_shard, nullptr);
    auto s = StartServer(ServerOptions{}, {&probe}, &port);
    ASSERT_TRUE(s.ok());
    (*s)->Shutdown(std::chrono::system_clock::now());
    probe_shard.Shutdown();
  }
  auto stub = proto::ParameterServer::NewStub(MakeChannel(absl::StrCat("127.0.0.1:", port)));
  auto call = [&] {
    auto ctx = MakeContext(std::chrono::milliseconds(1000));
    proto::StatsRequest req;
    proto::StatsResponse resp;
    return stub->Stats(ctx.get(), req, &resp);
  };
  EXPECT_EQ(call().error_code(), grpc::StatusCode::UNAVAILABLE);  // nobody listens yet
  pserver::ParameterShard shard(0, 1);
  pserver::PserverService service(&shard, nullptr);
  ServerOptions o;
  o.address = absl::StrCat("127.0.0.1:", port);
  int bound = 0;
  auto server = StartServer(o, {&service}, &bound);
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::Status last;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    last = call();
    if (!last.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (!last.ok() && std::chrono::steady_clock::now() < give_up);
  EXPECT_TRUE(last.ok()) << last.error_message();
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  shard.Shutdown();
  UseInsecureTransport();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pl::rpc
