#include "paddle_like/rpc/tls.h"

#include <openssl/pem.h>
#include <openssl/x509.h>

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace pl::rpc {
namespace {

struct Transport {
  std::mutex mu;
  std::string dir;  // empty: insecure
  // Servers' certificates, re-read when the files change (a running server's are).
  std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> watcher;
};

Transport& Global() {
  static Transport* t = new Transport();
  return *t;
}

// The file parses as what it should be: a PEM certificate or a PEM private key.
Status CheckPem(const std::string& path, bool key) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return absl::NotFoundError("TLS: cannot read " + path);
  bool ok;
  if (key) {
    EVP_PKEY* k = PEM_read_PrivateKey(f, nullptr, nullptr, nullptr);
    ok = k != nullptr;
    EVP_PKEY_free(k);
  } else {
    X509* c = PEM_read_X509(f, nullptr, nullptr, nullptr);
    ok = c != nullptr;
    X509_free(c);
  }
  std::fclose(f);
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("TLS: ", path, " is not a PEM ", key ? "private key" : "certificate"));
  return absl::OkStatus();
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string Dir() {
  Transport& t = Global();
  std::lock_guard<std::mutex> lock(t.mu);
  return t.dir;
}

}  // namespace

Status ConfigureTransportSecurity(const std::string& tls_dir) {
  PL_RETURN_IF_ERROR(CheckPem(tls_dir + "/tls.crt", false));
  PL_RETURN_IF_ERROR(CheckPem(tls_dir + "/tls.key", true));
  PL_RETURN_IF_ERROR(CheckPem(tls_dir + "/ca.crt", false));
  auto watcher = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      tls_dir + "/tls.key", tls_dir + "/tls.crt", tls_dir + "/ca.crt", kCertificateRefreshSeconds);
  Transport& t = Global();
  std::lock_guard<std::mutex> lock(t.mu);
  t.dir = tls_dir;
  t.watcher = std::move(watcher);
  return absl::OkStatus();
}

void UseInsecureTransport() {
  Transport& t = Global();
  std::lock_guard<std::mutex> lock(t.mu);
  t.dir.clear();
  t.watcher.reset();
}

bool TransportIsSecure() { return !Dir().empty(); }

std::string TransportDirectory() { return Dir(); }

std::string TransportDescription() {
  const std::string dir = Dir();
  return dir.empty() ? "insecure" : "mutual TLS (" + dir + ")";
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials() {
  const std::string dir = Dir();
  if (dir.empty()) return grpc::InsecureChannelCredentials();
  // Read at each channel: a rotated certificate (a Secret updated in place) is used by
  // every channel made after the files changed.
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ReadFile(dir + "/ca.crt");
  o.pem_private_key = ReadFile(dir + "/tls.key");
  o.pem_cert_chain = ReadFile(dir + "/tls.crt");
  return grpc::SslCredentials(o);
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentials() {
  std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> watcher;
  {
    Transport& t = Global();
    std::lock_guard<std::mutex> lock(t.mu);
    watcher = t.watcher;
  }
  if (watcher == nullptr) return grpc::InsecureServerCredentials();
  // A server lives as long as its process: its key, certificate and CA come from the
  // watcher, so a Secret rotated in place (Kubernetes swaps the files atomically) is
  // used for the handshakes after it changed, without a restart.
  grpc::experimental::TlsServerCredentialsOptions o(watcher);
  o.watch_root_certs();
  o.watch_identity_key_cert_pairs();
  o.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(o);
}

}  // namespace pl::rpc
