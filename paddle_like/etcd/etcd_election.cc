#include "paddle_like/etcd/etcd_election.h"

#include "absl/strings/str_cat.h"

namespace pl::etcd {

using SteadyClock = std::chrono::steady_clock;

EtcdElection::EtcdElection(EtcdClient* client, Options options) : client_(client), options_(std::move(options)) {}

EtcdElection::~EtcdElection() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
}

Status EtcdElection::GrantLease() {
  const SteadyClock::time_point asked = SteadyClock::now();
  PL_ASSIGN_OR_RETURN(etcdserverpb::LeaseGrantResponse granted, client_->LeaseGrant(options_.ttl_s));
  lease_id_ = granted.id();
  granted_ttl_s_ = granted.ttl();
  lease_valid_until_ = asked + std::chrono::seconds(granted_ttl_s_);
  return absl::OkStatus();
}

StatusOr<Fence> EtcdElection::Campaign(const std::function<bool()>& stop) {
  std::string last_seen;  // the last leader (or error) logged
  auto note = [&](const std::string& line) {
    if (line != last_seen && options_.log) options_.log(line);
    last_seen = line;
  };
  const auto renew_every = [this] { return std::chrono::milliseconds(granted_ttl_s_ * 1000 / 3); };
  bool delayed = options_.first_delay <= absl::ZeroDuration();
  SteadyClock::time_point renewed = SteadyClock::now();
  while (!stop()) {
    Status st;
    if (lease_id_ == 0 || SteadyClock::now() >= lease_valid_until_) {
      st = GrantLease();
      renewed = SteadyClock::now();
    } else if (SteadyClock::now() - renewed >= renew_every()) {
      // A standby keeps its lease alive so that winning needs no new one.
      const SteadyClock::time_point sent = SteadyClock::now();
      StatusOr<int64_t> ttl = client_->LeaseKeepAliveOnce(lease_id_);
      renewed = sent;
      if (ttl.ok() && *ttl > 0) {
        lease_valid_until_ = sent + std::chrono::seconds(*ttl);
      } else if (ttl.ok()) {
        lease_id_ = 0;  // gone: take a new one
      }
      st = ttl.status();
    }
    if (st.ok() && lease_id_ != 0 && !delayed) {
      // The head start counts from when etcd first answers: masters started together
      // wait for etcd's quorum alike.
      delayed = true;
      for (const auto until = SteadyClock::now() + absl::ToChronoMilliseconds(options_.first_delay);
           SteadyClock::now() < until && !stop();) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      continue;  // renew the lease if the wait took much of it
    }
    if (st.ok() && lease_id_ != 0) {
      etcdserverpb::TxnRequest txn;
      etcdserverpb::Compare* absent = txn.add_compare();
      absent->set_key(options_.key);
      absent->set_target(etcdserverpb::Compare::CREATE);
      absent->set_result(etcdserverpb::Compare::EQUAL);
      absent->set_create_revision(0);
      etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
      put->set_key(options_.key);
      put->set_value(options_.value);
      put->set_lease(lease_id_);
      txn.add_failure()->mutable_request_range()->set_key(options_.key);
      StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
      if (response.ok() && response->succeeded()) {
        // The transaction may have taken most of the lease (etcd electing a leader of
        // its own after a member's loss): renew before leading, or lead not at all. A
        // lease that cannot be renewed takes the key with it; campaign on.
        const SteadyClock::time_point sent = SteadyClock::now();
        StatusOr<int64_t> ttl = client_->LeaseKeepAliveOnce(lease_id_, absl::Seconds(granted_ttl_s_));
        if (!ttl.ok() || *ttl <= 0) {
          note(absl::StrCat("won '", options_.key, "' but could not renew the lease: campaigning again (",
                            ttl.ok() ? "it ran out" : std::string(ttl.status().message()), ")"));
          lease_id_ = 0;
          continue;
        }
        lease_valid_until_ = sent + std::chrono::seconds(*ttl);
        Fence fence{options_.key, response->header().revision()};
        if (options_.log) {
          options_.log(absl::StrCat("leading: '", options_.key, "' created at revision ", fence.create_revision,
                                    " (lease ", granted_ttl_s_, " s)"));
        }
        return fence;
      }
      if (response.ok()) {
        const auto& kvs = response->responses(0).response_range().kvs();
        if (!kvs.empty()) {
          note(absl::StrCat("standing by: the leader is ", kvs[0].value(), " (term ", kvs[0].create_revision(), ")"));
        }
      }
      st = response.status();
    }
    if (!st.ok()) note(absl::StrCat("standing by: etcd unreachable, retrying: ", st.message()));
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(options_.poll));
  }
  return absl::CancelledError("stopped before this process led");
}

void EtcdElection::KeepLeading(std::function<void(const std::string&)> on_lost) {
  renewer_ = std::thread([this, on_lost = std::move(on_lost)]() mutable { RenewLoop(std::move(on_lost)); });
}

void EtcdElection::RenewLoop(std::function<void(const std::string&)> on_lost) {
  const auto every = std::chrono::milliseconds(std::max<int64_t>(granted_ttl_s_ * 1000 / 3, 50));
  std::string last_error;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    const SteadyClock::time_point next = std::min(SteadyClock::now() + every, lease_valid_until_);
    if (stop_cv_.wait_until(lock, next, [this] { return stopping_; })) return;
    lock.unlock();
    const SteadyClock::time_point sent = SteadyClock::now();
    std::string lost;
    if (sent >= lease_valid_until_) {
      lost = absl::StrCat("the lease on '", options_.key, "' could not be renewed within its ", granted_ttl_s_,
                          " s", last_error.empty() ? "" : absl::StrCat(" (", last_error, ")"));
    } else {
      // Bounded by the lease: an answer later than that cannot keep this process leading.
      const absl::Duration left = absl::FromChrono(lease_valid_until_ - sent);
      StatusOr<int64_t> ttl = client_->LeaseKeepAliveOnce(lease_id_, left);
      if (ttl.ok() && *ttl > 0) {
        lease_valid_until_ = sent + std::chrono::seconds(*ttl);
        last_error.clear();
      } else if (ttl.ok()) {
        lost = absl::StrCat("etcd says the lease on '", options_.key, "' has run out");
      } else {
        last_error = std::string(ttl.status().message());
      }
    }
    if (!lost.empty()) {
      on_lost(lost);
      return;
    }
    lock.lock();
  }
}

void EtcdElection::Resign() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (lease_id_ != 0) (void)client_->LeaseRevoke(lease_id_);
  lease_id_ = 0;
}

}  // namespace pl::etcd
