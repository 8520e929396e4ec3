// Every binary, as a real process, speaks pl::cli's dialect: --help lists each of its
// flags with its default on stdout and exits 0; --version prints the project version and
// the commit; an unknown flag or a bad value is one line on stderr naming the flag, exit
// status 2. Also the defects these replace: "--shm false", "--version needs a value".
#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/testing/process.h"

namespace pl {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Flag {
  std::string name;
  std::string shown;  // what --help prints in parentheses, up to the env variable
};

struct Binary {
  std::string name;
  bool optional;                    // built only with OpenBLAS / CUDA
  std::vector<std::string> bad_value;  // a value that does not parse, or is out of range
  std::string bad_flag;             // the flag bad_value names
  std::vector<Flag> flags;          // every flag of the program
};

// The test's name in ctest's list: the binary's.
void PrintTo(const Binary& b, std::ostream* os) { *os << b.name; }

const std::vector<Binary>& Binaries() {
  static const auto* const binaries = new std::vector<Binary>{
      {"pl-trainer", false, {"--epochs", "abc"}, "--epochs",
       {{"admit_after", "int64, default 0"},
        {"batch_size", "int64, default 64"},       {"ctr_fields", "int64, default 8"},
        {"data", "string, default \"\""},          {"defer_apply", "bool, default false"},
        {"dense_link_lanes", "int32, default -1"},
        {"device", "string, default \"auto\""},    {"epochs", "int32, default 5"},
        {"eval_each_epoch", "bool, default false"}, {"evict_after_s", "int64, default 0"},
        {"insecure", "bool, default false"},
        {"local_steps", "int32, default 1"},
        {"log_every_s", "double, default 2"},
        {"logdir", "string, default \"\", env PL_LOGDIR"},
        {"lr", "double, default 0.001"},           {"master", "string, default \"\", env PL_MASTER_ADDR"},
        {"metrics_port", "int32, default -1, env PL_METRICS_PORT"},
        {"metrics_port_file", "string, default \"\", env PL_METRICS_PORT_FILE"},
        {"model", "string, default \"mlp\""},      {"momentum", "double, default 0.9"},
        {"optimizer", "string, default \"adam\""}, {"optimizer_args", "string, default \"\""},
        {"pipeline", "bool, default false"},
        {"rank", "string, default \"\", env PL_TRAINER_RANK"}, {"save", "string, default \"\""},
        {"seed", "uint64, default 1"},             {"shm", "bool, default true"},
        {"sync", "bool, default false, env PL_SYNC"}, {"test_data", "string, default \"\""},
        {"test_limit", "int64, default 0"},        {"threads", "int32, default 0"},
        {"tls_dir", "string, default \"\", env PL_TLS_DIR"},
        {"train_limit", "int64, default 0"},       {"weight_decay", "double, default 0"},
        {"wire_dtype", "string, default \"float32\""}}},
      {"pl-pserver", false, {"--shm=maybe"}, "--shm",
       {{"advertise_host", "string, default \"\", env PL_ADVERTISE_HOST"},
        {"apply_threads", "int32, default 0"},
        {"checkpoint_dir", "string, default \"\", env PL_CHECKPOINT_DIR"},
        {"checkpoint_every_s", "int32, default 10"},
        {"dense_link", "bool, default true"},
        {"dense_link_max_mb", "int64, default 0"},
        {"full_checkpoint_every", "int32, default 10"},
        {"gradient_norm_ratio", "double, default 100"},
        {"heartbeat_ms", "int32, default 100"},
        {"host", "string, default \"127.0.0.1\""},
        {"index", "int32, default -1, env PL_PSERVER_INDEX"},
        {"insecure", "bool, default false"},
        {"logdir", "string, default \"\""},
        {"metrics_port", "int32, default -1"},
        {"metrics_port_file", "string, default \"\""},
        {"master", "string, default \"\", env PL_MASTER_ADDR"},
        {"max_gradient_norm", "double, default 0"},
        {"max_memory_mb", "int64, default 0"},
        {"max_message_mb", "int32, default 256"},
        {"num_pservers", "int32, default 0, env PL_NUM_PSERVERS"},
        {"port", "int32, default 0"},
        {"port_file", "string, default \"\""},
        {"replicas", "int32, default 1"},
        {"replica_checkpoints", "bool, default false"},
        {"replica_id_file", "string, default \"\""},
        {"shm", "bool, default true"},
        {"snapshot_lanes", "int32, default 0, env PL_SNAPSHOT_LANES"},
        {"snapshot_shm", "bool, default true, env PL_SNAPSHOT_SHM"},
        {"snapshot_socket", "bool, default true"},
        {"sparse_disk_dir", "string, default \"\""},
        {"sparse_memory_mb", "int64, default 0"},
        {"stream_doorbell", "bool, default true, env PL_STREAM_DOORBELL"},
        {"stream_link", "bool, default true, env PL_STREAM_LINK"},
        {"stream_link_lanes", "int32, default 0, env PL_STREAM_LINK_LANES"},
        {"stream_shm", "bool, default true, env PL_STREAM_SHM"},
        {"table_report_every_s", "int32, default 60"},
        {"threads", "int32, default 0"},
        {"tls_dir", "string, default \"\", env PL_TLS_DIR"},
        {"trim_idle_ms", "int32, default 1000"}}},
      {"pl-master", false, {"--passes", "zero"}, "--passes",
       {{"campaign_delay_ms", "int64, default 0"},
        {"chunks_per_task", "int32, default 1"},
        {"data", "string, default \"\""},
        {"etcd_endpoints", "string, default \"\""},
        {"etcd_prefix", "string, default \"/paddle_like/job\""},
        {"etcd_tls_dir", "string, default \"\""},
        {"host", "string, default \"127.0.0.1\""},
        {"http_port", "int32, default -1"},
        {"http_port_file", "string, default \"\""},
        {"insecure", "bool, default false"},
        {"leader_ttl_s", "int64, default 2"},
        {"lease_ms", "int64, default 3000"},
        {"logdir", "string, default \"\""},
        {"metrics_port", "int32, default -1"},
        {"metrics_port_file", "string, default \"\""},
        {"max_failures", "int32, default 3"},
        {"num_nodes", "int32, default 1"},
        {"num_pservers", "int32, default 1, env PL_NUM_PSERVERS"},
        {"passes", "int32, default 1"},
        {"port", "int32, default 0, env PL_MASTER_PORT"},
        {"port_file", "string, default \"\""},
        {"pserver_lease_ms", "int64, default 800"},
        {"replicas", "int32, default 0"},
        {"seed", "uint64, default 0"},
        {"state_dir", "string, default \"\", env PL_STATE_DIR"},
        {"event_log", "bool, default true"},
        {"overlap_passes", "bool, default true"},
        {"tls_dir", "string, default \"\", env PL_TLS_DIR"},
        {"virtual_trainers", "int32, default 0"}}},
      {"pl-launch", false, {"--pservers", "two", "--trainers", "1", "--", "true"}, "--pservers",
       {{"add_trainer_after_s", "double, default -1"},
        {"allow_losses", "bool, default false"},
        {"overlap_passes", "bool, default true"},
        {"checkpoint_every_s", "int32, default 30"},
        {"chunks_per_task", "int32, default 1"},
        {"control", "string, default \"\""},
        {"data", "string, default \"\""},
        {"etcd_port", "int32, default 2379"},
        {"http_port", "int32, default -1"},
        {"insecure", "bool, default false"},
        {"kill_trainer_after_s", "double, default -1"},
        {"lease_ms", "int64, default 3000"},
        {"leave_grace_ms", "int64, default 600"},
        {"logdir", "string, default \"\""},
        {"make_ca", "string, default \"\""},
        {"master_addr", "string, default \"\""},
        {"master_wait_s", "double, default 60"},
        {"metrics_port", "int32, default -1"},
        {"nnodes", "int32, default 1"},
        {"node_addr", "string, default \"\""},
        {"node_rank", "int32, default 0"},
        {"passes", "int32, default 1"},
        {"progress_every_s", "double, default 5"},
        {"pservers", "int32, default 0"},
        {"replicas", "int32, default 0"},
        {"seed", "uint64, default 0"},
        {"sparse_disk", "bool, default false"},
        {"sparse_memory_mb", "int64, default 0"},
        {"sync", "bool, default false"},
        {"tls_ca", "string, default \"\""},
        {"trainers", "int32, default 0"},
        {"virtual_trainers", "int32, default 0"},
        {"workdir", "string, default \"\""}}},
      {"pl-status", false, {"--nope"}, "--nope", {}},
      {"pl-autoscale", false, {"--period_ms", "5"}, "--period_ms",
       {{"cluster", "string, default \"\", env PL_CLUSTER_FILE"},
        {"cooldown_ms", "int64, default 5000"},
        {"http_host", "string, default \"127.0.0.1\""},
        {"http_port", "int32, default -1"},
        {"http_port_file", "string, default \"\""},
        {"insecure", "bool, default false"},
        {"logdir", "string, default \"\", env PL_LOGDIR"},
        {"metrics_port", "int32, default -1, env PL_METRICS_PORT"},
        {"metrics_port_file", "string, default \"\", env PL_METRICS_PORT_FILE"},
        {"period_ms", "int64, default 250"},
        {"rpc_timeout_ms", "int64, default 500"},
        {"settle_ms", "int64, default 1000"},
        {"tls_dir", "string, default \"\", env PL_TLS_DIR"}}},
      {"pl-sim-elastic", false, {"--cooldown_ms", "soon"}, "--cooldown_ms",
       {{"cooldown_ms", "int64, default 2000"},
        {"curves", "string, default \"\""},
        {"jobs_csv", "string, default \"\""},
        {"max_drain_s", "double, default -1"},
        {"mode", "string, default \"both\""},
        {"settle_ms", "int64, default 500"},
        {"timeline", "string, default \"\""},
        {"trace", "string, default \"\""}}},
      {"pl-convert", false, {"idx", "--records_per_chunk", "many"}, "--records_per_chunk",
       {{"images", "string, default \"\""},
        {"labels", "string, default \"\""},
        {"out", "string, default \"\""},
        {"records_per_chunk", "int64, default 1000"}}},
      {"pl-gen-clicks", false, {"--train", "lots"}, "--train",
       {{"bias", "double, default -1"},
        {"fields", "int32, default 8"},
        {"out", "string, default \"\""},
        {"records_per_chunk", "int64, default 1000"},
        {"seed", "uint64, default 1"},
        {"sigma", "double, default 0.8"},
        {"test", "int64, default 100000"},
        {"train", "int64, default 500000"},
        {"vocab", "int64, default 500"},
        {"zipf", "double, default 1.1"}}},
      {"pl-bench-core", true, {"--eigen_threads", "x"}, "--eigen_threads",
       {{"data", "string, default \"\""},
        {"eigen_threads", "int32, default 0"},
        {"only", "list, default \"\""},
        {"quick", "bool, default false"},
        {"threads", "list, default \"1,2\""}}},
      {"pl-bench-ps", false, {"--only", "nothing"}, "--only",
       {{"bed", "bool, default false"},
        {"dense_link_lanes", "int32, default -1"},
        {"only", "list, default \"\""},
        {"quick", "bool, default false"}}},
      {"pl-bench-tls", false, {"--rounds", "zero"}, "--rounds", {{"rounds", "int32, default 3"}}},
      {"pl-bench-checkpoint", false, {"--rows", "many"}, "--rows",
       {{"changed_percent", "double, default 1"},
        {"dim", "int64, default 16"},
        {"dir", "string, default \"/tmp\""},
        {"rows", "int64, default 1000000"}}},
      {"pl-bench-dist", false, {"--quick=maybe"}, "--quick",
       {{"data", "string, default \"\""}, {"only", "list, default \"\""}, {"passes", "int32, default 1"},
        {"quick", "bool, default false"}}},
      {"pl-bench-telemetry", false, {"--rounds", "1"}, "--rounds",
       {{"block", "int32, default 100"},
        {"data", "string, default \"\""},
        {"job_runs", "int32, default 2"},
        {"quick", "bool, default false"},
        {"rounds", "int32, default 12"}}},
      {"pl-bench-gpu", true, {"--tf32=perhaps"}, "--tf32", {{"tf32", "bool, default false"}}},
      {"pl-bench-scaling", true, {"--reps", "several"}, "--reps",
       {{"bin_dir", "string, default \"\""},
        {"chunks_per_task", "int32, default 2"},
        {"csv", "string, default \"\""},
        {"data", "string, default \"\""},
        {"dense_link_lanes", "int32, default -1"},
        {"pipeline", "bool, default false"},
        {"pservers", "list, default \"\""},
        {"quick", "bool, default false"},
        {"rates_mbit", "list, default \"10000,1000\""},
        {"reps", "int32, default 0"},
        {"samples", "int64, default 0"},
        {"tls", "bool, default false"},
        {"trainers", "list, default \"\""},
        {"wire_dtype", "string, default \"float32\""}}},
  };
  return *binaries;
}

struct Outcome {
  int code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs binary `name` with `args` (and `env` added) to completion, stdout and stderr apart.
Outcome RunBinary(const std::string& path, const std::vector<std::string>& args, const testing::EnvVars& env = {}) {
  testing::TempDir dir;
  std::vector<std::string> argv = {"/bin/sh", "-c", "err=$1; shift; exec \"$@\" 2>\"$err\"", "sh",
                                   dir.path() + "/err", path};
  argv.insert(argv.end(), args.begin(), args.end());
  Outcome run;
  auto child = testing::Spawn(argv, dir.path() + "/out", env);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return run;
  auto exit = testing::WaitForExit(**child, 60s);
  EXPECT_TRUE(exit.ok()) << exit.status();
  if (exit.ok()) run.code = exit->exited && exit->signal == 0 ? exit->code : 128 + exit->signal;
  run.out = testing::ReadFileOrEmpty(dir.path() + "/out");
  run.err = testing::ReadFileOrEmpty(dir.path() + "/err");
  return run;
}

// The one line a refused command line prints: "<program>: error: <fragment>...".
void ExpectOneErrorLine(const Outcome& run, const std::string& program, const std::string& fragment) {
  EXPECT_EQ(run.code, cli::kUsageExitCode) << run.err;
  EXPECT_THAT(run.err, StartsWith(program + ": error: ")) << run.err;
  EXPECT_THAT(run.err, HasSubstr(fragment));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.back(), '\n');
  EXPECT_EQ(run.out, "");
}

class BinaryCliTest : public ::testing::TestWithParam<Binary> {
 protected:
  void SetUp() override {
    auto path = testing::BinaryPath(GetParam().name);
    if (!path.ok() && GetParam().optional) GTEST_SKIP() << path.status() << " (not built on this machine)";
    ASSERT_TRUE(path.ok()) << path.status();
    path_ = *path;
  }
  Outcome Exec(const std::vector<std::string>& args, const testing::EnvVars& env = {}) {
    return RunBinary(path_, args, env);
  }
  std::string path_;
};

TEST_P(BinaryCliTest, HelpListsEveryFlagWithItsDefaultOnStdoutAndExitsZero) {
  const Binary& b = GetParam();
  const Outcome run = Exec({"--help"});
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  EXPECT_THAT(run.out, StartsWith("usage: " + b.name + " "));
  for (const Flag& f : b.flags) EXPECT_THAT(run.out, HasSubstr("\n  --" + f.name + " (" + f.shown + ")\n"));
  // Exactly these flags: none of absl's own, none undocumented here.
  int listed = 0;
  for (absl::string_view row : absl::StrSplit(run.out, '\n')) {
    listed += std::regex_search(std::string(row), std::regex("^  --\\w+ \\("));
  }
  EXPECT_EQ(listed, static_cast<int>(b.flags.size())) << run.out;
  EXPECT_THAT(run.out, HasSubstr("\n  --version\n"));

  const Outcome short_form = Exec({"-h"});
  EXPECT_EQ(short_form.code, 0);
  EXPECT_EQ(short_form.out, run.out);
}

TEST_P(BinaryCliTest, VersionPrintsTheProjectVersionAndTheCommitAndExitsZero) {
  const Binary& b = GetParam();
  const Outcome run = Exec({"--version"});
  EXPECT_EQ(run.code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  const std::regex expected(b.name + " [0-9.]+ \\(commit ([0-9a-f]{40}|unknown)\\)\n");
  EXPECT_TRUE(std::regex_match(run.out, expected)) << run.out;
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat(" ", PL_EXPECTED_VERSION, " (commit ")));
}

TEST_P(BinaryCliTest, AnUnknownFlagIsOneLineNamingIt) {
  const Binary& b = GetParam();
  ExpectOneErrorLine(Exec({"--no_such_flag=1"}), b.name, "unknown flag --no_such_flag");
}

TEST_P(BinaryCliTest, ABadValueIsOneLineNamingTheFlag) {
  const Binary& b = GetParam();
  ExpectOneErrorLine(Exec(b.bad_value), b.name, b.bad_flag);
}

INSTANTIATE_TEST_SUITE_P(Every, BinaryCliTest, ::testing::ValuesIn(Binaries()),
                         [](const ::testing::TestParamInfo<Binary>& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// Both binaries that take --shm now share absl's bool dialect: "--shm false" is refused
// naming the flag (it used to switch shared memory off on pl-pserver and be ignored as
// a stray argument on pl-trainer); --shm=false and --noshm are accepted.
TEST(ShmFlagTest, ASeparateBoolValueIsRefusedNamingTheFlag) {
  for (const std::string name : {"pl-pserver", "pl-trainer"}) {
    auto path = testing::BinaryPath(name);
    ASSERT_TRUE(path.ok()) << path.status();
    ExpectOneErrorLine(RunBinary(*path, {"--shm", "false"}), name, "--shm takes no separate value ('false')");
    ExpectOneErrorLine(RunBinary(*path, {"--shm", "maybe"}), name, "--shm");
  }
  auto pserver = testing::BinaryPath("pl-pserver");
  ASSERT_TRUE(pserver.ok());
  // Parsed fine: the run stops at the next check, a value check naming --num_pservers.
  for (const char* off : {"--shm=false", "--noshm"}) {
    ExpectOneErrorLine(RunBinary(*pserver, {off, "--index", "0"}), "pl-pserver", "--num_pservers");
  }
}

// Lane counts are checked before the pserver serves anything, naming the flag and its range.
TEST(PserverLanesTest, ALaneCountOutOfRangeIsRefusedBeforeServing) {
  auto pserver = testing::BinaryPath("pl-pserver");
  ASSERT_TRUE(pserver.ok()) << pserver.status();
  ExpectOneErrorLine(RunBinary(*pserver, {"--index", "0", "--num_pservers", "1", "--stream_link_lanes", "99"}),
                     "pl-pserver", "--stream_link_lanes: 99 is not in [0, 16]");
  ExpectOneErrorLine(RunBinary(*pserver, {"--index", "0", "--num_pservers", "1"}, {{"PL_SNAPSHOT_LANES", "-1"}}),
                     "pl-pserver", "--snapshot_lanes: -1 is not in [0, 16]");
}

// Issue 36's flags: a --local_steps the model or mode cannot honour, and a negative
// --apply_threads, are refused with one line naming the flag before anything starts
// (no master is listening at the address given).
TEST(LocalStepsFlagTest, WhatCannotBeHonouredIsRefusedBeforeStarting) {
  auto trainer = testing::BinaryPath("pl-trainer");
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  const std::vector<std::string> job = {"--master", "127.0.0.1:1"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> argv = job;
    argv.insert(argv.end(), more.begin(), more.end());
    return argv;
  };
  ExpectOneErrorLine(RunBinary(*trainer, with({"--local_steps", "0"})), "pl-trainer", "--local_steps must be >= 1, got 0");
  ExpectOneErrorLine(RunBinary(*trainer, with({"--local_steps", "4", "--model", "ctr"})), "pl-trainer",
                     "--local_steps 4 needs a model of dense parameters only");
  ExpectOneErrorLine(RunBinary(*trainer, with({"--local_steps", "4", "--pipeline"})), "pl-trainer",
                     "--local_steps 4 cannot be combined with --pipeline");
  ExpectOneErrorLine(RunBinary(*trainer, {"--local_steps", "4"}), "pl-trainer",
                     "--local_steps: only for a distributed trainer");
  auto pserver = testing::BinaryPath("pl-pserver");
  ASSERT_TRUE(pserver.ok()) << pserver.status();
  ExpectOneErrorLine(RunBinary(*pserver, {"--index", "0", "--num_pservers", "1", "--apply_threads", "-1"}),
                     "pl-pserver", "--apply_threads");
}

// A standby master: etcd needs a fixed port (the trainers get every master's address
// before any leads), a prefix etcd can hold, endpoints that are host:port.
TEST(StandbyMasterFlagsTest, BadEtcdSettingsAreRefusedInOneLineNamingThem) {
  auto master = testing::BinaryPath("pl-master");
  ASSERT_TRUE(master.ok()) << master.status();
  const std::vector<std::string> etcd = {"--insecure", "--etcd_endpoints", "127.0.0.1:2379"};
  auto with = [&etcd](std::vector<std::string> more) {
    more.insert(more.begin(), etcd.begin(), etcd.end());
    return more;
  };
  ExpectOneErrorLine(RunBinary(*master, with({"--data", "x"})), "pl-master", "--etcd_endpoints needs a fixed --port");
  ExpectOneErrorLine(RunBinary(*master, with({"--port", "1", "--leader_ttl_s", "0"})), "pl-master", "--leader_ttl_s");
  ExpectOneErrorLine(RunBinary(*master, with({"--port", "1", "--etcd_prefix", "job/"})), "pl-master",
                     "--etcd_prefix 'job/' must start with '/'");
  ExpectOneErrorLine(RunBinary(*master, {"--insecure", "--etcd_endpoints", "etcd-0", "--port", "1"}), "pl-master",
                     "etcd endpoint 'etcd-0' is not host:port");
}

// Issue 38's: a negative grace between a shrink's SIGUSR1 and its SIGTERM.
TEST(LeaveGraceFlagTest, ANegativeGraceIsRefusedBeforeStarting) {
  auto launch = testing::BinaryPath("pl-launch");
  ASSERT_TRUE(launch.ok()) << launch.status();
  ExpectOneErrorLine(
      RunBinary(*launch, {"--pservers", "1", "--trainers", "1", "--leave_grace_ms", "-5", "--", "true"}),
      "pl-launch", "--leave_grace_ms: -5 is below the minimum 0");
}

// The environment stands in for an absent flag (read in main only); the command line
// overrides it; a bad value names the variable.
TEST(EnvironmentFallbackTest, PserverReadsItsRoleFromTheEnvironment) {
  auto pserver = testing::BinaryPath("pl-pserver");
  ASSERT_TRUE(pserver.ok()) << pserver.status();
  ExpectOneErrorLine(RunBinary(*pserver, {}, {{"PL_PSERVER_INDEX", "5"}, {"PL_NUM_PSERVERS", "2"}}), "pl-pserver",
                     "--index (or PL_PSERVER_INDEX) 5 must be in [0, 2)");
  ExpectOneErrorLine(RunBinary(*pserver, {"--index", "0"}, {{"PL_NUM_PSERVERS", "abc"}}), "pl-pserver",
                     "PL_NUM_PSERVERS (for --num_pservers): 'abc' is not an integer");
  // Overridden, the bad variable is never read: the first complaint is about --port.
  ExpectOneErrorLine(
      RunBinary(*pserver, {"--index", "0", "--num_pservers", "1", "--port", "70000"}, {{"PL_NUM_PSERVERS", "abc"}}),
      "pl-pserver", "--port: 70000 is not in [0, 65535]");
}

}  // namespace
}  // namespace pl
