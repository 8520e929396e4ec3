// The binaries' telemetry flags, on real processes: /metrics served on a port picked
// free and written to a port file, and bad input refused at start with one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>

#include "absl/strings/match.h"
#include "paddle_like/metrics/http_server.h"
#include "paddle_like/testing/process.h"

namespace pl {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

struct Finished {
  ExitInfo exit;
  std::string output;
};

Finished RunToEnd(const std::vector<std::string>& argv, const std::string& out) {
  auto child = pl::testing::Spawn(argv, out);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return {};
  auto exit = pl::testing::WaitForExit(**child, 30s);
  EXPECT_TRUE(exit.ok()) << exit.status();
  return {exit.ok() ? *exit : ExitInfo{}, pl::testing::ReadFileOrEmpty(out)};
}

TEST(TelemetryProcessTest, PserverServesMetricsAndWritesEvents) {
  pl::testing::TempDir dir;
  auto bin = pl::testing::BinaryPath("pl-pserver");
  ASSERT_TRUE(bin.ok()) << bin.status();
  auto ps = pl::testing::Spawn({*bin, "--index", "1", "--num_pservers", "2", "--host", "127.0.0.1", "--port_file",
                                dir.path() + "/port", "--metrics_port", "0", "--metrics_port_file",
                                dir.path() + "/metrics.port", "--logdir", dir.path() + "/logs"},
                               dir.path() + "/out");
  ASSERT_TRUE(ps.ok()) << ps.status();
  // The metrics port file comes first: when the service's port file exists, it does too.
  ASSERT_TRUE(pl::testing::WaitForPortFile(dir.path() + "/port", 30s, ps->get()).ok());
  auto port = pl::testing::WaitForPortFile(dir.path() + "/metrics.port", 1s, ps->get());
  ASSERT_TRUE(port.ok()) << port.status();
  std::string text;
  // Sampled once a second from the pserver's main loop.
  EXPECT_TRUE(pl::testing::WaitUntil(
      [&] {
        auto body = metrics::HttpGet("127.0.0.1", *port, "/metrics");
        text = body.ok() ? *body : "";
        return absl::StrContains(text, "pl_pserver_resident_bytes{index=\"1\",role=\"pserver\"}");
      },
      10s))
      << text;
  EXPECT_THAT(text, HasSubstr("pl_pserver_pushes_total{index=\"1\",role=\"pserver\"} 0"));
  ASSERT_TRUE((*ps)->Signal(SIGTERM).ok());
  auto exit = pl::testing::WaitForExit(**ps, 30s);
  ASSERT_TRUE(exit.ok() && exit->success()) << pl::testing::ReadFileOrEmpty(dir.path() + "/out");
  EXPECT_THAT(pl::testing::ReadFileOrEmpty(dir.path() + "/out"),
              HasSubstr(absl::StrCat("metrics: serving /metrics on 127.0.0.1:", *port)));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/logs/pserver-1")) {
    files += absl::StartsWith(e.path().filename().string(), "events.out.tfevents.");
  }
  EXPECT_EQ(files, 1);
}

TEST(TelemetryProcessTest, UnwritableLogdirIsOneLineAndExit2) {
  pl::testing::TempDir dir;
  for (const char* name : {"pl-master", "pl-pserver", "pl-trainer"}) {
    auto bin = pl::testing::BinaryPath(name);
    ASSERT_TRUE(bin.ok()) << bin.status();
    std::vector<std::string> argv = {*bin, "--logdir", "/proc/version/logs"};
    if (std::string(name) == "pl-master") argv.insert(argv.end(), {"--state_dir", dir.path() + "/state"});
    if (std::string(name) == "pl-pserver") argv.insert(argv.end(), {"--index", "0", "--num_pservers", "1"});
    if (std::string(name) == "pl-trainer") argv.insert(argv.end(), {"--master", "127.0.0.1:1"});
    const Finished run = RunToEnd(argv, dir.path() + "/" + name + ".out");
    EXPECT_EQ(run.exit.code, 2) << name << ": " << run.output;
    EXPECT_THAT(run.output, HasSubstr(absl::StrCat(name, ": error: --logdir: cannot create the log directory "
                                                         "'/proc/version/logs/")))
        << name;
  }
}

TEST(TelemetryProcessTest, MetricsPortInUseNamesIt) {
  pl::testing::TempDir dir;
  auto held = metrics::HttpServer::Start({"0.0.0.0", 0}, [](const std::string&) { return metrics::HttpResponse{}; });
  ASSERT_TRUE(held.ok()) << held.status();
  const int port = (*held)->port();
  auto bin = pl::testing::BinaryPath("pl-pserver");
  ASSERT_TRUE(bin.ok()) << bin.status();
  const Finished run = RunToEnd({*bin, "--index", "0", "--num_pservers", "1", "--metrics_port", std::to_string(port)},
                           dir.path() + "/out");
  EXPECT_EQ(run.exit.code, 1) << run.output;
  EXPECT_THAT(run.output, HasSubstr(absl::StrCat("--metrics_port: cannot listen on 127.0.0.1:", port,
                                                 ": Address already in use")));
  // The master's status page port too.
  auto master = pl::testing::BinaryPath("pl-master");
  ASSERT_TRUE(master.ok()) << master.status();
  const Finished page = RunToEnd({*master, "--state_dir", dir.path() + "/state", "--data", "/nonexistent",
                                  "--http_port", std::to_string(port)},
                                 dir.path() + "/out-master");
  EXPECT_EQ(page.exit.code, 1) << page.output;
  EXPECT_THAT(page.output, HasSubstr(absl::StrCat("--http_port: cannot listen on 127.0.0.1:", port,
                                                  ": Address already in use")));
  const Finished range = RunToEnd({*bin, "--index", "0", "--num_pservers", "1", "--metrics_port", "-2"},
                             dir.path() + "/out2");
  EXPECT_EQ(range.exit.code, 2) << range.output;
  EXPECT_THAT(range.output, HasSubstr("--metrics_port: -2 is not in [-1, 65535]"));
}

}  // namespace
}  // namespace pl
