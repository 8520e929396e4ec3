#include "paddle_like/testing/impaired_link.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"

namespace pl::netbed {

namespace {

using Clock = std::chrono::steady_clock;

// sizeof(struct virtio_net_hdr) (<linux/virtio_net.h> does not compile as C++): the
// header PACKET_VNET_HDR puts before each frame; the relay passes it on untouched.
constexpr size_t kVnetHdrSize = 10;

Status Errno(const std::string& what) { return absl::InternalError(absl::StrCat(what, ": ", strerror(errno))); }

// An AF_PACKET socket of the current thread's namespace, bound to interface `name`,
// reading and writing frames behind a virtio-net header.
StatusOr<int> OpenPacketSocket(const std::string& name) {
  const unsigned index = if_nametoindex(name.c_str());
  if (index == 0) return absl::NotFoundError(absl::StrCat("no interface ", name, ": ", strerror(errno)));
  int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (fd < 0) return Errno("socket(AF_PACKET)");
  const int one = 1;
  // Large buffers ride out bursts (a relayed TCP window) without the relay dropping.
  const int bytes = 8 << 20;
  bool ok = setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) == 0 &&
            setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) == 0 &&
            setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) == 0;
#ifdef PACKET_IGNORE_OUTGOING
  // Not strictly needed (Run skips PACKET_OUTGOING), but spares reading our own frames.
  (void)setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
#endif
  sockaddr_ll addr = {};
  addr.sll_family = AF_PACKET;
  addr.sll_protocol = htons(ETH_P_ALL);
  addr.sll_ifindex = static_cast<int>(index);
  ok = ok && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (!ok) {
    Status s = Errno(absl::StrCat("packet socket on ", name));
    close(fd);
    return s;
  }
  return fd;
}

}  // namespace

StatusOr<int> InNetns(const std::string& netns_path, const std::function<StatusOr<int>()>& fn) {
  StatusOr<int> result = absl::InternalError("InNetns: not run");
  std::thread t([&] {
    int ns = open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
      result = absl::NotFoundError(absl::StrCat("cannot open ", netns_path, ": ", strerror(errno)));
      return;
    }
    if (setns(ns, CLONE_NEWNET) != 0) {
      result = Errno(absl::StrCat("setns(", netns_path, ")"));
      close(ns);
      return;
    }
    close(ns);
    result = fn();
  });
  t.join();
  return result;
}

StatusOr<std::unique_ptr<ImpairedLink>> ImpairedLink::Start(const Options& options) {
  if (options.loss_pct < 0 || options.loss_pct > 100 || options.latency.count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ImpairedLink: loss ", options.loss_pct, "% must be in [0, 100] and latency >= 0"));
  }
  std::unique_ptr<ImpairedLink> link(new ImpairedLink());
  link->options_ = options;
  PL_ASSIGN_OR_RETURN(link->fd_a_, InNetns(options.netns_path, [&] { return OpenPacketSocket(options.if_a); }));
  PL_ASSIGN_OR_RETURN(link->fd_b_, InNetns(options.netns_path, [&] { return OpenPacketSocket(options.if_b); }));
  link->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (link->wake_fd_ < 0) return Errno("eventfd");
  link->thread_ = std::thread([l = link.get()] { l->Run(); });
  return link;
}

ImpairedLink::~ImpairedLink() {
  if (thread_.joinable()) {
    stop_ = true;
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
    thread_.join();
  }
  for (int fd : {fd_a_, fd_b_, wake_fd_}) {
    if (fd >= 0) close(fd);
  }
}

ImpairedLink::Counters ImpairedLink::counters() const {
  return Counters{relayed_.load(), lost_.load(), failed_.load()};
}

void ImpairedLink::Run() {
  struct Frame {
    Clock::time_point due;
    std::vector<char> bytes;  // virtio-net header + Ethernet frame
  };
  // queue[0]: read on a, to be written on b; queue[1]: the other way.
  std::deque<Frame> queue[2];
  const int in_fd[2] = {fd_a_, fd_b_};
  const int out_fd[2] = {fd_b_, fd_a_};
  std::mt19937_64 rng(options_.seed);
  std::uniform_real_distribution<double> uniform(0.0, 100.0);
  // The largest GSO frame is 64 KiB; anything longer is truncated and dropped.
  std::vector<char> buffer(kVnetHdrSize + 65536 + 256);

  while (!stop_) {
    // Sleep until a frame arrives or the earliest queued one is due.
    timespec timeout = {1, 0};
    const auto now = Clock::now();
    for (const auto& q : queue) {
      if (q.empty()) continue;
      const auto wait = std::max(q.front().due - now, Clock::duration::zero());
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
      if (ns < timeout.tv_sec * 1000000000LL + timeout.tv_nsec) timeout = {ns / 1000000000, ns % 1000000000};
    }
    pollfd fds[3] = {{fd_a_, POLLIN, 0}, {fd_b_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (ppoll(fds, 3, &timeout, nullptr) < 0 && errno != EINTR) return;
    if (stop_ || (fds[2].revents & POLLIN)) return;

    for (int side = 0; side < 2; ++side) {
      if (fds[side].revents & POLLERR) {
        // The interface went down (ENETDOWN): clear the error, keep the binding.
        int err = 0;
        socklen_t len = sizeof(err);
        (void)getsockopt(in_fd[side], SOL_SOCKET, SO_ERROR, &err, &len);
      }
      if (!(fds[side].revents & POLLIN)) continue;
      for (int n = 0; n < 256; ++n) {  // bounded, so one busy side cannot starve the other
        sockaddr_ll from = {};
        socklen_t from_len = sizeof(from);
        const ssize_t got = recvfrom(in_fd[side], buffer.data(), buffer.size(), MSG_DONTWAIT | MSG_TRUNC,
                                     reinterpret_cast<sockaddr*>(&from), &from_len);
        if (got < 0) break;                                 // EAGAIN: drained; ENETDOWN: nothing to read while down
        if (from.sll_pkttype == PACKET_OUTGOING) continue;  // our own write on this side
        if (static_cast<size_t>(got) > buffer.size()) {
          ++failed_;
          continue;
        }
        if (options_.loss_pct > 0 && uniform(rng) < options_.loss_pct) {
          ++lost_;
          continue;
        }
        queue[side].push_back(
            Frame{Clock::now() + options_.latency, std::vector<char>(buffer.begin(), buffer.begin() + got)});
      }
    }

    const auto flush_at = Clock::now();
    for (int side = 0; side < 2; ++side) {
      auto& q = queue[side];
      while (!q.empty() && q.front().due <= flush_at) {
        const auto& bytes = q.front().bytes;
        if (send(out_fd[side], bytes.data(), bytes.size(), MSG_DONTWAIT) == static_cast<ssize_t>(bytes.size())) {
          ++relayed_;
        } else {
          ++failed_;
        }
        q.pop_front();
      }
    }
  }
}

}  // namespace pl::netbed
