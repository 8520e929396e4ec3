#include "paddle_like/rpc/bulk_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "paddle_like/rpc/tls.h"

namespace pl::rpc {
namespace {

// Bigger kernel buffers than the default let one write or read move more per call.
constexpr int kSocketBufferBytes = 4 << 20;
// Room for every lane of a snapshot (snapshot_lanes.h) or a dense link to connect at once.
constexpr int kListenBacklog = 64;

Status Errno(const std::string& what) { return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno))); }

void Tune(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // the closing status is a few bytes
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketBufferBytes, sizeof(kSocketBufferBytes));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kSocketBufferBytes, sizeof(kSocketBufferBytes));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list != nullptr) ::freeaddrinfo(list);
  }
};

Status Resolve(const std::string& host, int port, bool passive, AddrInfo* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &out->list);
  if (rc != 0 || out->list == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve '", host, "': ", ::gai_strerror(rc)));
  }
  return absl::OkStatus();
}

// Waits for `events` on fd, in slices so that *cancel is noticed.
Status PollFor(int fd, short events, absl::Time deadline, const std::atomic<bool>* cancel, const char* what) {
  while (true) {
    if (cancel != nullptr && cancel->load()) return absl::CancelledError(absl::StrCat(what, ": cancelled"));
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::UnavailableError(absl::StrCat(what, ": timed out"));
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(std::min(left, kBulkCancelCheck))) + 1;
    const int rc = ::poll(&p, 1, ms);
    if (rc < 0 && errno != EINTR) return Errno(what);
    if (rc > 0) return absl::OkStatus();  // ready, or an error the next call reports
  }
}

}  // namespace

bool SameBytes(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string RandomToken() {
  std::random_device urandom;  // non-deterministic (the CPU's or the kernel's source): no guessable token
  std::string token(kBulkTokenBytes, '\0');
  for (char& c : token) c = static_cast<char>(urandom());
  return token;
}

StatusOr<std::shared_ptr<const TlsContext>> BulkTlsContext(TlsSide side) {
  if (!TransportIsSecure()) return std::shared_ptr<const TlsContext>();
  return TlsContext::Load(side);
}

std::string HostOf(const std::string& address) {
  if (!address.empty() && address[0] == '[') {
    const size_t close = address.find(']');
    if (close != std::string::npos) return address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

StatusOr<std::unique_ptr<BulkConnection>> BulkConnection::Dial(const std::string& host, int port,
                                                                       absl::Duration timeout,
                                                                       const std::atomic<bool>* cancel,
                                                                       const std::string& peer,
                                                                       std::shared_ptr<const TlsContext> tls) {
  if (tls == nullptr) {
    PL_ASSIGN_OR_RETURN(tls, BulkTlsContext(TlsSide::kClient));
  }
  const std::string where = absl::StrCat(host, ":", port);
  AddrInfo ai;
  PL_RETURN_IF_ERROR(Resolve(host, port, /*passive=*/false, &ai));
  const absl::Time deadline = absl::Now() + timeout;
  Status last = absl::UnavailableError(absl::StrCat("cannot connect to ", where));
  for (addrinfo* a = ai.list; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = Errno(absl::StrCat("socket for ", where));
      continue;
    }
    Tune(fd);
    auto conn = std::make_unique<BulkConnection>(fd, cancel);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = Errno(absl::StrCat("connect to ", where));
        continue;
      }
      last = PollFor(fd, POLLOUT, deadline, cancel, "connect");
      int err = 0;
      socklen_t len = sizeof(err);
      if (last.ok() && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err != 0) {
        errno = err;
        last = Errno(absl::StrCat("connect to ", where));
      }
      if (!last.ok()) continue;
    }
    PL_RETURN_IF_ERROR(conn->StartTls(tls.get(), peer, deadline - absl::Now()));
    return conn;
  }
  return last;
}

BulkConnection::~BulkConnection() { ::close(fd_); }

void BulkConnection::Shutdown() { ::shutdown(fd_, SHUT_RDWR); }

Status BulkConnection::Wait(short events, absl::Duration idle, const char* what) {
  return PollFor(fd_, events, absl::Now() + idle, cancel_, what);
}

Status BulkConnection::StartTls(const TlsContext* context, const std::string& peer,
                                    absl::Duration timeout) {
  if (context == nullptr) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + std::max(timeout, absl::Milliseconds(1));
  PL_ASSIGN_OR_RETURN(tls_, TlsSocket::Handshake(fd_, *context, peer, [&](short events) {
                        return PollFor(fd_, events, deadline, cancel_, "TLS handshake");
                      }));
  return absl::OkStatus();
}

Status BulkConnection::Read(void* data, size_t n, absl::Duration idle) {
  const std::string what = absl::StrCat(purpose_, " receive");
  if (tls_) return tls_->Read(data, n, [&](short events) { return Wait(events, idle, what.c_str()); });
  char* out = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t got = ::recv(fd_, out, n, 0);
    if (got > 0) {
      out += got;
      n -= static_cast<size_t>(got);
    } else if (got == 0) {
      return absl::UnavailableError(absl::StrCat("the ", purpose_, " sender closed with ", n, " bytes still to come"));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      PL_RETURN_IF_ERROR(Wait(POLLIN, idle, what.c_str()));
    } else if (errno != EINTR) {
      return Errno(what);
    }
  }
  return absl::OkStatus();
}

Status BulkConnection::Write(const void* data, size_t n, absl::Duration idle) {
  const std::string what = absl::StrCat(purpose_, " send");
  if (tls_) return tls_->Write(data, n, [&](short events) { return Wait(events, idle, what.c_str()); });
  const char* in = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = ::send(fd_, in, n, MSG_NOSIGNAL);
    if (put >= 0) {
      in += put;
      n -= static_cast<size_t>(put);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      PL_RETURN_IF_ERROR(Wait(POLLOUT, idle, what.c_str()));
    } else if (errno != EINTR) {
      return Errno(what);
    }
  }
  return absl::OkStatus();
}

StatusOr<std::unique_ptr<BulkListener>> BulkListener::Open(const std::string& host,
                                                                   const std::atomic<bool>* cancel,
                                                                   const std::string& peer) {
  // Loaded once: every lane's handshake starts from it.
  PL_ASSIGN_OR_RETURN(std::shared_ptr<const TlsContext> tls, BulkTlsContext(TlsSide::kServer));
  AddrInfo ai;
  PL_RETURN_IF_ERROR(Resolve(host, 0, /*passive=*/true, &ai));
  const int fd = ::socket(ai.list->ai_family, ai.list->ai_socktype | SOCK_CLOEXEC, ai.list->ai_protocol);
  if (fd < 0) return Errno("bulk listener socket");
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (::bind(fd, ai.list->ai_addr, ai.list->ai_addrlen) != 0 || ::listen(fd, kListenBacklog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
    Status s = Errno(absl::StrCat("bulk listener on ", host));
    ::close(fd);
    return s;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const int port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                               : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  std::string token = RandomToken();
  return std::unique_ptr<BulkListener>(
      new BulkListener(fd, port, std::move(token), cancel, peer, std::move(tls)));
}

BulkListener::~BulkListener() { ::close(fd_); }

StatusOr<std::unique_ptr<BulkConnection>> BulkListener::Accept(absl::Time deadline) {
  while (true) {
    PL_ASSIGN_OR_RETURN(std::unique_ptr<BulkConnection> conn, NextConnection(deadline));
    if (Admit(*conn, deadline).ok()) return conn;
    // Not the primary: closed unread, and the wait goes on.
  }
}

StatusOr<std::unique_ptr<BulkConnection>> BulkListener::NextConnection(absl::Time deadline) {
  while (true) {
    PL_RETURN_IF_ERROR(PollFor(fd_, POLLIN, deadline, cancel_, "waiting for a connection"));
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // gone already, or a spurious wake-up
    Tune(fd);
    return std::make_unique<BulkConnection>(fd, cancel_);
  }
}

Status BulkListener::Admit(BulkConnection& conn, absl::Time deadline) const {
  // A stranger gets a second at most, for the handshake and the token together.
  const absl::Duration allow =
      std::min(std::max(deadline - absl::Now(), absl::Milliseconds(1)), absl::Seconds(1));
  std::string presented(kBulkTokenBytes, '\0');
  PL_RETURN_IF_ERROR(conn.StartTls(tls_.get(), peer_, allow));
  PL_RETURN_IF_ERROR(conn.Read(presented.data(), presented.size(), allow));
  if (!SameBytes(presented, token_)) return absl::PermissionDeniedError("the connection's token is wrong");
  return absl::OkStatus();
}

}  // namespace pl::rpc
