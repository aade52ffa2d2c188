"""One job of tools/bench-scaling: N ranks (ranks.py) run until rank 0's
metrics show the measuring window, then stopped; its rate, all-reduce share
and each rank's CPU use. The method is in tools/bench-scaling's help."""
import json
import os
import re
import time

from cgroups import read
from links import Links
from ranks import JobFailed

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


def preset_value(root, config, section, key):
    """A number of a preset's TOML (the presets write `key = 12` or
    `key = 1e-3` under `[section]`), for the settings every rank is given
    explicitly; None when it has none."""
    current = None
    with open(os.path.join(root, config)) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line.startswith("["):
                current = line.strip("[] ")
            elif current == section and re.fullmatch(rf"{key}\s*=\s*[0-9.eE+-]+", line):
                value = line.split("=")[1].strip()
                return int(value) if value.isdigit() else float(value)
    return None


class RateJobs:
    """bench-scaling's jobs: `args` its options, `ranks` a ranks.Ranks, `root`
    the repository, `usage` its exit for a bad option."""

    def __init__(self, args, ranks, root, usage):
        self.args, self.ranks, self.root, self.usage = args, ranks, root, usage

    def settings(self, model):
        spec, a = MODELS[model], self.args

        def preset(section, key):
            value = preset_value(self.root, spec["config"], section, key)
            if value is None:
                self.usage(f"{spec['config']}: no {section}.{key}; set it with "
                           f"--{key.replace('_', '-')}")
            return value
        return {"num_envs": a.num_envs or spec.get("num_envs") or preset("env", "num_envs"),
                "batch_size": a.batch_size or spec.get("batch_size")
                or preset("learner", "batch_size"),
                "warmup": spec["warmup"] if a.warmup is None else a.warmup,
                "window": spec["window"] if a.window is None else a.window}

    def config(self, model):
        return os.path.join(self.root, MODELS[model]["config"])

    def sets(self, model, scratch, name):
        """Every rank's settings, whatever N: explicit, no evaluation, no
        checkpoint, no target, free ports."""
        s, a = self.settings(model), self.args
        return [f"run.dir={scratch}", f"run.name={name}", "run.target_return=0",
                "run.total_steps=1000000000000", "run.eval_interval_s=0",
                "run.checkpoint_interval_s=0", "server.address=127.0.0.1:0",
                "server.metrics_port=-1", f"learner.threads={a.learner_threads}",
                f"actor.count={a.actors}", "actor.oversubscribe=true",
                f"env.num_envs={s['num_envs']}", f"learner.batch_size={s['batch_size']}"] \
            + MODELS[model]["sets"] + a.set

    @staticmethod
    def job_name(model, n, link, round_no):
        return f"{model}-n{n}-{link[0].replace('+', '-') if link else 'lo'}-r{round_no}"

    def run_job(self, model, n, link, round_no, scratch):
        """One job; its rate, learner steps, all-reduce share and each
        rank's CPU use. `link`: None (loopback) or links.parse_link's."""
        s, a, cg = self.settings(model), self.args, self.ranks.cg
        name = self.job_name(model, n, link, round_no)
        job = os.path.join(scratch, name)
        links = None if link is None or n == 1 else Links(str(os.getpid()), n, link[1], link[2])
        start = time.monotonic()
        deadline = start + a.start_timeout + s["warmup"] + s["window"] + 30
        try:
            if links:
                links.up(os.path.join(scratch, f"{name}.switch.log"))
            self.ranks.start(self.config(model), self.sets(model, scratch, name), n,
                             os.path.join(scratch, name), links)
            # Each rank's cgroup counters at rank 0's uptime warmup and warmup + window.
            marks = []
            while len(marks) < 2:
                self.ranks.check_alive()
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
            codes = self.ranks.stop()
            if links:
                links.down()
        rows = metrics(os.path.join(job, "metrics.jsonl"))
        first = next(r for r in rows if r["uptime_s"] >= s["warmup"])
        last = next(r for r in rows if r["uptime_s"] >= s["warmup"] + s["window"])
        (t0, cpu0, per0), (t1, cpu1, per1) = marks
        use = [(cpu1[r] - cpu0[r]) / (t1 - t0) for r in range(n)]
        throttled = [(per1[r][1] - per0[r][1]) / max(1, per1[r][0] - per0[r][0]) for r in range(n)]
        span = last["uptime_s"] - first["uptime_s"]
        if span <= 0 or t1 - t0 < 0.5 * s["window"]:
            raise JobFailed(f"the window was not seen as it passed (metrics {span:.1f} s, "
                            f"counters {t1 - t0:.1f} s apart): lengthen --window")
        return {"rate": (last["env_steps"] - first["env_steps"]) / span,
                "learner_steps": last["learner_steps"] - first["learner_steps"], "use": use,
                "shares": {stage: (last[f"stage_time_learner_{stage}_s"] -
                                   first[f"stage_time_learner_{stage}_s"]) / span
                           for stage in ("allreduce", "wait")},
                "throttled": throttled,
                "held": all(u <= a.budget * (1 + a.tolerance) for u in use),
                "exits": [f"rank {r} exit {c}" for r, c in codes if c != 0]}
