// The HTTP server behind /metrics and the status page, spoken to over real sockets.
#include "paddle_like/metrics/http_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

namespace pl::metrics {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<HttpServer> Serve(HttpServerOptions options = {"127.0.0.1", 0}) {
  auto server = HttpServer::Start(options, [](const std::string& path) {
    if (path == "/hello") return HttpResponse{200, "text/plain", "hi\n"};
    return HttpResponse{404, "text/plain", "no\n"};
  });
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(server).value() : nullptr;
}

TEST(HttpServerTest, AnswersGetAndDropsTheQuery) {
  auto server = Serve();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(server->port(), 0);
  auto body = HttpGet("127.0.0.1", server->port(), "/hello?x=1");
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "hi\n");
  auto missing = HttpGet("127.0.0.1", server->port(), "/other");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("HTTP 404"));
}

TEST(HttpServerTest, PortInUseIsAnErrorNamingIt) {
  auto first = Serve();
  ASSERT_NE(first, nullptr);
  auto second = HttpServer::Start({"127.0.0.1", first->port()}, [](const std::string&) { return HttpResponse{}; });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat("cannot listen on 127.0.0.1:", first->port(), ": Address already in use")));
}

TEST(HttpServerTest, BadHostOrPortIsInvalidArgument) {
  auto handler = [](const std::string&) { return HttpResponse{}; };
  EXPECT_EQ(HttpServer::Start({"not-an-ip", 0}, handler).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HttpServer::Start({"127.0.0.1", 70000}, handler).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HttpServerTest, AStalledClientDelaysTheNextOnlyByTheIoTimeout) {
  auto server = Serve({"127.0.0.1", 0, absl::Milliseconds(200)});
  ASSERT_NE(server, nullptr);
  // Connects and sends nothing.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(server->port());
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const absl::Time start = absl::Now();
  auto body = HttpGet("127.0.0.1", server->port(), "/hello", absl::Seconds(5));
  EXPECT_TRUE(body.ok()) << body.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ::close(fd);
}

TEST(HttpServerTest, UnreachableServerIsUnavailable) {
  int port = 0;
  {
    auto server = Serve();
    ASSERT_NE(server, nullptr);
    port = server->port();
  }  // stopped: nothing listens there now
  auto body = HttpGet("127.0.0.1", port, "/hello", absl::Seconds(2));
  EXPECT_EQ(body.status().code(), absl::StatusCode::kUnavailable) << body.status();
}

}  // namespace
}  // namespace pl::metrics
