// MasterJournal: where the master's state survives the master.
//
// With a log (pl-master always gives one: STATE_DIR/master-events.log, or under its
// etcd prefix when a standby may take over) every call that may change the state is
// appended as one small MasterEvent (its request, the lease clock's reading, what it
// drew: a token digest) to a RecordLog, and calls in flight share one write (group
// commit): what a call writes does not grow with the job. Every `snapshot_bytes` of log the whole state is stored (StateStore key
// "master/state", with the seq of the last event it includes) and the log starts over.
// Restoring is the snapshot, then the events after it replayed in order.
//
// Without a log path every change stores the whole state, as the master first did.
//
// Thread-safety: Record, WriteSnapshot and Load under the master's mutex; Sync from any
// thread (outside it: that is how calls share fsyncs).
#ifndef PADDLE_LIKE_MASTER_MASTER_JOURNAL_H_
#define PADDLE_LIKE_MASTER_MASTER_JOURNAL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "paddle_like/core/status.h"
#include "paddle_like/store/record_log.h"
#include "paddle_like/store/state_store.h"
#include "proto/master_state.pb.h"

namespace pl {

// The store key of the master's state (the snapshot, with a log).
inline constexpr char kMasterStateKey[] = "master/state";
inline constexpr int32_t kMasterStateFormatVersion = 1;

class MasterJournal {
 public:
  using Logger = std::function<void(const std::string&)>;

  struct Stored {
    std::optional<proto::MasterState> snapshot;  // none: a new job
    std::vector<proto::MasterEvent> events;      // after the snapshot, in order
    int64_t torn_bytes = 0;                      // a torn last record, dropped
  };

  // `log_path` empty: no log (each change stores the whole state).
  static StatusOr<std::unique_ptr<MasterJournal>> Open(StateStore* store, std::string log_path,
                                                       int64_t snapshot_bytes, Logger log);
  // The events in `log` (nullptr: no log).
  static StatusOr<std::unique_ptr<MasterJournal>> Open(StateStore* store, std::shared_ptr<RecordLog> log,
                                                       int64_t snapshot_bytes, Logger log_line);

  // What the store and the log hold. DATA_LOSS, naming what and where, for a snapshot
  // that is not a MasterState of this format, a log that is corrupt before its end, a
  // gap in the events' seqs, or events without a snapshot. A torn last record is
  // dropped, reported through the logger and in torn_bytes, and cut off the file.
  StatusOr<Stored> Load();

  bool logging() const { return log_ != nullptr; }
  // Records `event`, giving it the next seq. Without a log: stores `state()` if it
  // differs from what was stored last. Returns what to Sync (-1: nothing). UNAVAILABLE
  // when it could not be written: nothing of it was kept.
  StatusOr<int64_t> Record(proto::MasterEvent& event, const std::function<proto::MasterState()>& state);
  // Returns once what Record returned `ticket` for is on disk.
  Status Sync(int64_t ticket);
  // Stores `state` as the snapshot of every event so far and empties the log.
  Status WriteSnapshot(proto::MasterState state);
  // The log is past snapshot_bytes: the caller stores a snapshot.
  bool SnapshotDue() const { return log_ != nullptr && log_->size() >= snapshot_bytes_; }
  uint64_t last_seq() const { return last_seq_; }

 private:
  MasterJournal(StateStore* store, std::shared_ptr<RecordLog> log, int64_t snapshot_bytes, Logger log_line)
      : store_(store), log_(std::move(log)), snapshot_bytes_(snapshot_bytes), logger_(std::move(log_line)) {}

  StateStore* const store_;
  const std::shared_ptr<RecordLog> log_;  // nullptr: no log
  const int64_t snapshot_bytes_;
  const Logger logger_;
  uint64_t last_seq_ = 0;
  std::string stored_bytes_;  // without a log: the state last stored
};

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_MASTER_JOURNAL_H_
