// The transport-security flags every paddle_like binary that talks gRPC shares:
//   --tls_dir DIR   mutual TLS with DIR/{tls.crt, tls.key, ca.crt} (env PL_TLS_DIR);
//                   pl-launch makes a job CA and each process's directory itself
//   --insecure      no transport security even when a directory is given (debugging)
// Without either the process runs insecure and says so on every start.
//
// Thread-safety: call from main, after pl::cli::ParseOrExit, before other threads start.
#ifndef PADDLE_LIKE_RPC_TLS_FLAGS_H_
#define PADDLE_LIKE_RPC_TLS_FLAGS_H_

#include <string>
#include <vector>

#include "paddle_like/core/cli.h"

namespace pl::rpc {

// `env` followed by {tls_dir, PL_TLS_DIR}: a Program's environment fallbacks.
std::vector<cli::EnvFallback> WithTlsEnv(std::vector<cli::EnvFallback> env);

// Configures the process's transport from the flags and logs which it is; a --tls_dir
// whose files are missing or unreadable, or whose certificate names another identity
// than `identity` ("pserver-2"; "" accepts any), is "<program>: error: ..." with exit
// status 2.
void ConfigureTransportOrExit(const cli::Program& program, const std::string& identity = "");

// What --tls_dir and --insecure say, for a launcher passing them on.
std::string TlsDirFlag();
bool InsecureFlag();

}  // namespace pl::rpc

#endif  // PADDLE_LIKE_RPC_TLS_FLAGS_H_
