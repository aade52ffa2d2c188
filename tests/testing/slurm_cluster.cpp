// See slurm_cluster.h. The recipe (../shared/INFRA.md): munged first, as the
// munge user; slurmctld and slurmd in the foreground (-D) with
// proctrack/linuxproc, task/none and no accounting; jobs cancelled before
// slurmd stops.
#include "tests/testing/slurm_cluster.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace pronghorn::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr std::array kBinaries = {"munged",   "slurmctld", "slurmd", "sbatch", "srun",
                                  "scontrol", "scancel",   "sinfo",  "setpriv"};

// `command` through the shell; its exit code and stdout and stderr together.
std::pair<int, std::string> capture(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed: " + command};
  std::string out;
  std::array<char, 4096> chunk{};
  size_t n;
  while ((n = fread(chunk.data(), 1, chunk.size(), pipe)) > 0) out.append(chunk.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

bool on_path(const std::string& binary) {
  return capture("command -v " + binary + " >/dev/null").first == 0;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// `count` distinct ports free on 127.0.0.1 now: held open together while
// chosen, so no two are the same.
std::vector<int> free_ports(size_t count) {
  std::vector<int> sockets, ports;
  for (size_t i = 0; i < count; ++i) {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("cannot find a free port on 127.0.0.1");
    }
    sockets.push_back(s);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (const int s : sockets) close(s);
  return ports;
}

// The value of `key=` in scontrol's `Key=Value` text; "" when absent.
std::string field(const std::string& text, const std::string& key) {
  std::smatch m;
  if (std::regex_search(text, m, std::regex("(^|\\s)" + key + "=(\\S*)"))) return m[2];
  return "";
}

bool wait_until(const std::function<bool()>& ready, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100ms);
  }
  return true;
}

// Every process but this one whose environment holds SLURM_CONF=`conf`
// (and SLURM_JOB_ID=`job_id` when given).
std::vector<pid_t> processes_of(const std::string& conf, const std::string& job_id) {
  const std::string mark = "\nSLURM_CONF=" + conf + "\n";
  const std::string job = "\nSLURM_JOB_ID=" + job_id + "\n";
  std::vector<pid_t> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == getpid()) continue;
    std::string env = "\n";
    env += read_all(entry.path().string() + "/environ");
    env += '\n';
    for (char& c : env) c = c == '\0' ? '\n' : c;
    if (env.find(mark) == std::string::npos) continue;
    if (!job_id.empty() && env.find(job) == std::string::npos) continue;
    found.push_back(pid);
  }
  return found;
}

// SIGTERM (a learner removes its shared memory), then SIGKILL what is left
// after 10 s. Not children of this process: nothing to reap.
void end_processes(const std::vector<pid_t>& pids) {
  if (pids.empty()) return;
  for (const pid_t pid : pids) kill(pid, SIGTERM);
  wait_until(
      [&] {
        for (const pid_t pid : pids) {
          const std::string state = read_all("/proc/" + std::to_string(pid) + "/stat");
          if (!state.empty() && state.find(") Z") == std::string::npos) return false;
        }
        return true;
      },
      10s);
  for (const pid_t pid : pids) kill(pid, SIGKILL);
}

// What a killed earlier run left: a cluster folder whose slurmctld is gone
// (its daemons died with the test, through the parent-death signal; its
// jobs did not). Their processes are killed, so they neither train on nor
// load the machine, and the folder is removed. A folder with no slurmctld
// yet and younger than two minutes may be a cluster starting in another
// process: left alone.
void sweep_stale_clusters(const std::string& parent) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string dir = entry.path();
    if (entry.path().filename().string().rfind("pronghorn-slurm-", 0) != 0) continue;
    const std::string pid = read_all(dir + "/slurmctld.pid");
    if (pid.empty()) {
      std::error_code age_ec;
      const auto written = fs::last_write_time(dir, age_ec);
      if (age_ec || fs::file_time_type::clock::now() - written < 2min) continue;
    } else if (read_all("/proc/" + std::to_string(std::atoi(pid.c_str())) + "/comm") ==
               "slurmctld\n") {
      continue;
    }
    end_processes(processes_of(dir + "/slurm.conf", ""));
    fs::remove_all(dir, ec);
  }
}

}  // namespace

std::optional<std::string> SlurmCluster::unavailable() {
  if (geteuid() != 0) return "needs root to run munged and slurmd (CI runs as root)";
  for (const char* binary : kBinaries) {
    if (!on_path(binary)) {
      return std::string(binary) + " not found: install Slurm with tools/setup-deps --test";
    }
  }
  if (getpwnam("munge") == nullptr) return "no munge user: install munge (tools/setup-deps --test)";
  return std::nullopt;
}

SlurmCluster::SlurmCluster() {
  sweep_stale_clusters(::testing::TempDir());
  // One spelling of the folder (no "//"): jobs' environments are matched on it.
  std::string templ =
      (fs::path(::testing::TempDir()) / "pronghorn-slurm-XXXXXX").lexically_normal().string();
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp " + templ + " failed");
  dir_ = templ;
  conf_ = dir_ + "/slurm.conf";
  try {
    start();
  } catch (...) {
    stop();
    throw;
  }
}

SlurmCluster::~SlurmCluster() { stop(); }

void SlurmCluster::start() {
  // munged refuses a socket folder others cannot traverse, and a key anyone
  // but munge can read.
  chmod(dir_.c_str(), 0755);
  for (const char* sub : {"/munge", "/state", "/spool", "/log"}) fs::create_directory(dir_ + sub);
  const std::string munge = dir_ + "/munge";
  chmod(munge.c_str(), 0755);
  {
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::string key(1024, '\0');
    random.read(key.data(), static_cast<std::streamsize>(key.size()));
    std::ofstream(munge + "/munge.key", std::ios::binary) << key;
  }
  const passwd* user = getpwnam("munge");
  if (user == nullptr) throw std::runtime_error("no munge user");
  chmod((munge + "/munge.key").c_str(), 0400);
  for (const std::string& path : {munge, munge + "/munge.key"}) {
    if (chown(path.c_str(), user->pw_uid, user->pw_gid) != 0) {
      throw std::runtime_error("chown " + path + " failed");
    }
  }
  const std::string socket = munge + "/munge.socket";
  const std::vector<int> ports = free_ports(3);  // slurmctld, slurmd n1, slurmd n2
  std::ofstream(conf_) << "ClusterName=pronghorn\n"
                       << "SlurmctldHost=localhost(127.0.0.1)\n"
                       << "SlurmctldPort=" << ports[0] << "\n"
                       << "SlurmdPort=" << ports[1] << "\n"
                       << "SlurmUser=root\nSlurmdUser=root\n"
                       << "AuthType=auth/munge\nCredType=cred/munge\n"
                       // cred_expire: how long a requeued job waits before it
                       // starts again (default 120 s; a test waits 10 s).
                       << "AuthInfo=socket=" << socket << ",cred_expire=10\n"
                       << "StateSaveLocation=" << dir_ << "/state\n"
                       << "SlurmdSpoolDir=" << dir_ << "/spool/%n\n"
                       << "SlurmctldPidFile=" << dir_ << "/slurmctld.pid\n"
                       << "SlurmdPidFile=" << dir_ << "/slurmd-%n.pid\n"
                       << "SlurmctldLogFile=" << dir_ << "/log/slurmctld.log\n"
                       << "SlurmdLogFile=" << dir_
                       << "/log/slurmd-%n.log\n"
                       // Nodes say what the config says (4 CPUs each on a
                       // smaller machine): a training job and an actor job fit.
                       << "SlurmdParameters=config_overrides\n"
                       << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
                       << "MpiDefault=none\nSchedulerType=sched/builtin\n"
                       << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
                       << "ReturnToService=2\nKillWait=10\nMinJobAge=600\n"
                       << "AccountingStorageType=accounting_storage/none\n"
                       << "JobAcctGatherType=jobacct_gather/none\nJobCompType=jobcomp/none\n"
                       << "NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=" << ports[1]
                       << " CPUs=4 RealMemory=2000\n"
                       << "NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=" << ports[2]
                       << " CPUs=4 RealMemory=2000\n"
                       << "PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE "
                          "State=UP\n";
  setenv("SLURM_CONF", conf_.c_str(), 1);

  // setpriv changes to the munge user, then a second setpriv (as munge) sets
  // the parent-death signal: a change of user would clear it.
  start_daemon("munged",
               {"setpriv", "--reuid=munge", "--regid=munge", "--init-groups", "setpriv",
                "--pdeathsig", "KILL", "munged", "-F", "--socket=" + socket,
                "--key-file=" + munge + "/munge.key", "--log-file=" + munge + "/munged.log",
                "--pid-file=" + munge + "/munged.pid", "--seed-file=" + munge + "/munged.seed"});
  if (!wait_until([&] { return fs::exists(socket); }, 10s)) {
    throw std::runtime_error("munged made no socket within 10 s\n" + logs());
  }
  start_daemon("slurmctld", {"setpriv", "--pdeathsig", "KILL", "slurmctld", "-D", "-c"});
  if (!wait_until([] { return capture("scontrol ping").second.find("is UP") != std::string::npos; },
                  20s)) {
    throw std::runtime_error("slurmctld did not answer within 20 s\n" + logs());
  }
  for (const char* node : {"n1", "n2"}) {
    start_daemon(std::string("slurmd-") + node,
                 {"setpriv", "--pdeathsig", "KILL", "slurmd", "-D", "-N", node});
  }
  if (!wait_until([] { return capture("sinfo -h -N -o '%N %t'").second == "n1 idle\nn2 idle\n"; },
                  30s)) {
    throw std::runtime_error("the nodes were not idle within 30 s: " + capture("sinfo -N").second +
                             "\n" + logs());
  }
}

void SlurmCluster::start_daemon(const std::string& name, const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  const std::string log = dir_ + "/log/" + name + ".out";
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: one kill stops it all
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (auto& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawnp(&pid, raw[0], &files, &attr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (error != 0) throw std::runtime_error("cannot start " + name);
  daemons_.push_back(pid);
}

void SlurmCluster::stop() {
  if (!daemons_.empty()) {
    // Jobs first: a slurmd stopped under a running job leaves its steps.
    capture("scancel --quiet --user=root");
    if (!wait_until([] { return capture("squeue -h").second.empty(); }, 40s)) {
      capture("scancel --quiet --full --signal=KILL --user=root");
      wait_until([] { return capture("squeue -h").second.empty(); }, 10s);
    }
    // Daemons last to first (slurmd before slurmctld before munged).
    for (auto it = daemons_.rbegin(); it != daemons_.rend(); ++it) {
      kill(-*it, SIGTERM);
      int status = 0;
      if (!wait_until([&] { return waitpid(*it, &status, WNOHANG) == *it; }, 10s)) {
        kill(-*it, SIGKILL);
        waitpid(*it, &status, 0);
      }
      kill(-*it, SIGKILL);  // whatever it forked into its group (slurmscriptd)
    }
    daemons_.clear();
  }
  // Whatever a job left behind, found by the cluster it names.
  end_processes(job_processes());
  unsetenv("SLURM_CONF");
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string SlurmCluster::sbatch(const std::string& env, const std::string& options,
                                 const std::string& script, const std::string& args) const {
  const auto [code, out] =
      capture("env " + env + " sbatch --parsable " + options + " " + script + " " + args);
  std::smatch m;
  if (code != 0 || !std::regex_search(out, m, std::regex("^([0-9]+)"))) {
    throw std::runtime_error("sbatch " + script + " refused (exit " + std::to_string(code) +
                             "): " + out);
  }
  return m[1];
}

SlurmCluster::JobState SlurmCluster::job_state(const std::string& id) const {
  const std::string text = capture("scontrol show job " + id).second;
  return {field(text, "JobState"), field(text, "ExitCode")};
}

SlurmCluster::JobState SlurmCluster::wait_job_end(const std::string& id,
                                                  std::chrono::seconds timeout) const {
  JobState last;
  wait_until(
      [&] {
        last = job_state(id);
        for (const char* running : {"", "PENDING", "CONFIGURING", "RUNNING", "COMPLETING",
                                    "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING"}) {
          if (last.state == running) return false;
        }
        return true;
      },
      timeout);
  return last;
}

std::vector<pid_t> SlurmCluster::job_processes(const std::string& job_id) const {
  std::vector<pid_t> found;
  for (const pid_t pid : processes_of(conf_, job_id)) {
    if (std::find(daemons_.begin(), daemons_.end(), pid) == daemons_.end()) found.push_back(pid);
  }
  return found;
}

std::string SlurmCluster::logs() const {
  std::string out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_ + "/log", ec)) {
    std::string text = read_all(entry.path());
    if (text.size() > 3000) text = "…" + text.substr(text.size() - 3000);
    out += "--- " + entry.path().filename().string() + "\n" + text;
  }
  return out;
}

}  // namespace pronghorn::testing
