// EtcdStateStore: the StateStore (paddle_like/store/state_store.h) kept in etcd, so that
// a standby master on another machine reads the state the leader stored.
//
// Every key lives under `root`: "<root>/kv/<key>" holds a tag byte, the CRC-32C of the
// value and either the value (up to 1 MB) or, for a larger one, where its pieces are:
// "<root>/pieces/<key>/<generation>/<i>", 1 MB each, each written before the entry that
// names them, so a Get never sees a value half written; the pieces of the value it
// replaced are deleted after. Every write is guarded by the leader's Fence: a replaced
// leader's Put fails with FAILED_PRECONDITION and changes nothing.
//
// Thread-safety: thread-safe (each call is its own etcd transactions).
#ifndef PADDLE_LIKE_ETCD_ETCD_STATE_STORE_H_
#define PADDLE_LIKE_ETCD_ETCD_STATE_STORE_H_

#include <string>
#include <vector>

#include "paddle_like/etcd/etcd_client.h"
#include "paddle_like/etcd/fence.h"
#include "paddle_like/store/state_store.h"

namespace pl::etcd {

class EtcdStateStore final : public StateStore {
 public:
  // A value larger than this is stored in pieces of this size.
  static constexpr size_t kPieceBytes = 1 << 20;

  // `client` outlives the store.
  EtcdStateStore(EtcdClient* client, std::string root, Fence fence)
      : client_(client), root_(std::move(root)), fence_(std::move(fence)) {}

  Status Put(const std::string& key, absl::string_view value) override;
  StatusOr<std::string> Get(const std::string& key) override;
  Status Delete(const std::string& key) override;
  StatusOr<std::vector<std::string>> List(const std::string& prefix) override;

 private:
  std::string EntryKey(const std::string& key) const { return root_ + "/kv/" + key; }
  std::string PiecesPrefix(const std::string& key) const { return root_ + "/pieces/" + key + "/"; }
  // Runs `txn` under the fence; FAILED_PRECONDITION when the fence no longer holds.
  StatusOr<etcdserverpb::TxnResponse> Fenced(etcdserverpb::TxnRequest txn, const char* what);

  EtcdClient* const client_;
  const std::string root_;
  const Fence fence_;
};

}  // namespace pl::etcd

#endif  // PADDLE_LIKE_ETCD_ETCD_STATE_STORE_H_
