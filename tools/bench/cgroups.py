"""CPU budgets for tools/bench-scaling and tools/bench-solve-ranks: one
cgroup per rank, its quota set and its usage read by the kernel's own
counters, on cgroup v2 (cpu.max, cpu.stat) or v1 (the cpu and cpuacct
hierarchies)."""
import os
import signal
import sys
import time

CGROUP_ROOT = "/sys/fs/cgroup"


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def stat_fields(path):
    return {k: int(v) for k, v in (line.split() for line in read(path).splitlines())}


def v1_mount(controller):
    """Where the cgroup v1 hierarchy holding `controller` is mounted."""
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 4 and fields[2] == "cgroup" and controller in fields[3].split(","):
                return fields[1]
    return None


class Cgroups:
    """The job's cgroups, one per rank under <root>/`parent` in each hierarchy
    used, each held to `quota_us` of CPU per `period_us`. Each change is an
    action, ("mkdir", dir) or ("write", file, value), listed before it is
    made, so that a dry run prints exactly these. `burst_us` (0: none) lets a
    rank spend quota it left unused in earlier periods, up to that much over
    its quota in one period (cpu.max.burst, cpu.cfs_burst_us): its average
    stays the budget."""

    def __init__(self, parent, quota_us, period_us, burst_us=0):
        # The kernel's bounds in both cgroup versions (kernel/sched/core.c):
        # outside them every rank's write would be refused.
        if quota_us < 1000 or period_us > 1_000_000:
            raise RuntimeError(f"a quota of {quota_us} µs per {period_us} µs period: the kernel "
                               "takes a quota of at least 1000 µs and a period of at most "
                               "1000000 µs (raise --period-us or --budget)")
        if not 0 <= burst_us <= quota_us:
            raise RuntimeError(f"a burst of {burst_us} µs over a quota of {quota_us} µs: the "
                               "kernel takes a burst from 0 to the quota (--burst-us)")
        self.quota_us, self.period_us, self.burst_us = quota_us, period_us, burst_us
        self.v2 = os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers"))
        if self.v2:
            self.limit_root = self.usage_root = os.path.join(CGROUP_ROOT, parent)
        else:
            cpu, acct = v1_mount("cpu"), v1_mount("cpuacct")
            if not cpu or not acct:
                raise RuntimeError("cgroup v1 without a cpu or cpuacct hierarchy mounted "
                                   "(/proc/self/mounts): the budget cannot be set and verified")
            self.limit_root, self.usage_root = os.path.join(cpu, parent), os.path.join(acct, parent)
        # cpu and cpuacct mounted together (cpu,cpuacct) are one folder.
        self.shared = os.path.realpath(os.path.dirname(self.limit_root)) == \
            os.path.realpath(os.path.dirname(self.usage_root))
        self.made = []  # folders made, removed in reverse order

    def version(self):
        return "v2" if self.v2 else "v1"

    def parent_actions(self):
        if self.v2:
            return [("write", os.path.join(CGROUP_ROOT, "cgroup.subtree_control"), "+cpu"),
                    ("mkdir", self.limit_root),
                    ("write", os.path.join(self.limit_root, "cgroup.subtree_control"), "+cpu")]
        return [("mkdir", self.limit_root)] + ([] if self.shared else [("mkdir", self.usage_root)])

    def rank_dirs(self, rank):
        name = f"rank{rank}"
        return os.path.join(self.limit_root, name), os.path.join(self.usage_root, name)

    def rank_actions(self, rank):
        limit, acct = self.rank_dirs(rank)
        burst_file = "cpu.max.burst" if self.v2 else "cpu.cfs_burst_us"
        burst = [("write", os.path.join(limit, burst_file), str(self.burst_us))] \
            if self.burst_us else []
        if self.v2:
            return [("mkdir", limit), ("write", os.path.join(limit, "cpu.max"),
                                       f"{self.quota_us} {self.period_us}")] + burst
        return [("mkdir", limit), ("write", os.path.join(limit, "cpu.cfs_period_us"), str(self.period_us)),
                ("write", os.path.join(limit, "cpu.cfs_quota_us"), str(self.quota_us))] + \
            burst + ([] if self.shared else [("mkdir", acct)])

    def procs_files(self, rank):
        limit, acct = self.rank_dirs(rank)
        dirs = [limit] if self.v2 or self.shared else [limit, acct]
        return [os.path.join(d, "cgroup.procs") for d in dirs]

    def apply(self, actions):
        for action in actions:
            try:
                if action[0] == "mkdir":
                    os.mkdir(action[1])
                    self.made.append(action[1])
                else:
                    write(action[1], action[2])
            except OSError as e:
                raise RuntimeError(f"cgroup {action[0]} {' '.join(action[1:])}: {e.strerror}"
                                   + (" (cgroup v2: a cgroup holding processes cannot enable "
                                      "controllers for its children)"
                                      if self.v2 and action[1].endswith("subtree_control") else ""))

    def usage_s(self, rank):
        """CPU seconds the rank's cgroup has used, by its own counter."""
        limit, acct = self.rank_dirs(rank)
        if self.v2:
            return stat_fields(os.path.join(limit, "cpu.stat"))["usage_usec"] / 1e6
        return int(read(os.path.join(acct, "cpuacct.usage"))) / 1e9

    def periods(self, rank):
        """(CFS periods, periods throttled) of the rank's quota so far."""
        s = stat_fields(os.path.join(self.rank_dirs(rank)[0], "cpu.stat"))
        return s["nr_periods"], s["nr_throttled"]

    def remove(self, folders):
        """Kills what is left in `folders` (our ranks' descendants, by pid),
        then removes them, innermost first."""
        for folder in reversed(folders):
            if folder not in self.made:
                continue
            deadline = time.monotonic() + 5
            while True:
                procs = os.path.join(folder, "cgroup.procs")
                left = {int(x) for x in read(procs).split()} if os.path.exists(procs) else set()
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    os.rmdir(folder)
                    self.made.remove(folder)
                    break
                except OSError as e:
                    if time.monotonic() > deadline:
                        print(f"bench: could not remove {folder}: {e.strerror}",
                              file=sys.stderr)
                        break
                    time.sleep(0.1)

    def remove_ranks(self, n):
        self.remove([d for r in range(n) for d in self.rank_dirs(r)])

    def remove_all(self):
        self.remove(list(self.made))
