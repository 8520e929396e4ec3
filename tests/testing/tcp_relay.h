// TcpRelay: a TCP relay on 127.0.0.1 for tests that cut one process off from another
// while the rest of the job still reaches both. Connections to port() are relayed to
// `target`; Cut() stops moving bytes (connections stay open, so callers see timeouts,
// as across a partitioned network, not resets) and Heal() resumes.
//
// Thread-safety: Cut/Heal/port from any thread; the relay runs on its own thread and
// is stopped (every connection closed) by the destructor.
#ifndef PADDLE_LIKE_TESTS_TESTING_TCP_RELAY_H_
#define PADDLE_LIKE_TESTS_TESTING_TCP_RELAY_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "paddle_like/core/status.h"

namespace pl::testing {

class TcpRelay {
 public:
  // Listens on a free port of 127.0.0.1 and relays to 127.0.0.1:target_port.
  static StatusOr<std::unique_ptr<TcpRelay>> Start(int target_port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      if (fd >= 0) ::close(fd);
      return absl::InternalError("tcp relay: cannot listen on 127.0.0.1");
    }
    return std::unique_ptr<TcpRelay>(new TcpRelay(fd, ntohs(addr.sin_port), target_port));
  }
  ~TcpRelay() {
    stop_ = true;
    thread_.join();
    for (auto& [a, b] : pairs_) {
      ::close(a);
      ::close(b);
    }
    ::close(listen_fd_);
  }
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  int port() const { return port_; }
  void Cut() { cut_ = true; }
  void Heal() { cut_ = false; }

 private:
  TcpRelay(int listen_fd, int port, int target_port)
      : listen_fd_(listen_fd), port_(port), target_port_(target_port), thread_([this] { Run(); }) {}

  void Accept() {
    int in = ::accept(listen_fd_, nullptr, nullptr);
    if (in < 0) return;
    int out = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (out < 0 || ::connect(out, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(in);
      if (out >= 0) ::close(out);
      return;
    }
    pairs_.emplace_back(in, out);
  }

  void Run() {
    char buf[64 * 1024];
    while (!stop_) {
      std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
      if (!cut_) {
        for (auto& [a, b] : pairs_) {
          fds.push_back({a, POLLIN, 0});
          fds.push_back({b, POLLIN, 0});
        }
      }
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      if (fds[0].revents & POLLIN) Accept();
      std::vector<size_t> closed;
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const auto& pair = pairs_[(i - 1) / 2];
        const int from = fds[i].fd, to = from == pair.first ? pair.second : pair.first;
        const ssize_t n = ::read(from, buf, sizeof(buf));
        if (n > 0) {
          for (ssize_t done = 0; done < n;) {
            // MSG_NOSIGNAL: a side that closed meanwhile is an error here, not a
            // SIGPIPE that kills the test (it once did, under load).
            const ssize_t w = ::send(to, buf + done, n - done, MSG_NOSIGNAL);
            if (w <= 0) break;
            done += w;
          }
        } else if (closed.empty() || closed.back() != (i - 1) / 2) {
          closed.push_back((i - 1) / 2);  // a side closed: close the pair
        }
      }
      for (auto it = closed.rbegin(); it != closed.rend(); ++it) {
        ::close(pairs_[*it].first);
        ::close(pairs_[*it].second);
        pairs_.erase(pairs_.begin() + static_cast<long>(*it));
      }
    }
  }

  const int listen_fd_;
  const int port_;
  const int target_port_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> cut_{false};
  std::vector<std::pair<int, int>> pairs_;  // (accepted, to target); relay thread only
  std::thread thread_;                      // last: starts once the members above exist
};

}  // namespace pl::testing

#endif  // PADDLE_LIKE_TESTS_TESTING_TCP_RELAY_H_
