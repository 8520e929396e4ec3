// ParameterShard's reads: waiting for a version, and Pull (see shard.h).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "pserver/shard.h"
#include "pserver/shard_internal.h"

namespace pl::pserver {

Status ParameterShard::WaitForVersion(int64_t min_version, absl::Time deadline) const {
  absl::MutexLock l(&version_mu_);
  while (version_ < min_version && !shutdown_) {
    if (version_cv_.WaitWithDeadline(&version_mu_, deadline) && version_ < min_version) {
      return absl::DeadlineExceededError(absl::StrCat("pserver ", index_, ": waited for version ",
                                                      min_version, ", still at ", version_));
    }
  }
  if (version_ < min_version) {
    return absl::UnavailableError(absl::StrCat("pserver ", index_, " is shutting down"));
  }
  return absl::OkStatus();
}

Status ParameterShard::Pull(const proto::PullRequest& request, absl::Time deadline,
                            proto::PullResponse* response) {
  PullFrame frame;
  PL_RETURN_IF_ERROR(Pull(request, deadline, &frame));
  *response = frame.ToProto();
  return absl::OkStatus();
}

Status ParameterShard::Pull(const proto::PullRequest& request, absl::Time deadline, PullFrame* frame) {
  return Pull(request, deadline, frame, nullptr);
}

Status ParameterShard::Pull(const proto::PullRequest& request, absl::Time deadline, PullFrame* frame,
                            const DenseDestination& dense_out) {
  proto::PullResponse* response = &frame->header();
  if (request.min_version() > 0) PL_RETURN_IF_ERROR(WaitForVersion(request.min_version(), deadline));
  absl::ReaderMutexLock pl(&params_mu_);
  PL_RETURN_IF_ERROR(CheckInitialized());
  absl::ReaderMutexLock sl(&step_mu_);
  // Validate the whole request first: a bad one creates no rows.
  std::vector<DenseBlockState*> blocks;
  blocks.reserve(request.dense_size());
  for (const proto::DenseBlock& msg : request.dense()) {
    PL_ASSIGN_OR_RETURN(DenseBlockState* blk, FindBlock(msg.param(), msg.block()));
    blocks.push_back(blk);
  }
  std::vector<float*> destinations;
  if (dense_out) {
    for (int i = 0; i < request.dense_size(); ++i) {
      PL_ASSIGN_OR_RETURN(float* out, dense_out(i, blocks[i]->n));
      destinations.push_back(out);
    }
  }
  std::vector<SparseTableState*> tables;
  for (const proto::SparseRowsMsg& msg : request.sparse()) {
    auto it = sparse_.find(msg.table());
    if (it == sparse_.end()) {
      return absl::NotFoundError(absl::StrCat("unknown sparse table '", msg.table(), "'"));
    }
    PL_RETURN_IF_ERROR(CheckRowIds(msg, it->second->spec, index_, num_shards_));
    tables.push_back(it->second.get());
  }
  for (int i = 0; i < request.dense_size(); ++i) {
    DenseBlockState* blk = blocks[i];
    if (!destinations.empty()) {
      // Async reads without the lock, as below; sync copies the finished step exactly.
      if (sync_) {
        absl::MutexLock l(&blk->mu);
        std::memcpy(destinations[i], blk->data.get(), blk->n * sizeof(float));
      } else {
        std::memcpy(destinations[i], blk->data.get(), blk->n * sizeof(float));
      }
      continue;
    }
    if (!sync_) {
      // Async: sent in place, without the block lock. A push applied while it is being
      // sent may show in part of the block; each value is either before or after it
      // (float stores do not tear), the staleness async training already accepts.
      frame->AddDenseRef(request.dense(i).param(), request.dense(i).block(), blk->data.get(), blk->n, blk->data);
      continue;
    }
    // Sync: exactly the values of the finished step.
    float* out = frame->AddDenseBuffer(request.dense(i).param(), request.dense(i).block(), blk->n);
    absl::MutexLock l(&blk->mu);
    std::memcpy(out, blk->data.get(), blk->n * sizeof(float));
  }
  int64_t rows = 0;
  for (int i = 0; i < request.sparse_size(); ++i) {
    const proto::SparseRowsMsg& msg = request.sparse(i);
    SparseTableState* t = tables[i];
    proto::SparseRowsMsg* out = response->add_sparse();
    out->set_table(msg.table());
    out->set_dim(t->dim);
    *out->mutable_ids() = msg.ids();
    std::string* values = out->mutable_values();
    values->resize(static_cast<size_t>(msg.ids_size()) * t->dim * sizeof(float));
    char* dst = values->data();
    for (int64_t id : msg.ids()) {
      RowStripe& stripe = t->stripes[StripeOf(id)];
      absl::MutexLock l(&stripe.mu);
      std::memcpy(dst, FindOrCreateRow(t, &stripe, id), t->dim * sizeof(float));
      dst += t->dim * sizeof(float);
    }
    rows += msg.ids_size();
  }
  sparse_rows_pulled_ += rows;
  response->set_version(version());
  return absl::OkStatus();
}

}  // namespace pl::pserver
