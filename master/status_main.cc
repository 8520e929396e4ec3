// pl-status: prints a job's status, as its master's status page shows it, in a terminal.
//
//   pl-status HOST:PORT       (the master's --http_port; pl-launch prints "status page: ...")
//   pl-status http://HOST:PORT/   (the same, as a browser shows it)
//
// One line on stderr and exit 1 when the page cannot be read.
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/core/runtime.h"
#include "paddle_like/metrics/http_server.h"

int main(int argc, char** argv) {
  pl::SkipMutexDeadlockChecks();
  const pl::cli::Program program = {"pl-status", "HOST:PORT",
                                    "Prints the status of the job whose master serves its status page on HOST:PORT\n"
                                    "(pl-master --http_port, pl-launch --http_port).",
                                    {}, /*max_positional=*/1};
  const pl::cli::CommandLine line = pl::cli::ParseOrExit(program, argc, argv);
  if (line.positional.size() != 1) pl::cli::ExitWithUsageError(program, "give the status page's HOST:PORT");
  // HOST:PORT, or the page's URL as a browser shows it (http://HOST:PORT/).
  std::string where = line.positional[0];
  if (where.rfind("http://", 0) == 0) where = where.substr(7);
  if (const size_t slash = where.find('/'); slash != std::string::npos) where = where.substr(0, slash);
  const size_t colon = where.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(where.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    pl::cli::ExitWithUsageError(program, "'" + line.positional[0] + "' is not HOST:PORT (or http://HOST:PORT/)");
  }
  std::string host = where.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  auto text = pl::metrics::HttpGet(host, port, "/status.txt");
  if (!text.ok()) {
    std::fprintf(stderr, "pl-status: %s\n", std::string(text.status().message()).c_str());
    return 1;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}
