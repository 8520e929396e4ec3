// The launcher's part in the job's mutual TLS (launcher.h, paddle_like/rpc/tls.h): the
// job's CA and one certificate per identity, made before any process starts.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/tls.h"
#include "trainer/launcher/launcher.h"

namespace pl {

namespace fs = std::filesystem;

Status Launcher::PrepareTls() {
  if (options_.insecure) {
    supervisor_->Log("transport: insecure (--insecure): any process that reaches the job's ports can call it");
    return absl::OkStatus();
  }
  tls_root_ = workdir_ + "/tls";
  if (!options_.tls_ca.empty()) {
    // The job's CA, the same on every node: copied in, so the job's directory holds
    // everything its processes read.
    std::error_code ec;
    fs::create_directories(tls_root_ + "/ca", ec);
    for (const char* file : {"ca.crt", "ca.key"}) {
      const std::string from = options_.tls_ca + "/" + file, to = tls_root_ + "/ca/" + file;
      if (!fs::exists(from)) return absl::InvalidArgumentError("--tls_ca: no " + from);
      fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
      if (ec) return absl::PermissionDeniedError(absl::StrCat("--tls_ca: cannot copy ", from, ": ", ec.message()));
    }
    fs::permissions(tls_root_ + "/ca/ca.key", fs::perms::owner_read | fs::perms::owner_write, ec);
  }
  PL_RETURN_IF_ERROR(rpc::EnsureJobCa(tls_root_, "paddle-like job " + workdir_));
  std::vector<std::string> identities = {"trainer", "launch"};
  if (runs_master()) identities.push_back("master");
  for (int i : LocalPservers()) identities.push_back(absl::StrCat("pserver-", i));
  for (const std::string& name : identities) PL_RETURN_IF_ERROR(rpc::IssueCertificate(tls_root_, name));
  PL_RETURN_IF_ERROR(rpc::ConfigureTransportSecurity(tls_root_ + "/launch"));
  configured_transport_ = true;
  supervisor_->Log("transport: mutual TLS; the job's CA and certificates in " + tls_root_);
  return absl::OkStatus();
}

std::vector<std::string> Launcher::TlsArgs(const std::string& identity) const {
  if (tls_root_.empty()) return {"--insecure"};
  return {"--tls_dir", tls_root_ + "/" + identity};
}

}  // namespace pl
