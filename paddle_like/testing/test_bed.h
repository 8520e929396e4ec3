// TestBed: several "hosts" on one Linux machine, for tests of the distributed runtime
// across machines. Each host is a network namespace with its own IPv4 address and
// hostname, and its own /dev/shm, so that processes on different hosts share nothing
// that real machines would not share except the file system (which stands for a
// shared volume: checkpoints, data and logs). A test starts real processes on hosts,
// cuts a host off and heals it, loses a host, and shapes a host's link.
//
//   PL_RETURN_IF_ERROR(TestBed::CheckSupported());   // tests GTEST_SKIP on this
//   PL_ASSIGN_OR_RETURN(auto bed, TestBed::Create(3));
//   auto master = bed->Start(0, {bin, "--host", bed->host(0).address(), ...}, log);
//   bed->CutOff(1); ...; bed->Heal(1);
//   bed->Lose(2);                                     // every process on host 2 dies
//
// Topology. One "switch" namespace holds a bridge; each host's namespace has one
// interface, eth0 (10.213.X.(i+1)/24), whose veth peer h<i> is a port of that bridge.
// X is picked per bed so that no route of this machine's root namespace overlaps.
// Namespaces are named <name>-sw and <name>-h<i>, with name = "plnb-<pid>-<k>", so two
// test binaries (ctest -j2) and several beds in one binary never collide.
//
// The test process reaches the hosts through one more veth pair: plnb<pid>-<k> in the
// root namespace (10.213.X.254/24), its peer a port of the bridge. That is what lets a
// test call the master's JobStatus or a pserver's Stats over gRPC with ordinary
// channels (gRPC makes its sockets on its own threads, which a per-thread setns
// cannot reach). It is the only thing a bed adds to the root namespace, it carries
// only the bed's own /24, and it is deleted with the bed (and with the switch
// namespace, should the test process die first). Like any other peer, the test
// loses sight of a host that is cut off. Socket() opens a socket inside a host, for
// tests that need to talk from one host to another without a process.
//
// Processes. Start() runs argv with nsenter in the host's network, mount and UTS
// namespaces, which a per-host holder process (`sleep infinity`) keeps: the holder's
// mount namespace has a fresh tmpfs on /dev/shm, so every process of one host shares
// one /dev/shm, as on a machine, and no host sees another's or the root's. The child
// keeps its pid through the exec chain, so the returned ChildProcess signals and
// reaps the program itself.
//
// Faults. CutOff(i) sets the host's switch port down (its eth0 loses carrier): frames
// to and from it are dropped, peers see timeouts, not resets, as when a cable is
// pulled or a switch fails. Lose(i) cuts the host off and then SIGKILLs every process
// in its namespace, like a machine losing power: its peers get no FIN or RST. The lost
// host stays cut off; Heal(i) brings it back like a fresh boot (nothing running, empty
// /dev/shm). Shape(i, ...) gives the host's link a rate (tc tbf, each direction) and a
// latency and loss (an ImpairedLink relay between the host's port and the bridge; the
// kernels of these machines have no netem qdisc), each applied in both directions.
//
// Cleanup. The destructor kills every process in the bed's namespaces, stops the
// relays and deletes every namespace, bridge and veth the bed made, also when a test
// fails or throws. A bed left by a process that died (SIGKILL, a crash) is removed by
// the next Create on this machine. Create and cleanup need root (CAP_SYS_ADMIN and
// CAP_NET_ADMIN) and the tools ip, tc, nsenter, unshare, mount (iproute2, util-linux).
//
// Thread-safety: a TestBed is used by one thread. Beds in different threads or
// processes are independent (Create serialises its address choice with a lock file).
#ifndef PADDLE_LIKE_TESTS_NETBED_TEST_BED_H_
#define PADDLE_LIKE_TESTS_NETBED_TEST_BED_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "paddle_like/core/status.h"
#include "paddle_like/process/process_control.h"
#include "paddle_like/testing/impaired_link.h"

namespace pl::netbed {

// How a host's link is shaped; each value applies to both directions. All zero: a
// plain link.
struct LinkShape {
  int latency_ms = 0;   // added to every frame
  double loss_pct = 0;  // share of frames dropped, in [0, 100]
  int rate_mbit = 0;    // bandwidth limit (0: none)
};

class TestBed {
 public:
  class Host {
   public:
    Host(std::string address, std::string netns, std::string hostname)
        : address_(std::move(address)), netns_(std::move(netns)), hostname_(std::move(hostname)) {}
    const std::string& address() const { return address_; }    // of its eth0, e.g. "10.213.17.2"
    const std::string& netns() const { return netns_; }        // e.g. "plnb-1234-0-h1"
    const std::string& hostname() const { return hostname_; }  // "host<i>"

   private:
    std::string address_, netns_, hostname_;
  };

  // OK when this process can build a bed here; else FAILED_PRECONDITION saying why
  // (not root, namespaces not permitted, a tool missing): the tests skip with it.
  static Status CheckSupported();

  // Builds `n_hosts` (>= 1) hosts. Removes stale beds of dead processes first.
  static StatusOr<std::unique_ptr<TestBed>> Create(int n_hosts);

  ~TestBed();
  TestBed(const TestBed&) = delete;
  TestBed& operator=(const TestBed&) = delete;

  int num_hosts() const { return static_cast<int>(hosts_.size()); }
  const Host& host(int i) const { return hosts_.at(i).info; }
  const std::string& name() const { return name_; }
  // The interface this bed added to the root namespace.
  const std::string& root_interface() const { return root_if_; }
  // Every namespace this bed made (switch and hosts).
  std::vector<std::string> namespaces() const;

  // Starts argv on `host` (argv[0] an absolute path or a name in PATH); stdout and
  // stderr are appended to `log_path`; `env` is added to this process's environment.
  // The child has its own process group and dies with this process. NOT_FOUND when
  // argv[0] is a path that is not executable; FAILED_PRECONDITION when the host is
  // lost and not yet healed.
  StatusOr<std::unique_ptr<ChildProcess>> Start(int host, const std::vector<std::string>& argv,
                                                const std::string& log_path, const process::EnvVars& env = {});

  // Link down / up at the switch. Heal also ends a Lose (the host boots afresh).
  Status CutOff(int host);
  Status Heal(int host);
  // Cuts the host off, SIGKILLs every process in its namespace and waits (bounded)
  // until none is left. Handles from Start then report signal 9 once polled.
  Status Lose(int host);
  // Replaces the host's link shape (all zero: back to a plain link).
  Status Shape(int host, const LinkShape& shape);

  // Pids of the live (non-zombie) processes in the host's network namespace.
  std::vector<pid_t> Pids(int host) const;

  // A socket (AF_INET, `type`: SOCK_STREAM or SOCK_DGRAM, CLOEXEC) inside `host`'s
  // network namespace; the caller owns and closes it.
  StatusOr<int> Socket(int host, int type) const;

  // Frames of the host's shaping relay (zeros when it has none).
  ImpairedLink::Counters RelayCounters(int host) const;

 private:
  struct HostState {
    explicit HostState(Host h) : info(std::move(h)) {}
    Host info;
    std::unique_ptr<ChildProcess> holder;  // keeps the mount and UTS namespaces
    std::unique_ptr<ImpairedLink> relay;
    bool relay_ports = false;  // r<i> and s<i> exist (h<i> is off the bridge)
    LinkShape shape;
    bool cut = false;
    bool lost = false;
  };

  TestBed() = default;
  Status Build(int n_hosts, int subnet);
  Status EnsureHolder(HostState& h);
  Status Unshape(int host);
  std::string NetnsPath(const std::string& ns) const { return "/var/run/netns/" + ns; }
  std::string SwitchNs() const { return name_ + "-sw"; }
  std::string Port(int host) const { return "h" + std::to_string(host); }
  // Kills every process in namespace `ns` and waits until none is left.
  static Status KillAllIn(const std::string& ns, std::chrono::milliseconds timeout);
  // Best effort; every step is tried.
  void Destroy();

  std::string name_;
  std::string root_if_;
  std::string prefix_;  // "10.213.X."
  std::vector<HostState> hosts_;
  std::vector<std::string> made_netns_;
  std::unique_ptr<process::TempDir> dir_;  // holders' ready files and logs
};

}  // namespace pl::netbed

#endif  // PADDLE_LIKE_TESTS_NETBED_TEST_BED_H_
