#include "paddle_like/rpc/tls_socket.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>

#include <algorithm>
#include <csignal>
#include <mutex>
#include <cerrno>
#include <climits>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/tls.h"

namespace pl::rpc {
namespace {

struct Deleter {
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
  void operator()(SSL* p) const { SSL_free(p); }
  void operator()(X509* p) const { X509_free(p); }
};

using Context = std::unique_ptr<SSL_CTX, Deleter>;

std::string OpenSslReason() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "no reason given";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// A fresh context per transfer: certificates may have been rotated since the last one
// (tls.h), and transfers are rare (one per snapshot).
StatusOr<Context> NewContext(TlsSide side) {
  const std::string dir = TransportDirectory();
  if (dir.empty()) return absl::FailedPreconditionError("TLS socket: this process runs without TLS");
  Context ctx(
      SSL_CTX_new(side == TlsSide::kClient ? TLS_client_method() : TLS_server_method()));
  if (!ctx) return absl::InternalError("TLS socket: " + OpenSslReason());
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_3_VERSION);
  SSL_CTX_set_ciphersuites(ctx.get(), "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  const std::string crt = dir + "/tls.crt", key = dir + "/tls.key", ca = dir + "/ca.crt";
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), crt.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("TLS socket: cannot use ", crt, " and ", key, ": ", OpenSslReason()));
  }
  if (SSL_CTX_load_verify_locations(ctx.get(), ca.c_str(), nullptr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("TLS socket: cannot use ", ca, ": ", OpenSslReason()));
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

}  // namespace

StatusOr<std::shared_ptr<const TlsContext>> TlsContext::Load(TlsSide side) {
  PL_ASSIGN_OR_RETURN(Context ctx, NewContext(side));
  return std::shared_ptr<const TlsContext>(new TlsContext(ctx.release(), side));
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

StatusOr<std::unique_ptr<TlsSocket>> TlsSocket::Handshake(int fd, const TlsContext& context, const std::string& peer,
                                                          const Wait& wait) {
  // OpenSSL writes with write(2), not send(MSG_NOSIGNAL): a peer that hung up must be
  // an EPIPE error here, not a SIGPIPE that kills the process.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  const TlsSide side = context.side();
  SSL* ssl = SSL_new(context.ctx_);  // holds its own reference to the context
  if (ssl == nullptr) return absl::InternalError("TLS socket: " + OpenSslReason());
  std::unique_ptr<TlsSocket> session(new TlsSocket(ssl));
  SSL_set_fd(ssl, fd);
  // As gRPC's channels do: the server's certificate must name the job (certificates.h).
  if (side == TlsSide::kClient && SSL_set1_host(ssl, kJobServerName) != 1) {
    return absl::InternalError("TLS socket: " + OpenSslReason());
  }
  while (true) {
    ERR_clear_error();
    const int rc = side == TlsSide::kClient ? SSL_connect(ssl) : SSL_accept(ssl);
    if (rc == 1) break;
    if (Status s = session->AfterCall(rc, "TLS handshake", wait); !s.ok()) {
      return absl::Status(absl::IsUnavailable(s) || absl::IsCancelled(s) ? s.code() : absl::StatusCode::kUnauthenticated,
                          s.message());
    }
  }
  std::unique_ptr<X509, Deleter> cert(SSL_get1_peer_certificate(ssl));
  char cn[256] = {0};
  const int n = cert ? X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof(cn)) : 0;
  const std::string named = n > 0 ? std::string(cn, n) : std::string();
  if (named != peer) {
    return absl::PermissionDeniedError(
        absl::StrCat("TLS socket: the peer's certificate names \"", named, "\", not \"", peer, "\""));
  }
  return session;
}

TlsSocket::~TlsSocket() { SSL_free(ssl_); }

Status TlsSocket::AfterCall(int rc, const char* what, const Wait& wait) {
  const int err = SSL_get_error(ssl_, rc);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      return wait(POLLIN);
    case SSL_ERROR_WANT_WRITE:
      return wait(POLLOUT);
    case SSL_ERROR_ZERO_RETURN:
      return absl::UnavailableError(absl::StrCat(what, ": the peer closed the connection"));
    case SSL_ERROR_SYSCALL:
      if (errno == EINTR) return absl::OkStatus();
      return absl::UnavailableError(
          absl::StrCat(what, ": ", errno != 0 ? std::strerror(errno) : "the peer closed the connection"));
    default:
      return absl::UnavailableError(absl::StrCat(what, ": ", OpenSslReason()));
  }
}

Status TlsSocket::Read(void* data, size_t n, const Wait& wait) {
  char* out = static_cast<char*>(data);
  while (n > 0) {
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_read(ssl_, out, static_cast<int>(std::min<size_t>(n, INT_MAX)));
    if (rc > 0) {
      out += rc;
      n -= static_cast<size_t>(rc);
      continue;
    }
    PL_RETURN_IF_ERROR(AfterCall(rc, "TLS receive", wait));
  }
  return absl::OkStatus();
}

Status TlsSocket::Write(const void* data, size_t n, const Wait& wait) {
  const char* in = static_cast<const char*>(data);
  while (n > 0) {
    ERR_clear_error();
    errno = 0;
    const int rc = SSL_write(ssl_, in, static_cast<int>(std::min<size_t>(n, INT_MAX)));
    if (rc > 0) {
      in += rc;
      n -= static_cast<size_t>(rc);
      continue;
    }
    PL_RETURN_IF_ERROR(AfterCall(rc, "TLS send", wait));
  }
  return absl::OkStatus();
}

}  // namespace pl::rpc
