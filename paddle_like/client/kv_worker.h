// KVWorker: the parameter servers as a key-value store, in the shape of ps-lite's
// KVWorker, for code that has no Module: declare named keys once (dense vectors and
// sparse tables, each with its initializer), then Push gradients, Pull values, or
// PushPull both; each call checks its input, queues the work and returns a handle at
// once, and Wait(handle) blocks until that call is done (calls run in order, so every
// earlier one is done too).
//
//   KVWorker kv({KeySpec::Dense("w", {1024}), KeySpec::Sparse("emb", 16)}, options, resolve);
//   PL_RETURN_IF_ERROR(kv.Connect());
//   std::vector<KeyValues> w;
//   PL_ASSIGN_OR_RETURN(KVWorker::Handle pulled, kv.Pull({{"w"}, {"emb", {3, 9}}}, &w));
//   PL_RETURN_IF_ERROR(kv.Wait(pulled));   // w[0].values: 1024 floats; w[1]: 2 rows
//
// It is the same engine a model trains through: ParameterClient moves named keys
// (key_store.h); a Module is bound to it by viewing its parameters as keys, and this
// worker by declaring keys of its own, so both share a job's keys by name. Calls are
// ParameterClient's *Keys calls, with its retries, failover and exactly-once pushes.
// A dense key travels whole; a sparse key travels as the rows named.
//
// Thread-safety: Push, Pull, PushPull and Wait may be called from any thread; the
// calls run one at a time on the worker's thread in the order they were made. A
// call's `out` is written by that thread and may be read once Wait returned OK.
#ifndef PADDLE_LIKE_CLIENT_KV_WORKER_H_
#define PADDLE_LIKE_CLIENT_KV_WORKER_H_

#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "paddle_like/client/key_store.h"
#include "paddle_like/client/param_client.h"
#include "paddle_like/client/task_thread.h"

namespace pl {

// One key's floats in a call. Dense: `values` holds the whole key, `ids` is empty.
// Sparse: `ids` names rows and `values` holds ids.size() x dim floats, row after row.
// In a pull's request only `key` (and a sparse key's `ids`) is read.
struct KeyValues {
  std::string key;
  std::vector<int64_t> ids;
  std::vector<float> values;
};

class KVWorker {
 public:
  using Handle = int64_t;

  // Keys must be named uniquely, with positive sizes; a bad one fails Connect (and
  // every call) with the reason. A key another client (a Module's, a worker's) has
  // created on the pservers must be declared alike: shape, dim, num_rows, init.
  KVWorker(std::vector<KeySpec> keys, ParameterClientOptions options, ParameterClient::Resolver resolve,
           const std::atomic<bool>* stop = nullptr);
  ~KVWorker();
  KVWorker(const KVWorker&) = delete;
  KVWorker& operator=(const KVWorker&) = delete;

  // Finds the pservers and creates the keys there (idempotent across workers: the
  // first creates them from the seed). Blocks.
  Status Connect();

  // Sends gradients (for `num_samples` examples) of the keys given; keys left out
  // send nothing and do not change. Repeated ids of a sparse key add up.
  StatusOr<Handle> Push(std::vector<KeyValues> gradients, int64_t num_samples = 1);
  // Fetches the keys requested (sparse: the rows in `ids`) into *out, in request order.
  StatusOr<Handle> Pull(std::vector<KeyValues> requests, std::vector<KeyValues>* out);
  // Push, then the pushed keys' values (sparse: the pushed rows) that include it.
  StatusOr<Handle> PushPull(std::vector<KeyValues> gradients, int64_t num_samples, std::vector<KeyValues>* out);
  // Waits for the call `handle` came from; returns its result. Each handle is waited
  // for at most once (NOT_FOUND otherwise).
  Status Wait(Handle handle);

  // The engine's counters and staleness; read them between calls (after a Wait).
  const ParameterClient& client() const { return *client_; }
  const std::vector<KeySpec>& keys() const { return specs_; }

 private:
  // The key a call names, checked against its spec; `values`: whether it carries floats.
  StatusOr<const KeySpec*> Check(const KeyValues& kv, bool values, const char* call) const;
  StatusOr<Handle> Submit(std::function<Status()> work);
  Status RunPush(const std::vector<KeyValues>& gradients, int64_t num_samples, const std::vector<KeyValues>* pull,
                 std::vector<KeyValues>* out);
  Status RunPull(const std::vector<KeyValues>& requests, std::vector<KeyValues>* out);
  // The dense names and sparse ids of `requests`, as ParameterClient takes them.
  void SplitKeys(const std::vector<KeyValues>& requests, std::vector<std::string>* dense, SparseIds* sparse) const;
  Status CopyOut(const std::vector<KeyValues>& requests, std::vector<KeyValues>* out);

  std::vector<KeySpec> specs_;
  std::map<std::string, size_t> index_;  // name -> specs_ position
  Status bad_keys_;                      // why the declared keys are unusable, if they are
  std::unique_ptr<ParameterClient> client_;
  std::mutex mu_;  // next_, pending_
  Handle next_ = 0;
  std::map<Handle, std::future<Status>> pending_;
  TaskThread worker_;  // last: finishes the queued calls before the rest goes
};

}  // namespace pl

#endif  // PADDLE_LIKE_CLIENT_KV_WORKER_H_
