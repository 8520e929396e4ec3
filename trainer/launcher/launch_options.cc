#include "trainer/launcher/launch_options.h"

#include <functional>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pl {

namespace {

Status BadValue(const std::string& flag, const std::string& value, const std::string& want) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", value, "' is not ", want));
}

template <typename T>
Status ParseInt(const std::string& flag, const std::string& value, T min, T* out) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) return BadValue(flag, value, "an integer");
  if (v < static_cast<int64_t>(min)) return BadValue(flag, value, absl::StrCat(">= ", min));
  if (static_cast<int64_t>(static_cast<T>(v)) != v) return BadValue(flag, value, "in range");
  *out = static_cast<T>(v);
  return absl::OkStatus();
}

Status ParseSeconds(const std::string& flag, const std::string& value, bool strictly_positive,
                    double* out) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !(v == v)) return BadValue(flag, value, "a number of seconds");
  if (v < 0 || (strictly_positive && v == 0)) {
    return BadValue(flag, value, strictly_positive ? "> 0" : ">= 0");
  }
  *out = v;
  return absl::OkStatus();
}

}  // namespace

std::string LaunchUsage() {
  return "usage: pl-launch --pservers P --trainers T [--sync] [--workdir DIR] [--data PATH]\n"
         "                 [--passes N] [--chunks_per_task K] [--lease_ms MS] [--seed S]\n"
         "                 [--checkpoint_every_s S] [--kill_trainer_after_s X]\n"
         "                 [--add_trainer_after_s Y] [--control FIFO] [--progress_every_s S]\n"
         "                 -- <trainer command...>\n"
         "Runs a master, P pservers and T trainers on 127.0.0.1, restarts the master and\n"
         "pservers when they die, and exits 0 when the job is done.\n"
         "Control FIFO lines: add-trainer | kill-trainer [rank] | stop-trainer [rank] |\n"
         "                    kill-pserver INDEX | kill-master\n";
}

StatusOr<LaunchOptions> ParseLaunchFlags(const std::vector<std::string>& args) {
  LaunchOptions o;
  bool have_pservers = false, have_trainers = false, have_separator = false;
  using Setter = std::function<Status(const std::string& flag, const std::string& value)>;
  const std::map<std::string, Setter> valued = {
      {"pservers", [&](auto& f, auto& v) { have_pservers = true; return ParseInt(f, v, 1, &o.num_pservers); }},
      {"trainers", [&](auto& f, auto& v) { have_trainers = true; return ParseInt(f, v, 1, &o.num_trainers); }},
      {"workdir", [&](auto& f, auto& v) { o.workdir = v; return absl::OkStatus(); }},
      {"data", [&](auto& f, auto& v) { o.data = v; return absl::OkStatus(); }},
      {"passes", [&](auto& f, auto& v) { return ParseInt(f, v, 1, &o.passes); }},
      {"chunks_per_task", [&](auto& f, auto& v) { return ParseInt(f, v, 1, &o.chunks_per_task); }},
      {"lease_ms", [&](auto& f, auto& v) { return ParseInt<int64_t>(f, v, 100, &o.lease_ms); }},
      {"seed", [&](auto& f, auto& v) {
         if (!absl::SimpleAtoi(v, &o.seed)) return BadValue(f, v, "a non-negative integer");
         return absl::OkStatus();
       }},
      {"checkpoint_every_s", [&](auto& f, auto& v) { return ParseInt(f, v, 0, &o.checkpoint_every_s); }},
      {"kill_trainer_after_s", [&](auto& f, auto& v) { return ParseSeconds(f, v, false, &o.kill_trainer_after_s); }},
      {"add_trainer_after_s", [&](auto& f, auto& v) { return ParseSeconds(f, v, false, &o.add_trainer_after_s); }},
      {"control", [&](auto& f, auto& v) { o.control_fifo = v; return absl::OkStatus(); }},
      {"progress_every_s", [&](auto& f, auto& v) { return ParseSeconds(f, v, true, &o.progress_every_s); }},
  };

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      o.trainer_command.assign(args.begin() + i + 1, args.end());
      have_separator = true;
      break;
    }
    if (arg == "--help" || arg == "-h") {
      o.show_help = true;
      return o;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument '", arg, "' (the trainer command goes after '--')"));
    }
    std::string name = arg.substr(2), value;
    bool inline_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    if (name == "sync") {
      if (inline_value) return absl::InvalidArgumentError("--sync takes no value");
      o.sync = true;
      continue;
    }
    auto it = valued.find(name);
    if (it == valued.end()) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    if (!inline_value) {
      if (i + 1 >= args.size() || args[i + 1] == "--") {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = args[++i];
    }
    PL_RETURN_IF_ERROR(it->second(name, value));
  }
  if (!have_pservers) return absl::InvalidArgumentError("--pservers is required (>= 1)");
  if (!have_trainers) return absl::InvalidArgumentError("--trainers is required (>= 1)");
  if (!have_separator || o.trainer_command.empty() || o.trainer_command[0].empty()) {
    return absl::InvalidArgumentError("no trainer command: put it after '--', e.g. -- pl-trainer --model mlp");
  }
  return o;
}

}  // namespace pl
