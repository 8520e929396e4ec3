// Who is calling a server, and whether it may make this call: the per-caller rights of
// the job's services. Under mutual TLS (tls.h) the caller is named by its certificate's
// common name, which the job's CA vouches for (certificates.h):
//
//   master       the master
//   pserver-<i>  a process serving shard i (its primary or any replica)
//   trainer      any trainer (which trainer: the token the master gave it, below)
//   launch       pl-launch and the operator's tools (they watch, they do not train)
//
// A certificate naming anything else is of the job but has no rights. Without transport
// security (--insecure) there are no identities and every call is allowed: that mode is
// for debugging, and every process says so when it starts.
//
// Trainer tokens: a trainer's registration yields a random token bound to its id; its
// later calls to the master carry it (metadata kTrainerTokenKey), so a trainer cannot
// finish, fail or leave under another's id. The master keeps only a digest.
//
// Thread-safety: the functions are thread-safe.
#ifndef PADDLE_LIKE_RPC_CALLER_H_
#define PADDLE_LIKE_RPC_CALLER_H_

#include <initializer_list>
#include <string>
#include "absl/strings/string_view.h"

#include <grpcpp/grpcpp.h>

#include "paddle_like/core/status.h"

namespace pl::rpc {

enum class Role { kNone, kMaster, kPserver, kTrainer, kLaunch };

struct Identity {
  Role role = Role::kNone;
  int index = -1;  // kPserver: the shard
  std::string name;  // as the certificate says it
};

// "master", "pserver-3", "trainer", "launch"; anything else is Role::kNone.
Identity ParseIdentity(absl::string_view common_name);

// One kind of caller a method admits: a role, and for pservers the shard (-1: any).
struct Allowed {
  Role role;
  int index = -1;
};
inline constexpr Allowed kTrainers{Role::kTrainer};
inline constexpr Allowed kPservers{Role::kPserver};
inline constexpr Allowed kLaunchers{Role::kLaunch};
inline constexpr Allowed kMasters{Role::kMaster};
inline Allowed PserverOf(int shard) { return Allowed{Role::kPserver, shard}; }
// The common name every trainer's certificate carries.
inline constexpr char kTrainerIdentity[] = "trainer";
// The common name of shard `shard`'s processes: "pserver-<shard>".
std::string PserverIdentity(int shard);

// OK when the server runs without transport security, or the caller's certificate
// names one of `allowed`. Otherwise UNAUTHENTICATED (no verified certificate) or
// PERMISSION_DENIED naming `method`, who may call it and who called.
grpc::Status Authorize(const grpc::ServerContextBase* context, std::initializer_list<Allowed> allowed,
                       absl::string_view method);
// Any process of the job (master, pservers, trainers, launch).
grpc::Status AuthorizeJobProcess(const grpc::ServerContextBase* context, absl::string_view method);
// Logs `s` with the caller's address when it is a refusal (PERMISSION_DENIED or
// UNAUTHENTICATED); returns it.
grpc::Status LogIfRefused(const grpc::ServerContextBase* context, grpc::Status s);

// The identity of this process: its own certificate's common name (NOT_FOUND / 
// INVALID_ARGUMENT for a missing or unreadable certificate); "" when insecure.
StatusOr<std::string> OwnIdentity();
// The process's certificate must name `expected` ("pserver-2"): a pserver started with
// another shard's certificate would be refused by the master at every registration.
Status CheckOwnIdentity(const std::string& expected);

// ---- trainer tokens ----
inline constexpr char kTrainerTokenKey[] = "pl-trainer-token";
// 128 random bits, hex.
std::string NewTrainerToken();
// What the master keeps of a token (SHA-256, hex).
std::string TokenDigest(absl::string_view token);
// Constant-time comparison of `token`'s digest with `digest`; false for an empty digest.
bool TokenMatches(absl::string_view token, absl::string_view digest);
// The token a call carries ("" if none).
std::string CallerToken(const grpc::ServerContextBase* context);

}  // namespace pl::rpc

#endif  // PADDLE_LIKE_RPC_CALLER_H_
