// pl-launch's flags: parsing (pl::cli's dialect), validation of binaries, and the
// binary's exit status 2.
#include "trainer/launcher/launch_options.h"

#include <sys/stat.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/flags/reflection.h"
#include "paddle_like/testing/process.h"
#include "trainer/launcher/launcher.h"

namespace pl {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

void ExpectInvalid(const std::vector<std::string>& args, const std::string& fragment) {
  absl::FlagSaver saver;
  auto o = ParseLaunchFlags(args);
  ASSERT_FALSE(o.ok()) << "accepted: " << ::testing::PrintToString(args);
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(o.status().message(), HasSubstr(fragment));
}

TEST(LaunchOptionsTest, ParsesEveryFlag) {
  absl::FlagSaver saver;
  auto o = ParseLaunchFlags({"--pservers", "2", "--trainers=3", "--sync", "--workdir", "/tmp/w", "--data", "/d",
                             "--passes", "4", "--chunks_per_task=5", "--lease_ms", "2500", "--seed", "9",
                             "--checkpoint_every_s", "0", "--kill_trainer_after_s", "1.5",
                             "--add_trainer_after_s=2", "--control", "/tmp/fifo", "--progress_every_s", "0.5",
                             "--", "pl-trainer", "--model", "mlp", "--sync", "--"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->num_pservers, 2);
  EXPECT_EQ(o->num_trainers, 3);
  EXPECT_TRUE(o->sync);
  EXPECT_EQ(o->workdir, "/tmp/w");
  EXPECT_EQ(o->data, "/d");
  EXPECT_EQ(o->passes, 4);
  EXPECT_EQ(o->chunks_per_task, 5);
  EXPECT_EQ(o->lease_ms, 2500);
  EXPECT_EQ(o->seed, 9u);
  EXPECT_EQ(o->checkpoint_every_s, 0);
  EXPECT_DOUBLE_EQ(o->kill_trainer_after_s, 1.5);
  EXPECT_DOUBLE_EQ(o->add_trainer_after_s, 2.0);
  EXPECT_EQ(o->control_fifo, "/tmp/fifo");
  EXPECT_DOUBLE_EQ(o->progress_every_s, 0.5);
  // Everything after the first "--" is the trainer's, untouched.
  EXPECT_THAT(o->trainer_command, ElementsAre("pl-trainer", "--model", "mlp", "--sync", "--"));
}

TEST(LaunchOptionsTest, DefaultsWhenOnlyRequiredFlagsAreGiven) {
  absl::FlagSaver saver;
  // Flags left by an earlier parse do not leak into the next one.
  ASSERT_TRUE(ParseLaunchFlags({"--pservers", "1", "--trainers", "1", "--sync", "--passes", "3", "--", "t"}).ok());
  auto o = ParseLaunchFlags({"--pservers", "1", "--trainers", "1", "--", "t"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->sync);
  EXPECT_TRUE(o->workdir.empty());
  EXPECT_EQ(o->passes, 1);
  EXPECT_LT(o->kill_trainer_after_s, 0);
  EXPECT_LT(o->add_trainer_after_s, 0);
  EXPECT_TRUE(o->control_fifo.empty());
}

TEST(LaunchOptionsTest, BoolFlagsTakeTheAbslForms) {
  absl::FlagSaver saver;
  for (const char* on : {"--sync", "--sync=true", "-sync"}) {
    auto o = ParseLaunchFlags({"--pservers", "1", "--trainers", "1", on, "--", "t"});
    ASSERT_TRUE(o.ok()) << on << ": " << o.status();
    EXPECT_TRUE(o->sync) << on;
  }
  for (const char* off : {"--nosync", "--sync=false"}) {
    auto o = ParseLaunchFlags({"--pservers", "1", "--trainers", "1", "--sync", off, "--", "t"});
    ASSERT_TRUE(o.ok()) << off << ": " << o.status();
    EXPECT_FALSE(o->sync) << off;
  }
}

TEST(LaunchOptionsTest, RejectsBadInputNamingTheFlag) {
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--bogus", "3", "--", "t"}, "unknown flag --bogus");
  ExpectInvalid({"--pservers", "0", "--trainers", "1", "--", "t"}, "--pservers: 0 is below the minimum 1");
  ExpectInvalid({"--pservers", "1", "--trainers", "-2", "--", "t"}, "--trainers: -2 is below the minimum 0");
  ExpectInvalid({"--pservers", "two", "--trainers", "1", "--", "t"}, "--pservers: 'two' is not an integer");
  ExpectInvalid({"--trainers", "1", "--", "t"}, "--pservers is required");
  ExpectInvalid({"--pservers", "1", "--", "t"}, "--trainers is required");
  ExpectInvalid({"--pservers", "1", "--trainers", "1"}, "no trainer command");
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--"}, "no trainer command");
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--passes", "--", "t"}, "--passes needs a value");
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--lease_ms", "5", "--", "t"},
                "--lease_ms: 5 is below the minimum 100");
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--kill_trainer_after_s", "-1", "--", "t"},
                "--kill_trainer_after_s: -1 is not >= 0");
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--progress_every_s", "0", "--", "t"},
                "--progress_every_s: 0 is not > 0");
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--sync=yes please", "--", "t"},
                "--sync: 'yes please' is not true or false");
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--sync", "false", "--", "t"},
                "--sync takes no separate value ('false')");
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "pl-trainer"},
                "unexpected argument 'pl-trainer' (the trainer command goes after '--')");
}

TEST(LaunchOptionsTest, TelemetryFlags) {
  {
    absl::FlagSaver saver;
    auto o = ParseLaunchFlags({"--pservers", "1", "--trainers", "1", "--", "t"});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->logdir, "");
    EXPECT_EQ(o->metrics_port, -1);
    EXPECT_EQ(o->http_port, -1);
  }
  {
    absl::FlagSaver saver;
    auto o = ParseLaunchFlags({"--pservers", "1", "--trainers", "1", "--logdir", "runs/a", "--metrics_port", "9100",
                               "--http_port=0", "--", "t"});
    ASSERT_TRUE(o.ok()) << o.status();
    EXPECT_EQ(o->logdir, "runs/a");
    EXPECT_EQ(o->metrics_port, 9100);
    EXPECT_EQ(o->http_port, 0);
  }
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--metrics_port", "-2", "--", "t"},
                "--metrics_port: -2 is not in [-1, 65535]");
  ExpectInvalid({"--pservers", "1", "--trainers", "1", "--http_port", "70000", "--", "t"},
                "--http_port: 70000 is not in [-1, 65535]");
}

TEST(LaunchOptionsTest, HelpIsAnsweredByTheCliHelper) {
  absl::FlagSaver saver;
  auto line = cli::Parse(LaunchProgram(), {"--help"}, nullptr);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->action, cli::CommandLine::Action::kHelp);
  const std::string help = cli::HelpText(LaunchProgram());
  EXPECT_THAT(help, HasSubstr("kill-pserver INDEX"));
  EXPECT_THAT(help, HasSubstr("-- <trainer command...>"));
  EXPECT_THAT(help, HasSubstr("  --pservers (int32, default 0)\n"));
  EXPECT_EQ(ParseLaunchFlags({"--help"}).status().code(), absl::StatusCode::kInvalidArgument);
}

void MakeExecutable(const std::string& path) {
  std::ofstream(path) << "#!/bin/sh\nexit 0\n";
  ::chmod(path.c_str(), 0755);
}

TEST(LauncherValidateTest, NamesAMissingBinaryOrTrainerCommand) {
  testing::TempDir bin;
  LaunchOptions o;
  o.num_pservers = 1;
  o.num_trainers = 1;
  o.bin_dir = bin.path();
  o.trainer_command = {"pl-trainer"};
  auto sink = [](const std::string&) {};
  {
    Launcher launcher(o, sink);
    Status s = launcher.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(s.message(), HasSubstr(bin.path() + "/pl-master"));
  }
  MakeExecutable(bin.path() + "/pl-master");
  {
    Launcher launcher(o, sink);
    Status s = launcher.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(s.message(), HasSubstr(bin.path() + "/pl-pserver"));
  }
  MakeExecutable(bin.path() + "/pl-pserver");
  {
    Launcher launcher(o, sink);
    Status s = launcher.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(s.message(), HasSubstr("trainer command 'pl-trainer' is found neither in"));
  }
  MakeExecutable(bin.path() + "/pl-trainer");
  {
    Launcher launcher(o, sink);
    EXPECT_TRUE(launcher.Validate().ok());
  }
  o.trainer_command = {"sh", "-c", "true"};  // from PATH
  {
    Launcher launcher(o, sink);
    EXPECT_TRUE(launcher.Validate().ok());
  }
}

// The real pl-launch binary: bad input is one line on stderr and exit status 2.
TEST(LaunchBinaryTest, BadInputExitsTwoWithOneLine) {
  auto launch = testing::BinaryPath("pl-launch");
  if (!launch.ok()) GTEST_SKIP() << launch.status();
  testing::TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {{"--pservers", "1", "--trainers", "1", "--frobnicate", "--", "true"}, "unknown flag --frobnicate"},
      {{"--pservers", "1", "--trainers", "1", "--sync", "true", "--", "true"}, "--sync takes no separate value"},
      {{"--pservers", "1", "--trainers", "1"}, "no trainer command"},
      {{"--pservers", "0", "--trainers", "1", "--", "true"}, "--pservers"},
      {{"--pservers", "1", "--trainers", "-1", "--", "true"}, "--trainers"},
  };
  int i = 0;
  for (const Case& c : cases) {
    std::vector<std::string> argv = {*launch};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const std::string out = dir.path() + "/out" + std::to_string(i++);
    auto child = testing::Spawn(argv, out);
    ASSERT_TRUE(child.ok()) << child.status();
    auto exit = testing::WaitForExit(**child, milliseconds(10000));
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_EQ(exit->code, 2) << c.fragment;
    const std::string text = testing::ReadFileOrEmpty(out);
    EXPECT_THAT(text, HasSubstr(c.fragment));
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  }
}

TEST(LaunchBinaryTest, MissingBinariesExitTwo) {
  auto launch = testing::BinaryPath("pl-launch");
  if (!launch.ok()) GTEST_SKIP() << launch.status();
  // A copy of pl-launch alone in a directory: pl-master is not beside it.
  testing::TempDir dir;
  const std::string copy = dir.path() + "/pl-launch";
  {
    std::ifstream src(*launch, std::ios::binary);
    std::ofstream dst(copy, std::ios::binary);
    dst << src.rdbuf();
  }
  ::chmod(copy.c_str(), 0755);
  auto child = testing::Spawn({copy, "--pservers", "1", "--trainers", "1", "--", "true"}, dir.path() + "/out");
  ASSERT_TRUE(child.ok()) << child.status();
  auto exit = testing::WaitForExit(**child, milliseconds(10000));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->code, 2);
  EXPECT_THAT(testing::ReadFileOrEmpty(dir.path() + "/out"), HasSubstr("missing binary " + dir.path() + "/pl-master"));
}

}  // namespace
}  // namespace pl
