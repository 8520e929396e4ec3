// The pl-trainer and pl-convert binaries on bad input: a one-line cause, non-zero exit.
#include <fstream>

#include <gtest/gtest.h>

#include "paddle_like/testing/process.h"

namespace pl {
namespace {

using namespace std::chrono_literals;

struct CliRun {
  ExitInfo exit;
  std::string output;
};

CliRun RunBinary(const std::string& name, std::vector<std::string> args, const testing::TempDir& dir) {
  auto bin = testing::BinaryPath(name);
  EXPECT_TRUE(bin.ok()) << bin.status();
  args.insert(args.begin(), *bin);
  const std::string log = dir.path() + "/" + name + ".log";
  auto child = testing::Spawn(args, log);
  EXPECT_TRUE(child.ok()) << child.status();
  auto exit = testing::WaitForExit(**child, 60s);
  EXPECT_TRUE(exit.ok()) << exit.status();
  return {*exit, testing::ReadFileOrEmpty(log)};
}

TEST(TrainerCliTest, MissingDataPathExitsNonZeroNamingThePath) {
  testing::TempDir dir;
  CliRun r = RunBinary("pl-trainer", {"--model", "mlp", "--data", dir.path() + "/no-such-dir"}, dir);
  EXPECT_TRUE(r.exit.exited && r.exit.code == 1) << r.exit.Describe();
  EXPECT_NE(r.output.find("no-such-dir/train.plrec"), std::string::npos) << r.output;
}

TEST(TrainerCliTest, BadOptimizerIsRejectedBeforeTraining) {
  testing::TempDir dir;
  CliRun r = RunBinary("pl-trainer", {"--model", "mlp", "--optimizer", "rmsprop", "--data", dir.path()}, dir);
  EXPECT_EQ(r.exit.code, 2);  // a usage error
  EXPECT_NE(r.output.find("pl-trainer: error: --optimizer: unknown optimizer 'rmsprop'"), std::string::npos) << r.output;
}

TEST(TrainerCliTest, ConvertRejectsAWrongIdxMagicNamingTheFile) {
  testing::TempDir dir;
  const std::string bogus = dir.path() + "/bogus-images-idx3-ubyte";
  {
    std::ofstream f(bogus, std::ios::binary);
    const unsigned char header[16] = {0x00, 0x00, 0x09, 0x99, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
  }
  CliRun r = RunBinary("pl-convert", {"idx", "--images", bogus, "--labels", bogus, "--out", dir.path() + "/x.plrec"}, dir);
  EXPECT_NE(r.exit.code, 0);
  EXPECT_NE(r.output.find("bogus-images-idx3-ubyte"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("magic"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace pl
