#include "paddle_like/core/cli.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "paddle_like/core/build_info.h"  // generated at build time (build_info.cmake)

namespace pl::cli {
namespace {

using FlagMap = std::map<std::string, absl::CommandLineFlag*, std::less<>>;

// absl reports a flag's file without its leading slashes.
absl::string_view WithoutLeadingSlashes(absl::string_view path) {
  while (absl::ConsumePrefix(&path, "/")) {
  }
  return path;
}

}  // namespace

bool IsProjectFlagFile(absl::string_view defined_in, absl::string_view source_dir) {
  const absl::string_view file = WithoutLeadingSlashes(defined_in);
  const std::string root = absl::StrCat(WithoutLeadingSlashes(source_dir), "/");
  if (absl::StartsWith(file, root)) return true;
  // ccache with CCACHE_BASEDIR (as `make` runs it) compiles the project's files by relative
  // paths ("../tools/pl_convert.cc"), so their flags cannot be told by the source root;
  // the flags that are not the project's are abseil's own, defined under absl/.
  return !(absl::StartsWith(file, "absl/") || absl::StrContains(file, "/absl/"));
}

namespace {

// The flags defined in this project's source files, by name.
FlagMap ProgramFlags() {
  FlagMap flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->IsRetired()) continue;
    if (!IsProjectFlagFile(flag->Filename(), PL_SOURCE_DIR)) continue;
    flags.emplace(std::string(name), flag);
  }
  return flags;
}

struct TypeInfo {
  const char* name;  // in --help
  const char* what;  // in "'x' is not <what>"
};

TypeInfo TypeOf(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<bool>()) return {"bool", "true or false"};
  if (flag.IsOfType<int32_t>()) return {"int32", "an integer (32-bit)"};
  if (flag.IsOfType<int64_t>()) return {"int64", "an integer (64-bit)"};
  if (flag.IsOfType<uint32_t>()) return {"uint32", "a non-negative integer (32-bit)"};
  if (flag.IsOfType<uint64_t>()) return {"uint64", "a non-negative integer (64-bit)"};
  if (flag.IsOfType<double>()) return {"double", "a number"};
  if (flag.IsOfType<float>()) return {"float", "a number"};
  if (flag.IsOfType<std::string>()) return {"string", "a string"};
  if (flag.IsOfType<std::vector<std::string>>()) return {"list", "a comma-separated list"};
  return {"value", "a valid value"};
}

std::string OneLine(absl::string_view text) {
  return absl::StrReplaceAll(absl::StripAsciiWhitespace(text), {{"\n", "; "}});
}

// Sets `flag` from `value`; INVALID_ARGUMENT "<source>: 'value' is not <what>" when it
// does not parse (absl's own explanation appended when it has one).
Status SetFlag(absl::CommandLineFlag& flag, absl::string_view value, absl::string_view source) {
  std::string error;
  if (flag.ParseFrom(value, &error)) return absl::OkStatus();
  std::string message = absl::StrCat(source, ": '", value, "' is not ", TypeOf(flag).what);
  // absl's text always starts "Illegal value '...' specified for flag '...'"; keep the rest.
  if (auto pos = error.find("; "); pos != std::string::npos) {
    absl::StrAppend(&message, " (", error.substr(pos + 2), ")");
  }
  return absl::InvalidArgumentError(OneLine(message));
}

bool IsBoolLiteral(absl::string_view text) {
  bool unused;
  return absl::SimpleAtob(text, &unused);
}

struct Assignment {
  absl::CommandLineFlag* flag;
  std::string name;
  std::string value;
};

// The arguments, split into assignments, positional arguments and the command. The first
// error is returned only when neither --help nor --version was given.
struct Scan {
  CommandLine line;
  std::vector<Assignment> assignments;
  Status error;
  void Fail(Status s) {
    if (error.ok()) error = std::move(s);
  }
};

Scan ScanArgs(const Program& program, const FlagMap& flags, const std::vector<std::string>& args) {
  Scan scan;
  CommandLine& line = scan.line;
  const absl::CommandLineFlag* bare_bool = nullptr;  // the previous argument: "--flag" of a bool
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const absl::CommandLineFlag* after_bool = std::exchange(bare_bool, nullptr);
    if (arg == "--") {
      line.has_separator = true;
      auto rest = args.begin() + static_cast<std::ptrdiff_t>(i) + 1;
      if (program.command_after_separator) {
        line.command.assign(rest, args.end());
      } else {
        line.positional.insert(line.positional.end(), rest, args.end());
      }
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      // A separate value after a bool flag ("--shm false") is the mistake to name.
      const bool slot_left = static_cast<int>(line.positional.size()) < program.max_positional;
      if (after_bool != nullptr && (IsBoolLiteral(arg) || !slot_left)) {
        const std::string name(after_bool->Name());
        const std::string forms = absl::StrCat("--", name, "=true, --", name, "=false or --no", name);
        if (IsBoolLiteral(arg)) {
          scan.Fail(absl::InvalidArgumentError(
              absl::StrCat("--", name, " takes no separate value ('", arg, "'): write ", forms)));
        } else {
          std::string message = absl::StrCat("unexpected argument '", arg, "' after the bool flag --", name, " (",
                                             forms, ")");
          if (!program.positional_hint.empty()) absl::StrAppend(&message, "; ", program.positional_hint);
          scan.Fail(absl::InvalidArgumentError(message));
        }
      }
      line.positional.push_back(arg);
      continue;
    }
    absl::string_view text = arg;
    text.remove_prefix(absl::StartsWith(text, "--") ? 2 : 1);
    std::optional<std::string> inline_value;
    std::string name(text);
    if (size_t eq = text.find('='); eq != absl::string_view::npos) {
      name = std::string(text.substr(0, eq));
      inline_value = std::string(text.substr(eq + 1));
    }
    if (name == "help" || name == "h" || name == "helpfull") {
      line.action = CommandLine::Action::kHelp;
      return scan;
    }
    if (name == "version") {
      line.action = CommandLine::Action::kVersion;
      return scan;
    }
    auto it = flags.find(name);
    bool negated = false;
    if (it == flags.end() && absl::StartsWith(name, "no")) {
      auto positive = flags.find(absl::string_view(name).substr(2));
      if (positive != flags.end()) {
        if (!positive->second->IsOfType<bool>()) {
          scan.Fail(absl::InvalidArgumentError(
              absl::StrCat("unknown flag --", name, " (--", positive->first, " is not a bool flag)")));
          continue;
        }
        it = positive;
        negated = true;
      }
    }
    if (it == flags.end()) {
      scan.Fail(absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)")));
      continue;
    }
    absl::CommandLineFlag* flag = it->second;
    if (flag->IsOfType<bool>()) {
      if (negated && inline_value) {
        scan.Fail(absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value")));
        continue;
      }
      if (!inline_value) bare_bool = flag;
      scan.assignments.push_back({flag, it->first, inline_value.value_or(negated ? "false" : "true")});
      continue;
    }
    if (!inline_value) {
      // "--flag value": the next argument, unless it is "--" or one of the program's flags.
      bool missing = i + 1 >= args.size() || args[i + 1] == "--";
      if (!missing && absl::StartsWith(args[i + 1], "-") && args[i + 1].size() > 1) {
        absl::string_view next = args[i + 1];
        next.remove_prefix(absl::StartsWith(next, "--") ? 2 : 1);
        next = next.substr(0, next.find('='));
        missing = flags.count(next) > 0 || next == "help" || next == "h" || next == "version" ||
                  (absl::StartsWith(next, "no") && flags.count(next.substr(2)) > 0);
      }
      if (missing) {
        scan.Fail(absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value")));
        continue;
      }
      inline_value = args[++i];
    }
    scan.assignments.push_back({flag, it->first, *inline_value});
  }
  return scan;
}

}  // namespace

StatusOr<CommandLine> Parse(const Program& program, const std::vector<std::string>& args, const EnvLookup& env) {
  const FlagMap flags = ProgramFlags();
  for (const auto& [name, flag] : flags) {
    std::string error;
    if (!flag->ParseFrom(flag->DefaultValue(), &error)) {
      return absl::InternalError(absl::StrCat("--", name, ": cannot reset to its default: ", OneLine(error)));
    }
  }
  Scan scan = ScanArgs(program, flags, args);
  CommandLine& line = scan.line;
  if (line.action != CommandLine::Action::kRun) return std::move(line);
  PL_RETURN_IF_ERROR(scan.error);
  if (static_cast<int>(line.positional.size()) > program.max_positional) {
    std::string message = absl::StrCat("unexpected argument '", line.positional[program.max_positional], "'");
    if (!program.positional_hint.empty()) absl::StrAppend(&message, " (", program.positional_hint, ")");
    return absl::InvalidArgumentError(message);
  }
  for (const Assignment& a : scan.assignments) line.given.insert(a.name);

  // The environment first, for the flags the command line leaves alone.
  for (const EnvFallback& fallback : program.env) {
    auto it = flags.find(fallback.flag);
    if (it == flags.end()) {
      return absl::InternalError(absl::StrCat(fallback.variable, " stands in for --", fallback.flag,
                                              ", which is not a flag of ", program.name));
    }
    if (!env || line.given.count(fallback.flag) > 0) continue;
    const char* value = env(fallback.variable);
    if (value == nullptr || *value == '\0') continue;
    PL_RETURN_IF_ERROR(SetFlag(*it->second, value, absl::StrCat(fallback.variable, " (for --", fallback.flag, ")")));
    line.given.insert(fallback.flag);
  }
  for (const Assignment& a : scan.assignments) {
    PL_RETURN_IF_ERROR(SetFlag(*a.flag, a.value, absl::StrCat("--", a.name)));
  }
  return std::move(line);
}

CommandLine ParseOrExit(const Program& program, int argc, char** argv) {
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  StatusOr<CommandLine> line =
      Parse(program, args, [](const std::string& variable) { return std::getenv(variable.c_str()); });
  if (!line.ok()) ExitWithUsageError(program, line.status().message());
  if (line->action == CommandLine::Action::kRun) return *std::move(line);
  const std::string text = line->action == CommandLine::Action::kHelp ? HelpText(program) : VersionText(program);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  std::exit(0);
}

void ExitWithUsageError(const Program& program, absl::string_view message) {
  const std::string line = absl::StrCat(program.name, ": error: ", OneLine(message), "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  std::exit(kUsageExitCode);
}

void CheckOrExit(const Program& program, std::initializer_list<Status> checks) {
  for (const Status& s : checks) {
    if (!s.ok()) ExitWithUsageError(program, s.message());
  }
}

std::string HelpText(const Program& program) {
  std::string out = absl::StrCat("usage: ", program.name, " ", program.usage, "\n");
  if (!program.description.empty()) absl::StrAppend(&out, "\n", program.description, "\n");
  std::map<std::string, std::string> env_of;
  for (const EnvFallback& e : program.env) env_of[e.flag] = e.variable;
  absl::StrAppend(&out, "\nflags (--flag=value; --flag value for non-bools; --flag or --noflag for bools):\n");
  for (const auto& [name, flag] : ProgramFlags()) {
    std::string shown_default = flag->DefaultValue();
    if (flag->IsOfType<std::string>() || flag->IsOfType<std::vector<std::string>>()) {
      shown_default = absl::StrCat("\"", shown_default, "\"");
    }
    absl::StrAppend(&out, "  --", name, " (", TypeOf(*flag).name, ", default ", shown_default);
    if (auto e = env_of.find(name); e != env_of.end()) absl::StrAppend(&out, ", env ", e->second);
    absl::StrAppend(&out, ")\n");
    // The help text, wrapped at 88 columns under a 6-space indent.
    std::string row;
    for (absl::string_view word : absl::StrSplit(flag->Help(), absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      if (!row.empty() && row.size() + 1 + word.size() > 82) {
        absl::StrAppend(&out, "      ", row, "\n");
        row.clear();
      }
      absl::StrAppend(&row, row.empty() ? "" : " ", word);
    }
    if (!row.empty()) absl::StrAppend(&out, "      ", row, "\n");
  }
  absl::StrAppend(&out, "  --help, -h\n      print this help and exit\n",
                  "  --version\n      print the program's version and the commit it was built from, and exit\n");
  return out;
}

std::string VersionText(const Program& program) {
  return absl::StrCat(program.name, " ", ProjectVersion(), " (commit ", GitCommit(), ")\n");
}

const char* ProjectVersion() { return PL_PROJECT_VERSION; }
const char* GitCommit() { return PL_GIT_COMMIT; }

}  // namespace pl::cli
