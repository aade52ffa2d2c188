// NetnsPair: namespaces, veth, route and partition by running `ip` and `nft`
// (tests/testing/netns.h has the layout and the cleanup order's reasons).
#include "tests/testing/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"

namespace pronghorn::testing {
namespace {

constexpr const char* kPrefix = "phns-";
constexpr int kSubnets = 16384;  // /30s in 10.213.0.0/16
constexpr const char* kPartitionTable = "inet phns_partition";
constexpr const char* kNetnsDir = "/run/netns";

int side_index(NetnsPair::Side side) { return side == NetnsPair::Side::a ? 0 : 1; }

std::string subnet_base(int index, int host) {
  const int offset = index * 4 + host;
  return "10.213." + std::to_string(offset / 256) + "." + std::to_string(offset % 256);
}

// Runs `command` and throws naming it and its output when it fails.
void must(const std::string& command) {
  auto [code, out] = run_command(command);
  if (code != 0) {
    throw Error("netns: `" + command + "` failed (exit " + std::to_string(code) + "): " + out);
  }
}

bool alive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// "phns-<pid>-<rest>" → {pid, rest}; pid 0 for other names.
std::pair<pid_t, std::string> parse_name(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0) return {0, ""};
  const size_t dash = name.find('-', 5);
  if (dash == std::string::npos || dash == 5) return {0, ""};
  const std::string pid = name.substr(5, dash - 5);
  if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) return {0, ""};
  return {static_cast<pid_t>(std::stol(pid)), name.substr(dash + 1)};
}

std::vector<std::string> namespaces() {
  std::vector<std::string> out;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(kNetnsDir, error)) {
    out.push_back(entry.path().filename());
  }
  return out;
}

std::vector<pid_t> pids_in(const std::string& name) {
  std::istringstream in(run_command("ip netns pids " + name).second);
  std::vector<pid_t> pids;
  pid_t pid;
  while (in >> pid) pids.push_back(pid);
  return pids;
}

// SIGKILLs every process in the namespace and waits (up to 5 s) until none is
// left, reaping those that are our children: `ip netns del` only unmounts the
// name, a namespace with a process in it lives on with its veth.
void kill_all_in(const std::string& name) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (auto pids = pids_in(name); !pids.empty(); pids = pids_in(name)) {
    for (pid_t pid : pids) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, WNOHANG);  // our child: reap it, or it stays listed
    }
    if (std::chrono::steady_clock::now() > deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string resolve(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  // sbin last: ip and nft live there and a test's PATH may lack it.
  std::istringstream dirs(std::string(path ? path : "/usr/bin:/bin") + ":/usr/sbin:/sbin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return program;  // execv fails, the child exits 127
}

// Adds the blackhole route that holds `subnet`: "" when held, else why not
// (with "File exists" when another pair holds it).
std::string hold_subnet(const std::string& subnet) {
  const std::string command = "ip route add blackhole " + subnet;
  auto [code, out] = run_command(command);
  return code == 0 ? "" : "netns: `" + command + "` failed: " + out;
}

// The nft script that drops every packet arriving over `interface`; run again
// it replaces itself (flush), so cut() is idempotent.
std::string partition_script(const std::string& interface) {
  const std::string table = kPartitionTable;
  return "add table " + table + "; flush table " + table + "; add chain " + table +
         " input { type filter hook input priority filter; policy accept; }; add rule " + table +
         " input iifname \"" + interface + "\" drop";
}

int open_namespace(const std::string& name) {
  const std::string path = std::string(kNetnsDir) + "/" + name;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("netns: cannot open " + path + ": " + std::strerror(errno));
  return fd;
}

}  // namespace

std::pair<int, std::string> run_command(const std::string& command) {
  // sbin holds ip and nft; a test's PATH may lack it.
  const std::string full = "PATH=\"$PATH:/usr/sbin:/sbin\"; { " + command + "; } 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) return {-1, std::string("popen: ") + std::strerror(errno)};
  std::string out;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, pipe)) > 0) out.append(chunk, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::optional<int> wait_exit_within(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0 || std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::optional<std::string> NetnsPair::unavailable() {
  static const std::optional<std::string> reason = []() -> std::optional<std::string> {
    if (geteuid() != 0) {
      return "network namespaces need root (euid " + std::to_string(geteuid()) + ")";
    }
    const std::string probe = kPrefix + std::to_string(getpid()) + "-probe";
    auto [code, out] = run_command("ip netns add " + probe);
    if (code != 0) return "`ip netns add` is not permitted here: " + out;
    std::tie(code, out) = run_command("ip netns exec " + probe + " nft list tables");
    run_command("ip netns del " + probe);
    if (code != 0) return "nft does not work in a namespace (tools/setup-deps installs it): " + out;
    return std::nullopt;
  }();
  return reason;
}

void NetnsPair::sweep() {
  for (const auto& name : namespaces()) {
    const pid_t owner = parse_name(name).first;
    if (owner == 0 || alive(owner)) continue;
    kill_all_in(name);
    run_command("ip netns del " + name);
  }
  // A route is held by the pair whose namespace a carries its index for the
  // route's whole life (made before it, deleted after it): a route whose index
  // no namespace carries any more is a dead process's.
  std::set<int> held;
  for (const auto& name : namespaces()) {
    const std::string rest = parse_name(name).second;
    if (rest.size() > 2 && rest.compare(rest.size() - 2, 2, "-a") == 0) {
      held.insert(std::atoi(rest.c_str()));
    }
  }
  std::istringstream routes(run_command("ip -4 route show type blackhole").second);
  std::string line;
  while (std::getline(routes, line)) {
    std::istringstream words(line);  // "blackhole 10.213.0.4/30"
    std::string kind, prefix;
    unsigned a, b, c, d, bits;
    if (!(words >> kind >> prefix) || kind != "blackhole") continue;
    if (std::sscanf(prefix.c_str(), "%u.%u.%u.%u/%u", &a, &b, &c, &d, &bits) != 5) continue;
    if (a != 10 || b != 213 || c > 255 || bits != 30 || d % 4 != 0) continue;
    const int index = static_cast<int>((c * 256 + d) / 4);
    if (held.count(index) == 0)
      run_command("ip route del blackhole " + subnet_base(index, 0) + "/30");
  }
}

NetnsPair::NetnsPair() {
  static std::atomic<int> counter{0};
  static std::once_flag swept;
  std::call_once(swept, &NetnsPair::sweep);
  const unsigned pid = static_cast<unsigned>(getpid());
  const unsigned start = pid * 2654435761u + static_cast<unsigned>(counter++) * 7919u;
  for (int attempt = 0; attempt < 64 && index_ < 0; ++attempt) {
    const int index = static_cast<int>((start + attempt) % kSubnets);
    const std::string stem = kPrefix + std::to_string(pid) + "-" + std::to_string(index);
    names_[0] = stem + "-a";
    must("ip netns add " + names_[0]);
    const std::string subnet = subnet_base(index, 0) + "/30";
    const std::string refused = hold_subnet(subnet);
    if (!refused.empty()) {
      run_command("ip netns del " + names_[0]);
      if (refused.find("File exists") != std::string::npos) continue;  // another pair's subnet
      throw Error(refused);
    }
    index_ = index;
    subnet_ = subnet;
    names_[1] = stem + "-b";
  }
  if (index_ < 0) throw Error("netns: 64 subnets of 10.213.0.0/16 tried, all held");
  try {
    must("ip netns add " + names_[1]);
    for (int s = 0; s < 2; ++s) {
      interfaces_[s] = "phv" + std::to_string(index_) + (s == 0 ? "a" : "b");
      addresses_[s] = subnet_base(index_, s + 1);
    }
    // Both ends made inside their namespaces: the root namespace never sees them.
    must("ip -n " + names_[0] + " link add " + interfaces_[0] + " type veth peer name " +
         interfaces_[1] + " netns " + names_[1]);
    for (int s = 0; s < 2; ++s) {
      const std::string ip = "ip -n " + names_[s] + " ";
      must(ip + "addr add " + addresses_[s] + "/30 dev " + interfaces_[s]);
      must(ip + "link set " + interfaces_[s] + " up");
      must(ip + "link set lo up");
    }
  } catch (...) {
    remove();
    throw;
  }
}

NetnsPair::~NetnsPair() { remove(); }

void NetnsPair::remove() {
  if (index_ < 0) return;
  // Order keeps sweep() right: namespace a outlives the route it guards.
  if (!names_[1].empty()) {
    kill_all_in(names_[1]);
    run_command("ip netns del " + names_[1]);
  }
  run_command("ip route del blackhole " + subnet_);
  kill_all_in(names_[0]);
  run_command("ip netns del " + names_[0]);
  index_ = -1;
  // Children that exited before: reap them (a pid no longer our child is skipped).
  for (pid_t pid : spawned_) waitpid(pid, nullptr, WNOHANG);
  spawned_.clear();
}

const std::string& NetnsPair::namespace_name(Side side) const { return names_[side_index(side)]; }
const std::string& NetnsPair::interface(Side side) const { return interfaces_[side_index(side)]; }
const std::string& NetnsPair::address(Side side) const { return addresses_[side_index(side)]; }

std::string NetnsPair::exec_prefix(Side side) const {
  return "ip netns exec " + namespace_name(side);
}

// Dropped at IP input on each side, like packets lost on the wire: the sender
// sees no error. The alternatives are not silent: a veth set down removes the
// subnet's route (connect fails at once with ENETUNREACH; netns_test sees it),
// an nft drop at output hands the sending call EPERM (UDP's send fails with it),
// and a drop at the netdev hook would also drop ARP, after which the kernel
// reports EHOSTUNREACH. ARP still answers here, so the partition is pure
// silence, as across a switch that lost the path: TCP retransmits until its
// own timeout, no RST, no ICMP (and a RST either side sent would be dropped).
void NetnsPair::cut() {
  for (const Side side : {Side::a, Side::b}) {
    must(exec_prefix(side) + " nft '" + partition_script(interface(side)) + "'");
  }
}

void NetnsPair::heal() {
  // "add" first: deleting a table that is not there fails.
  static const std::string script =
      std::string("add table ") + kPartitionTable + "; delete table " + kPartitionTable;
  for (const Side side : {Side::a, Side::b}) must(exec_prefix(side) + " nft '" + script + "'");
}

pid_t NetnsPair::spawn_in(Side side, const std::vector<std::string>& argv,
                          const std::string& output_file) const {
  if (argv.empty()) throw Error("netns: spawn_in needs a program");
  // Everything the child needs is made before fork: between fork and exec a
  // child of a threaded process may only make async-signal-safe calls.
  const std::string program = resolve(argv[0]);
  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (auto& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  const int ns = open_namespace(namespace_name(side));
  const std::string out_path = output_file.empty() ? "/dev/null" : output_file;
  const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out < 0 || in < 0) {
    const int error = errno;
    close(ns);
    if (out >= 0) close(out);
    if (in >= 0) close(in);
    throw Error("netns: cannot open " + out_path + ": " + std::strerror(error));
  }
  const pid_t pid = fork();
  if (pid == 0) {
    if (setns(ns, CLONE_NEWNET) != 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    execv(program.c_str(), raw.data());
    _exit(127);
  }
  const int error = errno;
  close(ns);
  close(out);
  close(in);
  if (pid < 0) throw Error(std::string("netns: fork failed: ") + std::strerror(error));
  spawned_.push_back(pid);
  return pid;
}

void NetnsPair::run_in(Side side, const std::function<void()>& fn) const {
  const int ns = open_namespace(namespace_name(side));
  std::exception_ptr failure;
  // setns(CLONE_NEWNET) moves the calling thread only, so a fresh thread
  // enters and the test's own thread stays in the root namespace.
  std::thread([&] {
    try {
      if (setns(ns, CLONE_NEWNET) != 0) {
        throw Error("netns: setns into " + namespace_name(side) + ": " + std::strerror(errno));
      }
      fn();
    } catch (...) {
      failure = std::current_exception();
    }
  }).join();
  close(ns);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace pronghorn::testing
