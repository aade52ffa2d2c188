// A real Slurm cluster of two nodes on this machine, for tests of
// deploy/slurm/: munged (as the munge user, its own key and socket),
// slurmctld and two slurmd (`-N n1`, `-N n2`, NodeHostname=localhost,
// NodeAddr=127.0.0.1), everything (config, state, spool, logs, the socket)
// in a fresh temporary folder and every daemon on a port found free at
// start, so a leftover of an earlier run never clashes with this one.
//
// The daemons run in the foreground as this process's children, each in its
// own process group and with a parent-death signal (setpriv --pdeathsig), so
// a killed test takes them with it. The destructor cancels every job, waits
// for it to end, stops the daemons, kills whatever a job left (any process
// whose environment names this cluster's SLURM_CONF) and removes the folder.
// The constructor first sweeps what a killed earlier run left: the jobs and
// folder of a cluster whose slurmctld is gone.
//
// Needs root and Slurm 22.05's binaries (tools/setup-deps --test);
// unavailable() says why not. SLURM_CONF is set in this process's
// environment while the cluster lives, so `sbatch`, `scontrol` and the jobs
// started through shell() talk to it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace pronghorn::testing {

class SlurmCluster {
 public:
  // Why no cluster can run here (not root, a binary or the munge user
  // missing), or nullopt when one can.
  static std::optional<std::string> unavailable();

  // Starts the daemons and waits until both nodes are idle; throws
  // std::runtime_error with the daemons' logs when they do not come up.
  SlurmCluster();
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // The folder holding config, state, spool and logs.
  const std::string& dir() const { return dir_; }

  // `sbatch --parsable <options> <script> <args>` with `env` (K=V words) in
  // front; the job id. Throws with sbatch's output when it refuses.
  std::string sbatch(const std::string& env, const std::string& options, const std::string& script,
                     const std::string& args = "") const;

  // JobState (e.g. RUNNING, COMPLETED, FAILED, CANCELLED) and ExitCode
  // ("75:0") of a job, as `scontrol show job` says; "" when it knows none.
  struct JobState {
    std::string state;
    std::string exit_code;
  };
  JobState job_state(const std::string& id) const;

  // Polls the job until it has ended (a final state, not COMPLETING), up to
  // `timeout`; its final state, or the last one seen.
  JobState wait_job_end(const std::string& id, std::chrono::seconds timeout) const;

  // Every process whose environment names this cluster (slurmstepd, job
  // scripts, their tasks and children), the daemons themselves excluded;
  // with `job_id`, only those of that job (SLURM_JOB_ID in the environment).
  std::vector<pid_t> job_processes(const std::string& job_id = "") const;

  // What the daemons logged, for a failure message.
  std::string logs() const;

 private:
  void start();
  void start_daemon(const std::string& name, const std::vector<std::string>& argv);
  void stop();

  std::string dir_;
  std::string conf_;
  std::vector<pid_t> daemons_;  // munged, slurmctld, slurmd n1, slurmd n2
};

}  // namespace pronghorn::testing
