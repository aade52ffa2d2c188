"""One job of tools/bench-scaling: N `pronghorn train` ranks, each in its own
cgroup (cgroups.py), pinned, and on a link of its own (links.py) or on
loopback; run until rank 0's metrics show the measuring window, then stopped.
The methods, budgets and rate are described in tools/bench-scaling's help."""
import json
import math
import os
import re
import signal
import subprocess
import time

from cgroups import read
from links import Links

POLL_S = 0.5
MODELS = {
    "cartpole": {"config": "configs/cartpole.toml", "sets": [], "warmup": 10, "window": 30,
                 "what": "CartPole, MLP [64, 64] (configs/cartpole.toml)"},
    "mlp256": {"config": "configs/pendulum.toml", "sets": ["model.hidden=[256,256]"],
               "warmup": 10, "window": 30,
               "what": "MLP [256, 256] on Pendulum (configs/pendulum.toml)"},
    "impala-cnn": {"config": "configs/pong.toml",
                   "sets": ["model.kind=impala_cnn", "model.hidden=[256]"],
                   "num_envs": 16, "batch_size": 2, "warmup": 30, "window": 120,
                   "what": "IMPALA CNN on Pong's 32×32 frames (configs/pong.toml)"},
}


class JobFailed(Exception):
    pass


def metrics(path):
    """Rank 0's metrics.jsonl lines so far, whole lines only."""
    try:
        text = read(path)
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines(keepends=True):
        if line.endswith("\n"):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return rows


def last_line(path):
    try:
        lines = [x for x in read(path).splitlines() if x.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


class Scaling:
    """The jobs of one bench-scaling run: `args` its options, `cores` the
    affinity mask, `cg` its Cgroups, `root` the repository."""

    def __init__(self, args, cores, cg, root, usage):
        self.args, self.cores, self.cg, self.root, self.usage = args, cores, cg, root, usage
        self.running = []  # (rank, Popen, log) of the job under way, for the stop at exit

    def preset_value(self, config, section, key):
        """An integer key of a preset's TOML (the presets write `key = N`
        under `[section]`), for the settings every rank is given explicitly."""
        current = None
        with open(os.path.join(self.root, config)) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line.startswith("["):
                    current = line.strip("[] ")
                elif current == section and re.fullmatch(rf"{key}\s*=\s*\d+", line):
                    return int(line.split("=")[1])
        self.usage(f"{config}: no {section}.{key}; set it with --{key.replace('_', '-')}")

    def settings(self, model):
        spec, a = MODELS[model], self.args
        return {"num_envs": a.num_envs or spec.get("num_envs")
                or self.preset_value(spec["config"], "env", "num_envs"),
                "batch_size": a.batch_size or spec.get("batch_size")
                or self.preset_value(spec["config"], "learner", "batch_size"),
                "warmup": spec["warmup"] if a.warmup is None else a.warmup,
                "window": spec["window"] if a.window is None else a.window}

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

    def rank_command(self, model, n, rank, scratch, name, rendezvous, links):
        s, a = self.settings(model), self.args
        sets = [f"run.dir={scratch}", f"run.name={name}", "run.target_return=0",
                "run.total_steps=1000000000000", "run.eval_interval_s=0",
                "run.checkpoint_interval_s=0", "server.address=127.0.0.1:0",
                "server.metrics_port=-1", f"learner.threads={a.learner_threads}",
                f"actor.count={a.actors}", "actor.oversubscribe=true",
                f"env.num_envs={s['num_envs']}", f"learner.batch_size={s['batch_size']}"] \
            + MODELS[model]["sets"] + a.set
        if n > 1:
            sets += [f"distributed.world_size={n}", f"distributed.rank={rank}",
                     f"distributed.rendezvous={rendezvous}"]
        place = self.placement(n)
        pin = ["taskset", "-c", ",".join(map(str, place[rank]))] if place else []
        train = [a.bin, "train", "-c", os.path.join(self.root, MODELS[model]["config"])]
        train += sum((["--set", x] for x in sets), [])
        files = self.cg.procs_files(rank)
        join = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(files)))
        net = links.prefix(rank) if links else []
        return ["sh", "-c", f'{join} && shift {len(files)} && exec "$@"', f"rank{rank}"] + files \
            + net + pin + train

    def stop(self):
        """SIGTERM to every rank, SIGKILL after --stop-timeout; True if one
        was killed. Forgets the ranks."""
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
        return killed

    def run_job(self, model, n, link, round_no, scratch):
        """One job; its rate, learner steps, all-reduce share and each
        rank's CPU use. `link`: None (loopback) or links.parse_link's."""
        s, a, cg = self.settings(model), self.args, self.cg
        name = f"{model}-n{n}-{link[0].replace('+', '-') if link else 'lo'}-r{round_no}"
        job = os.path.join(scratch, name)
        links = None if link is None or n == 1 else Links(str(os.getpid()), n, link[1], link[2])
        host = links.address(0) if links else "127.0.0.1"
        start = time.monotonic()
        deadline = start + a.start_timeout + s["warmup"] + s["window"] + 30

        def check_alive():
            for rank, proc, log in self.running:
                if proc.poll() is not None:
                    raise JobFailed(f"rank {rank} exited {proc.returncode}: {last_line(log)}")

        def launch(rank, rendezvous):
            log = os.path.join(scratch, f"{name}.rank{rank}.log")
            with open(log, "w") as out:
                proc = subprocess.Popen(
                    self.rank_command(model, n, rank, scratch, name, rendezvous, links),
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True)
            self.running.append((rank, proc, log))

        try:
            if links:
                links.up(os.path.join(scratch, f"{name}.switch.log"))
            for rank in range(n):
                cg.apply(cg.rank_actions(rank))
            launch(0, f"{host}:0")
            if n > 1:
                address_file = os.path.join(job, "rendezvous.address")
                while not (os.path.exists(address_file) and read(address_file).strip()):
                    check_alive()
                    if time.monotonic() > start + a.start_timeout:
                        raise JobFailed(f"rank 0 wrote no {address_file} in "
                                        f"{a.start_timeout:.0f} s")
                    time.sleep(0.1)
                rendezvous = read(address_file).strip()
                for rank in range(1, n):
                    launch(rank, rendezvous)
            # Each rank's cgroup counters at rank 0's uptime warmup and warmup + window.
            marks = []
            while len(marks) < 2:
                check_alive()
                rows = metrics(os.path.join(job, "metrics.jsonl"))
                uptime = rows[-1]["uptime_s"] if rows else -1
                if uptime >= s["warmup"] + (s["window"] if marks else 0):
                    marks.append((time.monotonic(), [cg.usage_s(r) for r in range(n)],
                                  [cg.periods(r) for r in range(n)]))
                    continue
                if time.monotonic() > deadline:
                    raise JobFailed(f"rank 0's uptime reached {uptime:.0f} s of "
                                    f"{s['warmup'] + s['window']:.0f} s in {deadline - start:.0f} s")
                time.sleep(POLL_S)
        finally:
            killed = self.stop()
            codes = [(rank, proc.returncode) for rank, proc, _ in self.running]
            self.running.clear()
            cg.remove_ranks(n)
            if links:
                links.down()
            if killed:
                subprocess.run([a.bin, "clean"], capture_output=True)  # a killed learner's /dev/shm
        rows = metrics(os.path.join(job, "metrics.jsonl"))
        first = next(r for r in rows if r["uptime_s"] >= s["warmup"])
        last = next(r for r in rows if r["uptime_s"] >= s["warmup"] + s["window"])
        (t0, cpu0, per0), (t1, cpu1, per1) = marks
        use = [(cpu1[r] - cpu0[r]) / (t1 - t0) for r in range(n)]
        throttled = [(per1[r][1] - per0[r][1]) / max(1, per1[r][0] - per0[r][0]) for r in range(n)]
        span = last["uptime_s"] - first["uptime_s"]
        return {"rate": (last["env_steps"] - first["env_steps"]) / span,
                "learner_steps": last["learner_steps"] - first["learner_steps"], "use": use,
                "shares": {stage: (last[f"stage_time_learner_{stage}_s"] -
                                   first[f"stage_time_learner_{stage}_s"]) / span
                           for stage in ("allreduce", "wait")},
                "throttled": throttled,
                "held": all(u <= a.budget * (1 + a.tolerance) for u in use),
                "exits": [f"rank {r} exit {c}" for r, c in codes if c != 0]}
