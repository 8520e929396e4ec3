#include "paddle_like/etcd/etcd_record_log.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pl::etcd {
namespace {

constexpr int kBatchDigits = 20;
// Batches read per Range: bounded so that one answer stays far below gRPC's limit.
constexpr int kBatchesPerRange = 256;

}  // namespace

std::string EtcdRecordLog::BatchKey(uint64_t n) const { return absl::StrFormat("%s%020u", prefix_, n); }

StatusOr<LogContents> EtcdRecordLog::Load() {
  LogContents out;
  uint64_t last = 0;
  std::string from = prefix_;
  const std::string end = EtcdClient::PrefixEnd(prefix_);
  for (;;) {
    etcdserverpb::RangeRequest request;
    request.set_key(from);
    request.set_range_end(end);
    request.set_limit(kBatchesPerRange);
    PL_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse response, client_->Range(request));
    for (const etcdserverpb::KeyValue& kv : response.kvs()) {
      const std::string suffix = kv.key().substr(prefix_.size());
      uint64_t n = 0;
      if (suffix.size() != kBatchDigits || !absl::SimpleAtoi(suffix, &n)) {
        return absl::DataLossError(absl::StrCat("etcd event log ", prefix_, ": key '", kv.key(),
                                                "' is not a batch of this log"));
      }
      PL_ASSIGN_OR_RETURN(LogContents batch, ParseRecordFrames(kv.value(), absl::StrCat("etcd key '", kv.key(), "'")));
      if (batch.torn_bytes > 0) {
        return absl::DataLossError(absl::StrCat("etcd event log: key '", kv.key(), "' ends in ", batch.torn_bytes,
                                                " bytes that are not a whole record (an etcd write is whole: the "
                                                "batch is corrupt)"));
      }
      for (std::string& r : batch.records) out.records.push_back(std::move(r));
      out.valid_bytes += static_cast<int64_t>(kv.value().size());
      last = n;
    }
    if (!response.more() || response.kvs_size() == 0) break;
    from = response.kvs(response.kvs_size() - 1).key() + '\0';
  }
  std::lock_guard<std::mutex> lock(mu_);
  next_batch_ = std::max(next_batch_, last + 1);
  bytes_ = out.valid_bytes;
  return out;
}

StatusOr<int64_t> EtcdRecordLog::Append(absl::string_view payload) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.ok()) return failed_;
  pending_ += FrameRecord(payload);
  return ++appended_;
}

Status EtcdRecordLog::Sync(int64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  while (written_ < ticket) {
    if (!failed_.ok()) return failed_;
    if (writing_) {
      written_cv_.wait(lock);
      continue;
    }
    // This caller writes everything queued so far, for itself and for those behind it.
    std::string batch;
    batch.swap(pending_);
    const int64_t upto = appended_;
    const uint64_t n = next_batch_++;
    writing_ = true;
    lock.unlock();
    Status st = WriteBatch(n, batch);
    lock.lock();
    writing_ = false;
    if (st.ok()) {
      written_ = std::max(written_, upto);
      bytes_ += static_cast<int64_t>(batch.size());
      ++batches_written_;
    } else {
      lock.unlock();
      st = Fail(std::move(st));
      lock.lock();
    }
    written_cv_.notify_all();
  }
  return absl::OkStatus();
}

Status EtcdRecordLog::WriteBatch(uint64_t n, const std::string& batch) {
  const std::string key = BatchKey(n);
  etcdserverpb::TxnRequest txn;
  fence_.GuardTxn(&txn);
  etcdserverpb::Compare* fresh = txn.add_compare();
  fresh->set_key(key);
  fresh->set_target(etcdserverpb::Compare::CREATE);
  fresh->set_result(etcdserverpb::Compare::EQUAL);
  fresh->set_create_revision(0);
  etcdserverpb::PutRequest* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(batch);
  txn.add_failure()->mutable_request_range()->set_key(key);
  PL_ASSIGN_OR_RETURN(etcdserverpb::TxnResponse response, client_->Txn(txn));
  if (response.succeeded()) return absl::OkStatus();
  // Refused: either an earlier attempt of this very write landed (its answer was lost),
  // or another master leads now.
  if (response.responses_size() == 1 && response.responses(0).response_range().kvs_size() == 1 &&
      response.responses(0).response_range().kvs(0).value() == batch) {
    etcdserverpb::RangeRequest leader;
    leader.set_key(fence_.key);
    PL_ASSIGN_OR_RETURN(etcdserverpb::RangeResponse now, client_->Range(leader));
    if (!fence_.active() ||
        (now.kvs_size() == 1 && now.kvs(0).create_revision() == fence_.create_revision)) {
      return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(absl::StrCat("etcd event log ", prefix_, ": write of batch ", n,
                                                    " refused: this master no longer leads ('", fence_.key,
                                                    "' is not the key it created at revision ",
                                                    fence_.create_revision, ")"));
}

Status EtcdRecordLog::Reset() {
  etcdserverpb::TxnRequest txn;
  fence_.GuardTxn(&txn);
  etcdserverpb::DeleteRangeRequest* del = txn.add_success()->mutable_request_delete_range();
  del->set_key(prefix_);
  del->set_range_end(EtcdClient::PrefixEnd(prefix_));
  StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
  Status st = !response.ok() ? response.status()
              : response->succeeded()
                  ? absl::OkStatus()
                  : absl::FailedPreconditionError(absl::StrCat("etcd event log ", prefix_,
                                                               ": reset refused, this master no longer leads"));
  // A failed reset loses nothing: the snapshot holds the events and Load skips them.
  if (!st.ok()) return st;
  std::lock_guard<std::mutex> lock(mu_);
  // What was queued is in the snapshot; a batch being written lands after the delete and
  // is skipped at Load by its seqs.
  pending_.clear();
  written_ = appended_;
  bytes_ = 0;
  written_cv_.notify_all();
  return absl::OkStatus();
}

int64_t EtcdRecordLog::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_ + static_cast<int64_t>(pending_.size());
}

int64_t EtcdRecordLog::batches_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_written_;
}

Status EtcdRecordLog::Fail(Status st) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.ok()) {
      failed_ = st;
      first = true;
    }
    st = failed_;
  }
  if (first && on_failure_) on_failure_(st);
  return st;
}

}  // namespace pl::etcd
