// ParameterShard::SaveState / LoadState: the shard as a little-endian byte stream.
//
//   u32 'PLSH' | u32 layout (1) | i32 index | i32 num_shards | u8 sync | u64 seed |
//   i64 version | bytes OptimizerConfig |
//   u32 #dense  { bytes ParamSpec | u64 #blocks { i64 block | i64 n | i64 step |
//                                                 f32 value[n] | f32 slots[S*n] } }
//   u32 #sparse { bytes ParamSpec | u32 #stripes { u64 #rows { i64 id |
//                                   f32 value[D] | f32 slots[S*D] | i64 step } } }
//   u32 'END!'
// where "bytes" is u64 length + data. The file framing and checksum are checkpoint.cc's.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "paddle_like/dist/sharding.h"
#include "pserver/shard.h"
#include "pserver/shard_internal.h"

namespace pl::pserver {

namespace {
constexpr uint32_t kHeadTag = 0x48534c50;  // "PLSH"
constexpr uint32_t kEndTag = 0x21444e45;   // "END!"
constexpr uint32_t kLayout = 1;
constexpr uint64_t kMaxMessageBytes = 1 << 20;

template <typename T>
Status Put(const ParameterShard::ByteWriter& w, T v) {
  return w(&v, sizeof(v));
}
Status PutBytes(const ParameterShard::ByteWriter& w, const std::string& s) {
  PL_RETURN_IF_ERROR(Put<uint64_t>(w, s.size()));
  return w(s.data(), s.size());
}
template <typename T>
Status Get(const ParameterShard::ByteReader& r, T* v) {
  return r(v, sizeof(*v));
}
template <typename M>
Status GetMessage(const ParameterShard::ByteReader& r, M* m, absl::string_view what) {
  uint64_t n = 0;
  PL_RETURN_IF_ERROR(Get(r, &n));
  if (n > kMaxMessageBytes) {
    return absl::DataLossError(absl::StrCat("shard state: ", what, " of ", n, " bytes is implausible"));
  }
  std::string s(n, '\0');
  PL_RETURN_IF_ERROR(r(s.data(), n));
  if (!m->ParseFromString(s)) return absl::DataLossError(absl::StrCat("shard state: unreadable ", what));
  return absl::OkStatus();
}
Status Corrupt(absl::string_view why) { return absl::DataLossError(absl::StrCat("shard state: ", why)); }
}  // namespace

Status ParameterShard::SaveState(const ByteWriter& w) const {
  absl::ReaderMutexLock pl(&params_mu_);
  PL_RETURN_IF_ERROR(CheckInitialized());
  // In sync mode this excludes a step's update, so values match `version` exactly.
  absl::ReaderMutexLock sl(&step_mu_);
  const int slots = NumSlots(optimizer_.kind);
  PL_RETURN_IF_ERROR(Put(w, kHeadTag));
  PL_RETURN_IF_ERROR(Put(w, kLayout));
  PL_RETURN_IF_ERROR(Put<int32_t>(w, index_));
  PL_RETURN_IF_ERROR(Put<int32_t>(w, num_shards_));
  PL_RETURN_IF_ERROR(Put<uint8_t>(w, sync_ ? 1 : 0));
  PL_RETURN_IF_ERROR(Put<uint64_t>(w, seed_));
  PL_RETURN_IF_ERROR(Put<int64_t>(w, version()));
  PL_RETURN_IF_ERROR(PutBytes(w, optimizer_proto_.SerializeAsString()));
  PL_RETURN_IF_ERROR(Put<uint32_t>(w, dense_.size()));
  for (const auto& [name, p] : dense_) {
    PL_RETURN_IF_ERROR(PutBytes(w, p->spec.SerializeAsString()));
    PL_RETURN_IF_ERROR(Put<uint64_t>(w, p->blocks.size()));
    for (const auto& [b, blk] : p->blocks) {
      absl::MutexLock l(&blk->mu);
      PL_RETURN_IF_ERROR(Put<int64_t>(w, b));
      PL_RETURN_IF_ERROR(Put<int64_t>(w, blk->n));
      PL_RETURN_IF_ERROR(Put<int64_t>(w, blk->step));
      PL_RETURN_IF_ERROR(w(blk->data.get(), (1 + slots) * blk->n * sizeof(float)));
    }
  }
  PL_RETURN_IF_ERROR(Put<uint32_t>(w, sparse_.size()));
  for (const auto& [name, t] : sparse_) {
    PL_RETURN_IF_ERROR(PutBytes(w, t->spec.SerializeAsString()));
    PL_RETURN_IF_ERROR(Put<uint32_t>(w, kRowStripes));
    for (int s = 0; s < kRowStripes; ++s) {
      RowStripe& stripe = t->stripes[s];
      absl::MutexLock l(&stripe.mu);
      PL_RETURN_IF_ERROR(Put<uint64_t>(w, stripe.index.size()));
      for (const auto& [id, slot] : stripe.index) {
        PL_RETURN_IF_ERROR(Put<int64_t>(w, id));
        PL_RETURN_IF_ERROR(w(stripe.At(slot, t->stride), t->stride * sizeof(float)));
      }
    }
  }
  return Put(w, kEndTag);
}

Status ParameterShard::LoadState(const ByteReader& r) {
  absl::WriterMutexLock pl(&params_mu_);
  if (initialized_) {
    return absl::FailedPreconditionError("LoadState needs a fresh shard; this one is initialised");
  }
  uint32_t tag = 0, layout = 0;
  PL_RETURN_IF_ERROR(Get(r, &tag));
  if (tag != kHeadTag) return Corrupt("not a pserver shard (bad tag)");
  PL_RETURN_IF_ERROR(Get(r, &layout));
  if (layout != kLayout) return Corrupt(absl::StrCat("unknown layout ", layout));
  int32_t index = 0, num_shards = 0;
  uint8_t sync = 0;
  uint64_t seed = 0;
  int64_t version = 0;
  PL_RETURN_IF_ERROR(Get(r, &index));
  PL_RETURN_IF_ERROR(Get(r, &num_shards));
  if (index != index_ || num_shards != num_shards_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the saved shard is pserver ", index, " of ", num_shards, ", this is pserver ", index_, " of ",
        num_shards_, " (changing the number of pservers needs a resharding the pserver does not do)"));
  }
  PL_RETURN_IF_ERROR(Get(r, &sync));
  PL_RETURN_IF_ERROR(Get(r, &seed));
  PL_RETURN_IF_ERROR(Get(r, &version));
  proto::OptimizerConfig opt_proto;
  PL_RETURN_IF_ERROR(GetMessage(r, &opt_proto, "optimizer config"));
  StatusOr<OptimizerSpec> opt = OptimizerFromProto(opt_proto);
  if (!opt.ok()) return Corrupt(opt.status().message());
  optimizer_ = *opt;
  optimizer_proto_ = opt_proto;
  seed_ = seed;
  sync_ = sync != 0;
  const int slots = NumSlots(optimizer_.kind);

  uint32_t num_dense = 0;
  PL_RETURN_IF_ERROR(Get(r, &num_dense));
  for (uint32_t i = 0; i < num_dense; ++i) {
    proto::ParamSpec spec;
    PL_RETURN_IF_ERROR(GetMessage(r, &spec, "dense parameter spec"));
    if (spec.kind() != proto::ParamSpec::DENSE || dense_.count(spec.name())) {
      return Corrupt(absl::StrCat("bad or repeated dense parameter '", spec.name(), "'"));
    }
    Status added = AddParam(spec);
    if (!added.ok()) return Corrupt(added.message());
    DenseParam* p = dense_[spec.name()].get();
    uint64_t num_blocks = 0;
    PL_RETURN_IF_ERROR(Get(r, &num_blocks));
    if (num_blocks != p->blocks.size()) {
      return Corrupt(absl::StrCat("parameter '", spec.name(), "': ", num_blocks, " blocks saved, ",
                                  p->blocks.size(), " owned"));
    }
    for (uint64_t k = 0; k < num_blocks; ++k) {
      int64_t b = 0, n = 0, step = 0;
      PL_RETURN_IF_ERROR(Get(r, &b));
      PL_RETURN_IF_ERROR(Get(r, &n));
      PL_RETURN_IF_ERROR(Get(r, &step));
      auto it = p->blocks.find(b);
      if (it == p->blocks.end() || it->second->n != n || step < 0) {
        return Corrupt(absl::StrCat("parameter '", spec.name(), "': unexpected block ", b, " of ", n));
      }
      DenseBlockState* blk = it->second.get();
      absl::MutexLock l(&blk->mu);
      blk->step = step;
      PL_RETURN_IF_ERROR(r(blk->data.get(), (1 + slots) * n * sizeof(float)));
    }
  }
  uint32_t num_sparse = 0;
  PL_RETURN_IF_ERROR(Get(r, &num_sparse));
  for (uint32_t i = 0; i < num_sparse; ++i) {
    proto::ParamSpec spec;
    PL_RETURN_IF_ERROR(GetMessage(r, &spec, "sparse table spec"));
    if (spec.kind() != proto::ParamSpec::SPARSE || sparse_.count(spec.name()) || dense_.count(spec.name())) {
      return Corrupt(absl::StrCat("bad or repeated sparse table '", spec.name(), "'"));
    }
    Status added = AddParam(spec);
    if (!added.ok()) return Corrupt(added.message());
    SparseTableState* t = sparse_[spec.name()].get();
    uint32_t stripes = 0;
    PL_RETURN_IF_ERROR(Get(r, &stripes));
    for (uint32_t s = 0; s < stripes; ++s) {
      uint64_t rows = 0;
      PL_RETURN_IF_ERROR(Get(r, &rows));
      for (uint64_t k = 0; k < rows; ++k) {
        int64_t id = 0;
        PL_RETURN_IF_ERROR(Get(r, &id));
        if (id < 0 || ShardOfRow(id, num_shards_) != index_) {
          return Corrupt(absl::StrCat("table '", spec.name(), "': row ", id, " is not this shard's"));
        }
        RowStripe& stripe = t->stripes[StripeOf(id)];
        absl::MutexLock l(&stripe.mu);
        if (stripe.index.contains(id)) {
          return Corrupt(absl::StrCat("table '", spec.name(), "': row ", id, " saved twice"));
        }
        PL_RETURN_IF_ERROR(r(stripe.Insert(id, t->stride), t->stride * sizeof(float)));
        ++t->rows;
      }
    }
  }
  PL_RETURN_IF_ERROR(Get(r, &tag));
  if (tag != kEndTag) return Corrupt("missing end tag");
  initialized_ = true;
  SetVersion(version);
  return absl::OkStatus();
}

}  // namespace pl::pserver
