// DenseLink: a region's dense blocks between a trainer and a pserver on another host,
// over plain TCP connections of their own (with the job's TLS when it has one), so that
// a step's megabytes skip gRPC's single HTTP/2 stream, its framing and its copies.
//
// Each end keeps its own copy of the region (SharedRegion::CreatePrivate, the layout a
// shared-memory region has). Send(seq, ranges) copies byte ranges of this end's copy
// into the same ranges of the peer's, spread over the link's lanes so that the copies
// and, with TLS, the cipher run on several cores; WaitFor(seq) returns once the peer's
// send numbered `seq` has fully landed here. The gRPC call that uses the bytes carries
// the number (PushRequest.link_seq), so the bulk bytes and the small call that refers
// to them travel apart and meet at the receiver.
//
// Every lane connection is one-way (an OpenSSL session must not be read and written
// from two threads at once): `out` lanes carry this end's sends, `in` lanes the peer's.
// Every send puts one frame on every out lane (possibly without bytes), so a receiver
// knows a send is whole when each in lane has delivered its frame. Frame: u64 seq,
// u32 ranges, u32 zero, then per range u64 offset, u64 bytes, then the bytes.
//
// Faults: the first lane error (a peer that closed, stalled for `idle`, or sent a
// frame outside the region) breaks the whole link: every lane is shut down, waiters
// wake with the error, and the owner falls back to gRPC and drops the link.
//
// A send is whole at the receiver once every lane has delivered its frame; WaitFor(seq)
// waits for that send itself, so sends may land in any order: several calls, each with
// its own number, may be in flight at once (a pserver answers them in any order). A
// receiver remembers the last kRememberedSends whole sends; one older than those counts
// as landed.
//
// Thread-safety: thread-safe. Sends are serialised.
#ifndef PADDLE_LIKE_DIST_DENSE_LINK_H_
#define PADDLE_LIKE_DIST_DENSE_LINK_H_

#include <cstdint>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "paddle_like/core/status.h"
#include "paddle_like/dist/shared_region.h"
#include "paddle_like/rpc/bulk_socket.h"

namespace pl {

inline constexpr int kMaxDenseLinkLanes = 16;

// The lanes a link takes per direction unless told: with TLS the cipher splits well
// over cores, without it one connection already runs at memory speed on loopback.
int DefaultDenseLinkLanes(bool tls);

class DenseLink {
 public:
  using Lanes = std::vector<std::unique_ptr<rpc::BulkConnection>>;
  struct Range {
    int64_t offset = 0;  // into the region's payload (at the peer, and here unless `source`)
    int64_t bytes = 0;
    // Send only: where the bytes are taken from, if not this end's region at `offset`
    // (a trainer sends gradients straight from its tensors). Must stay unchanged until
    // Send returns.
    const char* source = nullptr;
  };

  // Starts a reader thread per `in` lane and a writer per `out` lane over `region`'s
  // payload (kept alive by the link). Both lists must be non-empty, the same size.
  static StatusOr<std::unique_ptr<DenseLink>> Start(Lanes out, Lanes in, std::shared_ptr<SharedRegion> region,
                                                   absl::Duration idle = absl::Seconds(10));
  ~DenseLink();  // shuts the lanes down and joins their threads
  DenseLink(const DenseLink&) = delete;
  DenseLink& operator=(const DenseLink&) = delete;

  // Copies `ranges` of this end's payload to the peer under number `seq`; returns once
  // every byte is handed to the kernel. INVALID_ARGUMENT for a range outside the payload.
  Status Send(uint64_t seq, const std::vector<Range>& ranges);
  // Send in two halves, so the caller can make the call that names the bytes while they
  // travel (the receiver waits for them anyway): StartSend hands `ranges` to the lanes
  // and returns; FinishSend waits for them as Send does. An OK StartSend must be
  // followed by FinishSend on the same thread before any other send; the ranges'
  // sources must stay unchanged until it returns.
  Status StartSend(uint64_t seq, const std::vector<Range>& ranges);
  Status FinishSend();
  // Until the peer's send `seq` (or a later one) has landed in this end's payload:
  // the link's error once broken, DEADLINE_EXCEEDED at `deadline`.
  Status WaitFor(uint64_t seq, absl::Time deadline);
  // OK while every lane works; the first error after.
  Status status() const;
  int lanes() const { return static_cast<int>(out_.size()); }
  const std::shared_ptr<SharedRegion>& region() const { return region_; }

 private:
  DenseLink(Lanes out, Lanes in, std::shared_ptr<SharedRegion> region, absl::Duration idle);
  void ReadLane(int k);
  void WriteLane(int k);
  Status ReadFrame(int k);
  void Break(Status why);

  const Lanes out_, in_;
  const std::shared_ptr<SharedRegion> region_;
  const absl::Duration idle_;
  absl::Mutex send_mu_;  // one Send at a time
  mutable absl::Mutex mu_;
  Status error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  static constexpr size_t kRememberedSends = 4096;
  // Per send number: how many in lanes delivered its frame; once all did, it is landed.
  absl::flat_hash_map<uint64_t, int> arriving_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> landed_ ABSL_GUARDED_BY(mu_);  // whole sends, the newest kRememberedSends
  uint64_t forgotten_ ABSL_GUARDED_BY(mu_) = 0;     // landed sends up to here left landed_
  // The send in progress: its number, each out lane's ranges, and how many lanes are done.
  uint64_t job_ ABSL_GUARDED_BY(mu_) = 0;  // increments per send; a writer waits for a new one
  uint64_t job_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::vector<Range>> job_ranges_ ABSL_GUARDED_BY(mu_);
  int job_done_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_DENSE_LINK_H_
