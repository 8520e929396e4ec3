// DurableReplies: answers calls only once what they changed is on disk, waiting for
// many calls' records at once on one thread of its own. The master's frequent calls
// (a trainer's lease, finish and heartbeat) are made and recorded on gRPC's threads
// without waiting (Master::*Unsynced); each answer is queued here with its record's
// ticket, and this thread waits for the disk (`durable`, the journal's group commit)
// then gives the answers: no gRPC thread blocks on an fsync, and a call's way through
// the server costs no hand-off to a thread of a pool.
//
// Thread-safety: Add from any thread; the answers run on this class's thread (or on the
// destructor's, for those still queued).
#ifndef PADDLE_LIKE_MASTER_DURABLE_REPLIES_H_
#define PADDLE_LIKE_MASTER_DURABLE_REPLIES_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "paddle_like/core/status.h"

namespace pl {

class DurableReplies {
 public:
  // `durable(ticket)`: returns once the records up to `ticket` are durable.
  explicit DurableReplies(std::function<Status(int64_t ticket)> durable);
  // Gives the answers still queued (each after its wait), then stops.
  ~DurableReplies();
  DurableReplies(const DurableReplies&) = delete;
  DurableReplies& operator=(const DurableReplies&) = delete;

  // Runs `reply` with durable(ticket)'s status, on this class's thread in the order
  // added; at once on the caller's thread for ticket -1 (nothing to wait for).
  void Add(int64_t ticket, std::function<void(const Status& stored)> reply);

 private:
  struct Waiting {
    int64_t ticket;
    std::function<void(const Status&)> reply;
  };
  void Loop();

  const std::function<Status(int64_t)> durable_;
  std::mutex mu_;
  std::condition_variable added_;
  std::vector<Waiting> queue_;  // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::thread thread_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_MASTER_DURABLE_REPLIES_H_
