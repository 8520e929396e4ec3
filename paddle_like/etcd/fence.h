// Fence: what makes a write by a leader that was replaced impossible. A leader holds its
// election key (etcd_election.h) from the revision that created it; every write it makes
// is a transaction that first compares the key's create revision with that one, so once
// the key has lapsed or a new leader created it again, the old leader's writes fail
// instead of landing beside the new leader's. A write without a fence (key empty) is
// made unconditionally (one master, no standby).
//
// Thread-safety: a value type.
#ifndef PADDLE_LIKE_ETCD_FENCE_H_
#define PADDLE_LIKE_ETCD_FENCE_H_

#include <cstdint>
#include <string>

#include "proto/etcd_rpc.pb.h"

namespace pl::etcd {

struct Fence {
  std::string key;             // the election key; empty: no fence
  int64_t create_revision = 0;  // the revision that created it for this leader (its term)

  bool active() const { return !key.empty(); }
  // Adds the comparison to `txn` (nothing without a fence).
  void GuardTxn(etcdserverpb::TxnRequest* txn) const {
    if (!active()) return;
    etcdserverpb::Compare* c = txn->add_compare();
    c->set_key(key);
    c->set_target(etcdserverpb::Compare::CREATE);
    c->set_result(etcdserverpb::Compare::EQUAL);
    c->set_create_revision(create_revision);
  }
};

}  // namespace pl::etcd

#endif  // PADDLE_LIKE_ETCD_FENCE_H_
