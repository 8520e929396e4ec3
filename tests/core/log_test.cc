// The one log format: timestamp, level and process name on every line; INFO on stdout,
// WARNING and ERROR on stderr; concurrent lines stay whole.
#include "paddle_like/core/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pl::log {
namespace {

using ::testing::HasSubstr;

// Runs `body` with file descriptor `fd` redirected to a temporary file; returns what it wrote.
template <typename Body>
std::string Capture(int fd, Body body) {
  char path[] = "/tmp/pl_log_test_XXXXXX";
  const int tmp = mkstemp(path);
  EXPECT_GE(tmp, 0);
  const int saved = dup(fd);
  dup2(tmp, fd);
  body();
  dup2(saved, fd);
  close(saved);
  std::string out;
  lseek(tmp, 0, SEEK_SET);
  char buf[4096];
  for (ssize_t n; (n = read(tmp, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(tmp);
  unlink(path);
  return out;
}

TEST(LogTest, FormatsTimestampLevelProcessAndText) {
  const absl::Time when = absl::FromUnixMillis(1795500000123);  // 2026-11-24T...Z
  EXPECT_EQ(FormatLine(when, Level::kInfo, "pserver-1", "checkpoint written"),
            absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", when, absl::UTCTimeZone()) +
                " INFO pserver-1: checkpoint written\n");
  EXPECT_EQ(FormatLine(absl::UnixEpoch(), Level::kError, "master", "no data\n\n"),
            "1970-01-01T00:00:00.000Z ERROR master: no data\n");
  EXPECT_THAT(FormatLine(absl::UnixEpoch(), Level::kWarning, "trainer-3", "x"), HasSubstr(" WARNING trainer-3: x"));
}

TEST(LogTest, InfoGoesToStdoutProblemsToStderr) {
  SetProcessName("trainer-7");
  std::string err;
  const std::string out = Capture(STDOUT_FILENO, [&] {
    err = Capture(STDERR_FILENO, [] {
      Info("step 1");
      Warning("slow pserver");
      Error("cannot read data");
    });
  });
  const std::regex line(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (INFO|WARNING|ERROR) trainer-7: [a-z 0-9]+\n)");
  EXPECT_TRUE(std::regex_match(out, line)) << out;
  EXPECT_THAT(out, HasSubstr("INFO trainer-7: step 1"));
  EXPECT_THAT(err, HasSubstr("WARNING trainer-7: slow pserver\n"));
  EXPECT_THAT(err, HasSubstr("ERROR trainer-7: cannot read data\n"));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("INFO")));
  EXPECT_EQ(ProcessName(), "trainer-7");
}

TEST(LogTest, ALineStreamMakesOneLogLinePerLine) {
  SetProcessName("trainer-1");
  const std::string out = Capture(STDOUT_FILENO, [] {
    LineStream log;
    log << "pass 0 task " << 3 << "  step 1" << std::endl;
    log << "two\nlines\n" << "partial";
  });
  const std::regex three(R"(\S+Z INFO trainer-1: pass 0 task 3  step 1\n\S+Z INFO trainer-1: two\n)"
                         R"(\S+Z INFO trainer-1: lines\n\S+Z INFO trainer-1: partial\n)");
  EXPECT_TRUE(std::regex_match(out, three)) << out;
}

TEST(LogTest, ConcurrentLinesStayWhole) {
  SetProcessName("pserver-0");
  constexpr int kThreads = 4, kLines = 300;
  const std::string out = Capture(STDOUT_FILENO, [] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([t] {
        for (int i = 0; i < kLines; ++i) Info("thread " + std::to_string(t) + " line " + std::to_string(i) + " " +
                                              std::string(100, 'a' + t));
      });
    }
    for (auto& th : threads) th.join();
  });
  std::istringstream lines(out);
  const std::regex whole(R"(\S+Z INFO pserver-0: thread (\d) line \d+ ([a-d])\2{99})");
  int count = 0;
  for (std::string l; std::getline(lines, l); ++count) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, whole)) << "torn line: " << l;
    EXPECT_EQ(m[2].str()[0], 'a' + std::stoi(m[1]));
  }
  EXPECT_EQ(count, kThreads * kLines);
}

}  // namespace
}  // namespace pl::log
