// pl::cli, the command-line helper every binary's main calls: the dialect, the
// environment fallbacks, one-line errors naming the flag, --help and --version.
#include "paddle_like/core/cli.h"

#include <map>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_split.h"

ABSL_FLAG(int, cli_int, 7, "an int flag");
ABSL_FLAG(int64_t, cli_int64, -3, "an int64 flag");
ABSL_FLAG(uint64_t, cli_uint64, 5, "a uint64 flag");
ABSL_FLAG(double, cli_double, 0.5, "a double flag");
ABSL_FLAG(bool, cli_bool, true, "a bool flag, on by default");
ABSL_FLAG(bool, cli_quiet, false, "a bool flag, off by default");
ABSL_FLAG(std::string, cli_str, "dflt", "a string flag whose help text is long enough to be wrapped over "
          "more than one line of the help text, which keeps 88 columns");
ABSL_FLAG(std::vector<std::string>, cli_list, std::vector<std::string>({"a", "b"}), "a list flag");

namespace pl::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

const Program kProgram = {"pl-test", "[flags]", "A program for the tests.",
                          {{"cli_int", "PL_TEST_INT"}, {"cli_str", "PL_TEST_STR"}}};

// An environment of its own for each test.
EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

StatusOr<CommandLine> P(const std::vector<std::string>& args, const EnvLookup& env = nullptr,
                        const Program& program = kProgram) {
  return Parse(program, args, env);
}

// The message of a refused command line, which must be INVALID_ARGUMENT on one line.
std::string Refused(const std::vector<std::string>& args, const EnvLookup& env = nullptr,
                    const Program& program = kProgram) {
  StatusOr<CommandLine> line = P(args, env, program);
  EXPECT_FALSE(line.ok()) << "accepted: " << ::testing::PrintToString(args);
  if (line.ok()) return "";
  EXPECT_EQ(line.status().code(), absl::StatusCode::kInvalidArgument) << line.status();
  const std::string message(line.status().message());
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  return message;
}

class CliTest : public ::testing::Test {
  absl::FlagSaver saver_;  // every test leaves the flags as it found them
};

TEST_F(CliTest, EveryFormOfTheDialectSetsItsFlag) {
  auto line = P({"--cli_int=3", "--cli_int64", "-9", "-cli_uint64", "11", "--cli_double=2.5", "--nocli_bool",
                 "--cli_quiet", "--cli_str", "x y", "--cli_list=c,d"});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->action, CommandLine::Action::kRun);
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_int), 3);
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_int64), -9);  // a negative number is a value, not a flag
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_uint64), 11u);
  EXPECT_DOUBLE_EQ(absl::GetFlag(FLAGS_cli_double), 2.5);
  EXPECT_FALSE(absl::GetFlag(FLAGS_cli_bool));
  EXPECT_TRUE(absl::GetFlag(FLAGS_cli_quiet));
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_str), "x y");
  EXPECT_THAT(absl::GetFlag(FLAGS_cli_list), ElementsAre("c", "d"));
  EXPECT_THAT(line->given, UnorderedElementsAre("cli_int", "cli_int64", "cli_uint64", "cli_double", "cli_bool",
                                                "cli_quiet", "cli_str", "cli_list"));

  ASSERT_TRUE(P({"--cli_bool=false", "--cli_quiet=true"}).ok());
  EXPECT_FALSE(absl::GetFlag(FLAGS_cli_bool));
  EXPECT_TRUE(absl::GetFlag(FLAGS_cli_quiet));
}

TEST_F(CliTest, EachParseStartsFromTheDefaults) {
  ASSERT_TRUE(P({"--cli_int=3", "--nocli_bool", "--cli_str=s"}).ok());
  auto line = P({});
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_int), 7);
  EXPECT_TRUE(absl::GetFlag(FLAGS_cli_bool));
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_str), "dflt");
  EXPECT_TRUE(line->given.empty());
}

TEST_F(CliTest, TheLastValueOfARepeatedFlagWins) {
  ASSERT_TRUE(P({"--cli_int=3", "--cli_int", "4"}).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_int), 4);
}

TEST_F(CliTest, EnvironmentStandsInForAnAbsentFlagAndTheCommandLineOverridesIt) {
  auto line = P({}, Env({{"PL_TEST_INT", "12"}, {"PL_TEST_STR", "from-env"}}));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_int), 12);
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_str), "from-env");
  EXPECT_THAT(line->given, UnorderedElementsAre("cli_int", "cli_str"));

  // A bad value in a variable the command line overrides is never read.
  ASSERT_TRUE(P({"--cli_int", "13"}, Env({{"PL_TEST_INT", "junk"}})).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_int), 13);

  // Set but empty: absent.
  ASSERT_TRUE(P({}, Env({{"PL_TEST_INT", ""}})).ok());
  EXPECT_EQ(absl::GetFlag(FLAGS_cli_int), 7);
}

TEST_F(CliTest, ABadEnvironmentValueNamesTheVariableAndTheFlag) {
  EXPECT_EQ(Refused({}, Env({{"PL_TEST_INT", "abc"}})),
            "PL_TEST_INT (for --cli_int): 'abc' is not an integer (32-bit)");
}

TEST_F(CliTest, AFallbackForAFlagTheProgramLacksIsAProgrammingError) {
  Program program = kProgram;
  program.env = {{"no_such_flag", "PL_NOPE"}};
  auto line = P({}, Env({}), program);
  EXPECT_EQ(line.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(line.status().message(), HasSubstr("--no_such_flag"));
}

TEST_F(CliTest, BadCommandLinesAreOneLineNamingTheFlag) {
  EXPECT_EQ(Refused({"--bogus", "3"}), "unknown flag --bogus (see --help)");
  EXPECT_EQ(Refused({"--cli_int", "abc"}), "--cli_int: 'abc' is not an integer (32-bit)");
  EXPECT_EQ(Refused({"--cli_int=99999999999"}), "--cli_int: '99999999999' is not an integer (32-bit)");
  EXPECT_EQ(Refused({"--cli_uint64=-1"}), "--cli_uint64: '-1' is not a non-negative integer (64-bit)");
  EXPECT_EQ(Refused({"--cli_double=fast"}), "--cli_double: 'fast' is not a number");
  EXPECT_EQ(Refused({"--cli_bool=maybe"}), "--cli_bool: 'maybe' is not true or false");
  EXPECT_EQ(Refused({"--cli_int"}), "--cli_int needs a value");
  EXPECT_EQ(Refused({"--cli_int", "--cli_quiet"}), "--cli_int needs a value");
  EXPECT_EQ(Refused({"--cli_int", "--"}), "--cli_int needs a value");
  EXPECT_EQ(Refused({"--nocli_int"}), "unknown flag --nocli_int (--cli_int is not a bool flag)");
  EXPECT_EQ(Refused({"--nocli_bool=false"}), "--nocli_bool takes no value");
  EXPECT_EQ(Refused({"stray"}), "unexpected argument 'stray'");
}

TEST_F(CliTest, ABoolFlagFollowedByASeparateValueIsRefusedNamingIt) {
  // absl's dialect: "--shm false" would set --shm and leave "false" as an argument.
  EXPECT_EQ(Refused({"--cli_bool", "false"}),
            "--cli_bool takes no separate value ('false'): write --cli_bool=true, --cli_bool=false or --nocli_bool");
  EXPECT_THAT(Refused({"--cli_bool", "maybe"}),
              HasSubstr("unexpected argument 'maybe' after the bool flag --cli_bool"));
  Program takes_one = kProgram;
  takes_one.max_positional = 1;
  EXPECT_THAT(Refused({"--cli_quiet", "true", "x"}, nullptr, takes_one),
              HasSubstr("--cli_quiet takes no separate value"));
  // With room for an argument, a word that is not a bool is that argument.
  auto line = P({"--cli_quiet", "idx"}, nullptr, takes_one);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_TRUE(absl::GetFlag(FLAGS_cli_quiet));
  EXPECT_THAT(line->positional, ElementsAre("idx"));
}

TEST_F(CliTest, PositionalArgumentsUpToTheProgramsLimit) {
  Program program = kProgram;
  program.max_positional = 1;
  program.positional_hint = "one subcommand only";
  auto line = P({"idx", "--cli_int=2"}, nullptr, program);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_THAT(line->positional, ElementsAre("idx"));
  EXPECT_EQ(Refused({"idx", "more"}, nullptr, program), "unexpected argument 'more' (one subcommand only)");
  // Without command_after_separator, what follows "--" is positional.
  EXPECT_EQ(Refused({"--", "a", "b"}, nullptr, program), "unexpected argument 'b' (one subcommand only)");
}

TEST_F(CliTest, TheCommandAfterTheSeparatorIsUntouched) {
  Program program = kProgram;
  program.command_after_separator = true;
  auto line = P({"--cli_int=1", "--", "pl-trainer", "--bogus", "--help", "--"}, nullptr, program);
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->action, CommandLine::Action::kRun);  // --help after "--" is the command's
  EXPECT_TRUE(line->has_separator);
  EXPECT_THAT(line->command, ElementsAre("pl-trainer", "--bogus", "--help", "--"));
  EXPECT_TRUE(line->positional.empty());
}

TEST_F(CliTest, HelpAndVersionWinOverErrorsAndSetNothing) {
  for (const char* help : {"--help", "-h", "--helpfull", "-help"}) {
    auto line = P({"--bogus", "--cli_int=3", help, "--cli_int=abc"});
    ASSERT_TRUE(line.ok()) << help << ": " << line.status();
    EXPECT_EQ(line->action, CommandLine::Action::kHelp) << help;
    EXPECT_EQ(absl::GetFlag(FLAGS_cli_int), 7) << help;
  }
  auto line = P({"--version"}, Env({{"PL_TEST_INT", "abc"}}));
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(line->action, CommandLine::Action::kVersion);
}

TEST_F(CliTest, AbslsOwnFlagsAreNeitherListedNorAccepted) {
  // Linked here on purpose, so that absl's --flagfile and --fromenv exist in this binary.
  volatile auto keep_absl_parse = &absl::ParseCommandLine;
  (void)keep_absl_parse;
  ASSERT_NE(absl::FindCommandLineFlag("flagfile"), nullptr);
  EXPECT_EQ(Refused({"--flagfile=/dev/null"}), "unknown flag --flagfile (see --help)");
  EXPECT_THAT(HelpText(kProgram), Not(HasSubstr("flagfile")));
  EXPECT_THAT(HelpText(kProgram), Not(HasSubstr("fromenv")));
}

TEST(ProjectFlagFileTest, ProjectFilesByAbsoluteOrCcacheRelativePathAbseilsNever) {
  // absl reports a flag's file without leading slashes; ccache under CCACHE_BASEDIR (as
  // `make` builds) compiles by relative path. Both must count, or a binary built by `make`
  // knows none of its own flags.
  EXPECT_TRUE(IsProjectFlagFile("src/pl/tools/pl_convert.cc", "/src/pl"));
  EXPECT_TRUE(IsProjectFlagFile("../tools/pl_convert.cc", "/src/pl"));
  EXPECT_TRUE(IsProjectFlagFile("trainer/pl_trainer.cc", "/src/pl"));
  EXPECT_FALSE(IsProjectFlagFile("absl/flags/parse.cc", "/src/pl"));
  EXPECT_FALSE(IsProjectFlagFile("build/abseil-cpp-20220623/absl/flags/internal/usage.cc", "/src/pl"));
}

TEST_F(CliTest, HelpListsEveryFlagWithTypeDefaultEnvironmentAndHelpText) {
  const std::string help = HelpText(kProgram);
  EXPECT_EQ(help.rfind("usage: pl-test [flags]\n\nA program for the tests.\n", 0), 0u) << help;
  for (const char* entry : {"  --cli_int (int32, default 7, env PL_TEST_INT)\n      an int flag\n",
                            "  --cli_int64 (int64, default -3)\n",
                            "  --cli_uint64 (uint64, default 5)\n",
                            "  --cli_double (double, default 0.5)\n",
                            "  --cli_bool (bool, default true)\n      a bool flag, on by default\n",
                            "  --cli_quiet (bool, default false)\n",
                            "  --cli_str (string, default \"dflt\", env PL_TEST_STR)\n      a string flag",
                            "  --cli_list (list, default \"a,b\")\n",
                            "  --help, -h\n",
                            "  --version\n"}) {
    EXPECT_THAT(help, HasSubstr(entry));
  }
  // Sorted by name; long help texts wrapped.
  EXPECT_LT(help.find("--cli_bool"), help.find("--cli_double"));
  EXPECT_LT(help.find("--cli_double"), help.find("--cli_int "));
  for (absl::string_view row : absl::StrSplit(help, '\n')) EXPECT_LE(row.size(), 100u) << row;
}

TEST_F(CliTest, VersionIsTheCMakeProjectVersionAndTheCommit) {
  EXPECT_STREQ(ProjectVersion(), PL_EXPECTED_VERSION);  // project(paddle_like VERSION ...)
  EXPECT_TRUE(std::regex_match(GitCommit(), std::regex("[0-9a-f]{40}|unknown"))) << GitCommit();
  EXPECT_EQ(VersionText(kProgram),
            absl::StrCat("pl-test ", PL_EXPECTED_VERSION, " (commit ", GitCommit(), ")\n"));
}

TEST_F(CliTest, RangeChecksNameTheFlag) {
  EXPECT_TRUE(CheckRange("port", 0, 0, 65535).ok());
  EXPECT_EQ(CheckRange("port", 70000, 0, 65535).message(), "--port: 70000 is not in [0, 65535]");
  EXPECT_TRUE(CheckAtLeast("passes", 1, 1).ok());
  EXPECT_EQ(CheckAtLeast("passes", 0, 1).message(), "--passes: 0 is below the minimum 1");
}

TEST(CliDeathTest, AUsageErrorIsOneLineOnStderrAndExitStatusTwo) {
  EXPECT_EXIT(ExitWithUsageError(kProgram, "--port: bad\nsecond line"), ::testing::ExitedWithCode(kUsageExitCode),
              "^pl-test: error: --port: bad; second line\n$");
  EXPECT_EXIT(CheckOrExit(kProgram, {absl::OkStatus(), CheckAtLeast("passes", 0, 1), CheckAtLeast("x", 0, 1)}),
              ::testing::ExitedWithCode(kUsageExitCode), "^pl-test: error: --passes: 0 is below the minimum 1\n$");
  char arg0[] = "pl-test", arg1[] = "--cli_int=zz";
  char* argv[] = {arg0, arg1, nullptr};
  EXPECT_EXIT(ParseOrExit(kProgram, 2, argv), ::testing::ExitedWithCode(kUsageExitCode),
              "^pl-test: error: --cli_int: 'zz' is not an integer \\(32-bit\\)\n$");
}

}  // namespace
}  // namespace pl::cli
