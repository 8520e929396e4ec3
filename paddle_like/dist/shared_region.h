// SharedRegion: a shared-memory segment that a trainer and a parameter server on the
// same host both map, so that dense tensors pass between them as memory copies instead
// of through TCP (the kernel copies each byte twice on loopback, and gRPC frames and
// flow-controls it). Peers on different hosts cannot open each other's segment; they
// keep using gRPC.
//
// The trainer creates a segment (Create): a memfd sealed against shrinking and growing,
// so that neither side can truncate the memory the other maps (which would kill it with
// SIGBUS). Its name is "/proc/<pid>/fd/<fd>@<host key>" (the key: the kernel's boot id
// and the mount namespace, so that a process elsewhere never opens a descriptor of its
// own host by that path), which the pserver opens (Open refuses a segment without both
// seals) and proves it sees the same memory (it reads the
// creator's nonce, writes its answer); then the creator closes the descriptor (Unlink):
// the memory lives while either side maps it and is freed when both are gone, so a
// killed process leaves nothing behind.
//
// Layout: a kHeaderBytes header (magic, nonce, answer, a mailbox), then the payload the two
// sides agree on through their requests (see proto/pserver.proto, Attach).
//
// Thread-safety: the mapping is immutable once made; callers coordinate access to the
// bytes (a region serves one trainer's calls, one at a time).
#ifndef PADDLE_LIKE_DIST_SHARED_REGION_H_
#define PADDLE_LIKE_DIST_SHARED_REGION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "paddle_like/core/status.h"

namespace pl {

class SharedRegion {
 public:
  static constexpr size_t kHeaderBytes = 4096;

  // A new segment of kHeaderBytes + payload_bytes, its pages reserved up front (a
  // full /dev/shm is RESOURCE_EXHAUSTED here, not a SIGBUS later), with a fresh nonce.
  static StatusOr<std::shared_ptr<SharedRegion>> Create(size_t payload_bytes);
  // The same layout in this process's own anonymous memory, with no name: each end's
  // copy of a region mirrored over TCP (dense_link.h), where no memory can be shared.
  static StatusOr<std::shared_ptr<SharedRegion>> CreatePrivate(size_t payload_bytes);
  // Maps an existing segment; its size must be `total_bytes`. Only names Create
  // makes are accepted (INVALID_ARGUMENT otherwise); one this host does not have is
  // NOT_FOUND.
  static StatusOr<std::shared_ptr<SharedRegion>> Open(const std::string& name, size_t total_bytes);

  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  // Removes the name (the memory stays while mapped). Idempotent; the creator's
  // destructor does it too.
  void Unlink();

  const std::string& name() const { return name_; }
  size_t total_bytes() const { return bytes_; }
  uint64_t nonce() const;
  // The pserver's answer to the nonce, as the other side wrote it into the header.
  uint64_t answer() const;
  void set_answer(uint64_t value);
  // [kMailboxAt, kHeaderBytes) of the header: zeroed at Create, free for the two
  // sides to signal through (paddle_like/dist/stream_doorbell.h).
  static constexpr size_t kMailboxAt = 256;
  static constexpr size_t kMailboxBytes = kHeaderBytes - kMailboxAt;
  char* mailbox() const { return base_ + kMailboxAt; }
  // The payload: [kHeaderBytes, total_bytes) of the segment.
  char* payload() const { return base_ + kHeaderBytes; }
  size_t payload_bytes() const { return bytes_ - kHeaderBytes; }
  // payload() + offset when [offset, offset + count floats) lies inside the payload and
  // offset is 4-byte aligned; else INVALID_ARGUMENT naming the span.
  StatusOr<float*> Floats(int64_t offset, int64_t count) const;
  // Process-private memory the size of the payload, made on first use and kept with the
  // mapping: where a reader copies what it must check, since the other side can still
  // write the region. Thread-safe.
  char* shadow() const;
  // The same for `count` 2-byte values (bfloat16), offset 2-byte aligned.
  StatusOr<uint16_t*> Halves(int64_t offset, int64_t count) const;

 private:
  SharedRegion(std::string name, char* base, size_t bytes, bool linked);
  std::string name_;
  char* base_;
  size_t bytes_;
  bool linked_;  // the creator still has to unlink the name (close fd_)
  int fd_ = -1;   // Create's memfd, open while the name is
  mutable std::once_flag shadow_once_;
  mutable std::unique_ptr<char[]> shadow_;
};

}  // namespace pl

#endif  // PADDLE_LIKE_DIST_SHARED_REGION_H_
