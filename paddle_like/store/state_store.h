// StateStore: a small durable key → bytes map where processes keep the state they must
// resume from after a restart (the master's queues and membership, ...).
//
// The interface is what both the embedded LocalDirStore and a networked store (an
// etcd-backed one: Put → KV.Put, Get → KV.Range, Delete → KV.DeleteRange, List → a
// prefix Range with keys_only) can provide, so callers take a StateStore* and never
// know which one they have.
//
// Keys are '/'-separated paths of segments made of [A-Za-z0-9_.-], at most 200 bytes,
// where no segment is empty or starts with '.', and the key does not end in ".prev"
// or contain ".tmp." (names an implementation may use for its own files). ValidateKey
// enforces this so no key escapes a directory or names another key's backup.
//
// Thread-safety: implementations are safe for concurrent use from many threads.
#ifndef PADDLE_LIKE_STORE_STATE_STORE_H_
#define PADDLE_LIKE_STORE_STATE_STORE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"

namespace pl {

class StateStore {
 public:
  virtual ~StateStore() = default;

  // Durably replaces the value of `key`: once this returns OK the new value survives a
  // crash; if it fails, Get still returns the value from before.
  virtual Status Put(const std::string& key, absl::string_view value) = 0;
  // The newest valid value of `key`. NOT_FOUND when the key was never put (or was
  // deleted); DATA_LOSS when copies exist but none passes its checksum.
  virtual StatusOr<std::string> Get(const std::string& key) = 0;
  // Removes `key` and every copy of it. OK when it did not exist.
  virtual Status Delete(const std::string& key) = 0;
  // The keys that start with `prefix` (any string, "" for all), sorted.
  virtual StatusOr<std::vector<std::string>> List(const std::string& prefix) = 0;
};

// INVALID_ARGUMENT naming the key and the rule it breaks, OK otherwise.
Status ValidateKey(absl::string_view key);

}  // namespace pl

#endif  // PADDLE_LIKE_STORE_STATE_STORE_H_
