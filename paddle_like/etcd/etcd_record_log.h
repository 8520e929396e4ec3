// EtcdRecordLog: a RecordLog (paddle_like/store/record_log.h) kept in etcd, so that a
// standby master replays the events the leader wrote.
//
// Append queues a record in memory; Sync writes every record queued so far as one etcd
// key, "<prefix><20-digit batch number>" (the records framed with their CRC-32C), in one
// transaction guarded by the leader's Fence and by the key not existing yet: calls in
// flight share one etcd round trip, and a retried write that had landed is recognised
// rather than written twice. Batches are numbered on from the highest one found at
// Load, so keys sort in the order written; Reset deletes them all.
//
// A write that fails (etcd unreachable through every endpoint, or the fence no longer
// holding: another master leads) leaves the log failed: that Sync, every later one and
// every Append return the error, and `on_failure` is called once, since what the
// caller holds in memory may now be ahead of what is stored. The master exits on it.
//
// Thread-safety: Append, Sync and Reset are thread-safe; Load before the others.
#ifndef PADDLE_LIKE_ETCD_ETCD_RECORD_LOG_H_
#define PADDLE_LIKE_ETCD_ETCD_RECORD_LOG_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "paddle_like/etcd/etcd_client.h"
#include "paddle_like/etcd/fence.h"
#include "paddle_like/store/record_log.h"

namespace pl::etcd {

class EtcdRecordLog final : public RecordLog {
 public:
  // `client` outlives the log. `prefix`: the keys' common start (ends in '/').
  EtcdRecordLog(EtcdClient* client, std::string prefix, Fence fence,
                std::function<void(const Status&)> on_failure = nullptr)
      : client_(client), prefix_(std::move(prefix)), fence_(std::move(fence)), on_failure_(std::move(on_failure)) {}

  // DATA_LOSS naming the key for a batch that fails its CRC or is cut short (an etcd
  // write is whole: that is corruption, never a torn tail).
  StatusOr<LogContents> Load() override;
  StatusOr<int64_t> Append(absl::string_view payload) override;
  Status Sync(int64_t ticket) override;
  Status Reset() override;
  int64_t size() const override;
  std::string name() const override { return "etcd:" + prefix_; }

  // Batches written since Load (for the benchmark: records per etcd write).
  int64_t batches_written() const;

 private:
  std::string BatchKey(uint64_t n) const;
  // Writes `batch` as key `n`; OK when it is in etcd (also after a retry that found it
  // there already).
  Status WriteBatch(uint64_t n, const std::string& batch);
  // Marks the log failed with `st` (the first failure wins) and reports it once.
  Status Fail(Status st);

  EtcdClient* const client_;
  const std::string prefix_;
  const Fence fence_;
  const std::function<void(const Status&)> on_failure_;

  mutable std::mutex mu_;
  std::condition_variable written_cv_;
  std::string pending_;        // guarded by mu_: framed records not yet written
  int64_t appended_ = 0;       // guarded by mu_: records appended (the tickets)
  int64_t written_ = 0;        // guarded by mu_: records durable in etcd
  bool writing_ = false;       // guarded by mu_: a Sync is writing a batch
  uint64_t next_batch_ = 1;    // guarded by mu_
  int64_t bytes_ = 0;          // guarded by mu_: bytes since the last Reset
  int64_t batches_written_ = 0;  // guarded by mu_
  Status failed_;              // guarded by mu_
};

}  // namespace pl::etcd

#endif  // PADDLE_LIKE_ETCD_ETCD_RECORD_LOG_H_
