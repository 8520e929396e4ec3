// Faults: what a test may ask a pserver to do wrong on purpose, to make a rare
// schedule happen every time (a primary that dies between its backups' acknowledgement
// and its answer, a joiner slower than the trainers, ...). They reach the pserver's
// parts through its Env (pserver/service/pserver_env.h); the product's Env has none,
// and a test sets them through a binary of its own (tests/pserver/faulty_pserver_main.cc).
//
// Thread-safety: a plain value, copied into the parts' options before they start.
#ifndef PSERVER_STORE_FAULTS_H_
#define PSERVER_STORE_FAULTS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace pl::pserver {

struct Faults {
  // As primary, SIGKILL this process right after the backups acknowledged the n-th
  // update counted while the master lists a backup in sync (one would take over), before
  // the caller is answered, the first time (of all processes sharing `die_once_file`,
  // which this creates). <= 0: never.
  int64_t die_after_acked_updates = 0;
  std::string die_once_file;
  // A replica that joined with a trained shard (a snapshot past version 0) takes this
  // long over every stream entry it receives, to be slower than the trainers, and 40
  // times as long over the snapshot, as a big shard would (the trainers push on).
  absl::Duration slow_joiner = absl::ZeroDuration();
  // A backup takes this long over every call of the primary's stream, so that the
  // entries behind it queue up (and go in the next call together).
  absl::Duration slow_stream_call = absl::ZeroDuration();
  // A backup takes this long before applying each entry it holds.
  absl::Duration slow_apply = absl::ZeroDuration();
  // A replica's startup pauses this long between joining and attaching its shard: the
  // primary's stream may come first.
  absl::Duration attach_delay = absl::ZeroDuration();
  // A joiner's snapshot goes in gRPC pieces of this size (never the socket): many
  // small pieces, several in flight. 0: the process's own choice.
  int64_t snapshot_piece_bytes = 0;
  // The memory a primary's stream entry borrowed is written over (0xff bytes: NaN) the
  // moment its call lets go of it, as a trainer's next push would (push_loan.h).
  bool scribble_settled_loans = false;

  bool any() const {
    return die_after_acked_updates > 0 || slow_joiner > absl::ZeroDuration() ||
           slow_stream_call > absl::ZeroDuration() || slow_apply > absl::ZeroDuration() ||
           attach_delay > absl::ZeroDuration() || snapshot_piece_bytes > 0 || scribble_settled_loans;
  }
};

}  // namespace pl::pserver

#endif  // PSERVER_STORE_FAULTS_H_
