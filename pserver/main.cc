// pl-pserver: one parameter server process. Parses flags (environment fallbacks
// PL_PSERVER_INDEX, PL_NUM_PSERVERS, PL_MASTER_ADDR, PL_CHECKPOINT_DIR,
// PL_ADVERTISE_HOST, PL_SNAPSHOT_LANES, read here only), restores the newest valid
// checkpoint, serves the ParameterServer service, registers with the master,
// checkpoints every N seconds, returns freed message buffers to the kernel when traffic
// pauses, and on SIGTERM/SIGINT stops serving, writes a final checkpoint and exits 0.
//
//   pl-pserver --index 0 --num_pservers 2 --master 127.0.0.1:7000 --port 0
//              --port_file /tmp/ps0.port --checkpoint_dir /tmp/ckpt --checkpoint_every_s 10
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/metrics/hot_row_rates.h"
#include "paddle_like/metrics/pserver_sampler.h"
#include "paddle_like/metrics/telemetry_flags.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/caller.h"
#include "paddle_like/rpc/tls.h"
#include "paddle_like/rpc/tls_flags.h"
#include "pserver/checkpoint.h"
#include "pserver/disk_tier.h"
#include "paddle_like/core/log.h"
#include "pserver/membership_watcher.h"
#include "pserver/pserver_service.h"
#include "paddle_like/dist/dense_link.h"
#include "pserver/replicator.h"
#include "pserver/row_evictor.h"
#include "pserver/shard.h"
#include "pserver/snapshot_lanes.h"

ABSL_FLAG(int, index, -1, "this pserver's index in [0, num_pservers): which blocks and rows it holds");
ABSL_FLAG(int, num_pservers, 0, "pservers in the job (>= 1)");
ABSL_FLAG(std::string, master, "", "master address host:port to register with; empty: no master");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "address to listen on (default: this host only; 0.0.0.0 for every interface, as other hosts need)");
ABSL_FLAG(int, port, 0, "port to listen on (0: any free port; see --port_file)");
ABSL_FLAG(std::string, advertise_host, "",
          "host registered with the master (empty: --host, or 127.0.0.1 when --host is 0.0.0.0 or ::)");
ABSL_FLAG(std::string, port_file, "", "write the bound port here (atomically) once serving");
ABSL_FLAG(std::string, replica_id_file, "",
          "with --replicas > 1: write this process's replica id here (hex, atomically) before it joins, so "
          "that its supervisor can tell the master at once when the process dies (pl-launch does)");
ABSL_FLAG(std::string, checkpoint_dir, "", "checkpoints of this shard (restored at start); empty: none");
ABSL_FLAG(int, checkpoint_every_s, 10, "seconds between checkpoints (0: only the final one on SIGTERM)");
ABSL_FLAG(int, table_report_every_s, 60,
          "log each sparse table's rows, bytes and hottest rows this often (0: never)");
ABSL_FLAG(int, full_checkpoint_every, 10,
          "every Nth checkpoint is full, the others hold only the rows changed since the one before (>= 1; 1: all "
          "full)");
ABSL_FLAG(int, max_message_mb, 256,
          "largest gRPC message in MB, in [1, 2047]; once initialised the shard also refuses any push or pull "
          "larger than its parameters allow (Stats: largest_request_bytes)");
ABSL_FLAG(int, threads, 0,
          "gRPC polling threads for Init, Stats, Checkpoint and Attach (0: gRPC's default); Push and Pull "
          "run on gRPC's callback threads (async) or a pool of their own (sync)");
ABSL_FLAG(int, trim_idle_ms, 1000,
          "return freed message buffers to the kernel once traffic has paused this long (0: never)");
ABSL_FLAG(int, replicas, 1,
          "copies of this shard the job keeps, each in its own pl-pserver with the same --index (>= 1; > 1 needs "
          "--master): a primary serves trainers and streams every update to the others, a backup takes over when "
          "it dies; start one process per copy");
ABSL_FLAG(bool, replica_checkpoints, false,
          "every replica, backups too, checkpoints into its own --checkpoint_dir (replicas that do not share the "
          "directory, as Pods with claims of their own; a copy that outlives the others then restores its own "
          "newest state); default: only the primary writes, for replicas sharing one directory (pl-launch)");
ABSL_FLAG(int64_t, sparse_memory_mb, 0,
          "cap on this pserver's sparse rows (values, optimizer state, index), in MB: beyond it the least "
          "recently used rows are evicted in the background (0: no cap; tables' evict_after_s still applies)");
ABSL_FLAG(std::string, sparse_disk_dir, "",
          "with --sparse_memory_mb: rows beyond the cap move to a disk tier (RocksDB) in this directory instead of "
          "being dropped, and come back when touched (the directory is scratch: emptied at start)");
ABSL_FLAG(bool, snapshot_socket, true,
          "replicated shards: send a joining replica's snapshot over TCP connections of its own to a port the joiner "
          "picks, with the job's TLS unless --insecure (--nosnapshot_socket: in gRPC pieces, through the gRPC port "
          "alone)");
ABSL_FLAG(int32_t, snapshot_lanes, 0,
          "replicated shards: a snapshot over the socket goes on up to this many connections at once, each read "
          "into the shard on a thread of its own (1-16; the joiner takes the smaller of its own and the primary's; "
          "0: 4 with TLS, else one per 4 cores, at most 4)");
ABSL_FLAG(bool, dense_link, true,
          "accept dense links from trainers on other hosts (and, replicated, from the shard's primary for its "
          "stream; a primary uses them to its backups): dense blocks over TCP connections of their own, on ports "
          "the OS picks, with the job's TLS unless --insecure (--nodense_link: over gRPC)");
ABSL_FLAG(int64_t, dense_link_max_mb, 0,
          "the most memory the trainers' dense links may hold here together (each 2x the dense bytes that trainer "
          "exchanges with this pserver); a trainer past it keeps gRPC and asks again 30 s later (0: a quarter of the "
          "machine's memory)");
ABSL_FLAG(bool, stream_link, true,
          "replicated: a primary sends its stream's dense blocks to each backup over a dense link (when the "
          "backup takes links) instead of inside the gRPC calls");
ABSL_FLAG(bool, stream_shm, true,
          "replicated: a primary sends its stream's dense blocks to a backup on this host through shared memory "
          "(tried before --stream_link; a backup with --noshm or /dev/shm of its own refuses it)");
ABSL_FLAG(bool, stream_doorbell, true,
          "replicated, with --stream_shm: a primary rings such a backup through the shared memory (a futex) "
          "instead of calling it over gRPC for each update");
ABSL_FLAG(int32_t, stream_link_lanes, 0,
          "replicated, with --stream_link: connections each way of a primary's dense link to each backup (0: "
          "automatic, as a trainer's link)");
ABSL_FLAG(int32_t, heartbeat_ms, 100,
          "replicated: how often a replica tells the master it lives (and hears of promotions); at most half the "
          "master's --pserver_lease_ms, whose default is 800 (10-10000)");
ABSL_FLAG(bool, shm, true,
          "accept shared-memory regions from trainers on this host, and from a replicated primary's stream "
          "(--noshm: gRPC or dense links only)");

namespace {

// SIGTERM/SIGINT are noted by a handler (whichever thread takes them, including
// threads libraries start before main) and woken through a self-pipe.
int g_signal_pipe[2] = {-1, -1};
volatile sig_atomic_t g_signal = 0;

void OnSignal(int sig) {
  g_signal = sig;
  const char byte = 1;
  (void)!write(g_signal_pipe[1], &byte, 1);
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "pl-pserver: %s\n", why.c_str());
  return 1;
}

// A replica's start: register with the master (telling it how new a checkpoint it
// holds), then, as the shard's primary, restore that checkpoint (saying how many
// versions that loses against what the last primary reported), or, as a joining
// replica, wait empty for the primary's snapshot.
pl::Status ReplicatedStartup(pl::pserver::Replicator* replicator, pl::pserver::ParameterShard* shard,
                             pl::pserver::Checkpointer* checkpointer, std::string* restored_from) {
  pl::pserver::Checkpointer::Restored restored;
  if (checkpointer != nullptr) {
    PL_ASSIGN_OR_RETURN(restored, checkpointer->RestoreLatest(shard->num_shards()));
  }
  const int64_t checkpoint_version = restored.shard ? restored.shard->version() : -1;
  PL_ASSIGN_OR_RETURN(auto role, replicator->Join(absl::Seconds(60), checkpoint_version));
  if (role == pl::proto::ReplicaInfo::PRIMARY) {
    if (restored.shard) {
      PL_RETURN_IF_ERROR(pl::pserver::Checkpointer::LoadChain(restored.chain, shard));
      *restored_from = restored.path;
    }
    const int64_t known = replicator->last_known_version();
    if (!restored_from->empty()) {
      // The master knows the last version a primary reported (heartbeats, a few per
      // second): at least that much is gone; what came after the last report is too.
      pl::log::Warning(absl::StrCat("primary of shard ", shard->index(), " with no live replica: restored ",
                                    *restored_from, " (version ", shard->version(),
                                    "); the shard's last primary reported version ", known, ": at least ",
                                    std::max<int64_t>(0, known - shard->version()),
                                    " versions of updates are lost"));
    } else if (known > 0) {
      pl::log::Warning(absl::StrCat("primary of shard ", shard->index(), " with no live replica and no checkpoint: ",
                                    "the shard had reached version ", known, "; it starts again from its first Init"));
    } else {
      pl::log::Info(absl::StrCat("primary of shard ", shard->index(), " (a new shard)"));
    }
  } else {
    shard->SetFollowing(true);
    pl::log::Info(absl::StrCat("joining shard ", shard->index(), ": waiting for the primary's snapshot"));
  }
  if (const char* ms = std::getenv("PL_TEST_ATTACH_DELAY_MS"); ms != nullptr && std::atoi(ms) > 0) {
    absl::SleepFor(absl::Milliseconds(std::atoi(ms)));  // a test's slow startup: the stream may come first
  }
  replicator->Attach(shard);
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  pl::cli::Program program = {
      "pl-pserver",
      "--index I --num_pservers P [--master HOST:PORT] [--port_file PATH] [--checkpoint_dir DIR] [flags]",
      "One parameter server: serves its shard of the parameters, registers with the master,\n"
      "checkpoints its shard, and on SIGTERM writes a final checkpoint and exits 0.",
      {{"index", "PL_PSERVER_INDEX"},
       {"num_pservers", "PL_NUM_PSERVERS"},
       {"master", "PL_MASTER_ADDR"},
       {"checkpoint_dir", "PL_CHECKPOINT_DIR"},
       {"advertise_host", "PL_ADVERTISE_HOST"},
       {"snapshot_lanes", "PL_SNAPSHOT_LANES"},
       {"stream_link", "PL_STREAM_LINK"},
       {"stream_link_lanes", "PL_STREAM_LINK_LANES"},
       {"stream_shm", "PL_STREAM_SHM"},
       {"stream_doorbell", "PL_STREAM_DOORBELL"}}};
  program.env = pl::rpc::WithTlsEnv(program.env);
  pl::cli::ParseOrExit(program, argc, argv);
  const int index = absl::GetFlag(FLAGS_index);
  const int num_pservers = absl::GetFlag(FLAGS_num_pservers);
  const int port = absl::GetFlag(FLAGS_port);
  const int every_s = absl::GetFlag(FLAGS_checkpoint_every_s);
  const int full_every = absl::GetFlag(FLAGS_full_checkpoint_every);
  const int trim_idle_ms = absl::GetFlag(FLAGS_trim_idle_ms);
  const int max_mb = absl::GetFlag(FLAGS_max_message_mb);
  if (num_pservers <= 0) pl::cli::ExitWithUsageError(program, "--num_pservers (or PL_NUM_PSERVERS) must be >= 1");
  if (index < 0 || index >= num_pservers) {
    pl::cli::ExitWithUsageError(
        program, absl::StrCat("--index (or PL_PSERVER_INDEX) ", index, " must be in [0, ", num_pservers, ")"));
  }
  pl::cli::CheckOrExit(program, {pl::cli::CheckRange("port", port, 0, 65535),
                                   pl::cli::CheckAtLeast("checkpoint_every_s", every_s, 0),
                                   pl::cli::CheckAtLeast("full_checkpoint_every", full_every, 1),
                                   pl::cli::CheckAtLeast("table_report_every_s", absl::GetFlag(FLAGS_table_report_every_s), 0),
                                   pl::cli::CheckAtLeast("trim_idle_ms", trim_idle_ms, 0),
                                   pl::cli::CheckRange("max_message_mb", max_mb, 1, 2047),
                                   pl::cli::CheckAtLeast("threads", absl::GetFlag(FLAGS_threads), 0),
                                   pl::cli::CheckAtLeast("replicas", absl::GetFlag(FLAGS_replicas), 1),
                                   pl::cli::CheckRange("heartbeat_ms", absl::GetFlag(FLAGS_heartbeat_ms), 10, 10000),
                                   pl::cli::CheckRange("snapshot_lanes", absl::GetFlag(FLAGS_snapshot_lanes), 0,
                                                       pl::pserver::kMaxSnapshotLanes),
                                   pl::cli::CheckRange("stream_link_lanes", absl::GetFlag(FLAGS_stream_link_lanes), 0,
                                                       pl::kMaxDenseLinkLanes),
                                   pl::cli::CheckRange<int64_t>("sparse_memory_mb", absl::GetFlag(FLAGS_sparse_memory_mb), 0,
                                                                int64_t{1} << 30)});
  const std::string master = absl::GetFlag(FLAGS_master);
  const std::string host = absl::GetFlag(FLAGS_host);
  const std::string checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  const int64_t sparse_cap_bytes = absl::GetFlag(FLAGS_sparse_memory_mb) << 20;
  const std::string sparse_disk_dir = absl::GetFlag(FLAGS_sparse_disk_dir);
  if (!sparse_disk_dir.empty() && sparse_cap_bytes == 0) {
    pl::cli::ExitWithUsageError(program, "--sparse_disk_dir needs --sparse_memory_mb (the cap decides what goes to disk)");
  }
  // A shard's disk tier, attached before it restores or serves anything.
  auto attach_disk_tier = [&](pl::pserver::ParameterShard* s) -> pl::Status {
    if (sparse_disk_dir.empty()) return absl::OkStatus();
    PL_ASSIGN_OR_RETURN(std::unique_ptr<pl::pserver::DiskTier> tier,
                        pl::pserver::DiskTier::Open(sparse_disk_dir, sparse_cap_bytes));
    s->AttachDiskTier(std::move(tier));
    s->EnableEviction(sparse_cap_bytes);
    return absl::OkStatus();
  };
  const bool replicated = absl::GetFlag(FLAGS_replicas) > 1;
  const bool own_checkpoints = absl::GetFlag(FLAGS_replica_checkpoints);
  if (replicated && master.empty()) {
    pl::cli::ExitWithUsageError(program, "--replicas > 1 needs --master (the master keeps the shard's replica map)");
  }
  pl::log::SetProcessName(absl::StrCat("pserver-", index));
  pl::rpc::ConfigureTransportOrExit(program, pl::rpc::PserverIdentity(index));
  // --logdir, --metrics_port: a bad one ends the process here, before it serves.
  auto telemetry = pl::metrics::OpenTelemetryOrExit(program, "pserver", std::to_string(index), host);

  if (pipe(g_signal_pipe) != 0) return Fail("cannot create the signal pipe");
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  std::unique_ptr<pl::pserver::Checkpointer> checkpointer;
  std::unique_ptr<pl::pserver::ParameterShard> shard;
  std::string restored_from;
  // A replica learns from the master whether it is the shard's primary before it
  // restores anything (replicated_startup below).
  if (!checkpoint_dir.empty() && replicated) {
    checkpointer = std::make_unique<pl::pserver::Checkpointer>(checkpoint_dir, index, /*keep=*/2, full_every);
  } else if (!checkpoint_dir.empty()) {
    checkpointer = std::make_unique<pl::pserver::Checkpointer>(checkpoint_dir, index, /*keep=*/2, full_every);
    auto restored = checkpointer->RestoreLatest(num_pservers, attach_disk_tier);
    if (!restored.ok()) return Fail(std::string(restored.status().message()));
    if (restored->shard) {
      shard = std::move(restored->shard);
      restored_from = restored->path;
      pl::log::Info(absl::StrCat("restored ", restored_from, " (version ", shard->version(),
                                         shard->sync() ? ", sync)" : ", async)"));
    }
  }
  if (!shard) {
    shard = std::make_unique<pl::pserver::ParameterShard>(index, num_pservers);
    if (pl::Status attached = attach_disk_tier(shard.get()); !attached.ok()) return Fail(std::string(attached.message()));
  }

  // Trainers on this host may send their dense traffic through shared memory.
  pl::pserver::SharedRegionOptions shm;
  shm.enabled = absl::GetFlag(FLAGS_shm);
  shm.links_enabled = absl::GetFlag(FLAGS_dense_link);
  if (absl::GetFlag(FLAGS_dense_link_max_mb) < 0) {
    pl::cli::ExitWithUsageError(program, absl::StrCat("--dense_link_max_mb: ", absl::GetFlag(FLAGS_dense_link_max_mb),
                                                      " is negative"));
  }
  shm.max_link_bytes = absl::GetFlag(FLAGS_dense_link_max_mb) << 20;
  pl::pserver::PserverService service(shard.get(), checkpointer.get(), restored_from, shm);
  if (shm.links_enabled) {
    if (pl::Status opened = service.OpenDenseLinks(host); !opened.ok()) {
      pl::log::Warning(absl::StrCat("no dense links (trainers on other hosts use gRPC): ", opened.message()));
    }
  }
  pl::metrics::PserverSampler sampler(telemetry.get(), [&service] { return service.StatsNow(); });  // once a second
  pl::rpc::ServerOptions server_options;
  server_options.address = absl::StrCat(host, ":", port);
  server_options.max_message_bytes = max_mb << 20;
  server_options.num_threads = absl::GetFlag(FLAGS_threads);
  int bound_port = 0;
  auto server = pl::rpc::StartServer(server_options, {&service}, &bound_port);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  std::string advertise_host = absl::GetFlag(FLAGS_advertise_host);
  if (advertise_host.empty()) advertise_host = (host == "0.0.0.0" || host == "::") ? "127.0.0.1" : host;
  const std::string address = absl::StrCat(advertise_host, ":", bound_port);
  if (!port_file.empty()) {
    pl::Status written = pl::WriteFileAtomically(port_file, absl::StrCat(bound_port, "\n"));
    if (!written.ok()) return Fail(std::string(written.message()));
  }
  pl::log::Info(absl::StrCat("pserver ", index, " of ", num_pservers, ": serving on ", host, ":", bound_port,
                                     " (advertised as ", address, ")"));

  std::unique_ptr<pl::pserver::Replicator> replicator;
  if (replicated) {
    pl::pserver::ReplicatorOptions ro;
    ro.index = index;
    ro.master_address = master;
    ro.address = address;
    ro.listen_host = host;
    ro.heartbeat_every = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_ms));
    ro.snapshot_socket = absl::GetFlag(FLAGS_snapshot_socket);
    ro.snapshot_lanes = absl::GetFlag(FLAGS_snapshot_lanes);
    // The primary's stream to each backup carries its dense blocks through shared memory
    // to a backup on this host, else over a dense link whenever the backups take links
    // (their --shm and --dense_link, the defaults).
    const int stream_link_lanes = absl::GetFlag(FLAGS_stream_link_lanes);
    ro.stream_shm = absl::GetFlag(FLAGS_stream_shm);
    ro.stream_doorbell = absl::GetFlag(FLAGS_stream_doorbell);
    if (absl::GetFlag(FLAGS_stream_link)) {
      ro.stream_link_lanes =
          stream_link_lanes > 0 ? stream_link_lanes : pl::DefaultDenseLinkLanes(pl::rpc::TransportIsSecure());
    }
    if (ro.snapshot_lanes == 0) ro.snapshot_lanes = pl::pserver::DefaultSnapshotLanes(pl::rpc::TransportIsSecure());
    // Tests of the ack path (tests/dist/replication_test.cc) ask a primary to die there.
    if (const char* n = std::getenv("PL_TEST_DIE_AFTER_ACKED_UPDATES"); n != nullptr && *n != '\0') {
      ro.test_die_after_acked = std::atoll(n);
      const char* once = std::getenv("PL_TEST_DIE_ONCE_FILE");
      ro.test_die_once_file = once != nullptr ? once : "";
    }
    // Tests of a joiner slower than the trainers (tests/dist/replication_test.cc).
    if (const char* ms = std::getenv("PL_TEST_SLOW_JOINER_MS"); ms != nullptr && std::atoi(ms) > 0) {
      ro.test_slow_joiner = absl::Milliseconds(std::atoi(ms));
    }
    // Tests of entries batched in the stream's calls (tests/dist/replica_stream_link_test.cc).
    if (const char* ms = std::getenv("PL_TEST_SLOW_STREAM_CALL_MS"); ms != nullptr && std::atoi(ms) > 0) {
      ro.test_slow_stream_call = absl::Milliseconds(std::atoi(ms));
    }
    // Tests of a backup that applies behind what it acknowledged (replica_stream_link_test.cc).
    if (const char* ms = std::getenv("PL_TEST_SLOW_APPLY_MS"); ms != nullptr && std::atoi(ms) > 0) {
      ro.test_slow_apply = absl::Milliseconds(std::atoi(ms));
    }
    // Tests of a snapshot in many pieces (tests/dist/replication_test.cc) make them small
    // (and so ask for pieces, not the socket).
    if (const char* n = std::getenv("PL_TEST_SNAPSHOT_PIECE_BYTES"); n != nullptr && std::atoll(n) > 0) {
      ro.snapshot_piece_bytes = std::atoll(n);
      ro.snapshot_socket = false;
    }
    replicator = std::make_unique<pl::pserver::Replicator>(ro);
    if (const std::string id_file = absl::GetFlag(FLAGS_replica_id_file); !id_file.empty()) {
      pl::Status written = pl::WriteFileAtomically(id_file, absl::StrCat(absl::Hex(replicator->replica_id()), "\n"));
      if (!written.ok()) return Fail(absl::StrCat("--replica_id_file: ", written.message()));
    }
    shard->SetReplicationHook(replicator.get());
    service.SetReplicator(replicator.get());
    pl::Status started = ReplicatedStartup(replicator.get(), shard.get(), checkpointer.get(), &restored_from);
    if (!started.ok()) return Fail(std::string(started.message()));
    service.SetRestoredFrom(restored_from);
  }

  // Rows past their table's time to live, and beyond the cap, go in the background.
  pl::pserver::RowEvictor evictor(shard.get(), sparse_cap_bytes);

  std::unique_ptr<pl::pserver::MembershipWatcher> watcher;
  if (!master.empty()) {
    pl::pserver::MembershipWatcherOptions wo;
    wo.master_address = master;
    wo.register_index = replicated ? -1 : index;  // a replica registers through its Replicator
    wo.register_address = address;
    wo.num_pservers = num_pservers;
    pl::pserver::ParameterShard* shard_ptr = shard.get();
    watcher = std::make_unique<pl::pserver::MembershipWatcher>(
        wo, [shard_ptr](const std::vector<int64_t>& live) { shard_ptr->SetLiveTrainers(live); });
    watcher->Start();
  }

  // Main loop: signals, the checkpoint timer, and returning the message buffers of a
  // burst of traffic to the kernel once it has paused for --trim_idle_ms.
  const absl::Duration every = absl::Seconds(std::max(every_s, 1));
  absl::Time next_checkpoint = absl::Now() + every;
  // Sparse tables in the log: sizes and hot rows (x-deeplearning#85: hot shards nobody saw).
  const absl::Duration report_every = absl::Seconds(absl::GetFlag(FLAGS_table_report_every_s));
  absl::Time next_report = absl::Now() + report_every;
  pl::metrics::HotRowRates report_rates;
  int64_t calls_seen = 0;
  absl::Time last_traffic = absl::Now();
  bool trimmed = true;
  while (g_signal == 0) {
    if (replicator) {
      if (auto fatal = replicator->fatal()) {
        if (watcher) watcher->Stop();
        replicator->Stop();
        return Fail(*fatal);
      }
    }
    pollfd wake{g_signal_pipe[0], POLLIN, 0};
    (void)poll(&wake, 1, trim_idle_ms > 0 ? std::min(200, trim_idle_ms) : 200);
    if (g_signal != 0) break;
    if (const int64_t calls = service.data_calls(); calls != calls_seen) {
      calls_seen = calls;
      last_traffic = absl::Now();
      trimmed = false;
    } else if (!trimmed && trim_idle_ms > 0 && absl::Now() - last_traffic >= absl::Milliseconds(trim_idle_ms)) {
      shard->WaitForQueuedPushes();
      const int64_t before = pl::pserver::ResidentBytes();
      pl::ReleaseFreeHeapMemory();
      trimmed = true;
      pl::log::Info(absl::StrFormat("traffic paused for %d ms: freed buffers returned (rss %.1f MB -> %.1f MB)",
                                    trim_idle_ms, before / 1e6, pl::pserver::ResidentBytes() / 1e6));
    }
    service.DropIdleRegions();
    sampler.Tick();
    if (report_every > absl::ZeroDuration() && absl::Now() >= next_report) {
      next_report = absl::Now() + report_every;
      for (const std::string& line : pl::metrics::DescribeTables(service.StatsNow(), &report_rates, absl::Now())) {
        pl::log::Info(line);
      }
    }
    // Replicas sharing a directory leave the checkpoints to the primary.
    const bool may_checkpoint = !replicator || own_checkpoints || replicator->CheckPrimary().ok();
    if (checkpointer && may_checkpoint && every_s > 0 && absl::Now() >= next_checkpoint) {
      next_checkpoint = absl::Now() + every;
      // Nothing new since the last file: skip writing an identical one.
      if (shard->initialized() && shard->version() != service.checkpointed_version()) {
        (void)service.CheckpointNow();  // failure is logged; the next tick retries
      }
    }
  }
  const int signal_number = g_signal;
  pl::log::Info(absl::StrCat(strsignal(signal_number), " received; shutting down"));
  // The tables as they end (sizes, admissions, hottest rows), also when no report fell due.
  if (report_every > absl::ZeroDuration() && shard->initialized()) {
    for (const std::string& line : pl::metrics::DescribeTables(service.StatsNow(), &report_rates, absl::Now())) {
      pl::log::Info(line);
    }
  }
  if (watcher) watcher->Stop();
  const bool may_checkpoint = !replicator || own_checkpoints || replicator->CheckPrimary().ok();
  // Hands over (the backups hold every update taken) and tells the master, so that a
  // preempted primary's backup takes over at once.
  if (replicator) replicator->Leave(absl::Seconds(2));
  shard->Shutdown();  // wakes pulls waiting for a version
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  if (checkpointer && may_checkpoint && shard->initialized() && shard->version() != service.checkpointed_version()) {
    if (!service.CheckpointNow().ok()) return 1;
  }
  pl::log::Info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  pl::KeepLargeBuffersInHeap();
  pl::SkipMutexDeadlockChecks();
  return Run(argc, argv);
}
