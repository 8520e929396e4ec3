// pl-launch --make_ca DIR: the CA that the nodes of a job on several machines share
// (--tls_ca), made by the real binary; what it refuses, and that it never replaces one.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/flags/reflection.h"
#include "paddle_like/core/cli.h"
#include "paddle_like/rpc/certificates.h"
#include "paddle_like/testing/process.h"
#include "trainer/launcher/launch_options.h"

namespace pl {
namespace {

using ::testing::HasSubstr;

StatusOr<std::string> MakeCaDir(const std::vector<std::string>& args) {
  absl::FlagSaver saver;
  PL_ASSIGN_OR_RETURN(cli::CommandLine line, cli::Parse(LaunchProgram(), args, nullptr));
  return MakeCaDirFromFlags(line);
}

TEST(LaunchMakeCaTest, TheFlagStandsAlone) {
  EXPECT_EQ(*MakeCaDir({"--pservers", "1", "--trainers", "1", "--", "t"}), "");  // not asked: a job
  EXPECT_EQ(*MakeCaDir({"--make_ca", "/tmp/x"}), "/tmp/x");
  for (const auto& [args, fragment] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--make_ca", ""}, "give the directory"},
           {{"--make_ca", "/tmp/x", "--pservers", "1"}, "no other flag (--pservers given)"},
           {{"--make_ca", "/tmp/x", "--", "pl-trainer"}, "no trainer command"}}) {
    StatusOr<std::string> dir = MakeCaDir(args);
    ASSERT_FALSE(dir.ok()) << ::testing::PrintToString(args);
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(dir.status().message(), HasSubstr(fragment));
  }
}

class LaunchMakeCaBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = testing::BinaryPath("pl-launch");
    if (!path.ok()) GTEST_SKIP() << "needs the real binary: " << path.status().message();
    bin_ = *path;
  }
  // Runs pl-launch with `args`; its stdout and stderr end up in out.
  ExitInfo Run(const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {bin_};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = dir_.path() + "/run.log";
    (void)std::remove(log.c_str());
    auto child = testing::Spawn(argv, log);
    EXPECT_TRUE(child.ok()) << child.status();
    if (!child.ok()) return ExitInfo();
    auto exit = testing::WaitForExit(**child, std::chrono::seconds(30));
    EXPECT_TRUE(exit.ok()) << exit.status();
    *out = testing::ReadFileOrEmpty(log);
    return exit.ok() ? *exit : ExitInfo();
  }
  std::string bin_;
  testing::TempDir dir_{"pl-make-ca"};
};

TEST_F(LaunchMakeCaBinaryTest, WritesACaThatSignsTheJobsCertificatesAndNeverReplacesIt) {
  const std::string job = dir_.path() + "/job-tls";  // the layout --tls_ca is copied into
  std::string out;
  ExitInfo made = Run({"--make_ca", job + "/ca"}, &out);
  ASSERT_TRUE(made.success()) << made.Describe() << ": " << out;
  EXPECT_THAT(out, HasSubstr("--tls_ca " + job + "/ca"));
  struct stat key {};
  ASSERT_EQ(::stat((job + "/ca/ca.key").c_str(), &key), 0);
  EXPECT_EQ(key.st_mode & 0777, 0600u) << "the CA's key is its owner's alone";
  // A CA the job's processes can be given certificates by.
  ASSERT_TRUE(rpc::IssueCertificate(job, "trainer").ok());
  const std::string cert = testing::ReadFileOrEmpty(job + "/ca/ca.crt");
  ASSERT_THAT(cert, HasSubstr("BEGIN CERTIFICATE"));

  // Asked again for the same directory: refused, the CA as it was.
  ExitInfo again = Run({"--make_ca", job + "/ca"}, &out);
  EXPECT_EQ(again.code, 1) << again.Describe();
  EXPECT_THAT(out, HasSubstr("ca.crt exists: a job's CA is not replaced"));
  EXPECT_EQ(testing::ReadFileOrEmpty(job + "/ca/ca.crt"), cert);
  EXPECT_TRUE(rpc::IssueCertificate(job, "trainer").ok());

  // A job's flags beside it: bad input, nothing written.
  ExitInfo mixed = Run({"--make_ca", dir_.path() + "/other", "--pservers", "1"}, &out);
  EXPECT_EQ(mixed.code, cli::kUsageExitCode) << mixed.Describe();
  EXPECT_THAT(out, HasSubstr("pl-launch: error: --make_ca writes a CA and exits"));
  EXPECT_NE(::access((dir_.path() + "/other/ca.crt").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace pl
