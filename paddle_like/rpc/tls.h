// Transport security of every channel and server of a process (rpc.h uses it): mutual
// TLS with the certificates of a directory in cert-manager's layout (tls.crt, tls.key,
// ca.crt), or none. With TLS, a server accepts only clients whose certificate the
// job's CA signed, and a client talks only to servers whose certificate it signed and
// names the job (certificates.h). A client reads the files for every new channel; a
// server watches them (every kCertificateRefreshSeconds), so a rotated Secret is used by
// the connections made after it changed, a running server's included.
//
// The identity of a process is its certificate's common name ("master", "pserver-2",
// "trainer", certificates.h).
//
// Set once at start, before any channel or server is made (ConfigureTransportSecurity
// from the --tls_dir / --insecure flags, tls_flags.h); until then every channel and
// server is insecure, which is what in-process tests use.
//
// Thread-safety: thread-safe.
#ifndef PADDLE_LIKE_RPC_TLS_H_
#define PADDLE_LIKE_RPC_TLS_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "paddle_like/core/status.h"

namespace pl::rpc {

inline constexpr unsigned kCertificateRefreshSeconds = 5;

// Mutual TLS from DIR/{tls.crt, tls.key, ca.crt}; checks that the three files exist
// and parse (INVALID_ARGUMENT / NOT_FOUND naming the file otherwise).
Status ConfigureTransportSecurity(const std::string& tls_dir);
// Back to no transport security.
void UseInsecureTransport();
bool TransportIsSecure();
// "mutual TLS (DIR)" or "insecure".
std::string TransportDescription();
// The configured directory; "" when insecure.
std::string TransportDirectory();

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials();
std::shared_ptr<grpc::ServerCredentials> ServerCredentials();

}  // namespace pl::rpc

#endif  // PADDLE_LIKE_RPC_TLS_H_
