// PushLedger: exactly-once pushes. A trainer's client numbers its async pushes to a
// shard 1, 2, ... (PushRequest.client_id / push_id); the ledger remembers the last
// number applied per client, so a push retried after its answer was lost (a timeout,
// a primary that died after applying it, a failover) is acknowledged, not applied
// again. Replicas keep identical ledgers: they apply the same stream, and a joining
// replica receives the ledger with the shard's snapshot.
//
// Thread-safety: not thread-safe; the shard guards it.
#ifndef PSERVER_STORE_PUSH_LEDGER_H_
#define PSERVER_STORE_PUSH_LEDGER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "paddle_like/core/status.h"

namespace pl::pserver {

class PushLedger {
 public:
  // Whether push `push_id` of `client_id` was applied already (ids 0 are not numbered:
  // never).
  bool Applied(uint64_t client_id, int64_t push_id) const;
  void Record(uint64_t client_id, int64_t push_id);
  size_t clients() const { return last_.size(); }

  // u64 count, then (u64 client, i64 last push id) pairs, little-endian.
  std::string Serialize() const;
  size_t SerializedBytes() const { return 8 + 16 * last_.size(); }
  // DATA_LOSS for bytes that are not a ledger.
  static StatusOr<PushLedger> Parse(std::string_view bytes);

 private:
  absl::flat_hash_map<uint64_t, int64_t> last_;
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_PUSH_LEDGER_H_
