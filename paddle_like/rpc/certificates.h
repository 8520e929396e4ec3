// Certificates for a job's mutual TLS (tls.h), made with OpenSSL: a CA of the job's
// own, and for each of its processes a key and a certificate signed by that CA, whose
// common name is the process's identity ("master", "pserver-2", "trainer"). Written in
// the layout cert-manager gives a Kubernetes Secret: DIR/<name>/{tls.crt, tls.key,
// ca.crt}; the CA's key stays in DIR/ca/ (ca.key), so later processes of the job get
// certificates too. Keys are readable by their owner only (0600).
//
// Keys are ECDSA P-256; certificates SHA-256, valid from a minute ago for `valid_for`.
//
// Thread-safety: the functions are thread-safe (OpenSSL 3 needs no locking set-up).
#ifndef PADDLE_LIKE_RPC_CERTIFICATES_H_
#define PADDLE_LIKE_RPC_CERTIFICATES_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"

namespace pl::rpc {

// Every certificate also names this (a subject alternative name), and every channel
// asks for it: a pserver's address says nothing about who it is (it moves between
// hosts and ports), so the name checked in the handshake is the job's, and the
// chain to the job's CA is what proves it.
inline constexpr char kJobServerName[] = "paddle-like.job";

// Makes DIR/ca/{ca.crt, ca.key} (a new CA named `job`) unless DIR/ca holds one already.
Status EnsureJobCa(const std::string& dir, const std::string& job, absl::Duration valid_for = absl::Hours(24 * 365));
// Writes a new CA named `job` to CA_DIR/{ca.crt, ca.key} (the directory made if need
// be): what `pl-launch --make_ca` gives the nodes of a job on several machines.
// ALREADY_EXISTS, writing nothing, when either file is there: a job's CA is never
// replaced under its certificates.
Status MakeCa(const std::string& ca_dir, const std::string& job, absl::Duration valid_for = absl::Hours(24 * 365));
// Writes DIR/<name>/{tls.crt, tls.key, ca.crt}, signed by DIR/ca. `not_before` and
// `valid_for` default to a certificate valid now; tests pass others (an expired one).
Status IssueCertificate(const std::string& dir, const std::string& name,
                        absl::Duration valid_for = absl::Hours(24 * 365),
                        absl::Time not_before = absl::InfinitePast());

// As IssueCertificate, and the certificate also names `hosts` (IPv4 addresses or DNS
// names): for a server that peers reach by its address and check by it, as etcd's
// members do (etcd/etcd_member.h).
Status IssueCertificateForHosts(const std::string& dir, const std::string& name,
                                const std::vector<std::string>& hosts);

}  // namespace pl::rpc

#endif  // PADDLE_LIKE_RPC_CERTIFICATES_H_
