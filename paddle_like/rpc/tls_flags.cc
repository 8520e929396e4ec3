#include "paddle_like/rpc/tls_flags.h"

#include "absl/flags/flag.h"
#include "paddle_like/core/log.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/tls.h"

ABSL_FLAG(std::string, tls_dir, "",
          "mutual TLS: a directory with tls.crt, tls.key and ca.crt (cert-manager's layout; pl-launch makes them)");
ABSL_FLAG(bool, insecure, false, "no transport security, even with --tls_dir or PL_TLS_DIR (debugging only)");

namespace pl::rpc {

std::vector<cli::EnvFallback> WithTlsEnv(std::vector<cli::EnvFallback> env) {
  env.push_back({"tls_dir", "PL_TLS_DIR"});
  return env;
}

std::string TlsDirFlag() { return absl::GetFlag(FLAGS_tls_dir); }
bool InsecureFlag() { return absl::GetFlag(FLAGS_insecure); }

void ConfigureTransportOrExit(const cli::Program& program, const std::string& identity) {
  const std::string dir = absl::GetFlag(FLAGS_tls_dir);
  if (absl::GetFlag(FLAGS_insecure)) {
    UseInsecureTransport();
    log::Warning("transport: insecure (--insecure): any process that reaches this one's ports can call it");
    return;
  }
  if (dir.empty()) {
    UseInsecureTransport();
    log::Warning("transport: insecure (no --tls_dir or PL_TLS_DIR): any process that reaches this one's ports "
                 "can call it");
    return;
  }
  if (Status s = ConfigureTransportSecurity(dir); !s.ok()) {
    cli::ExitWithUsageError(program, "--tls_dir: " + std::string(s.message()));
  }
  if (Status s = identity.empty() ? Status() : CheckOwnIdentity(identity); !s.ok()) {
    cli::ExitWithUsageError(program, "--tls_dir: " + std::string(s.message()));
  }
  StatusOr<std::string> own = OwnIdentity();
  log::Info(absl::StrCat("transport: ", TransportDescription(), " as ", own.ok() ? *own : "?"));
}

}  // namespace pl::rpc
