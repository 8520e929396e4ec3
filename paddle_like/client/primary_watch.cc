#include "paddle_like/client/primary_watch.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/log.h"
#include "paddle_like/rpc/rpc.h"

namespace pl {
namespace {

constexpr absl::Duration kMaxInterval = absl::Milliseconds(1600);
constexpr int kSteadyAsks = 6;

}  // namespace

PrimaryWatch::PrimaryWatch(Resolver resolve, absl::Duration slow, absl::Duration every)
    : resolve_(std::move(resolve)), slow_(slow), every_(every), thread_([this] { Run(); }) {}

PrimaryWatch::~PrimaryWatch() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

PrimaryWatch::Call::Call(PrimaryWatch* watch, int shard, std::string address, absl::Duration timeout)
    : watch_(watch), context_(rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)))) {
  if (watch_ == nullptr) return;
  absl::MutexLock l(&watch_->mu_);
  watch_->calls_.push_back({context_.get(), shard, std::move(address), absl::Now(), false});
}

PrimaryWatch::Call::~Call() {
  if (watch_ == nullptr) return;
  absl::MutexLock l(&watch_->mu_);
  auto& calls = watch_->calls_;
  calls.erase(std::remove_if(calls.begin(), calls.end(),
                             [this](const Watched& w) { return w.context == context_.get(); }),
              calls.end());
}

void PrimaryWatch::Run() {
  absl::Time next_ask = absl::InfinitePast();
  // Steady for the first asks (a lease's worth: when a promotion comes), then doubling
  // while the answers change nothing (a sync barrier's long wait: many trainers must
  // not each ask the master 5 times a second); back to `every_` once no call is slow.
  absl::Duration interval = every_;
  int asks = 0;
  while (true) {
    bool slow_call = false;
    {
      absl::MutexLock l(&mu_);
      auto stopping = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), std::min(every_, slow_) / 2);
      if (stop_) return;
      const absl::Time now = absl::Now();
      for (const Watched& w : calls_) slow_call = slow_call || now - w.started >= slow_;
      if (!slow_call) {
        interval = every_;
        asks = 0;
      }
      if (!slow_call || now < next_ask) continue;
      next_ask = now + interval;
      if (++asks > kSteadyAsks) interval = std::min(interval * 2, kMaxInterval);
    }
    // Asked with no lock held: the calls come and go meanwhile.
    StatusOr<std::vector<std::string>> primaries = resolve_();
    if (!primaries.ok()) continue;
    absl::MutexLock l(&mu_);
    for (Watched& w : calls_) {
      if (w.cancelled || w.shard < 0 || w.shard >= static_cast<int>(primaries->size())) continue;
      const std::string& now_at = (*primaries)[w.shard];
      if (now_at.empty() || now_at == w.address) continue;
      w.context->TryCancel();
      w.cancelled = true;
      ++cancelled_;
      interval = every_;
      asks = 0;
      log::Info(absl::StrCat("pserver ", w.shard, ": the master names ", now_at, " its primary now; ending the call ",
                             "to ", w.address, " after ", absl::FormatDuration(absl::Now() - w.started)));
    }
  }
}

}  // namespace pl
