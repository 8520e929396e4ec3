// RecordLog: where an append-only sequence of records is kept, with group commit:
// Append queues a record and returns a ticket, Sync(ticket) returns once that record
// (and every one before it) is durable, and callers in flight share one write. The
// master's event log (master/master_journal.h) is one: on a local disk (FileRecordLog,
// over AppendLog) or in etcd, where a standby master reads it (etcd/etcd_record_log.h).
//
// Records are framed as AppendLog describes (length, CRC-32C, payload);
// ParseRecordFrames reads such frames back and FrameRecord writes one.
//
// Thread-safety: Append, Sync and Reset are thread-safe; Load before the others.
#ifndef PADDLE_LIKE_STORE_RECORD_LOG_H_
#define PADDLE_LIKE_STORE_RECORD_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "paddle_like/core/status.h"

namespace pl {

struct LogContents {
  std::vector<std::string> records;
  int64_t valid_bytes = 0;  // where the last whole record ends
  int64_t torn_bytes = 0;   // bytes after it that were dropped (0: none)
};

// The records framed in `bytes`. A last record cut short or failing its checksum is a
// torn tail (torn_bytes); one failing its checksum with records after it is DATA_LOSS
// naming `where` and its offset.
StatusOr<LogContents> ParseRecordFrames(absl::string_view bytes, const std::string& where);
// `payload` framed: uint32 length | uint32 CRC-32C | payload.
std::string FrameRecord(absl::string_view payload);

class RecordLog {
 public:
  virtual ~RecordLog() = default;
  // What the log holds, in order (an empty log when there is none yet). The first call
  // also readies it for appending after them: a torn tail is cut off. DATA_LOSS naming
  // the place for corruption before the end.
  virtual StatusOr<LogContents> Load() = 0;
  // Queues (or writes) one record; the ticket to Sync on. On failure nothing of it stays.
  virtual StatusOr<int64_t> Append(absl::string_view payload) = 0;
  // Returns once every record up to `ticket` is durable.
  virtual Status Sync(int64_t ticket) = 0;
  // Empties the log (a snapshot made its records redundant), durably; a Sync waiting on
  // what it held returns.
  virtual Status Reset() = 0;
  // Bytes it holds now (what a snapshot would make redundant).
  virtual int64_t size() const = 0;
  // Where it is, for messages: a path, an etcd prefix.
  virtual std::string name() const = 0;
};

// The log in one local file (AppendLog).
std::unique_ptr<RecordLog> OpenFileRecordLog(std::string path);

}  // namespace pl

#endif  // PADDLE_LIKE_STORE_RECORD_LOG_H_
