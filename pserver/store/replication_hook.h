// ReplicationHook: what a replicated shard's primary asks of its replication layer
// (pserver/replication/replicator.h) while it applies updates, so that ParameterShard stays
// ignorant of streams, leases and the master.
//
// The shard calls Forward* in the order it applies updates, under its own order
// lock, before it applies them; each returns the update's position in the stream.
// It then acknowledges the caller only after WaitAcked(position) says every replica
// the master counts in sync has it.
//
// Thread-safety: implementations are thread-safe.
#ifndef PSERVER_STORE_REPLICATION_HOOK_H_
#define PSERVER_STORE_REPLICATION_HOOK_H_

#include <cstdint>
#include <memory>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/dense_frame.h"
#include "proto/pserver.pb.h"
#include "pserver/store/push_loan.h"

namespace pl::pserver {

class ReplicationHook {
 public:
  virtual ~ReplicationHook() = default;
  // OK while this process may act as the shard's primary (its role and its lease);
  // else UNAVAILABLE naming why, which sends trainers to the master for the primary.
  virtual Status CheckPrimary() const = 0;
  // CheckPrimary for a trainer's call, where waiting a moment may turn a refusal into
  // service: a backup the master has just promoted hears of it at its next heartbeat,
  // and the trainer that learned it first would otherwise wait out a retry. Never
  // called under the shard's locks.
  virtual Status AwaitPrimary() { return CheckPrimary(); }
  // Queue an update for every backup; return its stream position.
  virtual StatusOr<int64_t> ForwardPush(const PushFrame& push) = 0;
  // ForwardPush whose backups' copy may borrow `push`'s payloads (push_loan.h): the
  // caller settles *loan, when set, before `push` goes, on every way out.
  virtual StatusOr<int64_t> ForwardBorrowedPush(const PushFrame& push, std::shared_ptr<PushLoan>* loan) {
    return ForwardPush(push);
  }
  virtual StatusOr<int64_t> ForwardInit(const proto::InitRequest& request) = 0;
  virtual StatusOr<int64_t> ForwardStepComplete(int contributors) = 0;
  // Rows the primary is about to evict (ids only); `to_disk`: to its disk tier.
  virtual StatusOr<int64_t> ForwardEviction(const proto::SparseRowsMsg& evicted, bool to_disk) = 0;
  // The position of the last update forwarded.
  virtual int64_t last_position() const = 0;
  // OK once every backup in sync has applied position `position`; UNAVAILABLE when
  // this process stops being primary first, DEADLINE_EXCEEDED at `deadline`.
  virtual Status WaitAcked(int64_t position, absl::Time deadline) = 0;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_REPLICATION_HOOK_H_
