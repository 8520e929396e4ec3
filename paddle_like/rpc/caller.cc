#include "paddle_like/rpc/caller.h"

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include <cstdio>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "paddle_like/core/log.h"
#include "paddle_like/rpc/tls.h"

namespace pl::rpc {

Identity ParseIdentity(absl::string_view common_name) {
  Identity id;
  id.name = std::string(common_name);
  if (common_name == "master") {
    id.role = Role::kMaster;
  } else if (common_name == "trainer") {
    id.role = Role::kTrainer;
  } else if (common_name == "launch") {
    id.role = Role::kLaunch;
  } else if (absl::ConsumePrefix(&common_name, "pserver-")) {
    int index = -1;
    // Digits only: "pserver-+1" or "pserver- 1" would otherwise parse as shard 1.
    const bool digits = !common_name.empty() && common_name.size() <= 6 &&
                        common_name.find_first_not_of("0123456789") == absl::string_view::npos;
    if (digits && absl::SimpleAtoi(common_name, &index)) {
      id.role = Role::kPserver;
      id.index = index;
    }
  }
  return id;
}

namespace {

std::string Describe(const Allowed& a) {
  switch (a.role) {
    case Role::kMaster: return "the master";
    case Role::kTrainer: return "the job's trainers";
    case Role::kLaunch: return "pl-launch";
    case Role::kPserver: return a.index < 0 ? "the job's pservers" : PserverIdentity(a.index);
    case Role::kNone: break;
  }
  return "nobody";
}

bool Admits(const Allowed& a, const Identity& id) {
  if (a.role != id.role) return false;
  return a.role != Role::kPserver || a.index < 0 || a.index == id.index;
}

}  // namespace

grpc::Status Authorize(const grpc::ServerContextBase* context, std::initializer_list<Allowed> allowed,
                       absl::string_view method) {
  if (!TransportIsSecure()) return grpc::Status::OK;
  std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat(method, ": the caller presented no certificate of this job"));
  }
  const std::vector<grpc::string_ref> names = auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME);
  const Identity id = names.empty() ? Identity{} : ParseIdentity(absl::string_view(names[0].data(), names[0].size()));
  for (const Allowed& a : allowed) {
    if (Admits(a, id)) return grpc::Status::OK;
  }
  std::vector<std::string> who;
  for (const Allowed& a : allowed) who.push_back(Describe(a));
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat(method, " may be called only by ", absl::StrJoin(who, " or "),
                                   "; the caller's certificate names \"", id.name, "\""));
}

grpc::Status AuthorizeJobProcess(const grpc::ServerContextBase* context, absl::string_view method) {
  return Authorize(context, {kMasters, kPservers, kTrainers, kLaunchers}, method);
}

grpc::Status LogIfRefused(const grpc::ServerContextBase* context, grpc::Status s) {
  if (s.error_code() == grpc::StatusCode::PERMISSION_DENIED || s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    log::Warning(absl::StrCat("refused a call from ", context->peer(), ": ", s.error_message()));
  }
  return s;
}

std::string PserverIdentity(int shard) { return absl::StrCat("pserver-", shard); }

StatusOr<std::string> OwnIdentity() {
  const std::string dir = TransportDirectory();
  if (dir.empty()) return std::string();
  const std::string path = dir + "/tls.crt";
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return absl::NotFoundError("TLS: cannot read " + path);
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (cert == nullptr) return absl::InvalidArgumentError("TLS: " + path + " is not a PEM certificate");
  char cn[256] = {0};
  const int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
  X509_free(cert);
  if (n <= 0) return absl::InvalidArgumentError("TLS: " + path + " names no common name (the process's identity)");
  return std::string(cn, n);
}

Status CheckOwnIdentity(const std::string& expected) {
  PL_ASSIGN_OR_RETURN(std::string own, OwnIdentity());
  if (own.empty() || own == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("TLS: this process is ", expected, " but its certificate (",
                                                 TransportDirectory(), "/tls.crt) names \"", own,
                                                 "\": the job's servers would refuse its calls"));
}

std::string NewTrainerToken() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // OpenSSL's generator failing means no entropy at all; nothing safe to fall back to.
    std::fprintf(stderr, "fatal: OpenSSL RAND_bytes failed\n");
    std::abort();
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

std::string TokenDigest(absl::string_view token) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), md);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(md), sizeof(md)));
}

bool TokenMatches(absl::string_view token, absl::string_view digest) {
  if (digest.empty()) return false;
  const std::string mine = TokenDigest(token);
  return mine.size() == digest.size() && CRYPTO_memcmp(mine.data(), digest.data(), mine.size()) == 0;
}

std::string CallerToken(const grpc::ServerContextBase* context) {
  const auto& md = context->client_metadata();
  auto it = md.find(kTrainerTokenKey);
  return it == md.end() ? std::string() : std::string(it->second.data(), it->second.size());
}

}  // namespace pl::rpc
