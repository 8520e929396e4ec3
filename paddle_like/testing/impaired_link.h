// ImpairedLink: a user-space relay of Ethernet frames between two interfaces of one
// network namespace that delays every frame by a fixed latency and drops a share of
// them at random, in each direction — what `tc qdisc add ... netem delay D loss L%`
// does, for kernels built without the netem qdisc (CONFIG_NET_SCH_NETEM is off on the
// 2-core machines, and their kernels load no modules). The test bed (test_bed.h) puts
// one between a host's port and the bridge when a test shapes that host's link.
//
// Frames are read and written through AF_PACKET sockets with virtio-net headers
// (PACKET_VNET_HDR), so the kernel's segmentation and checksum offloads pass through
// unchanged: a relayed TCP stream keeps its large segments, and one "frame" may carry
// up to 64 KiB. Loss is drawn per frame, as netem draws it per packet. Frames leave in
// the order they arrived (the latency is the same for all of them).
//
// A frame that cannot be written (the interface is down: the host is cut off) is
// dropped, as a wire would drop it; the relay goes on once the interface is up again.
//
// Thread-safety: Start and the destructor are called by one thread; the relay runs
// on its own thread and counters() may be read from any thread.
#ifndef PADDLE_LIKE_TESTS_NETBED_IMPAIRED_LINK_H_
#define PADDLE_LIKE_TESTS_NETBED_IMPAIRED_LINK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "paddle_like/core/status.h"

namespace pl::netbed {

class ImpairedLink {
 public:
  struct Options {
    std::string netns_path;                // /var/run/netns/<name>: the namespace both interfaces are in
    std::string if_a, if_b;                // relayed both ways; each must be up and enslaved to nothing
    std::chrono::microseconds latency{0};  // added to every frame, each direction
    double loss_pct = 0;                   // in [0, 100], each direction
    uint64_t seed = 1;                     // of the loss draws
  };
  struct Counters {
    int64_t relayed = 0;  // frames written to the other side
    int64_t lost = 0;     // frames dropped by the loss draw
    int64_t failed = 0;   // frames the other side would not take (interface down, full)
  };

  // Opens both sockets inside the namespace and starts relaying. INVALID_ARGUMENT for
  // a bad option, NOT_FOUND for a missing interface, the socket error otherwise.
  static StatusOr<std::unique_ptr<ImpairedLink>> Start(const Options& options);

  // Stops relaying (frames still queued are dropped) and closes the sockets.
  ~ImpairedLink();
  ImpairedLink(const ImpairedLink&) = delete;
  ImpairedLink& operator=(const ImpairedLink&) = delete;

  Counters counters() const;

 private:
  ImpairedLink() = default;
  void Run();

  Options options_;
  int fd_a_ = -1, fd_b_ = -1;
  int wake_fd_ = -1;  // eventfd: tells Run to stop
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> relayed_{0}, lost_{0}, failed_{0};
  std::thread thread_;
};

// Runs `fn` on a short-lived thread that has joined the network namespace at
// `netns_path` (setns affects only the calling thread), and returns its result:
// sockets created by `fn` stay in that namespace for their whole life, whichever
// thread uses them later.
StatusOr<int> InNetns(const std::string& netns_path, const std::function<StatusOr<int>()>& fn);

}  // namespace pl::netbed

#endif  // PADDLE_LIKE_TESTS_NETBED_IMPAIRED_LINK_H_
