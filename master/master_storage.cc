#include "master/master_storage.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "paddle_like/etcd/etcd_record_log.h"
#include "paddle_like/etcd/etcd_state_store.h"
#include "paddle_like/store/local_dir_store.h"

namespace pl {

Status ValidateEtcdSettings(const MasterStorageOptions& options) {
  if (options.etcd_endpoints.empty()) return absl::OkStatus();
  const std::string& prefix = options.etcd_prefix;
  if (prefix.empty() || prefix.front() != '/' || absl::EndsWith(prefix, "/")) {
    return absl::InvalidArgumentError(absl::StrCat("--etcd_prefix '", prefix,
                                                   "' must start with '/' and not end with one"));
  }
  return etcd::EtcdClient::Connect(options.etcd_endpoints, absl::Seconds(2), options.etcd_tls_dir).status();
}

StatusOr<MasterStorage> OpenMasterStorage(const MasterStorageOptions& options, const std::function<bool()>& stop,
                                          std::function<void(const std::string&)> on_lost) {
  MasterStorage out;
  if (options.etcd_endpoints.empty()) {
    if (options.state_dir.empty()) return absl::InvalidArgumentError("no state directory and no etcd endpoints");
    PL_ASSIGN_OR_RETURN(std::unique_ptr<LocalDirStore> store, LocalDirStore::Open(options.state_dir));
    out.store = std::move(store);
    if (options.event_log) out.log_path = options.state_dir + "/master-events.log";
    out.where = options.state_dir;
    return out;
  }
  PL_RETURN_IF_ERROR(ValidateEtcdSettings(options));
  const std::string& prefix = options.etcd_prefix;
  PL_ASSIGN_OR_RETURN(out.etcd, etcd::EtcdClient::Connect(options.etcd_endpoints, absl::Seconds(2),
                                                          options.etcd_tls_dir));
  etcd::EtcdElection::Options election;
  election.key = prefix + "/leader";
  election.value = options.advertise;
  election.ttl_s = options.leader_ttl_s;
  election.first_delay = absl::Milliseconds(options.campaign_delay_ms);
  election.log = options.log;
  out.election = std::make_unique<etcd::EtcdElection>(out.etcd.get(), election);
  PL_ASSIGN_OR_RETURN(etcd::Fence fence, out.election->Campaign(stop));
  out.store = std::make_unique<etcd::EtcdStateStore>(out.etcd.get(), prefix + "/state", fence);
  // A refused or failed write leaves memory ahead of what is stored: this master must
  // not answer another call, and leaves the job to the next leader.
  auto lost = std::make_shared<std::function<void(const std::string&)>>(std::move(on_lost));
  if (options.event_log) {
    out.event_log = std::make_shared<etcd::EtcdRecordLog>(out.etcd.get(), prefix + "/events/", fence,
                                                          [lost](const Status& st) { (*lost)(std::string(st.message())); });
  }
  out.election->KeepLeading([lost](const std::string& why) { (*lost)(why); });
  out.where = absl::StrCat("etcd ", options.etcd_endpoints, " ", prefix, ", term ", fence.create_revision);
  return out;
}

}  // namespace pl
