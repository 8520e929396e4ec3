// pl-master: serves the master of one training job.
//
//   pl-master --port 0 --port_file PATH --state_dir DIR --data DIR_OR_FILE --passes N
//             --chunks_per_task K --lease_ms 3000 --max_failures 3 --num_pservers P --seed S
//             [--host 0.0.0.0]
//
// Environment fallbacks (used when the flag is absent): PL_MASTER_PORT, PL_STATE_DIR,
// PL_NUM_PSERVERS. If the state dir holds a job it is resumed (the data is not read);
// otherwise the job's tasks are cut from the record files under --data. The bound
// port is written to --port_file (atomically) once serving. The master keeps serving
// after the job is done, so trainers and the launcher can read JOB_DONE, until
// SIGTERM or SIGINT, then exits 0. On an error it prints one line and exits non-zero.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "master/master_service.h"
#include "paddle_like/data/chunk_index.h"
#include "paddle_like/io/atomic_file.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/store/local_dir_store.h"

namespace {

struct Flags {
  std::string host = "0.0.0.0";
  int64_t port = 0;
  std::string port_file;
  std::string state_dir;
  std::string data;
  int64_t passes = 1;
  int64_t chunks_per_task = 1;
  int64_t lease_ms = 3000;
  int64_t max_failures = 3;
  int64_t num_pservers = 1;
  uint64_t seed = 0;
};

[[noreturn]] void Fail(const std::string& line, int code = 1) {
  std::cerr << "pl-master: " << line << std::endl;
  std::exit(code);
}

int64_t ParseInt(const std::string& name, const std::string& value, int64_t min) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) Fail(absl::StrCat("--", name, ": '", value, "' is not an integer"), 2);
  if (v < min) Fail(absl::StrCat("--", name, ": ", v, " is below the minimum ", min), 2);
  return v;
}

Flags ParseFlags(int argc, char** argv) {
  std::map<std::string, std::string> given;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << "usage: pl-master --state_dir DIR --data DIR_OR_FILE [--port 0] [--port_file PATH] [--host ADDR]\n"
                   "                 [--passes N] [--chunks_per_task K] [--lease_ms MS] [--max_failures F]\n"
                   "                 [--num_pservers P] [--seed S]\n";
      std::exit(0);
    }
    if (arg.rfind("--", 0) != 0) Fail(absl::StrCat("unexpected argument '", arg, "'"), 2);
    std::string name = arg.substr(2), value;
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      if (i + 1 >= argc) Fail(absl::StrCat("--", name, " needs a value"), 2);
      value = argv[++i];
    }
    given[name] = value;
  }
  // Environment variables stand in for absent flags.
  const std::pair<const char*, const char*> env[] = {
      {"port", "PL_MASTER_PORT"}, {"state_dir", "PL_STATE_DIR"}, {"num_pservers", "PL_NUM_PSERVERS"}};
  for (const auto& [flag, var] : env) {
    const char* v = std::getenv(var);
    if (!given.count(flag) && v != nullptr && *v != '\0') given[flag] = v;
  }
  Flags f;
  for (const auto& [name, value] : given) {
    if (name == "host") f.host = value;
    else if (name == "port") f.port = ParseInt(name, value, 0);
    else if (name == "port_file") f.port_file = value;
    else if (name == "state_dir") f.state_dir = value;
    else if (name == "data") f.data = value;
    else if (name == "passes") f.passes = ParseInt(name, value, 1);
    else if (name == "chunks_per_task") f.chunks_per_task = ParseInt(name, value, 1);
    else if (name == "lease_ms") f.lease_ms = ParseInt(name, value, 1);
    else if (name == "max_failures") f.max_failures = ParseInt(name, value, 1);
    else if (name == "num_pservers") f.num_pservers = ParseInt(name, value, 0);
    else if (name == "seed") f.seed = static_cast<uint64_t>(ParseInt(name, value, 0));
    else Fail(absl::StrCat("unknown flag --", name, " (see --help)"), 2);
  }
  if (f.port > 65535) Fail(absl::StrCat("--port: ", f.port, " is not a port number"), 2);
  if (f.state_dir.empty()) Fail("no state directory: pass --state_dir DIR (or set PL_STATE_DIR)", 2);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);

  // Signals are taken synchronously by this thread; block them before any thread starts
  // so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto store = pl::LocalDirStore::Open(flags.state_dir);
  if (!store.ok()) Fail(std::string(store.status().message()));

  pl::MasterOptions options;
  options.queue.num_passes = static_cast<int32_t>(flags.passes);
  options.queue.chunks_per_task = static_cast<int32_t>(flags.chunks_per_task);
  options.queue.max_failures = static_cast<int32_t>(flags.max_failures);
  options.queue.seed = flags.seed;
  options.num_pservers = static_cast<int32_t>(flags.num_pservers);
  options.lease_ms = flags.lease_ms;
  const std::string data = flags.data;
  auto chunks = [&data]() -> pl::StatusOr<std::vector<pl::ChunkInfo>> {
    if (data.empty()) return absl::InvalidArgumentError("no job to resume and no data: pass --data DIR_OR_FILE");
    auto listed = pl::ListChunks(data);
    if (!listed.ok()) return pl::Annotate(listed.status(), "cannot cut the job into tasks (--data)");
    std::vector<pl::ChunkInfo> list = std::move(listed).value();
    if (list.empty()) return absl::NotFoundError(absl::StrCat("no record files (*.plrec) with chunks under '", data, "'"));
    return list;
  };
  auto master = pl::Master::Open(options, store->get(), chunks);
  if (!master.ok()) Fail(std::string(master.status().message()));

  pl::MasterService service(master->get());
  pl::rpc::ServerOptions server_options;
  server_options.address = absl::StrCat(flags.host, ":", flags.port);
  int bound_port = 0;
  auto server = pl::rpc::StartServer(server_options, {&service}, &bound_port);
  if (!server.ok()) Fail(std::string(server.status().message()));
  if (!flags.port_file.empty()) {
    pl::Status st = pl::WriteFileAtomically(flags.port_file, absl::StrCat(bound_port, "\n"));
    if (!st.ok()) Fail(absl::StrCat("cannot write the port file: ", st.message()));
  }
  std::cerr << "pl-master: serving on " << flags.host << ":" << bound_port << " (" << (*master)->Summary() << ")"
            << std::endl;

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  std::cerr << "pl-master: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << ", stopping (" << (*master)->Summary()
            << ")" << std::endl;
  // gRPC's sync server waits out the whole deadline while any client keeps a connection
  // open, so the grace is short: every reply is already stored, and a cut call is retried.
  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(250));
  server->reset();
  master->reset();
  return 0;
}
