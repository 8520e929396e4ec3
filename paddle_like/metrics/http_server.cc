#include "paddle_like/metrics/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <exception>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pl::metrics {
namespace {

constexpr size_t kMaxRequest = 16 << 10;

const char* Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    default: return "Internal Server Error";
  }
}

void SetTimeouts(int fd, absl::Duration timeout) {
  const timeval tv = absl::ToTimeval(timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(n);
  }
  return true;
}

StatusOr<sockaddr_in> ParseAddress(const std::string& host, int port) {
  if (port < 0 || port > 65535) return absl::InvalidArgumentError(absl::StrCat("port ", port, " is not in [0, 65535]"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", host, "' is not an IPv4 address"));
  }
  return addr;
}

}  // namespace

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, HttpHandler handler) {
  const std::string where = absl::StrCat(options.host, ":", options.port);
  auto addr = ParseAddress(options.host, options.port);
  if (!addr.ok()) return Annotate(addr.status(), absl::StrCat("cannot listen on ", where));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot listen on ", where, ": ", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // a restart may rebind at once
  socklen_t len = sizeof(*addr);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0 || ::listen(fd, 16) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&*addr), &len) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", where, ": ", std::strerror(err)));
  }
  return std::unique_ptr<HttpServer>(new HttpServer(fd, ntohs(addr->sin_port), options, std::move(handler)));
}

HttpServer::HttpServer(int listen_fd, int port, HttpServerOptions options, HttpHandler handler)
    : listen_fd_(listen_fd), port_(port), options_(std::move(options)), handler_(std::move(handler)) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { Loop(); });
}

HttpServer::~HttpServer() {
  const char byte = 1;
  (void)!::write(wake_[1], &byte, 1);
  thread_.join();
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void HttpServer::Loop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents != 0) return;
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;  // the client gave up already, or out of descriptors for now
      Serve(fd);
      ::close(fd);
    }
  }
}

void HttpServer::Serve(int fd) {
  SetTimeouts(fd, options_.io_timeout);
  std::string request;
  char buf[4096];
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequest) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // closed or timed out before a whole request
    request.append(buf, n);
  }
  HttpResponse response;
  const std::vector<std::string> line = absl::StrSplit(request.substr(0, request.find("\r\n")), ' ');
  const bool head = !line.empty() && line[0] == "HEAD";
  if (line.size() != 3 || !absl::StartsWith(line[1], "/")) {
    response = {400, "text/plain; charset=utf-8", "bad request\n"};
  } else if (line[0] != "GET" && !head) {
    response = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
  } else {
    try {
      response = handler_(line[1].substr(0, line[1].find('?')));
    } catch (const std::exception& e) {
      response = {500, "text/plain; charset=utf-8", absl::StrCat("error: ", e.what(), "\n")};
    }
  }
  const std::string header =
      absl::StrCat("HTTP/1.1 ", response.status, " ", Reason(response.status), "\r\nContent-Type: ",
                   response.content_type, "\r\nContent-Length: ", response.body.size(),
                   "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
  if (WriteAll(fd, header) && !head) WriteAll(fd, response.body);
}

StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path, absl::Duration timeout) {
  const std::string url = absl::StrCat("http://", host, ":", port, path);
  PL_ASSIGN_OR_RETURN(sockaddr_in addr, ParseAddress(host, port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(url, ": ", std::strerror(errno)));
  SetTimeouts(fd, timeout);  // Linux bounds connect() by SO_SNDTIMEO too
  std::string response;
  Status error;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    error = absl::UnavailableError(absl::StrCat(url, ": ", std::strerror(errno)));
  } else if (!WriteAll(fd, absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", host, ":", port,
                                        "\r\nConnection: close\r\n\r\n"))) {
    error = absl::UnavailableError(absl::StrCat(url, ": cannot send the request"));
  } else {
    const absl::Time deadline = absl::Now() + timeout;
    char buf[8192];
    while (absl::Now() < deadline) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) error = absl::DeadlineExceededError(absl::StrCat(url, ": no whole answer within the timeout"));
      if (n <= 0) break;
      response.append(buf, n);
    }
  }
  ::close(fd);
  PL_RETURN_IF_ERROR(error);
  const size_t body = response.find("\r\n\r\n");
  int status = 0;
  const std::vector<std::string> first = absl::StrSplit(response.substr(0, response.find("\r\n")), ' ');
  if (body == std::string::npos || first.size() < 2 || !absl::SimpleAtoi(first[1], &status)) {
    return absl::UnavailableError(absl::StrCat(url, ": not an HTTP answer"));
  }
  if (status != 200) return absl::InternalError(absl::StrCat(url, ": HTTP ", status));
  return response.substr(body + 4);
}

}  // namespace pl::metrics
