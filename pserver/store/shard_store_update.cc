// ShardStore's updates: async application, sync accumulation and a step's mean
// (shard_store.h).
#include <algorithm>
#include <cstring>

#include "paddle_like/core/flush_denormals.h"
#include "pserver/store/parallel_for.h"
#include "pserver/store/shard_store.h"

namespace pl::pserver {

std::optional<uint32_t> ShardStore::FindSlot(SparseTable* t, RowStripe* stripe, int64_t id) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // callers hold mu_ (shared) and stripe->mu
  if (std::optional<uint32_t> slot = stripe->index.Find(id)) return slot;
  return TakeFromDisk(t, stripe, id);
}

uint32_t ShardStore::CreateSlot(SparseTable* t, RowStripe* stripe, int64_t id) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // callers hold mu_ (shared) and stripe->mu
  float* row = stripe->Insert(id, t->stride);
  InitializeValues(t->init, RowStreamSeed(seed_, t->spec.name(), id), row, t->dim);
  InitSlots(t->optimizer ? *t->optimizer : optimizer_, row + t->dim, t->dim);
  t->SetStep(row, 0);
  ++t->rows;
  return *stripe->index.Find(id);
}

void ShardStore::UpdateRow(SparseTable* t, RowStripe* stripe, int64_t id, const float* grad,
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

std::optional<uint32_t> ShardStore::AdmittedSlot(SparseTable* t, RowStripe* stripe, int64_t id) const
    ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (std::optional<uint32_t> slot = FindSlot(t, stripe, id)) return slot;  // a row on disk was admitted
  if (t->admit_after > 1) {
    if (stripe->Sight(id, t->admit_after) < t->admit_after) return std::nullopt;  // its gradient changes nothing
    ++t->admitted;
  }
  return CreateSlot(t, stripe, id);
}

void ShardStore::Apply(const ResolvedPush& push) {
  absl::ReaderMutexLock l(&mu_);
  const UpdateRule* rule = &*rule_;  // fixed once initialised; read by the helpers
  int64_t floats = 0;
  for (const ResolvedPush::Dense& d : push.dense) floats += d.block->n;
  ParallelFor(static_cast<int64_t>(push.dense.size()), ThreadsForDense(floats), [&](int64_t i) {
    const ResolvedPush::Dense& d = push.dense[i];
    DenseBlock* blk = d.block;
    absl::MutexLock bl(&blk->mu);
    const int64_t step = ++blk->step;
    float* value = blk->Writable(rule->num_slots());
    float* slots = rule->num_slots() > 0 ? value + blk->n : nullptr;
    d.grad->ForEachChunk([&](int64_t offset, const float* grad, int64_t n) {
      rule->Apply(value + offset, grad, slots ? slots + offset : nullptr, n, step, blk->n);
      // The gradient chunk is consumed: its place may take the new values.
      if (d.write_back) std::memcpy(d.write_back + offset, value + offset, n * sizeof(float));
    });
  });
  const RowNotes notes = Notes();
  for (const ResolvedPush::Sparse& s : push.sparse) {
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

void ShardStore::Accumulate(const ResolvedPush& push) {
  for (const ResolvedPush::Dense& d : push.dense) {
    DenseBlock* blk = d.block;
    absl::MutexLock bl(&blk->mu);
    if (!blk->accum) blk->accum.reset(new float[blk->n]);
    float* acc = blk->accum.get();
    if (!blk->has_accum) {
      d.grad->CopyTo(acc);
      blk->has_accum = true;
    } else {
      d.grad->ForEachChunk([acc](int64_t offset, const float* grad, int64_t n) {
        for (int64_t i = 0; i < n; ++i) acc[offset + i] += grad[i];
      });
    }
  }
  for (const ResolvedPush::Sparse& s : push.sparse) {
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

void ShardStore::ApplyAccumulated(int contributors) {
  absl::ReaderMutexLock l(&mu_);
  const float scale = 1.0f / static_cast<float>(std::max(contributors, 1));
  for (auto& [name, p] : dense_) {
    for (auto& [b, blk] : p->blocks) {
      absl::MutexLock bl(&blk->mu);
      if (!blk->has_accum) continue;
      float* g = blk->accum.get();
      for (int64_t i = 0; i < blk->n; ++i) g[i] *= scale;
      float* value = blk->Writable(rule_->num_slots());
      rule_->Apply(value, g, value + blk->n, blk->n, ++blk->step, blk->n);
      blk->has_accum = false;
    }
  }
  const RowNotes notes = Notes();
  const ScopedFlushDenormals flush;  // once, not once a row
  for (auto& [name, t] : sparse_) {
    for (int s = 0; s < kRowStripes; ++s) {
      RowStripe& stripe = t->stripes[s];
      absl::MutexLock sl(&stripe.mu);
      auto update = [&](int64_t id, uint32_t pos) ABSL_NO_THREAD_SAFETY_ANALYSIS {
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

}  // namespace pl::pserver
