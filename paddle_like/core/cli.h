// pl::cli: the one command-line dialect of every paddle_like binary, over absl flags.
//
// Each program defines its flags with ABSL_FLAG and, first thing in main, calls
//
//   const pl::cli::Program program = {"pl-pserver", "--index I --num_pservers P [flags]",
//                                     "Serves one shard of the parameters.",
//                                     {{"num_pservers", "PL_NUM_PSERVERS"}}};
//   pl::cli::CommandLine cl = pl::cli::ParseOrExit(program, argc, argv);
//
// The dialect: --flag=value, or --flag value for a non-bool flag; a bool flag is --flag,
// --noflag or --flag=true|false (never "--flag false"); a single dash works too; "--" ends
// the flags. Every program answers
//   --help, -h, --helpfull  usage line and every flag of the program (type, default, env
//                           variable, help text) on stdout, exit 0;
//   --version               "<program> <project version> (commit <git sha>)", exit 0;
// and a bad command line (unknown flag, bad value, stray argument) is one line on stderr,
// "<program>: error: <what, naming the flag>", exit status kUsageExitCode.
//
// The flags of a program are the ABSL_FLAGs defined in this project's source files
// (absl's own, such as --flagfile, are neither listed nor accepted). Parse first resets
// each of them to its default, then applies the environment fallbacks (a set, non-empty
// variable stands in for its flag), then the command line, which overrides them.
//
// The environment is read only here, only for the variables a Program names, and only
// when main calls ParseOrExit: libraries never read it.
//
// Thread-safety: Parse and ParseOrExit set the process's flags: call them from main
// before any thread reads a flag. HelpText, VersionText, ProjectVersion and GitCommit
// are thread-safe.
#ifndef PADDLE_LIKE_CORE_CLI_H_
#define PADDLE_LIKE_CORE_CLI_H_

#include <functional>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"

namespace pl::cli {

// The exit status of a process given a bad command line.
inline constexpr int kUsageExitCode = 2;

// An environment variable that stands in for a flag absent from the command line.
struct EnvFallback {
  std::string flag;      // "num_pservers"
  std::string variable;  // "PL_NUM_PSERVERS"
};

// What a binary is, for its messages and its --help.
struct Program {
  std::string name;         // "pl-pserver": the prefix of every message
  std::string usage;        // the usage line after the name: "--index I --num_pservers P [flags]"
  std::string description;  // printed by --help under the usage line; may be empty
  std::vector<EnvFallback> env;
  // Non-flag arguments accepted (pl-convert's subcommand); more is an error.
  int max_positional = 0;
  // Whether "--" starts a command returned untouched in CommandLine::command (pl-launch's
  // trainer command); otherwise what follows "--" counts as positional arguments.
  bool command_after_separator = false;
  // Added to the error for a stray argument: "the trainer command goes after '--'".
  std::string positional_hint;
};

struct CommandLine {
  enum class Action { kRun, kHelp, kVersion };
  Action action = Action::kRun;
  std::vector<std::string> positional;  // non-flag arguments, in order
  std::vector<std::string> command;     // after "--" (Program::command_after_separator)
  bool has_separator = false;           // "--" was given
  std::set<std::string> given;          // flags set by the command line or the environment
};

// The value of an environment variable, or nullptr when it is unset.
using EnvLookup = std::function<const char*(const std::string& variable)>;

// Parses `args` (argv without argv[0]) into the program's flags; `env` may be empty (no
// environment). INVALID_ARGUMENT with a one-line message naming the flag (or the
// variable, for a bad environment value) on a bad command line. --help and --version
// anywhere before "--" win over any error and leave the flags at their defaults.
StatusOr<CommandLine> Parse(const Program& program, const std::vector<std::string>& args,
                            const EnvLookup& env);

// What main calls: Parse with the real environment; prints the help or the version to
// stdout and exits 0, or prints "<program>: error: <message>" to stderr and exits
// kUsageExitCode. Returns only for Action::kRun.
CommandLine ParseOrExit(const Program& program, int argc, char** argv);

// "<program>: error: <message>" on stderr (one line), exit kUsageExitCode: for a value
// check main does after parsing ("--port: 70000 is not in [0, 65535]").
[[noreturn]] void ExitWithUsageError(const Program& program, absl::string_view message);
// ExitWithUsageError with the message of the first failed check, if any:
//   CheckOrExit(program, {CheckRange("port", port, 0, 65535), CheckAtLeast("passes", passes, 1)});
void CheckOrExit(const Program& program, std::initializer_list<Status> checks);

// The --help text: "usage: <name> <usage>", the description, then each flag of the
// program, sorted, as "  --name (type, default D[, env VAR])" and its help text.
std::string HelpText(const Program& program);
// "<name> <project version> (commit <sha>)\n".
std::string VersionText(const Program& program);

// Whether a flag defined in file `defined_in` (absl's CommandLineFlag::Filename) is one of
// this project's: under `source_dir`, or a relative path (ccache's CCACHE_BASEDIR builds)
// that is not abseil's own (absl/...).
bool IsProjectFlagFile(absl::string_view defined_in, absl::string_view source_dir);

// The `project(paddle_like VERSION ...)` of the top CMakeLists.txt, e.g. "0.1.0".
const char* ProjectVersion();
// The full sha of the commit the build was made from, or "unknown" outside a checkout.
const char* GitCommit();

// Value checks for main, after parsing: OK when min <= value (<= max); otherwise
// INVALID_ARGUMENT "--<flag>: <value> is not in [min, max]" / "is below the minimum <min>".
template <typename T>
Status CheckRange(absl::string_view flag, T value, T min, T max) {
  if (value >= min && value <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", value, " is not in [", min, ", ", max, "]"));
}
template <typename T>
Status CheckAtLeast(absl::string_view flag, T value, T min) {
  if (value >= min) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", value, " is below the minimum ", min));
}

}  // namespace pl::cli

#endif  // PADDLE_LIKE_CORE_CLI_H_
