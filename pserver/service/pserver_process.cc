#include "pserver/service/pserver_process.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/log.h"
#include "paddle_like/core/parallel_for.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/dist/dense_link.h"
#include "paddle_like/dist/snapshot_lanes.h"
#include "paddle_like/metrics/hot_row_rates.h"
#include "paddle_like/metrics/pserver_sampler.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"
#include "pserver/checkpoint/checkpoint.h"
#include "pserver/replication/replicator.h"
#include "pserver/service/membership_watcher.h"
#include "pserver/service/pserver_service.h"
#include "pserver/store/disk_tier.h"
#include "pserver/store/row_evictor.h"
#include "pserver/store/shard.h"

namespace pl::pserver {

int64_t DefaultMemoryBudgetBytes() {
  int64_t total = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (cgroup >> limit && limit != "max") {
    int64_t bytes = 0;
    if (absl::SimpleAtoi(limit, &bytes) && bytes > 0) total = std::min(total, bytes);
  }
  return total / 4 * 3;
}

Status ValidatePserverOptions(const PserverOptions& o) {
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError(why); };
  if (o.num_pservers <= 0) return bad("--num_pservers (or PL_NUM_PSERVERS) must be >= 1");
  if (o.index < 0 || o.index >= o.num_pservers) {
    return bad(absl::StrCat("--index (or PL_PSERVER_INDEX) ", o.index, " must be in [0, ", o.num_pservers, ")"));
  }
  if (!o.sparse_disk_dir.empty() && o.sparse_memory_mb <= 0) {
    return bad("--sparse_disk_dir needs --sparse_memory_mb (the cap decides what goes to disk)");
  }
  if (o.replicas > 1 && o.master.empty()) {
    return bad("--replicas > 1 needs --master (the master keeps the shard's replica map)");
  }
  if (o.dense_link_max_mb < 0) return bad(absl::StrCat("--dense_link_max_mb: ", o.dense_link_max_mb, " is negative"));
  if (o.apply_threads < 0) return bad(absl::StrCat("--apply_threads: ", o.apply_threads, " is negative (0: one per core)"));
  PL_RETURN_IF_ERROR(ValidateNormGuardOptions(o.norm_guard));
  if (o.max_memory_mb < -1) return bad(absl::StrCat("--max_memory_mb: ", o.max_memory_mb, " is below -1 (-1: no limit)"));
  if (o.env == nullptr) return bad("PserverOptions.env is null");
  return absl::OkStatus();
}

// What Run builds, in the order it builds it; destroyed in reverse.
class PserverProcess::Parts {
 public:
  std::unique_ptr<metrics::ProcessTelemetry> own_telemetry;  // when the options gave none
  metrics::ProcessTelemetry* telemetry = nullptr;
  std::unique_ptr<Checkpointer> checkpointer;
  std::unique_ptr<ParameterShard> shard;
  std::string restored_from;
  std::unique_ptr<PserverService> service;
  std::unique_ptr<metrics::PserverSampler> sampler;
  std::unique_ptr<grpc::Server> server;
  std::string address;  // what the master hands out
  std::unique_ptr<Replicator> replicator;
  std::unique_ptr<RowEvictor> evictor;
  std::unique_ptr<MembershipWatcher> watcher;
  metrics::HotRowRates report_rates;
};

PserverProcess::PserverProcess(PserverOptions options) : options_(std::move(options)) {}

PserverProcess::~PserverProcess() = default;

namespace {

int64_t SparseCapBytes(const PserverOptions& o) { return std::max<int64_t>(0, o.sparse_memory_mb) << 20; }

// A replica's start: register with the master (telling it how new a checkpoint it
// holds), then, as the shard's primary, restore that checkpoint (saying how many
// versions that loses against what the last primary reported), or, as a joining
// replica, wait empty for the primary's snapshot.
Status ReplicatedStartup(const Faults& faults, Replicator* replicator, ParameterShard* shard,
                         Checkpointer* checkpointer, std::string* restored_from) {
  Checkpointer::Restored restored;
  if (checkpointer != nullptr) {
    PL_ASSIGN_OR_RETURN(restored, checkpointer->RestoreLatest(shard->num_shards()));
  }
  const int64_t checkpoint_version = restored.shard ? restored.shard->version() : -1;
  PL_ASSIGN_OR_RETURN(auto role, replicator->Join(absl::Seconds(60), checkpoint_version));
  if (role == proto::ReplicaInfo::PRIMARY) {
    if (restored.shard) {
      PL_RETURN_IF_ERROR(Checkpointer::LoadChain(restored.chain, shard));
      *restored_from = restored.path;
    }
    const int64_t known = replicator->last_known_version();
    if (!restored_from->empty()) {
      // The master knows the last version a primary reported (heartbeats, a few per
      // second): at least that much is gone; what came after the last report is too.
      log::Warning(absl::StrCat("primary of shard ", shard->index(), " with no live replica: restored ",
                                *restored_from, " (version ", shard->version(),
                                "); the shard's last primary reported version ", known, ": at least ",
                                std::max<int64_t>(0, known - shard->version()), " versions of updates are lost"));
    } else if (known > 0) {
      log::Warning(absl::StrCat("primary of shard ", shard->index(), " with no live replica and no checkpoint: ",
                                "the shard had reached version ", known, "; it starts again from its first Init"));
    } else {
      log::Info(absl::StrCat("primary of shard ", shard->index(), " (a new shard)"));
    }
  } else {
    shard->SetFollowing(true);
    log::Info(absl::StrCat("joining shard ", shard->index(), ": waiting for the primary's snapshot"));
  }
  if (faults.attach_delay > absl::ZeroDuration()) {
    log::Warning(absl::StrCat("test fault: attaching the shard ", absl::FormatDuration(faults.attach_delay), " late"));
    absl::SleepFor(faults.attach_delay);
  }
  replicator->Attach(shard);
  return absl::OkStatus();
}

ReplicatorOptions ReplicatorOptionsOf(const PserverOptions& o, const std::string& address) {
  ReplicatorOptions ro;
  ro.index = o.index;
  ro.master_address = o.master;
  ro.address = address;
  ro.listen_host = o.host;
  ro.heartbeat_every = absl::Milliseconds(o.heartbeat_ms);
  ro.snapshot_socket = o.snapshot_socket;
  ro.snapshot_lanes = o.snapshot_lanes > 0 ? o.snapshot_lanes : DefaultSnapshotLanes(rpc::TransportIsSecure());
  // The primary's stream to each backup carries its dense blocks through shared memory
  // to a backup on this host, else over a dense link whenever the backups take links
  // (their --shm and --dense_link, the defaults).
  ro.stream_shm = o.stream_shm;
  ro.snapshot_shm = o.snapshot_shm;
  ro.stream_doorbell = o.stream_doorbell;
  if (o.stream_link) {
    ro.stream_link_lanes =
        o.stream_link_lanes > 0 ? o.stream_link_lanes : DefaultDenseLinkLanes(rpc::TransportIsSecure());
  }
  ro.faults = o.env->faults();
  if (ro.faults.snapshot_piece_bytes > 0) {  // many small pieces: never the socket or shared memory
    ro.snapshot_piece_bytes = ro.faults.snapshot_piece_bytes;
    ro.snapshot_socket = false;
    ro.snapshot_shm = false;
  }
  return ro;
}

}  // namespace

Status PserverProcess::Run(const StopWaiter& stopped) {
  PL_RETURN_IF_ERROR(ValidatePserverOptions(options_));
  SetApplyThreads(options_.apply_threads);
  parts_ = std::make_unique<Parts>();
  PL_RETURN_IF_ERROR(Start());  // what was built is torn down with parts_
  if (Status served = Serve(stopped); !served.ok()) {
    // Replication failed for good: no handover, no final checkpoint of a state the
    // shard's other replicas may have moved past.
    if (parts_->watcher) parts_->watcher->Stop();
    if (parts_->replicator) parts_->replicator->Stop();
    return served;
  }
  return Stop();
}

Status PserverProcess::Start() {
  const PserverOptions& o = options_;
  Parts& p = *parts_;
  p.telemetry = o.telemetry;
  if (p.telemetry == nullptr) {
    PL_ASSIGN_OR_RETURN(p.own_telemetry, metrics::ProcessTelemetry::Open(metrics::TelemetryOptions{}));
    p.telemetry = p.own_telemetry.get();
  }
  const int64_t sparse_cap_bytes = SparseCapBytes(o);
  // A shard's disk tier, attached before it restores or serves anything.
  auto attach_disk_tier = [&](ParameterShard* s) -> Status {
    if (o.sparse_disk_dir.empty()) return absl::OkStatus();
    PL_ASSIGN_OR_RETURN(std::unique_ptr<DiskTier> tier, DiskTier::Open(o.sparse_disk_dir, sparse_cap_bytes));
    s->tables().AttachDiskTier(std::move(tier));
    s->eviction().Enable(sparse_cap_bytes);
    return absl::OkStatus();
  };
  const bool replicated = o.replicas > 1;
  // A replica learns from the master whether it is the shard's primary before it
  // restores anything (ReplicatedStartup).
  if (!o.checkpoint_dir.empty()) {
    p.checkpointer = std::make_unique<Checkpointer>(o.checkpoint_dir, o.index, /*keep=*/2, o.full_checkpoint_every);
  }
  if (p.checkpointer && !replicated) {
    PL_ASSIGN_OR_RETURN(Checkpointer::Restored restored, p.checkpointer->RestoreLatest(o.num_pservers, attach_disk_tier));
    if (restored.shard) {
      p.shard = std::move(restored.shard);
      p.restored_from = restored.path;
      log::Info(absl::StrCat("restored ", p.restored_from, " (version ", p.shard->version(),
                             p.shard->sync() ? ", sync)" : ", async)"));
    }
  }
  if (!p.shard) {
    p.shard = std::make_unique<ParameterShard>(o.index, o.num_pservers);
    PL_RETURN_IF_ERROR(attach_disk_tier(p.shard.get()));
  }
  p.shard->norm_guard().set_options(o.norm_guard);
  // Without a cap of its own (--sparse_memory_mb 0) the sparse rows get what the dense
  // parameters leave of the budget.
  p.shard->set_memory_budget(o.max_memory_mb < 0    ? 0
                             : o.max_memory_mb == 0 ? DefaultMemoryBudgetBytes()
                                                    : o.max_memory_mb << 20,
                             /*cap_sparse_rows=*/o.sparse_memory_mb == 0);

  // Trainers on this host may send their dense traffic through shared memory.
  SharedRegionOptions shm;
  shm.enabled = o.shm;
  shm.links_enabled = o.dense_link;
  shm.max_link_bytes = o.dense_link_max_mb << 20;
  p.service = std::make_unique<PserverService>(p.shard.get(), p.checkpointer.get(), p.restored_from, shm);
  if (shm.links_enabled) {
    if (Status opened = p.service->OpenDenseLinks(o.host); !opened.ok()) {
      log::Warning(absl::StrCat("no dense links (trainers on other hosts use gRPC): ", opened.message()));
    }
  }
  PserverService* service = p.service.get();
  p.sampler = std::make_unique<metrics::PserverSampler>(p.telemetry, [service] { return service->StatsNow(); });
  rpc::ServerOptions server_options;
  server_options.address = absl::StrCat(o.host, ":", o.port);
  server_options.max_message_bytes = o.max_message_mb << 20;
  server_options.num_threads = o.threads;
  int bound_port = 0;
  PL_ASSIGN_OR_RETURN(p.server, rpc::StartServer(server_options, {service}, &bound_port));
  std::string advertise_host = o.advertise_host;
  if (advertise_host.empty()) advertise_host = (o.host == "0.0.0.0" || o.host == "::") ? "127.0.0.1" : o.host;
  p.address = absl::StrCat(advertise_host, ":", bound_port);
  if (!o.port_file.empty()) PL_RETURN_IF_ERROR(o.env->WriteFileAtomically(o.port_file, absl::StrCat(bound_port, "\n")));
  log::Info(absl::StrCat("pserver ", o.index, " of ", o.num_pservers, ": serving on ", o.host, ":", bound_port,
                         " (advertised as ", p.address, ")"));

  if (replicated) {
    p.replicator = std::make_unique<Replicator>(ReplicatorOptionsOf(o, p.address));
    if (!o.replica_id_file.empty()) {
      Status written =
          o.env->WriteFileAtomically(o.replica_id_file, absl::StrCat(absl::Hex(p.replicator->replica_id()), "\n"));
      if (!written.ok()) return Annotate(written, "--replica_id_file");
    }
    p.shard->SetReplicationHook(p.replicator.get());
    service->SetReplicator(p.replicator.get());
    PL_RETURN_IF_ERROR(ReplicatedStartup(o.env->faults(), p.replicator.get(), p.shard.get(), p.checkpointer.get(),
                                         &p.restored_from));
    service->SetRestoredFrom(p.restored_from);
  }

  // Rows past their table's time to live, and beyond the cap, go in the background.
  p.evictor = std::make_unique<RowEvictor>(p.shard.get(), sparse_cap_bytes);

  if (!o.master.empty()) {
    MembershipWatcherOptions wo;
    wo.master_address = o.master;
    wo.register_index = replicated ? -1 : o.index;  // a replica registers through its Replicator
    wo.register_address = p.address;
    wo.num_pservers = o.num_pservers;
    wo.incarnation = std::random_device()() | (uint64_t{std::random_device()()} << 32) | 1;  // never 0
    wo.started_empty = p.restored_from.empty();
    ParameterShard* shard = p.shard.get();
    wo.restored_version = p.restored_from.empty() ? -1 : shard->version();
    wo.describe = [shard](proto::RegisterPserverRequest* request) {
      request->set_version(shard->version());
      request->set_pushes_refused(shard->norm_guard().refused());
      request->set_restored_from_trainer(shard->restored_from_trainer());
    };
    p.watcher = std::make_unique<MembershipWatcher>(
        wo, [shard](const std::vector<int64_t>& live) { shard->SetLiveTrainers(live); });
    p.watcher->Start();
  }
  return absl::OkStatus();
}

Status PserverProcess::Serve(const StopWaiter& stopped) {
  const PserverOptions& o = options_;
  Parts& p = *parts_;
  Env& env = *o.env;
  // Signals, the checkpoint timer, and returning the message buffers of a burst of
  // traffic to the kernel once it has paused for trim_idle_ms.
  const absl::Duration every = absl::Seconds(std::max(o.checkpoint_every_s, 1));
  absl::Time next_checkpoint = env.Now() + every;
  // Sparse tables in the log: sizes and hot rows (x-deeplearning#85: hot shards nobody saw).
  const absl::Duration report_every = absl::Seconds(o.table_report_every_s);
  absl::Time next_report = env.Now() + report_every;
  int64_t calls_seen = 0;
  absl::Time last_traffic = env.Now();
  bool trimmed = true;
  const absl::Duration tick = absl::Milliseconds(o.trim_idle_ms > 0 ? std::min(200, o.trim_idle_ms) : 200);
  while (true) {
    if (p.replicator) {
      if (auto fatal = p.replicator->fatal()) return absl::InternalError(*fatal);
    }
    if (stopped(tick)) return absl::OkStatus();
    const absl::Time now = env.Now();
    if (const int64_t calls = p.service->data_calls(); calls != calls_seen) {
      calls_seen = calls;
      last_traffic = now;
      trimmed = false;
    } else if (!trimmed && o.trim_idle_ms > 0 && now - last_traffic >= absl::Milliseconds(o.trim_idle_ms)) {
      p.shard->WaitForQueuedPushes();
      const int64_t before = ResidentBytes();
      ReleaseFreeHeapMemory();
      trimmed = true;
      log::Info(absl::StrFormat("traffic paused for %d ms: freed buffers returned (rss %.1f MB -> %.1f MB)",
                                o.trim_idle_ms, before / 1e6, ResidentBytes() / 1e6));
    }
    p.service->DropIdleRegions();
    p.sampler->Tick();
    if (report_every > absl::ZeroDuration() && now >= next_report) {
      next_report = now + report_every;
      for (const std::string& line : metrics::DescribeTables(p.service->StatsNow(), &p.report_rates, now)) {
        log::Info(line);
      }
    }
    // Replicas sharing a directory leave the checkpoints to the primary.
    const bool may_checkpoint = !p.replicator || o.replica_checkpoints || p.replicator->CheckPrimary().ok();
    if (p.checkpointer && may_checkpoint && o.checkpoint_every_s > 0 && now >= next_checkpoint) {
      next_checkpoint = now + every;
      // Nothing new since the last file: skip writing an identical one.
      if (p.shard->initialized() && p.shard->version() != p.service->checkpointed_version()) {
        (void)p.service->CheckpointNow();  // failure is logged; the next tick retries
      }
    }
  }
}

Status PserverProcess::Stop() {
  const PserverOptions& o = options_;
  Parts& p = *parts_;
  // The tables as they end (sizes, admissions, hottest rows), also when no report fell due.
  if (o.table_report_every_s > 0 && p.shard->initialized()) {
    for (const std::string& line : metrics::DescribeTables(p.service->StatsNow(), &p.report_rates, o.env->Now())) {
      log::Info(line);
    }
  }
  if (p.watcher) p.watcher->Stop();
  const bool may_checkpoint = !p.replicator || o.replica_checkpoints || p.replicator->CheckPrimary().ok();
  // Hands over (the backups hold every update taken) and tells the master, so that a
  // preempted primary's backup takes over at once.
  if (p.replicator) p.replicator->Leave(absl::Seconds(2));
  p.shard->Shutdown();  // wakes pulls waiting for a version
  p.server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  if (p.checkpointer && may_checkpoint && p.shard->initialized() &&
      p.shard->version() != p.service->checkpointed_version()) {
    PL_RETURN_IF_ERROR(p.service->CheckpointNow().status());
  }
  log::Info("stopped");
  return absl::OkStatus();
}

}  // namespace pl::pserver
