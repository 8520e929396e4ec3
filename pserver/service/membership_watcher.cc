#include "pserver/service/membership_watcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/backoff.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/core/log.h"

namespace pl::pserver {

MembershipWatcher::MembershipWatcher(MembershipWatcherOptions options, Callback on_membership)
    : options_(std::move(options)),
      on_membership_(std::move(on_membership)),
      master_(options_.master_address) {}

MembershipWatcher::~MembershipWatcher() { Stop(); }

void MembershipWatcher::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void MembershipWatcher::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

bool MembershipWatcher::registered() const {
  absl::MutexLock l(&mu_);
  return registered_;
}

bool MembershipWatcher::Register() {
  proto::RegisterPserverRequest request;
  request.set_index(options_.register_index);
  request.set_address(options_.register_address);
  request.set_incarnation(options_.incarnation);
  request.set_started_empty(options_.started_empty);
  request.set_restored_version(options_.restored_version);
  if (options_.describe) options_.describe(&request);
  const StatusOr<proto::RegisterPserverResponse> registered =
      master_.RegisterPserver(request, MasterCallPolicy::Once(options_.rpc_timeout));
  if (!registered.ok()) return false;
  const proto::RegisterPserverResponse& response = *registered;
  bool first = false;
  {
    absl::MutexLock l(&mu_);
    first = !registered_;
    registered_ = true;
  }
  if (first) {
    log::Info(absl::StrCat("registered with master ",
                          options_.master_address, " as ", options_.register_address,
                          " (generation ", response.generation(), ")"));
  }
  if (options_.num_pservers > 0 && response.num_pservers() > 0 &&
      response.num_pservers() != options_.num_pservers && first) {
    log::Warning(absl::StrCat("the master expects ",
                          response.num_pservers(), " pservers, this one was started with --num_pservers ",
                          options_.num_pservers));
  }
  return true;
}

bool MembershipWatcher::Poll() {
  const StatusOr<proto::MembershipResponse> polled = master_.Membership(MasterCallPolicy::Once(options_.rpc_timeout));
  if (!polled.ok()) return false;
  const proto::MembershipResponse& response = *polled;
  std::vector<int64_t> live;
  live.reserve(response.trainers_size());
  // Only trainers holding a task take part in sync steps: one waiting for work at the
  // end of a pass pushes nothing, and counting it would stall the barrier.
  for (const proto::TrainerInfo& t : response.trainers()) {
    if (t.task_id() != 0) live.push_back(t.id());
  }
  if (on_membership_) on_membership_(live);
  return true;
}

void MembershipWatcher::Run() {
  // While the master is down: twice the poll interval, doubling up to max_backoff.
  BackoffOptions backoff_options;
  backoff_options.initial = std::min(options_.poll_interval * 2, options_.max_backoff);
  backoff_options.max = options_.max_backoff;
  Backoff backoff(absl::InfiniteDuration(), backoff_options);  // never gives up
  absl::Time next_register = absl::InfinitePast();
  bool reachable = true;
  std::string last_error;
  while (!stop_.HasBeenNotified()) {
    bool ok = true;
    if (options_.register_index >= 0 && absl::Now() >= next_register) {
      ok = Register();
      if (ok) next_register = absl::Now() + options_.register_interval;
    }
    if (ok) ok = Poll();
    if (ok != reachable) {
      log::Warning(absl::StrCat("master ",
                            options_.master_address, ok ? " is reachable again" : " is unreachable; retrying"));
      reachable = ok;
    }
    // Back off while the master is down; poll at the normal rate once it answers.
    if (ok) backoff.Reset();
    stop_.WaitForNotificationWithTimeout(ok ? options_.poll_interval : backoff.NextWait());
  }
}

}  // namespace pl::pserver
