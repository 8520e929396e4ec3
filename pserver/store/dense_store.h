// DenseStore: the dense half of a parameter server's shard (shard_store.h): block b of
// parameter p (elements [b*block_size, min(numel, (b+1)*block_size))) when
// ShardOfDenseBlock(p, b, P) == index, one allocation per block holding value (n) then
// the optimizer's state slots (n each), plus its step count; and the update rules over
// them. It knows nothing of tables, versions or barriers.
//
// Thread-safety: thread-safe. mu_ guards the map of parameters (Add and Clear hold it
// exclusively, everything else shared); each block has its own mutex, taken one at a
// time after mu_, so work on different blocks proceeds in parallel. Blocks are never
// removed but by Clear (of a store that never served), so a resolved block stays valid
// without a lock. A sync step's update is not atomic by itself: the caller keeps
// readers out meanwhile (SyncBarrier).
#ifndef PSERVER_STORE_DENSE_STORE_H_
#define PSERVER_STORE_DENSE_STORE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_frame.h"
#include "paddle_like/dist/page_warmer.h"
#include "paddle_like/optim/update_rules.h"
#include "proto/pserver.pb.h"
#include "pserver/store/shard_storage.h"
#include "pserver/store/shard_visitor.h"

namespace pl::pserver {

// A snapshot's hold on a dense block's floats as they are now, without a copy: the
// block's next update copies them first (DenseBlock::Writable), until Unpin.
struct DensePin {
  DenseBlock* block = nullptr;
  std::shared_ptr<const float[]> data;
  size_t bytes = 0;
};

class DenseStore {
 public:
  DenseStore(int index, int num_shards) : index_(index), num_shards_(num_shards) {}
  DenseStore(const DenseStore&) = delete;
  DenseStore& operator=(const DenseStore&) = delete;

  // Adds dense parameter `spec` with the blocks this shard owns: values drawn from its
  // stream of `seed` and state slots for `optimizer`, or left unset without
  // `initialize_values` (for a Loader that writes every block next: the initializer's
  // draws were most of the time a large snapshot took to install). Returns the bytes a
  // request carrying all of them takes, serialized.
  int64_t Add(const proto::ParamSpec& spec, const InitSpec& init, uint64_t seed, const OptimizerSpec& optimizer,
              bool initialize_values);
  bool Holds(const std::string& name) const;
  // The spec parameter `name` was created with, or null.
  const proto::ParamSpec* Spec(const std::string& name) const;
  size_t size() const;
  int64_t elements() const { return elements_.load(); }

  // Block `block` of `param`; NOT_FOUND for an unknown parameter (`why` says more),
  // INVALID_ARGUMENT for a block outside it or another shard's.
  StatusOr<DenseBlock*> Find(const std::string& param, int64_t block, const WhyNot& why) const;
  // The push's dense payloads, checked (sizes; with `check_finite` every gradient is
  // finite), into out->dense.
  Status Resolve(const PushFrame& frame, bool check_finite, const WhyNot& why, ResolvedPush* out) const;
  // Async: applies resolved blocks, each with its own step count, and writes each
  // block's new values to its write_back, if any.
  static void Apply(const std::vector<ResolvedPush::Dense>& dense, const UpdateRule& rule);
  // Async, local steps (PushRequest.delta): adds resolved blocks' payloads to their
  // values (no optimizer, no step count), and writes the new values to write_back.
  // `slots`: the optimizer's, which a block pinned by a snapshot copies with its values.
  static void AddChanges(const std::vector<ResolvedPush::Dense>& dense, int slots);
  // Sync: adds resolved blocks' gradients (`delta`: parameter changes) to the current
  // step's sums. A step's first push to a block decides which its sum holds.
  static void Accumulate(const std::vector<ResolvedPush::Dense>& dense, bool delta);
  // Sync: applies the mean of the step's sums over its `contributors` (the optimizer's
  // step for gradients, told how many pushes the mean is of; added as they are for
  // changes), and clears them. `keep_previous`: each updated block keeps the values the
  // update replaced (DenseBlock::previous), for Read's `previous`.
  void ApplyAccumulated(int contributors, const UpdateRule& rule, bool keep_previous = false);
  // The pull's blocks into `frame`, or with `dense_out` block i to dense_out(i, n), after
  // checking all of them. Async blocks are sent in place; sync ones are copied under
  // their lock.
  // `previous` (sync): the values before the last step (kept by ApplyAccumulated).
  Status Read(const proto::PullRequest& request, bool sync, const WhyNot& why, PullFrame* frame,
              const DenseDestination& dense_out, bool previous = false) const;

  // A trainer's copy of this shard's blocks in place of their values (a shard that lost
  // every copy and was created again from the seed: ParameterShard::Init). Checked whole
  // first (each block held here, its byte size, every value finite), so a refused
  // restore changes nothing; then each block's value is written and its optimizer state
  // restarted (UpdateRule::RestartSlots: Adam's first steps ramp up rather than move
  // every element by lr). Its step count becomes `learned_version`, the updates the copy
  // had seen, so a learning-rate schedule goes on where it was; the optimizer counts
  // its own steps from there (DenseBlock::restarted_at). Returns the floats written.
  StatusOr<int64_t> Restore(const google::protobuf::RepeatedPtrField<proto::DenseBlock>& blocks,
                            const UpdateRule& rule, int64_t learned_version, const WhyNot& why);

  // Every block's floats pinned as they are now, in the order Visit shows them. The
  // caller keeps updates out while it pins, and unpins before the store goes.
  std::vector<DensePin> Pin(int slots) const;
  static void Unpin(const DensePin& pin);
  // Each parameter and its blocks, each block under its lock (ShardVisitor).
  Status Visit(ShardVisitor* visitor, int slots) const;

  // A block's step count and the step it was restored at, as one int64 for the shard's
  // state (shard_serializer.cc writes it where the step count alone was): the count
  // itself for a block never restored, which is what older files hold; negative for a
  // restored one, the two counts packed. ParseStepRecord is false for a record that is
  // neither.
  static int64_t StepRecord(int64_t step, int64_t restarted_at);
  static bool ParseStepRecord(int64_t record, int64_t* step, int64_t* restarted_at);

  // For a Loader: block b of `name` with its counts from `record` (StepRecord), its value
  // and `slots` slots to fill; empty when this shard holds no such block of n floats.
  absl::Span<float> LoadBlock(const std::string& name, int64_t b, int64_t n, int64_t record, int slots);
  // Blocks of `name` held here (0 if none); with `warmer`, its blocks' pages are
  // faulted in there ahead of the fill.
  size_t OwnedBlocks(const std::string& name, int slots = 0, std::unique_ptr<PageWarmer>* warmer = nullptr) const;
  // Forgets every parameter (a Load that failed).
  void Clear();

 private:
  const int index_;
  const int num_shards_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<DenseParam>> params_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> elements_{0};
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_DENSE_STORE_H_
