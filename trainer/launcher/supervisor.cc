#include "trainer/launcher/supervisor.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "paddle_like/core/log.h"

namespace pl {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Supervisor::Supervisor(SupervisorOptions options, LineSink sink)
    : options_(options), sink_(std::move(sink)) {}

Supervisor::~Supervisor() {
  for (auto& [name, e] : entries_) {
    if (e.child && !e.child->Poll()) {
      e.child->Signal(SIGKILL).IgnoreError();
      e.child->WaitFor(std::chrono::seconds(5));
    }
  }
}

void Supervisor::Log(const std::string& message) {
  std::string line = log::FormatLine(absl::Now(), log::Level::kInfo, "launch", message);
  line.pop_back();  // the sink ends each line itself
  sink_("[launch] " + line);
}

Status Supervisor::Start(const ProcessSpec& spec) {
  if (spec.name.empty()) return absl::InvalidArgumentError("Supervisor::Start: empty process name");
  if (entries_.count(spec.name)) {
    return absl::AlreadyExistsError(absl::StrCat("a process named '", spec.name, "' already exists"));
  }
  Entry entry;
  entry.spec = spec;
  entry.spec.child.output = ChildSpec::Output::kPipe;
  entry.next_delay = options_.restart_delay;
  PL_RETURN_IF_ERROR(Annotate(Launch(&entry), spec.name));
  entries_.emplace(spec.name, std::move(entry));
  return absl::OkStatus();
}

Status Supervisor::Launch(Entry* entry) {
  PL_ASSIGN_OR_RETURN(entry->child, ChildProcess::Start(entry->spec.child));
  entry->state = State::kRunning;
  entry->started_at = Clock::now();
  entry->partial.clear();
  return absl::OkStatus();
}

void Supervisor::EmitLines(Entry* entry, bool flush_partial) {
  std::string& buf = entry->partial;
  size_t start = 0;
  while (true) {
    size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    sink_(absl::StrCat("[", entry->spec.name, "] ", absl::string_view(buf).substr(start, nl - start)));
    start = nl + 1;
  }
  buf.erase(0, start);
  while (buf.size() >= options_.max_line_bytes) {
    sink_(absl::StrCat("[", entry->spec.name, "] ", absl::string_view(buf).substr(0, options_.max_line_bytes)));
    buf.erase(0, options_.max_line_bytes);
  }
  if (flush_partial && !buf.empty()) {
    sink_(absl::StrCat("[", entry->spec.name, "] ", buf));
    buf.clear();
  }
}

void Supervisor::ReadOutput(Entry* entry) {
  if (!entry->child || entry->child->output_fd() < 0) return;
  char chunk[16384];
  while (true) {
    ssize_t n = ::read(entry->child->output_fd(), chunk, sizeof(chunk));
    if (n > 0) {
      entry->partial.append(chunk, n);
      EmitLines(entry, /*flush_partial=*/false);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // EOF (or a broken pipe): nothing more will come.
    EmitLines(entry, /*flush_partial=*/true);
    entry->child->CloseOutput();
    return;
  }
}

ProcessEvent Supervisor::OnExit(Entry* entry) {
  ReadOutput(entry);
  EmitLines(entry, /*flush_partial=*/true);
  entry->child->CloseOutput();

  ProcessEvent event;
  event.name = entry->spec.name;
  event.exit = entry->child->exit_info();
  const std::string how = event.exit.Describe();
  if (entry->spec.restart != RestartPolicy::kAlways || entry->stopping) {
    entry->state = State::kExited;
    Log(absl::StrCat(event.name, " exited (", how, ")"));
    return event;
  }
  const auto ran_for = Clock::now() - entry->started_at;
  if (ran_for >= options_.healthy_after) {
    entry->quick_failures = 0;
    entry->next_delay = options_.restart_delay;
  }
  ++entry->quick_failures;
  if (entry->quick_failures > options_.max_quick_failures) {
    entry->state = State::kGaveUp;
    event.gave_up = true;
    Log(absl::StrCat(event.name, " exited (", how, "); it failed ", entry->quick_failures,
                     " times in a row, each within ",
                     std::chrono::duration_cast<std::chrono::seconds>(options_.healthy_after).count(),
                     " s of starting: giving up"));
    return event;
  }
  entry->state = State::kRestartPending;
  entry->restart_at = Clock::now() + entry->next_delay;
  entry->next_delay = std::min(entry->next_delay * 2, options_.max_restart_delay);
  event.will_restart = true;
  Log(absl::StrCat(event.name, " exited (", how, "); restarting",
                   entry->spec.restart_note.empty() ? "" : " ", entry->spec.restart_note));
  return event;
}

void Supervisor::StartDueRestarts() {
  const auto now = Clock::now();
  for (auto& [name, e] : entries_) {
    if (e.state != State::kRestartPending || now < e.restart_at || e.stopping) continue;
    Status s = Launch(&e);
    ++e.restarts;
    if (s.ok()) {
      Log(absl::StrCat(name, " restarted (pid ", e.child->pid(), ", restart ", e.restarts, ")"));
      continue;
    }
    ++e.quick_failures;
    if (e.quick_failures > options_.max_quick_failures) {
      e.state = State::kGaveUp;
      Log(absl::StrCat(name, " could not be restarted: ", s.message(), "; giving up"));
    } else {
      e.restart_at = now + e.next_delay;
      e.next_delay = std::min(e.next_delay * 2, options_.max_restart_delay);
      Log(absl::StrCat(name, " could not be restarted: ", s.message(), "; trying again"));
    }
  }
}

std::vector<ProcessEvent> Supervisor::Pump(milliseconds timeout, const std::vector<int>& watch_fds,
                                           std::vector<int>* ready_fds) {
  // Wake up in time for the earliest due restart.
  const auto now = Clock::now();
  for (const auto& [name, e] : entries_) {
    if (e.state == State::kRestartPending) {
      auto until = std::chrono::duration_cast<milliseconds>(e.restart_at - now);
      timeout = std::max(milliseconds(0), std::min(timeout, until));
    }
  }
  std::vector<pollfd> fds;
  std::vector<Entry*> owners;
  for (auto& [name, e] : entries_) {
    if (e.child && e.child->output_fd() >= 0) {
      fds.push_back({e.child->output_fd(), POLLIN, 0});
      owners.push_back(&e);
    }
  }
  const size_t num_children = fds.size();
  // A child's exit wakes the poll at once (its pidfd): the master hears of a dead pserver
  // copy without the wait for the next tick; its output pipe closes a moment before it
  // can be reaped, so that alone would race.
  for (auto& [name, e] : entries_) {
    if (e.state == State::kRunning && e.child->exit_fd() >= 0) fds.push_back({e.child->exit_fd(), POLLIN, 0});
  }
  const size_t first_watched = fds.size();
  for (int fd : watch_fds) fds.push_back({fd, POLLIN, 0});
  int n = ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  if (n > 0) {
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      if (i < num_children) {
        ReadOutput(owners[i]);
      } else if (i >= first_watched && ready_fds != nullptr) {
        ready_fds->push_back(fds[i].fd);
      }
    }
  }
  std::vector<ProcessEvent> events;
  for (auto& [name, e] : entries_) {
    if (e.state == State::kRunning && e.child->Poll()) events.push_back(OnExit(&e));
  }
  StartDueRestarts();
  return events;
}

Status Supervisor::Signal(const std::string& name, int sig) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return absl::NotFoundError(absl::StrCat("no process named '", name, "'"));
  if (it->second.state != State::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat(name, " is not running"));
  }
  return it->second.child->Signal(sig);
}

Status Supervisor::SetCommand(const std::string& name, std::vector<std::string> argv) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return absl::NotFoundError(absl::StrCat("no process named '", name, "'"));
  if (argv.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": empty command line"));
  it->second.spec.child.argv = std::move(argv);
  return absl::OkStatus();
}

Status Supervisor::SetRestartPolicy(const std::string& name, RestartPolicy policy) {
  auto it = entries_.find(name);
  if (it == entries_.end()) return absl::NotFoundError(absl::StrCat("no process named '", name, "'"));
  it->second.spec.restart = policy;
  return absl::OkStatus();
}

std::vector<ProcessEvent> Supervisor::Stop(const std::vector<std::string>& names, milliseconds grace) {
  std::vector<ProcessEvent> events;
  std::vector<Entry*> waiting;
  for (const std::string& name : names) {
    auto it = entries_.find(name);
    if (it == entries_.end()) continue;
    Entry& e = it->second;
    e.stopping = true;
    if (e.state == State::kRestartPending) e.state = State::kExited;
    if (e.state != State::kRunning) continue;
    e.child->Signal(SIGTERM).IgnoreError();
    waiting.push_back(&e);
  }
  auto all_exited = [&] {
    for (Entry* e : waiting) {
      if (e->state == State::kRunning && !e->child->Poll()) return false;
    }
    return true;
  };
  auto collect = [&] {
    for (Entry* e : waiting) {
      if (e->state == State::kRunning && e->child->Poll()) events.push_back(OnExit(e));
    }
  };
  const auto term_deadline = Clock::now() + grace;
  while (!all_exited() && Clock::now() < term_deadline) {
    for (auto& ev : Pump(milliseconds(20))) events.push_back(ev);
  }
  collect();
  bool killed = false;
  for (Entry* e : waiting) {
    if (e->state == State::kRunning) {
      Log(absl::StrCat(e->spec.name, " did not stop within ",
                       std::chrono::duration_cast<milliseconds>(grace).count(), " ms of SIGTERM; sending SIGKILL"));
      e->child->Signal(SIGKILL).IgnoreError();
      killed = true;
    }
  }
  if (killed) {
    const auto kill_deadline = Clock::now() + std::chrono::seconds(10);
    while (!all_exited() && Clock::now() < kill_deadline) {
      for (auto& ev : Pump(milliseconds(20))) events.push_back(ev);
    }
    collect();
  }
  return events;
}

std::vector<ProcessEvent> Supervisor::StopAll(milliseconds grace) {
  std::vector<std::string> names;
  for (const auto& [name, e] : entries_) names.push_back(name);
  return Stop(names, grace);
}

bool Supervisor::IsRunning(const std::string& name) const {
  auto it = entries_.find(name);
  return it != entries_.end() && it->second.state == State::kRunning;
}

bool Supervisor::IsAlive(const std::string& name) const {
  auto it = entries_.find(name);
  return it != entries_.end() &&
         (it->second.state == State::kRunning || it->second.state == State::kRestartPending);
}

pid_t Supervisor::Pid(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.state != State::kRunning) return -1;
  return it->second.child->pid();
}

int Supervisor::Restarts(const std::string& name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? 0 : it->second.restarts;
}

std::vector<std::string> Supervisor::Running(const std::string& prefix) const {
  std::vector<std::string> out;
  for (const auto& [name, e] : entries_) {
    if (e.state == State::kRunning && absl::StartsWith(name, prefix)) out.push_back(name);
  }
  return out;
}

}  // namespace pl
