// ParameterClient: the trainer's side of the parameter servers. It maps named keys
// (key_store.h: a Module's parameters, or keys declared for the key-value API,
// kv_worker.h) onto the P pservers (paddle_like/dist/sharding.h), and each Pull or
// Push sends exactly one request to each pserver, all in parallel.
//
// Dense parameters travel whole (every block, every step) as DenseFrames: a push
// sends the gradient tensors' memory as is and a pull copies each received block
// straight into its parameter (one copy). Sparse tables travel as
// the rows a batch touches only: Pull fetches the ids it is given, Push sends the
// rows of the tables' sparse gradients.
//
// How a pserver's dense blocks travel is its channel's business (dense_channel.h): the
// client routes blocks and rows to pservers and retries calls, and speaks to every
// pserver through one interface. A pserver on the same host is offered a shared-memory
// region at Connect (ShmDenseChannel: only the request travels over gRPC); one on
// another host is asked for a dense link (LinkDenseChannel: the blocks travel over TCP
// connections of their own). A pserver that refuses both (--shm=false and
// --dense_link=false, an older build) keeps its blocks inside the gRPC calls
// (GrpcDenseChannel); one that restarted and forgot the region, or whose link broke,
// answers ABORTED, and the call is retried over gRPC and a region offered again on the
// next step.
//
// Faults: a pserver that is unreachable or restarting is retried with backoff (its
// address re-resolved through the master, since a restarted pserver may listen on a
// new port) until `give_up_after`; a Push keeps its gradients across retries, so a
// step's update is not lost. A pserver that lost its parameters (restarted without a
// checkpoint) is initialised again from the same deterministic specs.
//
// Thread-safety: not thread-safe; one training loop drives it (StartExchange's
// background thread works only on state no other call touches until it is finished).
#ifndef PADDLE_LIKE_CLIENT_PARAM_CLIENT_H_
#define PADDLE_LIKE_CLIENT_PARAM_CLIENT_H_

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "paddle_like/client/dense_channel.h"
#include "paddle_like/client/key_store.h"
#include "paddle_like/client/pserver_shards.h"
#include "paddle_like/client/sparse_ids.h"
#include "paddle_like/client/task_thread.h"
#include "paddle_like/dist/bf16.h"
#include "paddle_like/dist/dense_frame.h"
#include "paddle_like/nn/module.h"
#include "paddle_like/optim/update_rules.h"
#include "proto/pserver.grpc.pb.h"

namespace pl {

struct ParameterClientOptions {
  int num_pservers = 1;
  OptimizerSpec optimizer;
  uint64_t seed = 1;
  bool sync = false;
  // A job of virtual trainers (implies sync): steps are named by the caller (PullStep,
  // PushMicroBatch), and a shard found at another step is not followed there.
  bool virtual_trainers = false;
  absl::Duration give_up_after = absl::Minutes(5);
  absl::Duration call_timeout = absl::Seconds(30);
  // Async: pservers answer a push once it is validated and queued, not applied
  // (PushRequest.defer_apply), so a push costs the trainer no optimizer time.
  bool defer_apply = false;
  // Push zeroes the dense gradients it sent (false: the caller overwrites them anyway).
  bool zero_gradients_after_push = true;
  // StartExchange hands the dense gradient tensors themselves to the exchange and gives
  // the model zeroed ones in their place (two sets that alternate, the sent one zeroed
  // on the exchange's thread), instead of copying the gradients out and zeroing them on
  // the caller's thread. For a model whose gradients nothing else holds by address (a
  // GPU backend's page-locked host buffers do: it leaves this off).
  bool swap_gradients_in_exchange = false;
  // Offer co-located pservers a shared-memory region for dense traffic.
  bool shared_memory = true;
  // Move each dense parameter whose blocks all live on one pserver, with its gradient,
  // into that pserver's region once attached, so pushes and pulls copy nothing on the
  // trainer's side. The parameters' tensors change storage then (a view of the old
  // storage, e.g. a NumPy array, goes stale), and StartExchange is refused: the next
  // step's gradients would land in the region the exchange is sending.
  bool bind_parameters_to_shared_memory = false;
  // How dense values cross gRPC and dense links (a shared-memory region on one host
  // always carries float32): bfloat16 halves the bytes; pushed gradients keep what
  // rounding dropped and add it to the next push (error feedback,
  // paddle_like/dist/bf16.h), pulled parameters are the pserver's float32 values rounded.
  WireDtype wire_dtype = WireDtype::kFloat32;
  // A pserver that cannot share memory with this trainer (another host, or
  // shared_memory off) is asked for a dense link (paddle_like/dist/dense_link.h): the
  // dense blocks then travel over this many TCP connections each way, beside gRPC,
  // with the job's TLS. -1: DefaultDenseLinkLanes; 0: everything over gRPC. With
  // wire_dtype bfloat16 the link carries bfloat16 (a pserver of an older build, which
  // reads only float32 there, gets bfloat16 over gRPC instead).
  int dense_link_lanes = -1;
  // A pserver that refused a link for want of room (its links' memory cap, pl-pserver
  // --dense_link_max_mb) is asked again this long after, since trainers that leave free
  // their share; any other refusal stands until the pserver's address changes.
  absl::Duration link_retry_after = absl::Seconds(30);
};

struct TrafficCounters {
  int64_t pulls = 0, pushes = 0;
  int64_t sparse_rows_pulled = 0, sparse_rows_pushed = 0;
  int64_t bytes_pulled = 0, bytes_pushed = 0;
  int64_t retries = 0;
  int64_t shm_attaches = 0;  // shared-memory regions a pserver accepted
  int64_t bound_parameters = 0;  // parameters moved into a region (bind_parameters_to_shared_memory)
  // StartExchange's exchanges: how long they ran in the background, beside the steps.
  double background_exchange_s = 0;
};

class ParameterClient {
 public:
  // `resolve` returns the P pserver addresses by index (from the master); it may
  // wait for pservers to register.
  using Resolver = std::function<StatusOr<std::vector<std::string>>()>;

  ParameterClient(std::unique_ptr<KeyStore> keys, ParameterClientOptions options, Resolver resolve,
                  const std::atomic<bool>* stop = nullptr);
  // The Module binding: the module's parameters are the keys (KeyStore::Of); the
  // module must outlive the client.
  ParameterClient(Module* module, ParameterClientOptions options, Resolver resolve,
                  const std::atomic<bool>* stop = nullptr)
      : ParameterClient(KeyStore::Of(*module), std::move(options), std::move(resolve), stop) {}
  ~ParameterClient();

  // Resolves addresses and initialises every pserver (idempotent across trainers).
  Status Connect();
  // Pulls every dense parameter and the given sparse rows (each table then holds
  // exactly those rows). Sync mode: waits for the step after the last push.
  Status Pull(const SparseIds& sparse_ids);
  // Pushes the module's dense gradients and its tables' sparse gradients (for
  // `num_samples` examples), then clears them.
  Status Push(int64_t num_samples);
  // Push, and the Pull of the next step's parameters, at the same time over gRPC
  // (async mode: the pulled values may or may not include this push, a staleness of at
  // most one step that async training tolerates); through a shared-memory region, one
  // call whose pulled values include the push. Sync mode does them one after the other.
  Status PushAndPull(int64_t num_samples, const SparseIds& next_sparse_ids);
  // Push, then Pull parameters that include it (async; sync mode is always so). With
  // a shared-memory region this is one call per pserver.
  Status PushThenPull(int64_t num_samples, const SparseIds& next_sparse_ids);
  // Local steps (local_steps.h): PushThenPull with the dense gradient tensors holding
  // changes to add to the parameters (PushRequest.delta) instead of gradients; the
  // pservers add them (sync: their average over the step's trainers) without running
  // the optimizer. Dense parameters only: INVALID_ARGUMENT when the keys hold a table.
  Status PushChangesThenPull(int64_t num_samples);
  // PushAndPull of the dense parameters in two halves, for a trainer that computes
  // meanwhile (async only): StartExchange copies the gradients out (into the regions,
  // or buffers of its own) and zeroes them, or with swap_gradients_in_exchange hands
  // the tensors over and puts zeroed ones in their place; it returns while a
  // background thread pushes
  // and pulls, both directions at once between hosts (the pulled values may lack this
  // push, as PushAndPull's); FinishExchange waits for that and installs the pulled
  // values. Any other call first finishes an exchange in flight.
  Status StartExchange(int64_t num_samples);
  Status FinishExchange();
  // What FinishExchange does with each pulled dense block instead of copying it into
  // its parameter (local steps rebase their progress onto it, local_steps.h): `param`'s
  // values at element `offset` on, where the block's `pulled` values belong. Called on
  // several threads at once, for different blocks.
  using PulledBlockInstaller = std::function<void(Parameter* param, int64_t offset, const FloatPieces& pulled)>;
  Status FinishExchange(const PulledBlockInstaller& install);
  // StartExchange with the dense gradient tensors holding changes to add (as
  // PushChangesThenPull); finished by either FinishExchange.
  Status StartChangesExchange(int64_t num_samples);
  bool exchange_in_flight() const { return in_flight_.valid(); }

  // Pull, Push and PushThenPull over the dense parameters named in `dense` only (the
  // others neither travel nor change), for the key API (kv_worker.h); sparse tables as
  // above. They go by each pserver's channel, as whole steps do: a region holds every
  // block in a place of its own, so a push or pull of some names only theirs.
  Status PullKeys(const std::vector<std::string>& dense, const SparseIds& sparse_ids);
  Status PushKeys(const std::vector<std::string>& dense, int64_t num_samples);
  Status PushThenPullKeys(const std::vector<std::string>& dense, int64_t num_samples,
                          const SparseIds& next_sparse_ids);

  // A job of virtual trainers (docs/consistent-training.md):
  // Pulls every dense parameter and the given rows as they are at version `step`
  // exactly (PullRequest.exact_version), from every pserver; one already a step
  // further serves the values that step replaced.
  Status PullStep(int64_t step, const SparseIds& sparse_ids);
  // Pushes the module's gradients (as Push) as virtual trainer `virtual_trainer`'s
  // micro-batch of sync step `step`, `step_expects` being the step's StepMask.
  Status PushMicroBatch(int64_t step, int32_t virtual_trainer, const std::string& step_expects,
                        int64_t num_samples);
  // Waits up to `timeout` for every pserver to reach version `step`; returns the lowest
  // version seen (>= step: all there). A pserver that does not answer counts as not
  // there yet (and its address is asked of the master again).
  StatusOr<int64_t> WaitForStep(int64_t step, absl::Duration timeout);

  // Async: how many updates of other trainers the shards applied between the pull the
  // last push's gradients were computed from and that push (mean over pservers); the
  // staleness async training trades for speed. 0 in sync mode.
  double last_staleness() const { return staleness_; }
  const KeyStore& keys() const { return *keys_; }

  // The trainer id the master gave this trainer (sync barriers count by it).
  void set_trainer_id(int64_t id) {
    trainer_id_ = id;
    shards_.set_trainer_id(id);
  }
  // How each pserver's dense traffic travels: "shared memory (N MB)" or "gRPC (why)".
  std::vector<std::string> Transports() const { return shards_.Transports(); }
  TrafficCounters counters() const {
    TrafficCounters c = counters_;
    c.retries = shards_.retries();
    c.shm_attaches = shards_.region_attaches();
    c.bound_parameters = shards_.bound_parameters();
    c.background_exchange_s = background_exchange_ns_.load(std::memory_order_relaxed) * 1e-9;
    return c;
  }

 private:
  // Runs `call` with only the dense parameters in `dense` selected (Selected()).
  Status WithDenseKeys(const std::vector<std::string>& dense, const std::function<Status()>& call);
  bool Selected(const std::string& dense_name) const {
    return only_dense_ == nullptr || only_dense_->contains(dense_name);
  }

  // Routing: a step's blocks and rows to their pservers, and the pulled values back.
  Status BuildPull(const SparseIds& sparse_ids);
  // Copies each pulled dense block into its parameter, or hands it to `install`.
  Status InstallPull(const std::vector<PullFrame>& responses, const PulledBlockInstaller& install = nullptr);
  // Each pserver's push: its header, its sparse rows, and one payload per dense block
  // referencing the gradient tensors.
  void BuildPush(int64_t num_samples);
  // TryAttach, BuildPush, then each pserver's push prepared for its channel (own_copies:
  // the tensors may change once this returns). then_pull: a pull (already built) follows,
  // which a region's push may bring back in the same call; overlap: the push and the pull
  // will run at the same time (a duplex channel then carries them at once instead).
  void PreparePush(int64_t num_samples, bool own_copies, bool then_pull, bool overlap = false);
  void PushDone();
  void ZeroSentGradients();
  // swap_gradients_in_exchange: the dense gradients into in_flight_grads_, spares (or
  // new zeroed tensors) in their place.
  void SwapOutGradients();
  // Pushes every shard's prepared push and pulls (overlap: at the same time where the
  // channel is duplex).
  Status Exchange(int64_t num_samples, const SparseIds& next_sparse_ids, bool overlap);
  Status Wait();  // finishes an exchange in flight, if any

  std::unique_ptr<KeyStore> keys_;
  ParameterClientOptions options_;
  // The pservers: addresses, stubs, channels and calls with retries. After keys_ and
  // options_, which it points at.
  PserverShards shards_;
  // The dense parameters a *Keys call moves (nullptr: all); set only for its duration.
  const absl::flat_hash_set<std::string>* only_dense_ = nullptr;
  // PushChangesThenPull: the pushes built carry changes (PushRequest.delta).
  bool push_changes_ = false;
  // PushMicroBatch: the step, virtual trainer and mask the pushes built carry.
  struct MicroBatchTag {
    int64_t step;
    int32_t virtual_trainer;
    const std::string* step_expects;
  };
  const MicroBatchTag* micro_batch_ = nullptr;
  TrafficCounters counters_;
  double staleness_ = 0;
  int64_t trainer_id_ = 0;
  // Runs StartExchange's push and pull in the background.
  TaskThread exchange_thread_;
  // swap_gradients_in_exchange: the gradients the exchange in flight sends (zeroed on
  // its thread once sent), and the zeroed tensors the next StartExchange puts in place.
  std::vector<std::pair<std::string, Tensor>> in_flight_grads_;
  absl::flat_hash_map<std::string, Tensor> spare_grads_;
  // StartExchange's results; the future last, so it is waited for first on destruction.
  std::atomic<int64_t> background_exchange_ns_{0};
  std::vector<PullFrame> in_flight_pulled_;
  std::vector<proto::PushResponse> in_flight_pushed_;
  std::future<Status> in_flight_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_PARAM_CLIENT_H_
