// EventFileWriter: writes TensorBoard event files (events.out.tfevents.*) that
// TensorBoard reads as it reads TensorFlow's: TFRecord frames (uint64 length, masked
// CRC-32C of the length, the data, masked CRC-32C of the data) around Event protos
// (proto/tensorboard_event.proto). The first record says "brain.Event:2".
//
//   PL_ASSIGN_OR_RETURN(auto w, EventFileWriter::Open("logs/trainer-0"));
//   PL_RETURN_IF_ERROR(w->AddScalars(step, {{"loss", 0.31}, {"train/accuracy", 0.9}}));
//   PL_RETURN_IF_ERROR(w->Close());
//
// Why buffered: a training step records a few scalars; a write(2) per step would cost
// more than the formatting. Records collect in memory and reach the file when the buffer
// passes 64 KiB, when `flush_every` has passed since the last write (checked on each
// Add), on Flush() and on Close(). A reader therefore sees whole records, at most
// `flush_every` late. Several scalars of one step go in one Event (one Summary with
// several values): TensorBoard files them per tag, and a step costs one frame.
//
// Errors: the first failed write is kept and returned by every later call (nothing is
// written after a gap, so a file never holds a hole TensorBoard would stop at).
//
// Thread-safety: thread-safe (one mutex; a user's SummaryWriter may be shared by threads).
#ifndef PADDLE_LIKE_METRICS_EVENT_FILE_WRITER_H_
#define PADDLE_LIKE_METRICS_EVENT_FILE_WRITER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "paddle_like/core/status.h"
#include "proto/tensorboard_event.pb.h"

namespace pl::metrics {

struct EventFileOptions {
  // Longest time a record waits in memory (see the file comment); zero: every Add writes.
  absl::Duration flush_every = absl::Seconds(2);
  // Part of the file name (TensorBoard's convention: time, host, pid); empty: gethostname.
  std::string hostname;
};

// One scalar of a step: its tag ("loss", "train/accuracy") and value.
struct Scalar {
  std::string tag;
  double value;
};

class EventFileWriter {
 public:
  // Creates `dir` (and its parents) if needed and a new event file in it. The file name
  // "events.out.tfevents.<unix seconds>.<host>.<pid>.<n>" never repeats within a
  // process, so two writers on one directory write two files. An error naming the
  // directory when it cannot be made or written, its code from errno (PERMISSION_DENIED,
  // FAILED_PRECONDITION for a path through a file, ...).
  static StatusOr<std::unique_ptr<EventFileWriter>> Open(const std::string& dir, EventFileOptions options = {});
  ~EventFileWriter();  // Close(), errors ignored
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  Status AddScalar(const std::string& tag, double value, int64_t step);
  Status AddScalars(int64_t step, const std::vector<Scalar>& scalars);
  // A histogram of `values` (summary_histogram.h) under `tag`.
  Status AddHistogram(const std::string& tag, absl::Span<const double> values, int64_t step);
  // Any Event the caller built (its wall_time is set when zero).
  Status AddEvent(proto::tb::Event event);

  // Writes what is buffered to the file (not fsynced: a crash may lose the last records).
  Status Flush();
  // Flushes and closes; later Adds fail with FAILED_PRECONDITION. Idempotent.
  Status Close();

  const std::string& path() const { return path_; }
  // Bytes framed so far (written or buffered), for the cost benchmark.
  int64_t bytes() const;

 private:
  EventFileWriter(std::string path, int fd, EventFileOptions options);
  Status AppendLocked(const proto::tb::Event& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const EventFileOptions options_;
  mutable absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_);
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  Status error_ ABSL_GUARDED_BY(mu_);
  absl::Time last_flush_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Frames one record as TFRecord does: what each record of an event file is on disk.
std::string FrameRecord(const std::string& data);

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_EVENT_FILE_WRITER_H_
