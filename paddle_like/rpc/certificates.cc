#include "paddle_like/rpc/certificates.h"

#include <arpa/inet.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"

namespace pl::rpc {
namespace {

namespace fs = std::filesystem;

struct Deleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(FILE* p) const { std::fclose(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter>;
using Cert = std::unique_ptr<X509, Deleter>;
using File = std::unique_ptr<FILE, Deleter>;

Status OpenSslError(const std::string& what) { return absl::InternalError("OpenSSL: " + what); }

StatusOr<Key> NewKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return OpenSslError("cannot make a P-256 key");
  return key;
}

// Opens `path` for writing with `mode` (0600 for keys) before anything is written.
StatusOr<File> Create(const std::string& path, mode_t mode) {
  std::error_code ec;
  fs::remove(path, ec);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return absl::PermissionDeniedError("cannot write " + path);
  File f(fdopen(fd, "w"));
  if (!f) return absl::InternalError("fdopen " + path);
  return f;
}

Status WriteKey(const std::string& path, EVP_PKEY* key) {
  PL_ASSIGN_OR_RETURN(File f, Create(path, 0600));
  if (PEM_write_PrivateKey(f.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return OpenSslError("cannot write the key " + path);
  }
  return absl::OkStatus();
}

Status WriteCert(const std::string& path, X509* cert) {
  PL_ASSIGN_OR_RETURN(File f, Create(path, 0644));
  if (PEM_write_X509(f.get(), cert) != 1) return OpenSslError("cannot write the certificate " + path);
  return absl::OkStatus();
}

StatusOr<Key> ReadKey(const std::string& path) {
  File f(std::fopen(path.c_str(), "r"));
  if (!f) return absl::NotFoundError("no key at " + path);
  Key key(PEM_read_PrivateKey(f.get(), nullptr, nullptr, nullptr));
  if (!key) return absl::DataLossError("not a PEM private key: " + path);
  return key;
}

StatusOr<Cert> ReadCert(const std::string& path) {
  File f(std::fopen(path.c_str(), "r"));
  if (!f) return absl::NotFoundError("no certificate at " + path);
  Cert cert(PEM_read_X509(f.get(), nullptr, nullptr, nullptr));
  if (!cert) return absl::DataLossError("not a PEM certificate: " + path);
  return cert;
}

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `name` with `key`, signed by (issuer, issuer_key); self-signed when
// issuer is null (the CA).
StatusOr<Cert> MakeCert(const std::string& name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                        absl::Time not_before, absl::Duration valid_for, const std::string& extra_sans = "") {
  Cert cert(X509_new());
  if (!cert) return OpenSslError("X509_new");
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  const int64_t from = absl::ToUnixSeconds(not_before == absl::InfinitePast() ? absl::Now() - absl::Minutes(1)
                                                                             : not_before);
  ASN1_TIME_set(X509_getm_notBefore(cert.get()), static_cast<time_t>(from));
  ASN1_TIME_set(X509_getm_notAfter(cert.get()), static_cast<time_t>(from + absl::ToInt64Seconds(valid_for)));
  X509_set_pubkey(cert.get(), key);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(name.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : subject);
  X509* signer = issuer ? issuer : cert.get();
  const bool ok =
      issuer == nullptr
          ? AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE") &&
                AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign")
          : AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
                AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature") &&
                AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth") &&
                AddExtension(cert.get(), signer, NID_subject_alt_name,
                             ("DNS:" + name + ",DNS:" + kJobServerName + extra_sans).c_str());
  if (!ok) return OpenSslError("cannot add the certificate's extensions");
  if (X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256()) == 0) return OpenSslError("X509_sign");
  return cert;
}

Status MakeDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot make ", dir, ": ", ec.message()));
  ::chmod(dir.c_str(), 0700);
  return absl::OkStatus();
}

}  // namespace

Status EnsureJobCa(const std::string& dir, const std::string& job, absl::Duration valid_for) {
  const std::string ca = dir + "/ca";
  if (fs::exists(ca + "/ca.crt") && fs::exists(ca + "/ca.key")) return absl::OkStatus();
  std::error_code ec;
  // Half a CA (one file lost): made afresh, as before this directory had any.
  for (const char* file : {"/ca.crt", "/ca.key"}) fs::remove(ca + file, ec);
  return MakeCa(ca, job, valid_for);
}

Status MakeCa(const std::string& ca_dir, const std::string& job, absl::Duration valid_for) {
  for (const char* file : {"/ca.crt", "/ca.key"}) {
    if (fs::exists(ca_dir + file)) {
      return absl::AlreadyExistsError(absl::StrCat(ca_dir, file, " exists: a job's CA is not replaced (its "
                                                   "certificates would no longer verify); choose another directory"));
    }
  }
  PL_RETURN_IF_ERROR(MakeDir(ca_dir));
  PL_ASSIGN_OR_RETURN(Key key, NewKey());
  PL_ASSIGN_OR_RETURN(Cert cert, MakeCert(job, key.get(), nullptr, nullptr, absl::InfinitePast(), valid_for));
  PL_RETURN_IF_ERROR(WriteKey(ca_dir + "/ca.key", key.get()));
  return WriteCert(ca_dir + "/ca.crt", cert.get());
}

namespace {

Status Issue(const std::string& dir, const std::string& name, absl::Duration valid_for, absl::Time not_before,
             const std::vector<std::string>& hosts) {
  if (name.empty() || name.find('/') != std::string::npos || name == "ca") {
    return absl::InvalidArgumentError("certificate name '" + name + "': one path component, not 'ca'");
  }
  std::string extra_sans;
  for (const std::string& host : hosts) {
    in_addr ip;
    const bool literal = inet_pton(AF_INET, host.c_str(), &ip) == 1;
    if (host.empty() || host.find_first_of(",:= ") != std::string::npos) {
      return absl::InvalidArgumentError("certificate host '" + host + "': not an IPv4 address or a DNS name");
    }
    extra_sans += (literal ? ",IP:" : ",DNS:") + host;
  }
  PL_ASSIGN_OR_RETURN(Key ca_key, ReadKey(dir + "/ca/ca.key"));
  PL_ASSIGN_OR_RETURN(Cert ca_cert, ReadCert(dir + "/ca/ca.crt"));
  PL_ASSIGN_OR_RETURN(Key key, NewKey());
  PL_ASSIGN_OR_RETURN(Cert cert,
                      MakeCert(name, key.get(), ca_cert.get(), ca_key.get(), not_before, valid_for, extra_sans));
  const std::string out = dir + "/" + name;
  PL_RETURN_IF_ERROR(MakeDir(out));
  PL_RETURN_IF_ERROR(WriteKey(out + "/tls.key", key.get()));
  PL_RETURN_IF_ERROR(WriteCert(out + "/tls.crt", cert.get()));
  return WriteCert(out + "/ca.crt", ca_cert.get());
}

}  // namespace

Status IssueCertificate(const std::string& dir, const std::string& name, absl::Duration valid_for,
                        absl::Time not_before) {
  return Issue(dir, name, valid_for, not_before, {});
}

Status IssueCertificateForHosts(const std::string& dir, const std::string& name,
                                const std::vector<std::string>& hosts) {
  return Issue(dir, name, absl::Hours(24 * 365), absl::InfinitePast(), hosts);
}

}  // namespace pl::rpc
