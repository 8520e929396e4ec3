#include "trainer/launcher/job_tls.h"

#include "paddle_like/etcd/etcd_member.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/rpc/tls.h"

namespace pl {

namespace fs = std::filesystem;

Status JobTls::Prepare(const LaunchOptions& options, const JobLayout& layout,
                       const std::function<void(const std::string&)>& log) {
  if (options.insecure) {
    log("transport: insecure (--insecure): any process that reaches the job's ports can call it");
    return absl::OkStatus();
  }
  root_ = layout.workdir() + "/tls";
  if (!options.tls_ca.empty()) {
    // The job's CA, the same on every node: copied in, so the job's directory holds
    // everything its processes read.
    std::error_code ec;
    fs::create_directories(root_ + "/ca", ec);
    for (const char* file : {"ca.crt", "ca.key"}) {
      const std::string from = options.tls_ca + "/" + file, to = root_ + "/ca/" + file;
      if (!fs::exists(from)) return absl::InvalidArgumentError("--tls_ca: no " + from);
      fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
      if (ec) return absl::PermissionDeniedError(absl::StrCat("--tls_ca: cannot copy ", from, ": ", ec.message()));
    }
    fs::permissions(root_ + "/ca/ca.key", fs::perms::owner_read | fs::perms::owner_write, ec);
  }
  PL_RETURN_IF_ERROR(rpc::EnsureJobCa(root_, "paddle-like job " + layout.workdir()));
  std::vector<std::string> identities = {"trainer", "launch"};
  if (layout.runs_master()) identities.push_back("master");
  for (int i : layout.LocalPservers()) identities.push_back(absl::StrCat("pserver-", i));
  for (const std::string& name : identities) PL_RETURN_IF_ERROR(rpc::IssueCertificate(root_, name));
  if (layout.runs_master() && layout.standby_masters()) {
    // This node's etcd member: its peers reach it at its --master_addr host and check
    // that its certificate names it.
    PL_ASSIGN_OR_RETURN(std::vector<HostPort> masters, ParseMasterAddrs(options.master_addr, options.num_nodes));
    PL_RETURN_IF_ERROR(rpc::IssueCertificateForHosts(root_, etcd::kEtcdIdentity, {masters[options.node_rank].host}));
  }
  PL_RETURN_IF_ERROR(rpc::ConfigureTransportSecurity(root_ + "/launch"));
  configured_ = true;
  log("transport: mutual TLS; the job's CA and certificates in " + root_);
  return absl::OkStatus();
}

std::vector<std::string> JobTls::Args(const std::string& identity) const {
  if (root_.empty()) return {"--insecure"};
  return {"--tls_dir", root_ + "/" + identity};
}

}  // namespace pl
