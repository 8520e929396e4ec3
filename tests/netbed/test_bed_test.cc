// The multi-host test bed itself: hosts reach each other and the test reaches them,
// a cut is a timeout (not a reset) and heals, /dev/shm is per host, losing a host kills
// everything on it and nothing elsewhere, link shaping delays, drops and limits, and
// nothing the bed made outlives it (nor a bed whose process died).
//
// Sockets inside hosts come from TestBed::Socket, so most checks need no binary.
#include "paddle_like/testing/test_bed.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "paddle_like/testing/process.h"

namespace pl::netbed {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

sockaddr_in Address(const std::string& ip, int port) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// Connects `fd` to ip:port within `timeout`; OK or the reason it did not.
Status ConnectWithin(int fd, const std::string& ip, int port, milliseconds timeout) {
  const sockaddr_in a = Address(ip, port);
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  if (rc != 0 && errno != EINPROGRESS) return absl::UnavailableError(strerror(errno));
  if (rc != 0) {
    pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) == 0) return absl::DeadlineExceededError("connect timed out");
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return absl::UnavailableError(strerror(err));
  }
  fcntl(fd, F_SETFL, flags);
  return absl::OkStatus();
}

class TestBedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status supported = TestBed::CheckSupported();
    if (!supported.ok()) GTEST_SKIP() << supported;
  }

  std::unique_ptr<TestBed> MakeBed(int hosts) {
    auto bed = TestBed::Create(hosts);
    EXPECT_TRUE(bed.ok()) << bed.status();
    return bed.ok() ? std::move(*bed) : nullptr;
  }

  // A bed of `hosts` hosts (bed_) with a TCP listener on host 0 (listener_, at port_).
  void MakeBedWithListener(int hosts) {
    bed_ = MakeBed(hosts);
    ASSERT_NE(bed_, nullptr);
    auto fd = bed_->Socket(0, SOCK_STREAM);
    ASSERT_TRUE(fd.ok()) << fd.status();
    listener_.fd = *fd;
    sockaddr_in a = Address(bed_->host(0).address(), 0);
    socklen_t len = sizeof(a);
    ASSERT_EQ(bind(listener_.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << strerror(errno);
    ASSERT_EQ(listen(listener_.fd, 16), 0);
    ASSERT_EQ(getsockname(listener_.fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
  }

  // Connects from host `from` (-1: from the test's root namespace) to host `to`'s listener.
  Status Connect(TestBed& bed, int from, int to, int port, milliseconds timeout, Fd* out = nullptr) {
    int fd = -1;
    if (from < 0) {
      fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    } else {
      auto s = bed.Socket(from, SOCK_STREAM);
      if (!s.ok()) return s.status();
      fd = *s;
    }
    Status st = ConnectWithin(fd, bed.host(to).address(), port, timeout);
    if (out != nullptr && st.ok()) {
      out->fd = fd;
    } else {
      close(fd);
    }
    return st;
  }

  // Runs `script` on host `h` with sh; its exit code (-1 when it did not end in 10 s).
  int RunOn(TestBed& bed, int h, const std::string& script) {
    auto child = bed.Start(h, {"/bin/sh", "-c", script}, dir_.path() + "/sh.log");
    EXPECT_TRUE(child.ok()) << child.status();
    if (!child.ok()) return -1;
    auto exit = testing::WaitForExit(**child, seconds(10));
    if (!exit.ok()) return -1;
    return exit->signal != 0 ? 128 + exit->signal : exit->code;
  }

  testing::TempDir dir_{"pl-netbed-test"};
  std::unique_ptr<TestBed> bed_;
  Fd listener_;
  int port_ = 0;
};

TEST_F(TestBedTest, HostsReachEachOtherAndTheTestReachesThem) {
  ASSERT_NO_FATAL_FAILURE(MakeBedWithListener(3));
  TestBed& bed = *bed_;
  const int port = port_;
  EXPECT_NE(bed.host(0).address(), bed.host(1).address());
  EXPECT_TRUE(Connect(bed, 1, 0, port, seconds(3)).ok()) << "host 1 -> host 0";
  EXPECT_TRUE(Connect(bed, 2, 0, port, seconds(3)).ok()) << "host 2 -> host 0";
  EXPECT_TRUE(Connect(bed, -1, 0, port, seconds(3)).ok()) << "the test (root namespace) -> host 0";
  // A process on a host sees only its own interface and address, and its own name.
  EXPECT_EQ(RunOn(bed, 1,
                  absl::StrCat("ip -4 -o addr show | grep -q ' ", bed.host(1).address(),
                               "/24' && ! ip -4 -o addr show | grep -q ' ", bed.host(0).address(),
                               "/' && test \"$(hostname)\" = host1")),
            0);
}

TEST_F(TestBedTest, CutOffIsATimeoutNotAResetAndHealRestoresTheHost) {
  ASSERT_NO_FATAL_FAILURE(MakeBedWithListener(2));
  TestBed& bed = *bed_;
  const int port = port_;
  Fd& listener = listener_;
  Fd client;
  ASSERT_TRUE(Connect(bed, 1, 0, port, seconds(3), &client).ok());
  Fd server(accept(listener.fd, nullptr, nullptr));
  ASSERT_GE(server.fd, 0);

  ASSERT_TRUE(bed.CutOff(0).ok());
  const auto cut = Clock::now();
  Status from_host = Connect(bed, 1, 0, port, milliseconds(800));
  EXPECT_TRUE(absl::IsDeadlineExceeded(from_host)) << "host 1 reached cut-off host 0: " << from_host;
  Status from_test = Connect(bed, -1, 0, port, milliseconds(800));
  EXPECT_TRUE(absl::IsDeadlineExceeded(from_test)) << "the test reached cut-off host 0: " << from_test;
  // Bytes sent during the cut are held by TCP, not refused.
  ASSERT_EQ(send(client.fd, "x", 1, MSG_NOSIGNAL), 1);

  ASSERT_TRUE(bed.Heal(0).ok());
  std::cout << "[measured] cut for " << std::chrono::duration<double>(Clock::now() - cut).count() << " s" << std::endl;
  // The open connection survived the cut: the byte sent meanwhile arrives.
  pollfd p = {server.fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1) << "the byte sent during the cut never arrived after Heal";
  char c = 0;
  EXPECT_EQ(recv(server.fd, &c, 1, 0), 1);
  EXPECT_EQ(c, 'x');
  EXPECT_TRUE(testing::WaitUntil([&] { return Connect(bed, 1, 0, port, milliseconds(500)).ok(); }, seconds(5)))
      << "host 0 still unreachable after Heal";
}

TEST_F(TestBedTest, DevShmIsSharedWithinAHostAndPrivateBetweenHosts) {
  auto bed = MakeBed(2);
  ASSERT_NE(bed, nullptr);
  const std::string name = absl::StrCat("/dev/shm/plnb-probe-", getpid());
  ASSERT_EQ(RunOn(*bed, 0, "echo hi > " + name), 0);
  EXPECT_EQ(RunOn(*bed, 0, "test \"$(cat " + name + ")\" = hi"), 0) << "a second process on host 0 misses it";
  EXPECT_EQ(RunOn(*bed, 1, "test ! -e " + name), 0) << "host 1 sees host 0's " << name;
  EXPECT_FALSE(fs::exists(name)) << "the root namespace sees host 0's " << name;
  // /dev/shm is a tmpfs of its own on the host.
  EXPECT_EQ(RunOn(*bed, 1, "grep -q ' /dev/shm tmpfs ' /proc/mounts"), 0);
}

TEST_F(TestBedTest, LoseKillsEveryProcessOnTheHostAndNothingElse) {
  auto bed = MakeBed(2);
  ASSERT_NE(bed, nullptr);
  auto other = bed->Start(0, {"sleep", "60"}, dir_.path() + "/other.log");
  ASSERT_TRUE(other.ok()) << other.status();
  auto a = bed->Start(1, {"sleep", "60"}, dir_.path() + "/a.log");
  ASSERT_TRUE(a.ok()) << a.status();
  // A grandchild in its own session: not reachable through the child's process group.
  auto b = bed->Start(1, {"/bin/sh", "-c", "setsid sleep 61 & echo hi > /dev/shm/x; wait"}, dir_.path() + "/b.log");
  ASSERT_TRUE(b.ok()) << b.status();
  // holder + sleep + sh + setsid'd sleep
  ASSERT_TRUE(testing::WaitUntil([&] { return bed->Pids(1).size() >= 4; }, seconds(5))) << bed->Pids(1).size();

  ASSERT_TRUE(bed->Lose(1).ok());
  EXPECT_TRUE(bed->Pids(1).empty());
  auto exit = testing::WaitForExit(**a, seconds(2));
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->signal, SIGKILL) << exit->Describe();
  EXPECT_TRUE((*other)->running()) << "Lose(1) killed a process on host 0";
  auto refused = bed->Start(1, {"true"}, dir_.path() + "/c.log");
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();

  // Healed, the host boots afresh: processes start, /dev/shm is empty.
  ASSERT_TRUE(bed->Heal(1).ok());
  EXPECT_EQ(RunOn(*bed, 1, "test ! -e /dev/shm/x"), 0);
}

TEST_F(TestBedTest, ShapeDelaysDropsAndLimitsAHostsLinkAndCarriesBulkDataIntact) {
  ASSERT_NO_FATAL_FAILURE(MakeBedWithListener(2));
  TestBed& bed = *bed_;
  const int port = port_;
  Fd& listener = listener_;
  auto connect_ms = [&] {
    const auto t0 = Clock::now();
    Status s = Connect(bed, 1, 0, port, seconds(2));
    EXPECT_TRUE(s.ok()) << s;
    Fd accepted(accept(listener.fd, nullptr, nullptr));
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  // Sends `bytes` from host 1 to host 0; seconds taken, checking every byte arrived in order.
  auto transfer_s = [&](size_t bytes) {
    Fd client;
    EXPECT_TRUE(Connect(bed, 1, 0, port, seconds(2), &client).ok());
    Fd server(accept(listener.fd, nullptr, nullptr));
    size_t received = 0;
    bool in_order = true;
    std::thread reader([&] {
      char buf[65536];
      ssize_t n;
      while ((n = recv(server.fd, buf, sizeof(buf), 0)) > 0) {
        for (ssize_t i = 0; i < n; ++i) in_order &= buf[i] == static_cast<char>((received + i) % 251);
        received += n;
      }
    });
    std::vector<char> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i % 251);
    const auto t0 = Clock::now();
    size_t sent = 0;
    while (sent < bytes) {
      const ssize_t n = send(client.fd, data.data() + sent, bytes - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += n;
    }
    shutdown(client.fd, SHUT_WR);
    reader.join();
    EXPECT_EQ(received, bytes);
    EXPECT_TRUE(in_order);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };

  const double plain_ms = connect_ms();
  ASSERT_TRUE(bed.Shape(1, LinkShape{40, 0, 0}).ok());
  const double delayed_ms = connect_ms();
  std::cout << "[measured] connect " << plain_ms << " ms plain, " << delayed_ms << " ms with 40 ms latency"
            << std::endl;
  // The SYN and the SYN-ACK each cross the shaped link once.
  EXPECT_GE(delayed_ms, 80);
  EXPECT_LT(plain_ms, 40);

  ASSERT_TRUE(bed.Shape(1, LinkShape{0, 100, 0}).ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(Connect(bed, 1, 0, port, milliseconds(600))));
  EXPECT_GT(bed.RelayCounters(1).lost, 0);

  // 2 ms and 1% loss, as the job test uses: bulk data still arrives whole, in order.
  ASSERT_TRUE(bed.Shape(1, LinkShape{2, 1, 0}).ok());
  const double lossy_s = transfer_s(8 << 20);
  std::cout << "[measured] 8 MiB over 2 ms + 1% loss in " << lossy_s << " s; relay: " << bed.RelayCounters(1).relayed
            << " frames relayed, " << bed.RelayCounters(1).lost << " lost" << std::endl;
  EXPECT_GT(bed.RelayCounters(1).lost, 0);

  ASSERT_TRUE(bed.Shape(1, LinkShape{0, 0, 100}).ok());
  const double limited_s = transfer_s(4 << 20);
  ASSERT_TRUE(bed.Shape(1, LinkShape{}).ok());
  const double free_s = transfer_s(4 << 20);
  std::cout << "[measured] 4 MiB in " << limited_s << " s at 100 mbit, " << free_s << " s unshaped" << std::endl;
  EXPECT_GE(limited_s, 0.25);  // 4 MiB x 8 / 100 Mbit/s = 0.34 s, less one bucket
  EXPECT_LT(free_s, limited_s / 2);
  EXPECT_LT(connect_ms(), 40) << "Shape({}) did not restore a plain link";
}

TEST_F(TestBedTest, DestroyLeavesNoNamespaceInterfaceOrProcess) {
  std::vector<std::string> namespaces;
  std::string root_if;
  std::unique_ptr<ChildProcess> child;
  {
    auto bed = MakeBed(3);
    ASSERT_NE(bed, nullptr);
    namespaces = bed->namespaces();
    root_if = bed->root_interface();
    EXPECT_EQ(namespaces.size(), 4u);  // the switch and three hosts
    EXPECT_TRUE(fs::exists("/sys/class/net/" + root_if));
    ASSERT_TRUE(bed->Shape(2, LinkShape{1, 1, 1000}).ok());
    ASSERT_TRUE(bed->CutOff(1).ok());
    auto started = bed->Start(0, {"sleep", "60"}, dir_.path() + "/sleep.log");
    ASSERT_TRUE(started.ok()) << started.status();
    child = std::move(*started);
  }
  auto exit = testing::WaitForExit(*child, seconds(2));
  ASSERT_TRUE(exit.ok()) << "a process outlived its bed: " << exit.status();
  for (const std::string& ns : namespaces) EXPECT_FALSE(fs::exists("/var/run/netns/" + ns)) << ns;
  EXPECT_FALSE(fs::exists("/sys/class/net/" + root_if)) << root_if;
}

TEST_F(TestBedTest, AStaleBedOfADeadProcessIsRemovedByTheNextCreate) {
  // A pid that was alive a moment ago and is not any more.
  const pid_t dead = fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) _exit(0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const std::string ns = absl::StrCat("plnb-", dead, "-0-sw");
  const std::string root_if = absl::StrCat("plnb", dead, "-0");
  ASSERT_EQ(std::system(
                absl::StrCat("ip netns add ", ns, " && ip link add ", root_if, " type veth peer name uplink netns ", ns)
                    .c_str()),
            0);
  ASSERT_TRUE(fs::exists("/var/run/netns/" + ns));
  auto bed = MakeBed(1);
  ASSERT_NE(bed, nullptr);
  EXPECT_FALSE(fs::exists("/var/run/netns/" + ns));
  EXPECT_FALSE(fs::exists("/sys/class/net/" + root_if));
}

}  // namespace
}  // namespace pl::netbed
