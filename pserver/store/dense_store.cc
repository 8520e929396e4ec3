#include "pserver/store/dense_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "paddle_like/dist/sharding.h"
#include "paddle_like/core/parallel_for.h"
#include "paddle_like/dist/wire.h"

namespace pl::pserver {

namespace {
// A request's bytes for one block, generously: a field's tag and length, the
// parameter's name, the block number, and the values in float32 (the widest the wire
// carries).
int64_t RequestBytesOfBlock(const proto::ParamSpec& spec, int64_t n) {
  return 32 + static_cast<int64_t>(spec.name().size()) + 4 * n;
}

Status BlockNotHere(const proto::ParamSpec& spec, int64_t numel, int64_t block_size, int64_t block, int index,
                    int num_shards) {
  const int64_t nb = NumBlocks(numel, block_size);
  if (block < 0 || block >= nb) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name(), "': block ", block,
                                                   " is outside [0, ", nb, ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat("parameter '", spec.name(), "': block ", block,
                                                 " belongs to pserver ", ShardOfDenseBlock(spec.name(), block, num_shards),
                                                 ", not to this pserver ", index));
}
}  // namespace

int64_t DenseStore::Add(const proto::ParamSpec& spec, const InitSpec& init, uint64_t seed,
                        const OptimizerSpec& optimizer, bool initialize_values) {
  const int slots = NumSlots(optimizer.kind);
  auto p = std::make_unique<DenseParam>();
  p->spec = spec;
  p->spec.set_block_size(BlockSizeOf(spec));
  p->init = init;
  p->numel = DenseNumel(spec);
  p->block_size = BlockSizeOf(spec);
  const uint64_t stream = DenseStreamSeed(seed, spec.name());
  const int64_t nb = NumBlocks(p->numel, p->block_size);
  int64_t request_bytes = 0;
  for (int64_t b = 0; b < nb; ++b) {
    if (ShardOfDenseBlock(spec.name(), b, num_shards_) != index_) continue;
    auto blk = std::make_unique<DenseBlock>();
    blk->block = b;
    blk->offset = b * p->block_size;
    blk->n = std::min(p->numel, blk->offset + p->block_size) - blk->offset;
    blk->data = DenseBlock::Allocate((1 + slots) * blk->n);
    if (initialize_values) {
      InitializeValues(init, stream, blk->data.get(), blk->n, blk->offset);
      InitSlots(optimizer, blk->data.get() + blk->n, blk->n);
    }
    elements_ += blk->n;
    request_bytes += RequestBytesOfBlock(spec, blk->n);
    p->blocks.emplace(b, std::move(blk));
  }
  absl::WriterMutexLock l(&mu_);
  params_.emplace(spec.name(), std::move(p));
  return request_bytes;
}

bool DenseStore::Holds(const std::string& name) const {
  absl::ReaderMutexLock l(&mu_);
  return params_.count(name) > 0;
}

const proto::ParamSpec* DenseStore::Spec(const std::string& name) const {
  absl::ReaderMutexLock l(&mu_);
  auto it = params_.find(name);
  return it == params_.end() ? nullptr : &it->second->spec;  // never removed while serving
}

size_t DenseStore::size() const {
  absl::ReaderMutexLock l(&mu_);
  return params_.size();
}

StatusOr<DenseBlock*> DenseStore::Find(const std::string& param, int64_t block, const WhyNot& why) const {
  const DenseParam* found = nullptr;
  {
    absl::ReaderMutexLock l(&mu_);
    auto pit = params_.find(param);
    if (pit != params_.end()) found = pit->second.get();  // never removed while serving
  }
  // `why` may ask the other half: never with this half's lock held.
  if (found == nullptr) return absl::NotFoundError(absl::StrCat("unknown dense parameter '", param, "'", why(param)));
  const DenseParam& p = *found;
  auto bit = p.blocks.find(block);
  if (bit == p.blocks.end()) return BlockNotHere(p.spec, p.numel, p.block_size, block, index_, num_shards_);
  return bit->second.get();
}

Status DenseStore::Resolve(const PushFrame& frame, bool check_finite, const WhyNot& why, ResolvedPush* out) const {
  out->dense.reserve(frame.dense().size());
  int64_t floats = 0;
  for (const DenseFramePayload& msg : frame.dense()) {
    PL_ASSIGN_OR_RETURN(DenseBlock * blk, Find(msg.param, msg.block, why));
    const std::string what = absl::StrCat("parameter '", msg.param, "' block ", msg.block);
    if (msg.values.num_bytes() % 4 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", msg.values.num_bytes(),
                                                     " bytes is not a whole number of float32 values"));
    }
    if (msg.values.size() != blk->n) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": expected ", blk->n, " gradient values, got ",
                                                     msg.values.size()));
    }
    out->dense.push_back({blk, &msg.values});
    floats += blk->n;
  }
  if (!check_finite) return absl::OkStatus();
  std::vector<int64_t> bad(out->dense.size(), -1);
  std::vector<double> squares(out->dense.size(), 0.0);
  ParallelFor(
      static_cast<int64_t>(bad.size()), ThreadsForDense(floats),
      [&](int64_t i) {
        // One pass gives the norm and the check (SumOfSquares is finite exactly when
        // every value is); the position is looked for only in a bad block.
        const FloatPieces& g = *out->dense[i].grad;
        double sum = 0;
        g.ForEachChunk([&sum](int64_t, const float* x, int64_t n) { sum += SumOfSquares(x, n); });
        squares[i] = sum;
        if (!std::isfinite(sum)) bad[i] = g.FirstNonFinite();
      },
      /*another_follows=*/true);
  for (size_t i = 0; i < bad.size(); ++i) {
    if (bad[i] < 0) continue;
    const DenseFramePayload& msg = frame.dense()[i];
    return absl::InvalidArgumentError(absl::StrCat("gradient of parameter '", msg.param, "' block ", msg.block,
                                                   " has a non-finite value (", msg.values.At(bad[i]),
                                                   ") at index ", out->dense[i].block->offset + bad[i]));
  }
  // Per parameter: a push lists a parameter's blocks together.
  for (size_t i = 0; i < squares.size(); ++i) {
    const std::string& name = frame.dense()[i].param;
    if (out->norms.empty() || out->norms.back().name != name) out->norms.push_back({name, 0.0});
    out->norms.back().norm += squares[i];
  }
  for (ParamNorm& p : out->norms) p.norm = std::sqrt(p.norm);
  return absl::OkStatus();
}

namespace {
// fn(d) for every resolved block, split over threads by block (each block is one
// thread's, under its own lock, so any thread count gives the same bits).
void ForEachBlock(const std::vector<ResolvedPush::Dense>& dense,
                  const std::function<void(const ResolvedPush::Dense&)>& fn) {
  int64_t floats = 0;
  for (const ResolvedPush::Dense& d : dense) floats += d.block->n;
  ParallelFor(static_cast<int64_t>(dense.size()), ThreadsForDense(floats), [&](int64_t i) { fn(dense[i]); });
}
}  // namespace

void DenseStore::Apply(const std::vector<ResolvedPush::Dense>& dense, const UpdateRule& rule) {
  ForEachBlock(dense, [&](const ResolvedPush::Dense& d) {
    DenseBlock* blk = d.block;
    absl::MutexLock bl(&blk->mu);
    const int64_t step = ++blk->step;
    float* value = blk->Writable(rule.num_slots());
    float* slots = rule.num_slots() > 0 ? value + blk->n : nullptr;
    d.grad->ForEachChunk([&](int64_t offset, const float* grad, int64_t n) {
      rule.Apply(value + offset, grad, slots ? slots + offset : nullptr, n, step, blk->n, 1.0f, blk->restarted_at);
      // The gradient chunk is consumed: its place may take the new values.
      if (d.write_back) std::memcpy(d.write_back + offset, value + offset, n * sizeof(float));
    });
  });
}

void DenseStore::AddChanges(const std::vector<ResolvedPush::Dense>& dense, int slots) {
  ForEachBlock(dense, [&](const ResolvedPush::Dense& d) {
    DenseBlock* blk = d.block;
    absl::MutexLock bl(&blk->mu);
    float* value = blk->Writable(slots);
    d.grad->ForEachChunk([&](int64_t offset, const float* change, int64_t n) {
      float* v = value + offset;
      for (int64_t j = 0; j < n; ++j) v[j] += change[j];
      if (d.write_back) std::memcpy(d.write_back + offset, v, n * sizeof(float));
    });
  });
}

void DenseStore::Accumulate(const std::vector<ResolvedPush::Dense>& dense, bool delta) {
  ForEachBlock(dense, [&](const ResolvedPush::Dense& d) {
    DenseBlock* blk = d.block;
    absl::MutexLock bl(&blk->mu);
    if (!blk->accum) blk->accum.reset(new float[blk->n]);
    float* acc = blk->accum.get();
    if (!blk->has_accum) {
      d.grad->CopyTo(acc);
      blk->has_accum = true;
      blk->accum_delta = delta;
    } else {
      d.grad->ForEachChunk([acc](int64_t offset, const float* grad, int64_t n) {
        for (int64_t i = 0; i < n; ++i) acc[offset + i] += grad[i];
      });
    }
  });
}

void DenseStore::ApplyAccumulated(int contributors, const UpdateRule& rule, bool keep_previous) {
  absl::ReaderMutexLock l(&mu_);
  const int k = std::max(contributors, 1);
  const float scale = 1.0f / static_cast<float>(k);
  std::vector<DenseBlock*> blocks;
  int64_t floats = 0;
  for (auto& [name, p] : params_) {
    for (auto& [b, blk] : p->blocks) {
      blocks.push_back(blk.get());
      floats += blk->n;
    }
  }
  ParallelFor(static_cast<int64_t>(blocks.size()), ThreadsForDense(floats), [&](int64_t i) {
    DenseBlock* blk = blocks[i];
    absl::MutexLock bl(&blk->mu);
    blk->has_previous = false;
    if (!blk->has_accum) return;
    if (keep_previous) {
      if (!blk->previous) blk->previous.reset(new float[blk->n]);
      std::memcpy(blk->previous.get(), blk->data.get(), blk->n * sizeof(float));
      blk->has_previous = true;
    }
    float* g = blk->accum.get();
    for (int64_t j = 0; j < blk->n; ++j) g[j] *= scale;
    float* value = blk->Writable(rule.num_slots());
    if (blk->accum_delta) {
      for (int64_t j = 0; j < blk->n; ++j) value[j] += g[j];
    } else {
      rule.Apply(value, g, value + blk->n, blk->n, ++blk->step, blk->n, static_cast<float>(k), blk->restarted_at);
    }
    blk->has_accum = false;
  });
}

Status DenseStore::Read(const proto::PullRequest& request, bool sync, const WhyNot& why, PullFrame* frame,
                        const DenseDestination& dense_out, bool previous) const {
  std::vector<DenseBlock*> blocks;
  blocks.reserve(request.dense_size());
  for (const proto::DenseBlock& msg : request.dense()) {
    PL_ASSIGN_OR_RETURN(DenseBlock * blk, Find(msg.param(), msg.block(), why));
    blocks.push_back(blk);
  }
  std::vector<float*> destinations;
  if (dense_out) {
    for (int i = 0; i < request.dense_size(); ++i) {
      PL_ASSIGN_OR_RETURN(float* out, dense_out(i, blocks[i]->n));
      destinations.push_back(out);
    }
  }
  for (int i = 0; i < request.dense_size(); ++i) {
    DenseBlock* blk = blocks[i];
    if (!sync) {
      // Async: read without the block lock. A push applied meanwhile may show in part
      // of the block; each value is either before or after it (float stores do not
      // tear), the staleness async training already accepts. In a frame, the values
      // are sent in place.
      if (destinations.empty() && request.bf16()) {
        frame->AddDenseBf16(request.dense(i).param(), request.dense(i).block(), blk->data.get(), blk->n);
      } else if (destinations.empty()) {
        frame->AddDenseRef(request.dense(i).param(), request.dense(i).block(), blk->data.get(), blk->n, blk->data);
      } else {
        std::memcpy(destinations[i], blk->data.get(), blk->n * sizeof(float));
      }
      continue;
    }
    // Sync: exactly the values of the finished step (or of the one before it).
    absl::MutexLock bl(&blk->mu);
    const float* values = previous && blk->has_previous ? blk->previous.get() : blk->data.get();
    if (destinations.empty() && request.bf16()) {
      frame->AddDenseBf16(request.dense(i).param(), request.dense(i).block(), values, blk->n);
      continue;
    }
    float* out = destinations.empty()
                     ? frame->AddDenseBuffer(request.dense(i).param(), request.dense(i).block(), blk->n)
                     : destinations[i];
    std::memcpy(out, values, blk->n * sizeof(float));
  }
  return absl::OkStatus();
}

std::vector<DensePin> DenseStore::Pin(int slots) const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<DensePin> pins;
  for (const auto& [name, p] : params_) {
    for (const auto& [b, blk] : p->blocks) {
      absl::MutexLock bl(&blk->mu);
      ++blk->pins;
      pins.push_back({blk.get(), blk->data, static_cast<size_t>((1 + slots) * blk->n) * sizeof(float)});
    }
  }
  return pins;
}

void DenseStore::Unpin(const DensePin& pin) {
  absl::MutexLock bl(&pin.block->mu);
  // An update since has given the block a copy of its own, with no pins.
  if (pin.block->data.get() == pin.data.get() && pin.block->pins > 0) --pin.block->pins;
}

Status DenseStore::Visit(ShardVisitor* v, int slots) const {
  absl::ReaderMutexLock l(&mu_);
  for (const auto& [name, p] : params_) {
    PL_RETURN_IF_ERROR(v->Param(p->spec, p->blocks.size()));
    for (const auto& [b, blk] : p->blocks) {
      absl::MutexLock bl(&blk->mu);
      PL_RETURN_IF_ERROR(v->Block(b, blk->n, StepRecord(blk->step, blk->restarted_at),
                                  {blk->data.get(), static_cast<size_t>((1 + slots) * blk->n)}));
    }
  }
  return absl::OkStatus();
}

StatusOr<int64_t> DenseStore::Restore(const google::protobuf::RepeatedPtrField<proto::DenseBlock>& blocks,
                                      const UpdateRule& rule, int64_t learned_version, const WhyNot& why) {
  const int slots = rule.num_slots();
  learned_version = std::max<int64_t>(learned_version, 0);
  std::vector<DenseBlock*> found;
  found.reserve(blocks.size());
  for (const proto::DenseBlock& b : blocks) {
    PL_ASSIGN_OR_RETURN(DenseBlock * blk, Find(b.param(), b.block(), why));
    const std::string what = absl::StrCat("restore: parameter '", b.param(), "' block ", b.block());
    if (!b.bf16_values().empty() || static_cast<int64_t>(b.values().size()) != blk->n * 4) {
      return absl::InvalidArgumentError(absl::StrCat(what, " carries ", b.values().size(),
                                                     " bytes of float32 values; the block holds ", blk->n,
                                                     " floats (", blk->n * 4, " bytes)"));
    }
    for (int64_t i = 0; i < blk->n; ++i) {
      float v;
      std::memcpy(&v, b.values().data() + 4 * i, 4);
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat(what, " has a non-finite value (", v, ") at element ", i));
      }
    }
    found.push_back(blk);
  }
  int64_t floats = 0;
  for (int i = 0; i < blocks.size(); ++i) {
    DenseBlock* blk = found[i];
    absl::MutexLock bl(&blk->mu);
    float* data = blk->Writable(slots);
    std::memcpy(data, blocks[i].values().data(), blk->n * 4);
    if (slots > 0) rule.RestartSlots(data + blk->n, blk->n);
    blk->step = learned_version;
    blk->restarted_at = learned_version;
    floats += blk->n;
  }
  return floats;
}

namespace {
// A restored block's record: -1 - (restarted_at << 23 | steps since), both non-negative.
// Once 2^23 steps have passed since, the optimizer's count is past any bias correction
// in float (b2 < 0.99999), and the record is the plain step count again.
constexpr int kSinceBits = 23;
constexpr int64_t kMaxRestartedAt = (int64_t{1} << (63 - kSinceBits)) - 1;
}  // namespace

int64_t DenseStore::StepRecord(int64_t step, int64_t restarted_at) {
  const int64_t since = step - restarted_at;
  if (restarted_at <= 0 || since < 0 || since >= (int64_t{1} << kSinceBits) || restarted_at > kMaxRestartedAt) {
    return step;
  }
  return -1 - ((restarted_at << kSinceBits) | since);
}

bool DenseStore::ParseStepRecord(int64_t record, int64_t* step, int64_t* restarted_at) {
  if (record >= 0) {
    *step = record;
    *restarted_at = 0;
    return true;
  }
  const int64_t packed = -1 - record;  // record >= INT64_MIN, so this is >= 0
  *restarted_at = packed >> kSinceBits;
  *step = *restarted_at + (packed & ((int64_t{1} << kSinceBits) - 1));
  return *restarted_at > 0;
}

absl::Span<float> DenseStore::LoadBlock(const std::string& name, int64_t b, int64_t n, int64_t record, int slots) {
  int64_t step = 0, restarted_at = 0;
  if (!ParseStepRecord(record, &step, &restarted_at)) return {};
  absl::ReaderMutexLock l(&mu_);
  auto pit = params_.find(name);
  if (pit == params_.end()) return {};
  auto it = pit->second->blocks.find(b);
  if (it == pit->second->blocks.end() || it->second->n != n) return {};
  DenseBlock* blk = it->second.get();
  absl::MutexLock bl(&blk->mu);
  blk->step = step;
  blk->restarted_at = restarted_at;
  return {blk->data.get(), static_cast<size_t>((1 + slots) * n)};
}

size_t DenseStore::OwnedBlocks(const std::string& name, int slots, std::unique_ptr<PageWarmer>* warmer) const {
  absl::ReaderMutexLock l(&mu_);
  auto it = params_.find(name);
  if (it == params_.end()) return 0;
  if (warmer != nullptr) {
    for (const auto& [b, blk] : it->second->blocks) {
      const size_t bytes = static_cast<size_t>((1 + slots) * blk->n) * sizeof(float);
      if (bytes < PageWarmer::kMinBytes) continue;
      if (!*warmer) *warmer = std::make_unique<PageWarmer>();
      (*warmer)->Add(blk->data.get(), bytes);
    }
  }
  return it->second->blocks.size();
}

void DenseStore::Clear() {
  absl::WriterMutexLock l(&mu_);
  params_.clear();
  elements_ = 0;
}

}  // namespace pl::pserver
