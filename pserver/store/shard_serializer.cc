#include "pserver/store/shard_serializer.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message.h"
#include "paddle_like/dist/page_warmer.h"
#include "paddle_like/dist/sharding.h"

namespace pl::pserver {

namespace {
constexpr uint32_t kHeadTag = 0x48534c50;  // "PLSH"
constexpr uint32_t kEndTag = 0x21444e45;   // "END!"
constexpr uint32_t kLayout = 1;       // the whole state
constexpr uint32_t kOldDeltaLayout = 2;  // the same, with only the rows changed since the state before
constexpr uint32_t kDeltaLayout = 3;     // the same, each stripe first listing the rows evicted since
constexpr uint32_t kPayloadAfterLayout = 4;  // layout 1, the dense floats after the end tag
bool IsDelta(uint32_t layout) { return layout == kOldDeltaLayout || layout == kDeltaLayout; }
constexpr uint64_t kMaxMessageBytes = 1 << 20;

template <typename T>
Status Put(const ByteWriter& w, T v) {
  return w(&v, sizeof(v));
}
Status PutBytes(const ByteWriter& w, const std::string& s) {
  PL_RETURN_IF_ERROR(Put<uint64_t>(w, s.size()));
  return w(s.data(), s.size());
}
// A message's bytes with its maps in key order (protobuf's default order of a map is
// the hash table's, which differs between two copies of one message): two replicas of
// a shard then write the same bytes.
Status PutMessage(const ByteWriter& w, const google::protobuf::Message& m) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!m.SerializeToCodedStream(&coded)) return absl::InternalError("shard state: a message did not serialize");
  }
  return PutBytes(w, bytes);
}
template <typename T>
Status Get(const ByteReader& r, T* v) {
  return r(v, sizeof(*v));
}
template <typename M>
Status GetMessage(const ByteReader& r, M* m, absl::string_view what) {
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

// Writes what the store shows, in the order of the layout.
class Writer : public ShardStore::Visitor {
 public:
  Writer(const ShardStore& store, int64_t version, uint32_t layout, const ByteWriter& w)
      : store_(store), version_(version), layout_(layout), w_(w) {}

  Status Config(const proto::OptimizerConfig& optimizer, uint64_t seed, bool sync, size_t dense_params) override {
    PL_RETURN_IF_ERROR(Put(w_, kHeadTag));
    PL_RETURN_IF_ERROR(Put(w_, layout_));
    PL_RETURN_IF_ERROR(Put<int32_t>(w_, store_.index()));
    PL_RETURN_IF_ERROR(Put<int32_t>(w_, store_.num_shards()));
    PL_RETURN_IF_ERROR(Put<uint8_t>(w_, sync ? 1 : 0));
    PL_RETURN_IF_ERROR(Put<uint64_t>(w_, seed));
    PL_RETURN_IF_ERROR(Put<int64_t>(w_, version_));
    PL_RETURN_IF_ERROR(PutMessage(w_, optimizer));
    return Put<uint32_t>(w_, dense_params);
  }
  Status Param(const proto::ParamSpec& spec, size_t blocks) override {
    PL_RETURN_IF_ERROR(PutMessage(w_, spec));
    return Put<uint64_t>(w_, blocks);
  }
  Status Block(int64_t block, int64_t n, int64_t step_record, absl::Span<const float> data) override {
    PL_RETURN_IF_ERROR(Put<int64_t>(w_, block));
    PL_RETURN_IF_ERROR(Put<int64_t>(w_, n));
    PL_RETURN_IF_ERROR(Put<int64_t>(w_, step_record));
    if (layout_ == kPayloadAfterLayout) return absl::OkStatus();  // sent after the head, from pinned blocks
    return w_(data.data(), data.size() * sizeof(float));
  }
  Status Tables(size_t tables) override { return Put<uint32_t>(w_, tables); }
  Status Table(const proto::ParamSpec& spec, int stripes) override {
    PL_RETURN_IF_ERROR(PutMessage(w_, spec));
    return Put<uint32_t>(w_, stripes);
  }
  Status Evicted(absl::Span<const int64_t> ids) override {
    PL_RETURN_IF_ERROR(Put<uint64_t>(w_, ids.size()));
    return w_(ids.data(), ids.size() * sizeof(int64_t));
  }
  Status Stripe(size_t rows) override { return Put<uint64_t>(w_, rows); }
  Status Row(int64_t id, absl::Span<const float> record) override {
    PL_RETURN_IF_ERROR(Put<int64_t>(w_, id));
    return w_(record.data(), record.size() * sizeof(float));
  }
  Status Sightings(absl::Span<const uint16_t> counters) override {
    return w_(counters.data(), counters.size() * sizeof(uint16_t));
  }

 private:
  const ShardStore& store_;
  const int64_t version_;
  const uint32_t layout_;
  const ByteWriter& w_;
};

Status ReadHeader(const ByteReader& r, const ShardStore& store, ShardStore::Loader* loader, bool delta,
                  uint32_t* layout_out, int64_t* version) {
  uint32_t tag = 0, layout = 0;
  PL_RETURN_IF_ERROR(Get(r, &tag));
  if (tag != kHeadTag) return Corrupt("not a pserver shard (bad tag)");
  PL_RETURN_IF_ERROR(Get(r, &layout));
  if (layout != kLayout && layout != kPayloadAfterLayout && !IsDelta(layout)) {
    return Corrupt(absl::StrCat("unknown layout ", layout));
  }
  if (IsDelta(layout) != delta) {
    return Corrupt(delta ? "a whole state where an incremental one was expected"
                         : "an incremental state where a whole one was expected");
  }
  *layout_out = layout;
  int32_t index = 0, num_shards = 0;
  uint8_t sync = 0;
  uint64_t seed = 0;
  PL_RETURN_IF_ERROR(Get(r, &index));
  PL_RETURN_IF_ERROR(Get(r, &num_shards));
  if (index != store.index() || num_shards != store.num_shards()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the saved shard is pserver ", index, " of ", num_shards, ", this is pserver ", store.index(), " of ",
        store.num_shards(), " (changing the number of pservers needs a resharding the pserver does not do)"));
  }
  PL_RETURN_IF_ERROR(Get(r, &sync));
  PL_RETURN_IF_ERROR(Get(r, &seed));
  PL_RETURN_IF_ERROR(Get(r, version));
  proto::OptimizerConfig opt_proto;
  PL_RETURN_IF_ERROR(GetMessage(r, &opt_proto, "optimizer config"));
  Status configured = loader->Configure(opt_proto, seed, sync != 0);
  if (!configured.ok()) return Corrupt(configured.message());
  return absl::OkStatus();
}

// Reads a parameter's or table's spec and creates it; returns the blocks it owns here.
// `delta`: one the state before already holds is kept (it must be the same).
StatusOr<size_t> ReadSpec(const ByteReader& r, proto::ParamSpec::Kind kind, bool delta, ShardStore::Loader* loader,
                          proto::ParamSpec* spec) {
  const char* what = kind == proto::ParamSpec::DENSE ? "dense parameter" : "sparse table";
  PL_RETURN_IF_ERROR(GetMessage(r, spec, absl::StrCat(what, " spec")));
  if (delta && loader->Holds(spec->name())) {
    const proto::ParamSpec* held = loader->Spec(spec->name());
    if (held == nullptr || held->kind() != kind || held->SerializeAsString() != spec->SerializeAsString()) {
      return Corrupt(absl::StrCat(what, " '", spec->name(), "' differs from the state it changes"));
    }
    return loader->OwnedBlocks(spec->name());
  }
  if (spec->kind() != kind || loader->Holds(spec->name())) {
    return Corrupt(absl::StrCat("bad or repeated ", what, " '", spec->name(), "'"));
  }
  StatusOr<size_t> owned = loader->Add(*spec);
  if (!owned.ok()) return Corrupt(owned.status().message());
  return owned;
}

// `deferred`: a layout-4 state's, whose floats come after the end tag: each block's
// place is added to it instead of read.
Status ReadDense(const ByteReader& r, bool delta, ShardStore::Loader* loader, ByteSpans* deferred) {
  proto::ParamSpec spec;
  PL_ASSIGN_OR_RETURN(const size_t owned, ReadSpec(r, proto::ParamSpec::DENSE, delta, loader, &spec));
  uint64_t num_blocks = 0;
  PL_RETURN_IF_ERROR(Get(r, &num_blocks));
  if (num_blocks != owned) {
    return Corrupt(absl::StrCat("parameter '", spec.name(), "': ", num_blocks, " blocks saved, ", owned, " owned"));
  }
  for (uint64_t k = 0; k < num_blocks; ++k) {
    int64_t b = 0, n = 0, step_record = 0;
    PL_RETURN_IF_ERROR(Get(r, &b));
    PL_RETURN_IF_ERROR(Get(r, &n));
    PL_RETURN_IF_ERROR(Get(r, &step_record));
    absl::Span<float> data = loader->Block(spec.name(), b, n, step_record);
    if (data.empty()) {
      return Corrupt(absl::StrCat("parameter '", spec.name(), "': unexpected block ", b, " of ", n,
                                  " (step record ", step_record, ")"));
    }
    if (deferred != nullptr) {
      deferred->emplace_back(reinterpret_cast<char*>(data.data()), data.size() * sizeof(float));
    } else {
      // A fresh block: its pages in at once, not a fault per page inside the read.
      PopulateForWrite(data.data(), data.size() * sizeof(float));
      PL_RETURN_IF_ERROR(r(data.data(), data.size() * sizeof(float)));
    }
  }
  return absl::OkStatus();
}

Status ReadTable(const ByteReader& r, const ShardStore& store, uint32_t layout, ShardStore::Loader* loader) {
  const bool delta = IsDelta(layout);
  proto::ParamSpec spec;
  PL_RETURN_IF_ERROR(ReadSpec(r, proto::ParamSpec::SPARSE, delta, loader, &spec).status());
  uint32_t stripes = 0;
  PL_RETURN_IF_ERROR(Get(r, &stripes));
  for (uint32_t s = 0; s < stripes; ++s) {
    if (layout == kDeltaLayout) {
      uint64_t evicted = 0;
      PL_RETURN_IF_ERROR(Get(r, &evicted));
      for (uint64_t k = 0; k < evicted; ++k) {
        int64_t id = 0;
        PL_RETURN_IF_ERROR(Get(r, &id));
        if (id < 0 || ShardOfRow(id, store.num_shards()) != store.index()) {
          return Corrupt(absl::StrCat("table '", spec.name(), "': evicted row ", id, " is not this shard's"));
        }
        loader->Erase(spec.name(), id);
      }
    }
    uint64_t rows = 0;
    PL_RETURN_IF_ERROR(Get(r, &rows));
    for (uint64_t k = 0; k < rows; ++k) {
      int64_t id = 0;
      PL_RETURN_IF_ERROR(Get(r, &id));
      if (id < 0 || ShardOfRow(id, store.num_shards()) != store.index()) {
        return Corrupt(absl::StrCat("table '", spec.name(), "': row ", id, " is not this shard's"));
      }
      absl::Span<float> record = delta ? loader->Row(spec.name(), id) : loader->NewRow(spec.name(), id);
      if (record.empty()) return Corrupt(absl::StrCat("table '", spec.name(), "': row ", id, " saved twice"));
      PL_RETURN_IF_ERROR(r(record.data(), record.size() * sizeof(float)));
      PL_RETURN_IF_ERROR(loader->Filled(spec.name(), id));
    }
    if (spec.admit_after() > 1) {
      absl::Span<uint16_t> counters = loader->Sightings(spec.name(), static_cast<int>(s));
      if (counters.empty()) return Corrupt(absl::StrCat("table '", spec.name(), "': stripe ", s, " out of range"));
      PL_RETURN_IF_ERROR(r(counters.data(), counters.size() * sizeof(uint16_t)));
    }
  }
  return absl::OkStatus();
}

Status ReadBody(const ByteReader& r, const ScatterReader& scatter, const ShardStore& store, bool delta,
                ShardStore::Loader* loader, int64_t* version) {
  uint32_t layout = 0;
  PL_RETURN_IF_ERROR(ReadHeader(r, store, loader, delta, &layout, version));
  ByteSpans payload;
  ByteSpans* deferred = layout == kPayloadAfterLayout ? &payload : nullptr;
  uint32_t num_dense = 0;
  PL_RETURN_IF_ERROR(Get(r, &num_dense));
  for (uint32_t i = 0; i < num_dense; ++i) PL_RETURN_IF_ERROR(ReadDense(r, delta, loader, deferred));
  uint32_t num_sparse = 0;
  PL_RETURN_IF_ERROR(Get(r, &num_sparse));
  for (uint32_t i = 0; i < num_sparse; ++i) PL_RETURN_IF_ERROR(ReadTable(r, store, layout, loader));
  uint32_t tag = 0;
  PL_RETURN_IF_ERROR(Get(r, &tag));
  if (tag != kEndTag) return Corrupt("missing end tag");
  if (scatter && !payload.empty()) return scatter(payload);
  for (const absl::Span<char>& span : payload) {
    PopulateForWrite(span.data(), span.size());
    PL_RETURN_IF_ERROR(r(span.data(), span.size()));
  }
  return absl::OkStatus();
}
}  // namespace

Status WriteShardState(const ShardStore& store, int64_t version, const ByteWriter& write, ShardStore::Rows rows) {
  Writer writer(store, version, rows == ShardStore::Rows::kChangedTakingChanges ? kDeltaLayout : kLayout, write);
  PL_RETURN_IF_ERROR(store.Visit(&writer, rows));
  return Put(write, kEndTag);
}

Status WriteShardStateHead(const ShardStore& store, int64_t version, const ByteWriter& write) {
  Writer writer(store, version, kPayloadAfterLayout, write);
  PL_RETURN_IF_ERROR(store.Visit(&writer));
  return Put(write, kEndTag);
}

StatusOr<int64_t> ReadShardState(const ByteReader& r, ShardStore* store, const ScatterReader& scatter) {
  int64_t version = 0;
  PL_RETURN_IF_ERROR(store->Load([&](ShardStore::Loader* loader) {
    return ReadBody(r, scatter, *store, /*delta=*/false, loader, &version);
  }));
  return version;
}

StatusOr<int64_t> ApplyShardDelta(const ByteReader& r, ShardStore* store) {
  int64_t version = 0;
  PL_RETURN_IF_ERROR(store->LoadMore(
      [&](ShardStore::Loader* loader) { return ReadBody(r, nullptr, *store, /*delta=*/true, loader, &version); }));
  return version;
}

}  // namespace pl::pserver
