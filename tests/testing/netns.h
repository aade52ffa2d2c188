// Two network namespaces joined by a veth pair, for tests that run processes
// as if on two nodes and cut the link between them. Needs root (CAP_NET_ADMIN
// and CAP_SYS_ADMIN), iproute2 and nftables; `NetnsPair::unavailable()` says
// why not, for GTEST_SKIP. Link pronghorn_testing_netns.
//
//   root namespace:  blackhole route for 10.213.I.J/30 (nothing leaks out)
//   phns-<pid>-<k>-a [phv<k>a 10.213.I.J+1/30] ==veth== [phv<k>b .J+2/30] phns-<pid>-<k>-b
//
// k is the index of the /30 inside 10.213.0.0/16 (0..16383). The blackhole
// route in the root namespace is also the lock on the subnet: adding it fails
// when another pair (of any process) holds that subnet, and the pair tries the
// next one. Interface names stay within Linux's 15 characters because they
// carry k, not the pid; the namespace names carry the pid so that `sweep()`
// can tell a dead test's leftovers from a running one's.
//
// Cleanup runs on every exit path of the test (destructor, so a failed ASSERT
// too): every process inside either namespace is SIGKILLed (a namespace with a
// process in it outlives `ip netns del`, and so would its veth), the
// namespaces are deleted (which deletes the veth and any nft table in them),
// then the route. A SIGKILLed test leaves them behind; the next pair's
// constructor sweeps the leftovers of dead processes.
//
// Not thread-safe: one thread of the test uses a pair.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pronghorn::testing {

class NetnsPair {
 public:
  enum class Side { a, b };

  // Creates both namespaces, the veth with addresses, loopback up in both,
  // and the root-namespace blackhole route. Throws pronghorn::Error naming
  // the command that failed and its output.
  NetnsPair();
  ~NetnsPair();
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  // Why network administration is not possible here (not root, `ip netns
  // add` refused, no nft), or nothing. Probed once per process.
  static std::optional<std::string> unavailable();

  // Removes namespaces, processes in them and routes left by test processes
  // that no longer run (any pid; names "phns-<pid>-…"). Safe while other
  // processes' pairs are alive.
  static void sweep();

  const std::string& namespace_name(Side side) const;  // "phns-<pid>-<k>-a"
  const std::string& interface(Side side) const;       // "phv<k>a", inside its namespace
  const std::string& address(Side side) const;         // "10.213.I.J"
  const std::string& address_a() const { return address(Side::a); }
  const std::string& address_b() const { return address(Side::b); }
  const std::string& subnet() const { return subnet_; }  // "10.213.I.J/30"

  // "ip netns exec <namespace>": prefix for a shell command run inside it.
  std::string exec_prefix(Side side) const;

  // Partition: every packet arriving over the veth is dropped, on both sides
  // (nft table in each namespace). An established TCP connection goes silent
  // (sends succeed into the buffer, nothing arrives, no RST) and a new
  // connect times out. Idempotent.
  void cut();
  // Undoes cut(): established connections resume on the next retransmit.
  void heal();

  // `argv` run inside the side's namespace (fork, setns, execv; argv[0] is
  // searched in PATH, then /usr/sbin and /sbin, when it has no '/'), stdout
  // and stderr appended to `output_file` ("" = /dev/null). The pid is the
  // real process's, so kill(pid, SIGKILL) hits it. Reap it with
  // wait_exit_within (or testing::wait_exit); the destructor kills what still
  // runs. Throws when the namespace or the output file cannot be opened; a
  // program that cannot be executed exits 127. Extra environment: start
  // {"env", "GLOO_SOCKET_IFNAME=" + interface(side), program, ...} (env
  // execs, the pid stays). Unlike `ip netns exec`, /sys is the root's.
  pid_t spawn_in(Side side, const std::vector<std::string>& argv,
                 const std::string& output_file = "") const;

  // Runs `fn` on a new thread that has entered the side's namespace, and
  // joins it; rethrows what `fn` throws. Sockets created inside `fn` stay in
  // that namespace when used from any thread afterwards.
  void run_in(Side side, const std::function<void()>& fn) const;

 private:
  void remove();

  int index_ = -1;  // the /30 inside 10.213.0.0/16 whose route we hold
  std::string subnet_;
  std::string names_[2], interfaces_[2], addresses_[2];
  mutable std::vector<pid_t> spawned_;  // spawn_in's children, reaped by remove()
};

// The exit status (128 + signal if killed) of child `pid` once it exits
// within `timeout`, or nothing (the child runs on and is not reaped).
std::optional<int> wait_exit_within(pid_t pid, std::chrono::milliseconds timeout);

// Runs `command` with /bin/sh; its exit code (-1 if not run or killed) and
// its stdout and stderr together.
std::pair<int, std::string> run_command(const std::string& command);

}  // namespace pronghorn::testing
