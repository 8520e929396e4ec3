#include "paddle_like/client/pserver_shards.h"

#include <algorithm>
#include <future>
#include <random>

#include "absl/strings/str_cat.h"
#include "paddle_like/client/backoff.h"
#include "paddle_like/client/dense_channel_attach.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/core/log.h"
#include "paddle_like/dist/dense_link.h"
#include "paddle_like/dist/sharding.h"
#include "paddle_like/dist/wire.h"
#include "paddle_like/rpc/rpc.h"
#include "paddle_like/rpc/tls.h"

namespace pl {

PserverShards::PserverShards(KeyStore* keys, const ParameterClientOptions* options, Resolver resolve,
                             const std::atomic<bool>* stop)
    : keys_(keys), options_(options), resolve_(std::move(resolve)), stop_(stop) {
  for (int i = 0; i < options_->num_pservers; ++i) {
    shards_.push_back(std::make_unique<PserverShard>(i, options_->wire_dtype, &residuals_));
  }
  // Each pserver's dense blocks, in the order pushes and pulls list them (a region's
  // layout: gradients of every slot, then values of every slot).
  for (const NamedParameter& np : keys_->keys()) {
    if (np.param->kind != ParamKind::kDense) continue;
    const int64_t numel = np.param->var.value().numel();
    for (int64_t b = 0; b < NumBlocks(numel, kDefaultBlockSize); ++b) {
      PserverShard& sh = *shards_[ShardOfDenseBlock(np.name, b, options_->num_pservers)];
      const int64_t n = std::min<int64_t>(kDefaultBlockSize, numel - b * kDefaultBlockSize);
      sh.slots.push_back({np.name, static_cast<int32_t>(b), n, sh.slot_bytes, 0});
      sh.slot_bytes += (n * 4 + 63) / 64 * 64;  // cache-line aligned blocks
    }
  }
  for (auto& sh : shards_) {
    for (DenseSlot& slot : sh->slots) slot.value_offset = sh->slot_bytes + slot.grad_offset;
  }
  if (resolve_) {
    watch_ = std::make_unique<PrimaryWatch>([this] {
      std::lock_guard<std::mutex> lock(resolve_mu_);
      return resolve_();
    });
  }
  for (int i = 1; i < options_->num_pservers; ++i) shard_threads_.push_back(std::make_unique<TaskThread>());
  client_id_ = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  for (const proto::ParamSpec& spec : ParamSpecsOf(keys_->keys())) *init_request_.add_params() = spec;
  *init_request_.mutable_optimizer() = OptimizerToProto(options_->optimizer);
  init_request_.set_seed(options_->seed);
  init_request_.set_sync(options_->sync);
}

PserverShards::~PserverShards() = default;

Status PserverShards::Resolve(int only) {
  PL_ASSIGN_OR_RETURN(std::vector<std::string> addresses, resolve_());
  if (static_cast<int>(addresses.size()) != options_->num_pservers) {
    return absl::FailedPreconditionError(absl::StrCat("expected ", options_->num_pservers,
                                                      " pserver addresses, the master gave ", addresses.size()));
  }
  for (int i = 0; i < options_->num_pservers; ++i) {
    if (only >= 0 && i != only) continue;
    PserverShard& s = *shards_[i];
    if (s.address != addresses[i] || !s.stub) {
      s.address = addresses[i];
      // Another pserver (maybe on another host): its region channel is gone, a push
      // prepared in it goes over gRPC, and a region is offered afresh.
      if (s.region) DropRegion(s, absl::UnavailableError(absl::StrCat("the pserver moved to ", s.address)));
      s.shm_refusal.clear();
      s.link_refusal.clear();
      s.link_retry_at = absl::InfiniteFuture();
      std::shared_ptr<grpc::Channel> channel = rpc::MakeChannel(s.address);
      s.stub = proto::ParameterServer::NewStub(channel);
      s.frames = std::make_unique<PserverFrameStub>(channel);
    }
  }
  return absl::OkStatus();
}

Status PserverShards::CallWithRetry(int i, const Attempt& attempt,
                                      const char* what) {
  // Short waits: a replicated shard's backup takes over within a second, and the
  // trainer should be back as soon as it has (a call to a dead address costs nothing;
  // each retry asks the master for the shard's primary). Doubling to seconds would
  // add up to a wait's length to every failover.
  BackoffOptions waits;
  waits.initial = absl::Milliseconds(25);
  waits.max = absl::Milliseconds(100);
  Backoff backoff(options_->give_up_after, waits);
  PserverShard& shard = *shards_[i];
  bool reinitialised = false;
  while (true) {
    Status s = attempt(shard);
    if (s.ok()) return s;
    if (absl::IsNotFound(s) && !reinitialised) {
      // A pserver restarted without a checkpoint knows no parameters: recreate them
      // (deterministically, so every trainer agrees) and try again.
      reinitialised = true;
      bool created = false;
      Status init = InitShard(shard, &created);  // logs what it did when it created them
      if (init.ok()) {
        if (!created) {
          log::Warning(absl::StrCat("pserver ", i, " (", shard.address, ") had no parameters (", s.message(),
                                    "): another trainer had initialised it again; continuing at its version ",
                                    shard.version));
        }
        AlignSyncStep(i, shard, /*waited_in_vain=*/true);
        continue;
      }
      s = init;
    }
    if (!rpc::IsRetryable(s) || backoff.Expired() || (stop_ && stop_->load())) {
      return Annotate(s, absl::StrCat(what, " pserver ", i, " (", shard.address, ")"));
    }
    backoff.Wait();
    ++retries_;
    // The pserver may have come back on another port: ask the master again.
    {
      std::lock_guard<std::mutex> lock(resolve_mu_);
      Status r = Resolve(i);
      (void)r;  // a failed lookup is retried with the call
    }
    // A shard that came back with no parameters is made again here (InitShard logs it).
    if (options_->sync && InitShard(shard).ok()) {
      AlignSyncStep(i, shard, /*waited_in_vain=*/absl::IsDeadlineExceeded(s));
    }
  }
}

StatusOr<int64_t> PserverShards::WaitForVersion(int i, int64_t version, absl::Duration timeout) {
  PserverShard& shard = *shards_[i];
  if (shard.version >= version) return shard.version;
  proto::PullRequest request;  // no blocks, no rows: the version alone
  request.set_trainer_id(trainer_id_);
  request.set_min_version(version);
  auto ctx = rpc::MakeContext(std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout))));
  PullFrame response;
  Status st = shard.grpc.Pull(*shard.frames, ctx.get(), request, &response);
  if (st.ok()) {
    shard.version = std::max(shard.version, response.header().version());
    return shard.version;
  }
  if (absl::IsDeadlineExceeded(st)) return shard.version;
  if (!rpc::IsRetryable(st)) return Annotate(st, absl::StrCat("waiting for step ", version, " of pserver ", i));
  ++retries_;
  std::lock_guard<std::mutex> lock(resolve_mu_);
  (void)Resolve(i);  // it may be back elsewhere; a failed lookup is tried again next time
  return shard.version;
}

void PserverShards::AlignSyncStep(int i, PserverShard& shard, bool waited_in_vain) {
  if (!options_->sync || options_->virtual_trainers) return;
  // A shard that came back from a checkpoint (or empty) is at an earlier step than
  // this trainer: carry on from its step, or the push and the pull would wait for a
  // step that never comes. A replica that took over may be one step behind for a
  // moment (it completes the step it had when it becomes primary), so only a larger
  // gap counts, unless a pull already waited out its deadline with the shard still
  // there: then this trainer's push of that step is gone, and it goes again.
  const int64_t gap = std::max(shard.push.header().step(), shard.pull.min_version()) - shard.version;
  if (gap <= (waited_in_vain ? 0 : 1)) return;
  log::Warning(absl::StrCat("pserver ", i, " (", shard.address, ") is at step ", shard.version,
                            ", behind this trainer's step ", shard.version + gap, ": continuing from its step"));
  if (shard.push.header().step() > shard.version) shard.push.header().set_step(shard.version);
  if (shard.pull.min_version() > shard.version) shard.pull.set_min_version(shard.version);
}

Status PserverShards::ForEachShard(const std::function<Status(int)>& fn) {
  if (shards_.size() == 1) return fn(0);
  std::vector<std::future<Status>> futures;
  for (size_t i = 1; i < shards_.size(); ++i) {
    futures.push_back(shard_threads_[i - 1]->Run([&fn, i] { return fn(static_cast<int>(i)); }));
  }
  Status first = fn(0);
  for (auto& f : futures) {
    Status s = f.get();
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

Status PserverShards::InitShard(PserverShard& shard, bool* created) {
  // What this trainer's copy of the shard has learned: 0 before its first exchange.
  const int64_t seen = shard.version;
  proto::InitRequest request = init_request_;  // shards are initialised in parallel
  request.set_learned_version(seen);
  proto::InitResponse resp;
  auto ctx = rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(options_->call_timeout)));
  PL_RETURN_IF_ERROR(rpc::FromGrpc(shard.stub->Init(ctx.get(), request, &resp)));
  if (created != nullptr) *created = resp.created();
  shard.version = resp.version();
  shard.wait_version = resp.version();
  if (resp.restore_ticket() != 0) {
    // The shard lost every copy and was made again from the seed (by this call or
    // another trainer's): give it this trainer's copy of its values instead, which in
    // sync mode is the last step's.
    const Status restored = RestoreShard(shard, resp.restore_ticket(), seen);
    log::Warning(restored.ok()
                     ? absl::StrCat("pserver ", shard.index, " (", shard.address,
                                    ") had lost its parameters: gave it this trainer's copy of them (version ", seen,
                                    "); its optimizer state and sparse rows start over")
                     : absl::StrCat("pserver ", shard.index, " (", shard.address,
                                    ") had lost its parameters; this trainer's copy could not replace the seed's: ",
                                    restored.message()));
  } else if (resp.created() && seen > 0) {
    log::Warning(absl::StrCat("pserver ", shard.index, " (", shard.address,
                              ") had lost its parameters: initialised it again from the seed; what it had learned is "
                              "lost"));
  }
  return absl::OkStatus();
}

Status PserverShards::RestoreShard(PserverShard& shard, uint64_t ticket, int64_t version) {
  proto::InitRequest request;
  request.set_restore_ticket(ticket);
  request.set_learned_version(version);
  for (const DenseSlot& slot : shard.slots) {
    PL_ASSIGN_OR_RETURN(Parameter * p, keys_->Find(slot.param));
    const float* values = p->var.value().f32() + int64_t{slot.block} * kDefaultBlockSize;
    proto::DenseBlock& b = *request.add_restore();
    b.set_param(slot.param);
    b.set_block(slot.block);
    b.set_values(reinterpret_cast<const char*>(values), slot.n * sizeof(float));
  }
  if (request.restore_size() == 0) return absl::OkStatus();  // a shard of sparse rows only
  proto::InitResponse resp;
  auto ctx = rpc::MakeContext(std::chrono::milliseconds(absl::ToInt64Milliseconds(options_->call_timeout)));
  PL_RETURN_IF_ERROR(rpc::FromGrpc(shard.stub->Init(ctx.get(), request, &resp)));
  if (!resp.restored()) return absl::InternalError("the pserver did not say it took the values");
  return absl::OkStatus();
}

Status PserverShards::ResolveWithRetry() {
  const absl::Time give_up = absl::Now() + options_->give_up_after;
  while (true) {
    Status s = Resolve();
    if (s.ok()) return s;
    if (absl::Now() > give_up || (stop_ && stop_->load())) return s;
    absl::SleepFor(absl::Milliseconds(200));
  }
}

Status PserverShards::Connect() {
  PL_RETURN_IF_ERROR(ResolveWithRetry());
  PL_RETURN_IF_ERROR(ForEachShard([this](int i) {
    PL_RETURN_IF_ERROR(CallWithRetry(i, [this](PserverShard& s) { return InitShard(s); }, "init"));
    TryAttach(*shards_[i]);
    return absl::OkStatus();
  }));
  connected_ = true;
  return absl::OkStatus();
}

PserverShards::Attempt PserverShards::PullAttempt(PullFrame* response, bool fall_back) {
  return [this, response, fall_back](PserverShard& s) {
    const PrimaryWatch::Call ctx = WatchedCall(s);
    Status st = s.channel().Pull(*s.frames, ctx.get(), s.pull, response);
    // The pserver forgot the region, or the link failed: gRPC until offered again.
    if (absl::IsAborted(st) && fall_back && s.region) DropRegion(s, st);
    return st;
  };
}

PserverShards::Attempt PserverShards::PushAttempt(proto::PushResponse* response,
                                                                            PullFrame* values, bool fall_back) {
  return [this, response, values, fall_back](PserverShard& s) {
    const PrimaryWatch::Call ctx = WatchedCall(s);
    DenseChannel& channel = *s.pushing;
    const bool bring_values = s.one_call && values != nullptr && channel.push_brings_values();
    Status st = channel.Push(*s.frames, ctx.get(), s.push, s.prepared, bring_values, response, values);
    if (st.ok()) s.values_came = bring_values;
    // The pserver forgot the region or the link failed: the gradients go again over
    // gRPC (a push that was applied is known by its number and not applied twice).
    if (absl::IsAborted(st) && fall_back && channel.has_region()) DropRegion(s, st);
    // The push was built on the parameters of version `step`; the shard answers with
    // its version after applying it, so the difference less this push is what others
    // applied in between (a deferred push answers before it applies: a lower bound).
    if (st.ok()) s.staleness = std::max<int64_t>(0, response->version() - s.push.header().step() - 1);
    return st;
  };
}

void PserverShards::DropRegion(PserverShard& s, const Status& why) {
  if (!s.region) return;
  if (absl::IsAborted(why) && s.region->duplex()) {
    log::Warning(absl::StrCat("pserver ", s.index, " (", s.address, "): the dense link failed (", why.message(),
                              "); this step goes over gRPC, a new link is asked for with the next"));
  }
  // A push prepared in the region: its gradients as a gRPC frame, sent as they are.
  if (s.pushing == s.region.get()) {
    s.region->TakePushForGrpc(s.push, s.prepared);
    s.pushing = &s.grpc;
  }
  s.region.reset();  // offered again on the next call (a frame keeps the memory it names)
}

PrimaryWatch::Call PserverShards::WatchedCall(const PserverShard& s) const {
  return PrimaryWatch::Call(watch_.get(), s.index, s.address, options_->call_timeout);
}

Status PserverShards::ExchangeShard(int i, bool overlap, proto::PushResponse* pushed, PullFrame* pulled) {
  PserverShard& s = *shards_[i];
  // A duplex channel carries both directions at once: its push and pull overlap, and a
  // failure of either is handled once both are back. A push that brings the values back
  // is the whole exchange.
  const bool at_once = overlap && s.pushing->duplex() && !s.one_call;
  if (!at_once) {
    // Push, then pull parameters that include it: in one call where the pserver writes
    // the new values back into the region, else in two.
    PL_RETURN_IF_ERROR(CallWithRetry(i, PushAttempt(pushed, pulled), "push"));
    if (s.values_came) {
      pulled->header().set_version(pushed->version());
      return absl::OkStatus();
    }
    return CallWithRetry(i, PullAttempt(pulled), "pull");
  }
  // One attempt of each at the same time (TCP carries both directions at once); a
  // failed one is then retried on its own, so retries never race on a shard.
  if (!s.push_thread) s.push_thread = std::make_unique<TaskThread>();
  const bool region = s.pushing->has_region();
  std::future<Status> push = s.push_thread->Run([&] { return PushAttempt(pushed, nullptr, !region)(s); });
  Status pull_status = PullAttempt(pulled, !region)(s);
  Status push_status = push.get();
  if (region && (absl::IsAborted(push_status) || absl::IsAborted(pull_status))) {
    DropRegion(s, absl::IsAborted(push_status) ? push_status : pull_status);
  }
  if (rpc::IsRetryable(push_status) || rpc::IsRetryable(pull_status)) {
    // Both attempts went to the address the shard had: a pserver that died may be back
    // elsewhere, so the retries start from the master's current address, not the old one.
    std::lock_guard<std::mutex> lock(resolve_mu_);
    (void)Resolve(i);  // a failed lookup is retried with the calls
  }
  if (!push_status.ok()) PL_RETURN_IF_ERROR(CallWithRetry(i, PushAttempt(pushed, nullptr), "push"));
  if (!pull_status.ok()) PL_RETURN_IF_ERROR(CallWithRetry(i, PullAttempt(pulled), "pull"));
  return absl::OkStatus();
}

void PserverShards::TryAttach(PserverShard& s) {
  if (s.region || !s.stub) return;
  if (s.slots.empty()) {
    s.shm_refusal = "no dense blocks";
    return;
  }
  ChannelOffer offer;
  offer.index = s.index;
  offer.address = s.address;
  offer.trainer_id = trainer_id_;
  offer.client_id = client_id_;
  offer.slots = s.slots;
  offer.area_bytes = s.slot_bytes;
  offer.call_timeout = options_->call_timeout;
  offer.wire = options_->wire_dtype;
  offer.residuals = &residuals_;
  ChannelAttach attached;
  if (options_->shared_memory && s.shm_refusal.empty()) {
    attached = AttachSharedMemory(*s.stub, offer);
    s.shm_refusal = attached.refusal;
    if (!attached.channel && s.shm_refusal.empty()) return;  // offered again next call
  }
  if (!attached.channel) {
    if (!s.link_refusal.empty() && absl::Now() >= s.link_retry_at) {
      s.link_refusal.clear();
      s.link_retry_at = absl::InfiniteFuture();
    }
    if (options_->dense_link_lanes == 0 || !s.link_refusal.empty()) return;
    offer.link_lanes = options_->dense_link_lanes > 0 ? std::min(options_->dense_link_lanes, kMaxDenseLinkLanes)
                                                     : DefaultDenseLinkLanes(rpc::TransportIsSecure());
    attached = AttachLink(*s.stub, offer);
    s.link_refusal = attached.refusal;
    if (attached.room) s.link_retry_at = absl::Now() + options_->link_retry_after;
    if (!attached.channel) return;
  }
  s.region = std::move(attached.channel);
  ++shm_attaches_;
  // A pserver that could not be asked at connect, or came back, or whose link failed:
  // its new way is worth a line, as the first one was.
  if (connected_) log::Info(absl::StrCat("pserver ", s.index, ": dense traffic now over ", s.region->Describe()));
  // A bfloat16 region cannot hold the tensors: they stay where they are.
  if (options_->bind_parameters_to_shared_memory && s.region->WireBytes(1) == 4) {
    bound_parameters_ += s.region->BindParameters(*keys_);
  }
}

std::vector<std::string> PserverShards::Transports() const {
  std::vector<std::string> out;
  for (const auto& sh : shards_) {
    if (sh->region) {
      out.push_back(sh->region->Describe());
      continue;
    }
    std::string why = sh->shm_refusal;
    if (!sh->link_refusal.empty()) why = absl::StrCat(why.empty() ? "" : why + "; ", sh->link_refusal);
    out.push_back(absl::StrCat(sh->grpc.Describe(), why.empty() ? "" : " (" + why + ")"));
  }
  return out;
}

}  // namespace pl
