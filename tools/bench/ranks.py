"""N `pronghorn train` ranks of one job for tools/bench-scaling and
tools/bench-solve-ranks: each rank in its own cgroup (cgroups.py), pinned
to its share of the cores, on loopback or a link of its own (links.py),
all started at once with rank 0's rendezvous address chosen beforehand, as
deploy/ starts them."""
import math
import os
import shutil
import signal
import socket
import subprocess
import time

from cgroups import read


class JobFailed(Exception):
    pass


def last_line(path):
    try:
        lines = [x for x in read(path).splitlines() if x.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def unmet(args, networked):
    """Why the ranks cannot be run here (a line for the tool's usage), or
    None: root for the cgroups, the binary, taskset for pinning, and for the
    links (links.parse_link's, loopback left out) iproute2, and ethtool for
    a delay."""
    if networked and not all(shutil.which(x) for x in ("ip", "tc")):
        return "links with a rate need ip and tc (iproute2)"
    if any(link[2] for link in networked) and not shutil.which("ethtool"):
        return ("links with a delay need ethtool (apt-get install ethtool): the forwarding "
                "switch turns the links' offloads off")
    if os.geteuid() != 0:
        return "making cgroups needs root"
    if not os.access(args.bin, os.X_OK):
        return f"--bin: no pronghorn binary at {args.bin}; build it (make) or name it"
    if args.pin == "auto" and not shutil.which("taskset"):
        return "pinning ranks needs taskset (util-linux); install it or pass --pin never"
    return None


def median_time(runs):
    """The median seconds of runs {"solved", "seconds"}, an unsolved run
    counted as slower than any solved one: (seconds, whether the median run
    itself solved)."""
    ordered = sorted(runs, key=lambda r: (not r["solved"], r["seconds"]))
    middle = ordered[len(ordered) // 2]
    return middle["seconds"], middle["solved"]


class Ranks:
    """Launches and stops the ranks of one job at a time. `args` has bin,
    budget, pin and stop_timeout; `cores` is the affinity
    mask; `cg` the run's Cgroups."""

    def __init__(self, args, cores, cg):
        self.args, self.cores, self.cg = args, cores, cg
        self.running = []  # (rank, Popen, log) of the job under way
        self.n = 0  # its ranks, whose cgroups exist

    def placement(self, n):
        """Each rank's cores, packed: rank r gets cores [floor(r·b),
        ceil((r+1)·b)) of the affinity mask for a budget of b cores, so ranks
        of half a core share a core two by two at every N (the same
        conditions at 1, 2 and 4) and ranks of whole cores get cores of their
        own; None with --pin never."""
        if self.args.pin == "never":
            return None
        b = self.args.budget
        return [self.cores[math.floor(r * b + 1e-9):
                           max(math.ceil((r + 1) * b - 1e-9), math.floor(r * b + 1e-9) + 1)]
                for r in range(n)]

    def describe_cores(self, n):
        place = self.placement(n)
        if place is None:
            return f"shared {','.join(map(str, self.cores))}"
        return " ".join(",".join(map(str, c)) for c in place)

    def command(self, config, sets, n, rank, rendezvous, links):
        """Rank `rank`'s argv: join its cgroup, enter its namespace, pin,
        then `pronghorn train -c config --set ...` with the cluster's keys."""
        if n > 1:
            sets = sets + [f"distributed.world_size={n}", f"distributed.rank={rank}",
                           f"distributed.rendezvous={rendezvous}"]
        place = self.placement(n)
        pin = ["taskset", "-c", ",".join(map(str, place[rank]))] if place else []
        train = [self.args.bin, "train", "-c", config] + sum((["--set", x] for x in sets), [])
        files = self.cg.procs_files(rank)
        join = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(files)))
        net = links.prefix(rank) if links else []
        return ["sh", "-c", f'{join} && shift {len(files)} && exec "$@"', f"rank{rank}"] + files \
            + net + pin + train

    def rendezvous(self, links):
        """Rank 0's store address, chosen before any rank starts: on a link
        a fixed port (the namespaces are new, nothing else listens there),
        on loopback a port the kernel finds free now."""
        if links:
            return f"{links.address(0)}:29500"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return f"127.0.0.1:{s.getsockname()[1]}"

    def check_alive(self):
        for rank, proc, log in self.running:
            if proc.poll() is not None:
                raise JobFailed(f"rank {rank} exited {proc.returncode}: {last_line(log)}")

    def start(self, config, sets, n, log_prefix, links):
        """Makes the ranks' cgroups and starts every rank. Logs:
        log_prefix.rank<r>.log."""
        self.n = n
        for rank in range(n):
            self.cg.apply(self.cg.rank_actions(rank))
        rendezvous = self.rendezvous(links)
        for rank in range(n):
            log = f"{log_prefix}.rank{rank}.log"
            with open(log, "w") as out:
                proc = subprocess.Popen(self.command(config, sets, n, rank, rendezvous, links),
                                        stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
            self.running.append((rank, proc, log))

    def stop(self):
        """SIGTERM to every rank still running, SIGKILL after --stop-timeout,
        `pronghorn clean` after a kill, cgroups removed. Returns each rank's
        exit code; forgets the ranks."""
        for _, proc, _ in self.running:
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + self.args.stop_timeout
        killed = False
        for _, proc, _ in self.running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                killed = True
        codes = [(rank, proc.returncode) for rank, proc, _ in self.running]
        self.cg.remove_ranks(self.n)
        self.running.clear()
        self.n = 0
        if killed:
            subprocess.run([self.args.bin, "clean"], capture_output=True)  # a killed learner's /dev/shm
        return codes
