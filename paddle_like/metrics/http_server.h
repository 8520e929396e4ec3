// HttpServer: the smallest HTTP/1.1 server that serves /metrics and the master's status
// page: GET (and HEAD) only, one request per connection (Connection: close), answered
// by one handler on one thread of its own.
//
// Why not civetweb (prometheus-cpp's Exposer): Debian's civetweb starts its threads
// with a fixed 100 KiB stack, and pthread_create refuses that (EINVAL) in a process
// whose static TLS is larger: pl-trainer built with CUDA carries 110 KiB of it
// (cuBLASLt alone 92 KiB), so /metrics could not start there. Scrapes are rare and
// small, so one thread that answers them in turn is enough; each connection gets
// `io_timeout` to send its request and take the answer, so a stalled client delays the
// next scrape by at most that.
//
// Thread-safety: Start and the destructor from one thread; the handler runs on the
// server's thread (one request at a time) and must be thread-safe with respect to the
// rest of the process.
#ifndef PADDLE_LIKE_METRICS_HTTP_SERVER_H_
#define PADDLE_LIKE_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/time.h"
#include "paddle_like/core/status.h"

namespace pl::metrics {

struct HttpResponse {
  int status = 200;  // 200, 404 ...
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Called with the request's path without its query string ("/metrics").
using HttpHandler = std::function<HttpResponse(const std::string& path)>;

struct HttpServerOptions {
  std::string host = "0.0.0.0";  // an IPv4 address
  int port = 0;                  // 0: any free port
  absl::Duration io_timeout = absl::Seconds(2);
};

class HttpServer {
 public:
  // UNAVAILABLE "cannot listen on HOST:PORT: <strerror>" when the port is taken;
  // INVALID_ARGUMENT for a bad host or port.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, HttpHandler handler);
  // Stops accepting and joins the thread (a request under way finishes first).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  HttpServer(int listen_fd, int port, HttpServerOptions options, HttpHandler handler);
  void Loop();
  void Serve(int fd);

  const int listen_fd_;
  const int port_;
  const HttpServerOptions options_;
  const HttpHandler handler_;
  int wake_[2] = {-1, -1};  // the destructor writes to stop Loop's poll
  std::thread thread_;
};

// GET http://host:port/path with a deadline: the body of a 200 answer; UNAVAILABLE when
// the server cannot be reached, INTERNAL "HTTP <status>" for another status. For
// pl-status and the tests.
StatusOr<std::string> HttpGet(const std::string& host, int port, const std::string& path,
                              absl::Duration timeout = absl::Seconds(5));

}  // namespace pl::metrics

#endif  // PADDLE_LIKE_METRICS_HTTP_SERVER_H_
