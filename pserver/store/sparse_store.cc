// SparseStore: tables, their rows' updates and reads, statistics and visits
// (sparse_store.h); eviction in sparse_store_eviction.cc, the disk tier in
// sparse_store_disk.cc.
#include "pserver/store/sparse_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "paddle_like/core/flush_denormals.h"
#include "paddle_like/dist/sharding.h"
#include "paddle_like/core/parallel_for.h"
#include "paddle_like/dist/wire.h"

namespace pl::pserver {

namespace {
// A request's bytes for `rows` rows of a table, generously: ids are varints of at most
// 10 bytes, values float32.
int64_t RequestBytesOfRows(const proto::ParamSpec& spec, int64_t rows) {
  return 32 + static_cast<int64_t>(spec.name().size()) + rows * (10 + 4 * spec.dim());
}

// OK when every id of `msg` is in the table's range and owned by pserver `index` of
// `num_shards`, and its dim (if set) is the table's; else INVALID_ARGUMENT naming it.
Status CheckRowIds(const proto::SparseRowsMsg& msg, const proto::ParamSpec& spec, int index, int num_shards) {
  for (int i = 0; i < msg.ids_size(); ++i) {
    const int64_t id = msg.ids(i);
    if (id < 0 || (spec.num_rows() > 0 && id >= spec.num_rows())) {
      return absl::InvalidArgumentError(absl::StrCat("table '", spec.name(), "': row id ", id, " (position ", i,
                                                     ") is outside [0, ",
                                                     spec.num_rows() > 0 ? spec.num_rows() : INT64_MAX, ")"));
    }
    const int owner = ShardOfRow(id, num_shards);
    if (owner != index) {
      return absl::InvalidArgumentError(absl::StrCat("table '", spec.name(), "': row id ", id, " belongs to pserver ",
                                                     owner, ", not to this pserver ", index));
    }
  }
  if (msg.dim() != 0 && msg.dim() != spec.dim()) {
    return absl::InvalidArgumentError(absl::StrCat("table '", spec.name(), "': message dim ", msg.dim(),
                                                   ", the table's dim is ", spec.dim()));
  }
  return absl::OkStatus();
}
}  // namespace

void SparseStore::Configure(uint64_t seed, const OptimizerSpec& optimizer, const UpdateRule& rule) {
  absl::WriterMutexLock l(&mu_);
  seed_ = seed;
  optimizer_ = optimizer;
  rule_ = rule;
}

StatusOr<int64_t> SparseStore::Add(const proto::ParamSpec& spec, const InitSpec& init) {
  auto t = std::make_unique<SparseTable>();
  t->spec = spec;
  t->init = init;
  t->dim = spec.dim();
  absl::WriterMutexLock l(&mu_);
  int table_slots = NumSlots(optimizer_.kind);
  if (spec.has_optimizer()) {
    PL_ASSIGN_OR_RETURN(OptimizerSpec own, OptimizerFromProto(spec.optimizer()));
    PL_ASSIGN_OR_RETURN(UpdateRule rule, UpdateRule::Create(own));
    table_slots = NumSlots(own.kind);
    t->optimizer = own;
    t->rule = rule;
  }
  t->stride = spec.dim() * (1 + table_slots) + 2;
  t->admit_after = spec.admit_after();
  t->evict_after_s = spec.evict_after_s();
  if (t->evict_after_s > 0) evicting_.store(true, std::memory_order_relaxed);
  t->stripes.reset(new RowStripe[kRowStripes]);
  tables_.emplace(spec.name(), std::move(t));
  // Rows this shard can hold: its share of the id range, when the table has one.
  const int64_t rows = spec.num_rows() > 0
                           ? std::min(kRowsPerPushBound, (spec.num_rows() + num_shards_ - 1) / num_shards_)
                           : kRowsPerPushBound;
  return RequestBytesOfRows(spec, rows);
}

bool SparseStore::Holds(const std::string& name) const {
  absl::ReaderMutexLock l(&mu_);
  return tables_.count(name) > 0;
}

const proto::ParamSpec* SparseStore::Spec(const std::string& name) const {
  absl::ReaderMutexLock l(&mu_);
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : &it->second->spec;  // never removed while serving
}

size_t SparseStore::size() const {
  absl::ReaderMutexLock l(&mu_);
  return tables_.size();
}

int64_t SparseStore::rows() const {
  absl::ReaderMutexLock l(&mu_);
  int64_t rows = 0;
  for (const auto& [name, t] : tables_) rows += t->rows.load();
  return rows;
}

std::vector<proto::TableStats> SparseStore::Stats(int hottest) const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<proto::TableStats> out;
  for (const auto& [name, t] : tables_) {
    proto::TableStats& s = out.emplace_back();
    s.set_name(name);
    s.set_rows(t->rows.load());
    s.set_admit_after(t->admit_after);
    s.set_admitted(t->admitted.load());
    s.set_evicted(t->evicted.load());
    s.set_evict_after_s(t->evict_after_s);
    if (t->optimizer) s.set_optimizer(t->optimizer->ToString());
    if (disk_ != nullptr) s.set_rows_on_disk(disk_->rows(name));
    int64_t bytes = 0;
    std::vector<HotRows::Entry> hot;
    for (int i = 0; i < kRowStripes; ++i) {
      RowStripe& stripe = t->stripes[i];
      absl::MutexLock sl(&stripe.mu);
      for (size_t slab = 0; slab < stripe.slabs.size(); ++slab) bytes += SlabRows(slab) * t->stride * sizeof(float);
      for (size_t slab = 0; slab < stripe.marked_in.size(); ++slab) bytes += SlabRows(slab) * sizeof(uint32_t);
      for (size_t slab = 0; slab < stripe.touched_in.size(); ++slab) bytes += SlabRows(slab) * sizeof(uint32_t);
      bytes += static_cast<int64_t>(stripe.free_slots.capacity() * sizeof(uint32_t) +
                                    stripe.evicted.capacity() * sizeof(int64_t));
      // A flat_hash_map slot holds the pair and one control byte.
      for (size_t slab = 0; slab < stripe.ids_in.size(); ++slab) bytes += SlabRows(slab) * sizeof(int64_t);
      bytes += static_cast<int64_t>(stripe.index.capacity() * RowIndex::kEntryBytes);
      bytes += static_cast<int64_t>(stripe.changed.capacity() * sizeof(stripe.changed[0]));
      if (stripe.sightings) bytes += RowStripe::kSketchDepth * RowStripe::kSketchWidth * sizeof(uint16_t);
      stripe.hot.AppendTo(&hot);
    }
    s.set_bytes(bytes);
    std::sort(hot.begin(), hot.end(), [](const HotRows::Entry& a, const HotRows::Entry& b) {
      return a.count != b.count ? a.count > b.count : a.id < b.id;
    });
    for (size_t k = 0; k < hot.size() && static_cast<int>(k) < hottest; ++k) {
      proto::HotRow* h = s.add_hottest();
      h->set_id(hot[k].id);
      h->set_updates(hot[k].count);
      h->set_error(hot[k].error);
    }
  }
  return out;
}

StatusOr<SparseTable*> SparseStore::FindRows(const proto::SparseRowsMsg& msg, const WhyNot* why) const {
  SparseTable* table = nullptr;
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = tables_.find(msg.table());
    if (it != tables_.end()) table = it->second.get();  // never removed while serving
  }
  if (table == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("unknown sparse table '", msg.table(), "'", why != nullptr ? (*why)(msg.table()) : ""));
  }
  PL_RETURN_IF_ERROR(CheckRowIds(msg, table->spec, index_, num_shards_));
  return table;
}

Status SparseStore::Resolve(const proto::PushRequest& request, bool check_finite, const WhyNot& why,
                            ResolvedPush* out) const {
  out->sparse.reserve(request.sparse_size());
  for (const proto::SparseRowsMsg& msg : request.sparse()) {
    PL_ASSIGN_OR_RETURN(SparseTable * t, FindRows(msg, &why));
    const std::string what = absl::StrCat("table '", msg.table(), "'");
    PL_ASSIGN_OR_RETURN(FloatView grad, FloatView::Of(msg.values(), what));
    if (grad.size() != msg.ids_size() * t->dim) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", msg.ids_size(), " ids of dim ", t->dim, " need ",
                                                     msg.ids_size() * t->dim, " gradient values, got ", grad.size()));
    }
    // One pass for the norm and the check: the sum is finite exactly when every value is.
    const double sum = check_finite ? SumOfSquares(grad.data(), grad.size()) : 0.0;
    const int64_t bad_at = std::isfinite(sum) ? -1 : FirstNonFinite(grad.data(), grad.size());
    if (bad_at >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("gradient of ", what, " has a non-finite value (",
                                                     grad.data()[bad_at], ") at row id ", msg.ids(bad_at / t->dim),
                                                     " element ", bad_at % t->dim, " (index ", bad_at, ")"));
    }
    if (check_finite) out->norms.push_back({msg.table(), std::sqrt(sum)});
    out->rows += msg.ids_size();
    out->sparse.push_back({t, &msg, std::move(grad)});
  }
  return absl::OkStatus();
}

std::optional<uint32_t> SparseStore::FindSlot(SparseTable* t, RowStripe* stripe, int64_t id) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // callers hold mu_ (shared) and stripe->mu
  if (std::optional<uint32_t> slot = stripe->index.Find(id)) return slot;
  return TakeFromDisk(t, stripe, id);
}

uint32_t SparseStore::CreateSlot(SparseTable* t, RowStripe* stripe, int64_t id) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // callers hold mu_ (shared) and stripe->mu
  float* row = stripe->Insert(id, t->stride);
  InitializeValues(t->init, RowStreamSeed(seed_, t->spec.name(), id), row, t->dim);
  InitSlots(t->optimizer ? *t->optimizer : optimizer_, row + t->dim, t->dim);
  t->SetStep(row, 0);
  ++t->rows;
  return *stripe->index.Find(id);
}

void SparseStore::UpdateRow(SparseTable* t, RowStripe* stripe, int64_t id, const float* grad,
                            const RowNotes& notes) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // callers hold mu_ and stripe->mu
  const std::optional<uint32_t> admitted = AdmittedSlot(t, stripe, id);
  if (!admitted) return;
  float* row = stripe->At(*admitted, t->stride);
  const int64_t step = t->GetStep(row) + 1;
  (t->rule ? *t->rule : *rule_).Apply(row, grad, row + t->dim, t->dim, step, t->dim);
  t->SetStep(row, step);
  if (notes.track) stripe->MarkChanged(id, *admitted);
  if (notes.touch) stripe->Touch(*admitted, notes.tick);
  stripe->hot.Count(id);
}

std::optional<uint32_t> SparseStore::AdmittedSlot(SparseTable* t, RowStripe* stripe, int64_t id) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (std::optional<uint32_t> slot = FindSlot(t, stripe, id)) return slot;  // a row on disk was admitted
  if (t->admit_after > 1) {
    if (stripe->Sight(id, t->admit_after) < t->admit_after) return std::nullopt;  // its gradient changes nothing
    ++t->admitted;
  }
  return CreateSlot(t, stripe, id);
}

void SparseStore::Apply(const std::vector<ResolvedPush::Sparse>& sparse) const {
  absl::ReaderMutexLock l(&mu_);
  const RowNotes notes = Notes();
  for (const ResolvedPush::Sparse& s : sparse) {
    SparseTable* t = s.table;
    const RowsByStripe rows(*s.msg);
    ParallelFor(kRowStripes, ThreadsForRows(s.msg->ids_size()), [&](int64_t st) {
      if (rows.begin[st] == rows.begin[st + 1]) return;
      RowStripe& stripe = t->stripes[st];
      absl::MutexLock sl(&stripe.mu);
      const ScopedFlushDenormals flush;  // once for the stripe's rows, not once a row
      for (uint32_t k = rows.begin[st]; k < rows.begin[st + 1]; ++k) {
        const uint32_t i = rows.order[k];
        UpdateRow(t, &stripe, s.msg->ids(i), s.grad.data() + i * t->dim, notes);
      }
    });
  }
}

void SparseStore::Accumulate(const std::vector<ResolvedPush::Sparse>& sparse) {
  for (const ResolvedPush::Sparse& s : sparse) {
    SparseTable* t = s.table;
    for (int i = 0; i < s.msg->ids_size(); ++i) {
      const int64_t id = s.msg->ids(i);
      const float* g = s.grad.data() + i * t->dim;
      RowStripe& stripe = t->stripes[StripeOf(id)];
      absl::MutexLock sl(&stripe.mu);
      auto [it, inserted] = stripe.accum_index.try_emplace(id, static_cast<uint32_t>(stripe.accum.size()));
      if (inserted) {
        stripe.accum.insert(stripe.accum.end(), g, g + t->dim);
      } else {
        float* acc = stripe.accum.data() + it->second;
        for (int64_t j = 0; j < t->dim; ++j) acc[j] += g[j];
      }
    }
  }
}

void SparseStore::ApplyAccumulated(float scale, bool keep_previous) const {
  absl::ReaderMutexLock l(&mu_);
  const RowNotes notes = Notes();
  const ScopedFlushDenormals flush;  // once, not once a row
  for (auto& [name, t] : tables_) {
    for (int s = 0; s < kRowStripes; ++s) {
      RowStripe& stripe = t->stripes[s];
      absl::MutexLock sl(&stripe.mu);
      stripe.previous.clear();
      auto update = [&](int64_t id, uint32_t pos) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        if (keep_previous) {
          std::vector<float>& before = stripe.previous[id];
          before.resize(t->dim);
          ReadRow(t.get(), &stripe, id, before.data(), RowNotes{});
        }
        float* g = stripe.accum.data() + pos;
        for (int64_t j = 0; j < t->dim; ++j) g[j] *= scale;
        UpdateRow(t.get(), &stripe, id, g, notes);
      };
      if (t->admit_after > 1) {
        // Sightings counted in the same order on every replica (a hash map's order is
        // not: its hash is seeded per process), so they admit the same ids.
        std::vector<std::pair<int64_t, uint32_t>> order(stripe.accum_index.begin(), stripe.accum_index.end());
        std::sort(order.begin(), order.end());
        for (const auto& [id, pos] : order) update(id, pos);
      } else {
        for (const auto& [id, pos] : stripe.accum_index) update(id, pos);
      }
      stripe.accum_index.clear();
      stripe.accum.clear();
    }
  }
}

Status SparseStore::CheckRead(const proto::PullRequest& request) const {
  for (const proto::SparseRowsMsg& msg : request.sparse()) PL_RETURN_IF_ERROR(FindRows(msg, nullptr).status());
  return absl::OkStatus();
}

void SparseStore::ReadRow(SparseTable* t, RowStripe* stripe, int64_t id, float* dst, const RowNotes& notes) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // callers hold mu_ and stripe->mu
  std::optional<uint32_t> slot = FindSlot(t, stripe, id);
  if (!slot && t->admit_after > 1) {
    std::memset(dst, 0, t->dim * sizeof(float));  // not admitted yet: the shared default
    return;
  }
  if (!slot) {
    // A pull creates no row (a million never-seen ids would be a million rows): it
    // reads the values the row will start with when a push makes it.
    InitializeValues(t->init, RowStreamSeed(seed_, t->spec.name(), id), dst, t->dim);
    return;
  }
  if (notes.touch) stripe->Touch(*slot, notes.tick);
  std::memcpy(dst, stripe->At(*slot, t->stride), t->dim * sizeof(float));
}

Status SparseStore::Read(const proto::PullRequest& request, proto::PullResponse* response, bool previous) const {
  std::vector<SparseTable*> tables;
  for (const proto::SparseRowsMsg& msg : request.sparse()) {
    PL_ASSIGN_OR_RETURN(SparseTable * t, FindRows(msg, nullptr));
    tables.push_back(t);
  }
  absl::ReaderMutexLock l(&mu_);
  const RowNotes notes = Notes();
  for (int i = 0; i < request.sparse_size(); ++i) {
    const proto::SparseRowsMsg& msg = request.sparse(i);
    SparseTable* t = tables[i];
    proto::SparseRowsMsg* out = response->add_sparse();
    out->set_table(msg.table());
    out->set_dim(t->dim);
    *out->mutable_ids() = msg.ids();
    std::string* values = out->mutable_values();
    values->resize(static_cast<size_t>(msg.ids_size()) * t->dim * sizeof(float));
    char* const base = values->data();
    const size_t row_bytes = t->dim * sizeof(float);
    const RowsByStripe rows(msg);
    ParallelFor(kRowStripes, ThreadsForRows(msg.ids_size()), [&](int64_t st) {
      if (rows.begin[st] == rows.begin[st + 1]) return;
      RowStripe& stripe = t->stripes[st];
      absl::MutexLock sl(&stripe.mu);
      for (uint32_t k = rows.begin[st]; k < rows.begin[st + 1]; ++k) {
        const uint32_t i = rows.order[k];
        char* dst = base + i * row_bytes;
        if (previous) {
          if (auto before = stripe.previous.find(msg.ids(i)); before != stripe.previous.end()) {
            std::memcpy(dst, before->second.data(), row_bytes);
            continue;
          }
        }
        ReadRow(t, &stripe, msg.ids(i), reinterpret_cast<float*>(dst), notes);
      }
    });
  }
  return absl::OkStatus();
}

void SparseStore::Clear() {
  absl::WriterMutexLock l(&mu_);
  tables_.clear();
  evicting_ = false;
}

// ------------------------------------------------------------------ saving, restoring

Status SparseStore::Visit(ShardVisitor* v, VisitRows rows) const {
  absl::ReaderMutexLock l(&mu_);
  // No row moves between memory and the disk tier during the visit: each is seen once.
  std::optional<absl::MutexLock> tier;
  if (disk_ != nullptr) tier.emplace(&tier_mu_);
  PL_RETURN_IF_ERROR(v->Tables(tables_.size()));
  for (const auto& [name, t] : tables_) {
    PL_RETURN_IF_ERROR(v->Table(t->spec, kRowStripes));
    for (int s = 0; s < kRowStripes; ++s) {
      RowStripe& stripe = t->stripes[s];
      absl::MutexLock sl(&stripe.mu);
      if (rows == VisitRows::kChangedTakingChanges) {
        PL_RETURN_IF_ERROR(v->Evicted(stripe.evicted));
        // A row keeps its slot until evicted; after an eviction, an entry whose row is
        // gone or moved (its slot reused) is stale.
        std::vector<std::pair<int64_t, uint32_t>> live;
        const std::vector<std::pair<int64_t, uint32_t>>* changed = &stripe.changed;
        if (stripe.evicted_since_take) {
          for (const auto& [id, slot] : stripe.changed) {
            if (stripe.index.Find(id) == slot) live.emplace_back(id, slot);
          }
          changed = &live;
        }
        PL_RETURN_IF_ERROR(v->Stripe(changed->size()));
        for (const auto& [id, slot] : *changed) {
          PL_RETURN_IF_ERROR(v->Row(id, {stripe.At(slot, t->stride), static_cast<size_t>(t->stride)}));
        }
      } else {
        // The rows on the disk tier travel in the last stripe's section (a reader puts a
        // row in its own stripe, whichever section it came in).
        const bool last = s == kRowStripes - 1;
        const int64_t on_disk = last && disk_ != nullptr ? disk_->rows(name) : 0;
        PL_RETURN_IF_ERROR(v->Stripe(stripe.index.size() + on_disk));
        for (const auto& [id, slot] : stripe.index) {
          PL_RETURN_IF_ERROR(v->Row(id, {stripe.At(slot, t->stride), static_cast<size_t>(t->stride)}));
        }
        if (on_disk > 0) {
          int64_t seen = 0;
          PL_RETURN_IF_ERROR(disk_->ForEach(name, t->stride, [&](int64_t id, absl::Span<const float> record) {
            ++seen;
            return v->Row(id, record);
          }));
          if (seen != on_disk) {
            return absl::InternalError(absl::StrCat("disk tier: table '", name, "' holds ", seen, " rows, counted ", on_disk));
          }
        }
      }
      if (rows != VisitRows::kAll) stripe.TakeChanges();
      if (t->admit_after > 1) {
        static const uint16_t kNone[RowStripe::kSketchDepth * RowStripe::kSketchWidth] = {};
        PL_RETURN_IF_ERROR(v->Sightings({stripe.sightings ? stripe.sightings.get() : kNone,
                                         RowStripe::kSketchDepth * RowStripe::kSketchWidth}));
      }
    }
  }
  return absl::OkStatus();
}

absl::Span<float> SparseStore::LoadRow(const std::string& table, int64_t id, bool fresh) {
  absl::ReaderMutexLock l(&mu_);
  auto tit = tables_.find(table);
  if (tit == tables_.end()) return {};
  SparseTable* t = tit->second.get();
  RowStripe& stripe = t->stripes[StripeOf(id)];
  absl::MutexLock sl(&stripe.mu);
  if (std::optional<uint32_t> slot = stripe.index.Find(id)) {
    if (fresh) return {};
    return {stripe.At(*slot, t->stride), static_cast<size_t>(t->stride)};
  }
  ++t->rows;
  return {stripe.Insert(id, t->stride), static_cast<size_t>(t->stride)};
}

void SparseStore::EraseRow(const std::string& table, int64_t id) {
  absl::ReaderMutexLock l(&mu_);
  auto tit = tables_.find(table);
  if (tit == tables_.end()) return;
  SparseTable* t = tit->second.get();
  RowStripe& stripe = t->stripes[StripeOf(id)];
  absl::MutexLock sl(&stripe.mu);
  // Not counted as evicted here: a restore replays evictions the shard counted before.
  if (stripe.Erase(id, tracking_changes())) --t->rows;
}

absl::Span<uint16_t> SparseStore::LoadSightings(const std::string& table, int s) {
  absl::ReaderMutexLock l(&mu_);
  auto tit = tables_.find(table);
  if (tit == tables_.end() || s < 0 || s >= kRowStripes) return {};
  RowStripe& stripe = tit->second->stripes[s];
  absl::MutexLock sl(&stripe.mu);
  if (!stripe.sightings) stripe.sightings.reset(new uint16_t[RowStripe::kSketchDepth * RowStripe::kSketchWidth]());
  stripe.sightings_sum = -1;  // summed again at the next sighting
  return {stripe.sightings.get(), RowStripe::kSketchDepth * RowStripe::kSketchWidth};
}

}  // namespace pl::pserver
