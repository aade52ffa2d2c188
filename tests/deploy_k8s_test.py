#!/usr/bin/env python3
"""deploy/k8s rendered with `kubectl kustomize`, checked, and run here.

1. Renders the base and the example overlay, and the token Secret the docs'
   `kubectl create secret` command makes; checks what the objects say
   (tests/deploy_k8s_manifests.py): the env contract, ports, probes, the
   token, resources, selectors, the scrape annotation, the failure policy.
2. Runs the base's learner containers (2 ranks) and one actor-only node as
   local processes (tests/testing/k8s_local.py), with their rendered command,
   args and environment; only what cannot exist here is substituted: the
   image's binary (a `pronghorn` on PATH that runs the build's), mount paths
   (local directories holding the rendered ConfigMap and Secret as a kubelet
   lays them out), DNS names (127.0.0.1) and fixed ports (free ports, the
   same in every attempt). The test's ConfigMap sets a fixed run.total_steps
   (no target return) and a checkpoint a second.
   First, with a fake `pronghorn` that exits 0 at once, the learner
   container's choice at any restart attempt: a run without a checkpoint
   starts afresh (rank 0 moves it aside, rank 1 leaves it), one with a
   checkpoint resumes, and the rank is named by its pod's hostname (pod
   names carry a random suffix here, as real ones do; hostnames do not).
   Then the real one. Attempt 0: rank 0 answers grpc.health.v1 SERVING on
   its control port and serves /metrics; the node joins and a learner
   commits its unrolls (their /metrics say); after a checkpoint rank 1's
   pod gets the kubelet's SIGTERM (a drain): every rank stops cleanly and
   rank 1's container exits 143, which the rendered policies restart.
   Attempt 1 resumes every rank; after a new checkpoint rank 1's pod is
   lost (SIGKILL), rank 0 exits 75, and the policies say "restart the
   group" (and "fail" for exit 1 and 2). Attempt 2 resumes every rank, and
   both end with exit 0 and an exit_status of 0; the node leaves with 0.

Exit 77 (skipped) where there is no kubectl or its kustomize is older than
v5. Every process is stopped on every way out.
   deploy_k8s_test.py SOURCE_DIR PRONGHORN_BINARY
"""

import glob
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_k8s_manifests as manifests  # noqa: E402
from deploy_k8s_manifests import COMPLETION_INDEX, RESTART_ATTEMPT, Failure, expect  # noqa: E402
from testing import k8s_local  # noqa: E402

SKIP = 77
TOTAL_STEPS = 5_000_000  # env steps of the job: attempt 0 is cut short, attempt 1 runs to it
NO_GRPC = k8s_local.NO_GRPC
TEST_DEADLINE_S = 110  # below the ctest TIMEOUT: the test ends its processes itself


def kubectl(*args):
    return subprocess.run(["kubectl", *args], check=True, capture_output=True, text=True).stdout


def kustomize_major():
    """The major version of kubectl's kustomize, or None when unknown."""
    try:
        info = json.loads(kubectl("version", "--client", "-o", "json"))
    except (subprocess.CalledProcessError, ValueError):
        return None
    match = re.match(r"v(\d+)", info.get("kustomizeVersion", ""))
    return int(match.group(1)) if match else None


def render(path):
    import yaml
    return [o for o in yaml.safe_load_all(kubectl("kustomize", path)) if o]


def token_secret(tmp):
    """The Secret of docs/deploy.md's command, from a fresh token."""
    import yaml
    path = os.path.join(tmp, "token")
    with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(secrets.token_hex(32) + "\n")
    return yaml.safe_load(kubectl("create", "secret", "generic", "pronghorn-token",
                                  f"--from-file=token={path}", "--dry-run=client", "-o", "yaml"))


def jobset_decision(job, exit_codes):
    """What the rendered policies make of the ranks' exit codes: "complete",
    "restart" (the whole group) or "fail" (the JobSet)."""
    if all(code == 0 for code in exit_codes):
        return "complete"
    codes = job.job_spec["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"]
    reason = "PodFailurePolicy" if any(c in codes for c in exit_codes) else "BackoffLimitExceeded"
    rules = job.jobset["spec"]["failurePolicy"].get("rules", [])
    if any(reason in r.get("onJobFailureReasons", []) and r["action"] == "FailJobSet" for r in rules):
        return "fail"
    return "restart" if job.jobset["spec"]["failurePolicy"]["maxRestarts"] >= 1 else "fail"


class Cluster:
    """The pods of the base's job on this machine: fixed ports mapped to free
    ones per pod, DNS names to 127.0.0.1, the shared volume a directory."""

    def __init__(self, job, secret, pronghorn, tmp):
        self.job, self.tmp, self.processes = job, tmp, []
        self.objects = {**job.objects, ("Secret", secret["metadata"]["name"]): secret}
        self.ports = [{name: k8s_local.free_port() for name in ("control", "metrics", "remote")}
                      for _ in range(job.world_size)]
        self.master_port = k8s_local.free_port()
        self.shared = os.path.join(tmp, "shared")
        self.argv_log = os.path.join(tmp, "argv.log")
        # The image's `pronghorn` on PATH; it resolves the learners' DNS names
        # in --learner (the actor node's only address argument) and logs argv.
        learners = {f"{job.hostname(r)}.{job.subdomain}:{job.ports['remote']}": f"127.0.0.1:{p['remote']}"
                    for r, p in enumerate(self.ports)}
        os.makedirs(os.path.join(tmp, "bin"))
        shim = os.path.join(tmp, "bin", "pronghorn")
        with open(shim, "w") as f:
            f.write(f"""#!/usr/bin/env python3
import json, os, sys
args = [{learners!r}.get(a, a) for a in sys.argv[1:]]
with open({self.argv_log!r}, "a") as log:
    log.write(json.dumps(args) + "\\n")
os.execv({pronghorn!r}, [{pronghorn!r}] + args)
""")
        os.chmod(shim, 0o755)

    def config_for(self, rank):
        """The test's ConfigMap: a small total_steps, checkpoints every second,
        this pod's free ports in place of the fixed ones."""
        def transform(_name, _key, text):
            text = re.sub(r"(?m)^total_steps = .*$", f"total_steps = {TOTAL_STEPS}", text)
            text = re.sub(r"(?m)^target_return = .*$", "target_return = 0.0", text)  # off: total_steps ends it
            text = re.sub(r"(?m)^\[run\]$", "[run]\ncheckpoint_interval_s = 1.0", text)
            if rank is None:
                return text
            for name, port in self.ports[rank].items():
                fixed = self.job.ports[name]
                text = text.replace(f':{fixed}"', f':{port}"').replace(f"_port = {fixed}\n", f"_port = {port}\n")
            return text
        return transform

    def start(self, pod_template, container, pod, rank):
        pod_dir = os.path.join(self.tmp, "pods", f"{pod.name}-{len(self.processes)}")
        os.makedirs(pod_dir)
        mounts = k8s_local.mount_volumes(pod_template["spec"], container, self.objects, pod_dir,
                                         self.shared, self.config_for(rank))
        localize = k8s_local.localizer(mounts)
        env = {k: localize(v) for k, v in k8s_local.container_env(container, pod).items()}
        if "MASTER_ADDR" in env:
            expect(env["MASTER_ADDR"] == f"{self.job.hostname(0)}.{self.job.subdomain}", "MASTER_ADDR")
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.master_port))
        uts = k8s_local.hostname_command(os.path.join(pod_dir, "uts"), pod.hostname)
        env.update(PATH=f"{uts}:{self.tmp}/bin:{os.environ['PATH']}", HOME=pod_dir, HOSTNAME=pod.hostname,
                   LANG="C.UTF-8")
        argv = [localize(k8s_local.expand(a, env)) for a in container["command"] + container["args"]]
        process = k8s_local.Process(argv, env, os.path.join(pod_dir, "log"), pod_dir)
        self.processes.append(process)
        return process

    def start_rank(self, rank, attempt):
        annotations = {**self.job.learner_pod["metadata"].get("annotations", {}),
                       COMPLETION_INDEX: str(rank), RESTART_ATTEMPT: str(attempt)}
        hostname = self.job.hostname(rank)
        pod = k8s_local.Pod(f"{hostname}-{k8s_local.random_suffix()}", hostname,
                            self.job.learner_labels(rank), annotations)
        return self.start(self.job.learner_pod, self.job.learner, pod, rank)

    def start_actor_node(self, name):
        pod = k8s_local.Pod(name, name, self.job.actor_labels())
        return self.start(self.job.actor_pod, self.job.actor, pod, None)

    def run_rank(self, rank, attempt):
        """A learner container that ends by itself (a fake `pronghorn`): its exit code."""
        process = self.start_rank(rank, attempt)
        return process.wait(time.monotonic() + 10), process

    def stop_all(self):
        for process in self.processes:
            process.stop()

    def argv_lines(self):
        if not os.path.exists(self.argv_log):
            return []
        with open(self.argv_log) as f:
            return [json.loads(line) for line in f]


def wait_for(what, condition, deadline, alive=()):
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        for process in alive:
            expect(process.exit_code() is None,
                   f"while waiting for {what}: a pod exited {process.exit_code()}\n{process.output()[-3000:]}")
        time.sleep(0.2)
    raise Failure(f"no {what} in time")


def wait_group(ranks, deadline):
    """The ranks' exit codes once all have exited or one has failed (the Job
    fails at its first failed pod, backoffLimit 0); None for one still running."""
    while time.monotonic() < deadline:
        codes = [r.exit_code() for r in ranks]
        if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
            return codes
        time.sleep(0.1)
    return [r.exit_code() for r in ranks]


def exit_status(run, rank):
    path = os.path.join(run, "exit_status") if rank == 0 else os.path.join(run, "ranks", str(rank), "exit_status")
    with open(path) as f:
        return f.read().strip()


def checkpoints(run):
    return set(glob.glob(os.path.join(run, "checkpoints", "*.ckpt")))


def check_wrapper_decisions(cluster):
    """The learner container's choice, whatever the restart attempt, with a
    fake `pronghorn` that exits 0 at once: a run without a checkpoint starts
    afresh (rank 0 moves it aside first, ranks > 0 leave it); a run with one
    resumes; the rank is named by its hostname."""
    job = cluster.job
    claim = [v for v in job.learner_pod["spec"]["volumes"] if "persistentVolumeClaim" in v][0]
    run = os.path.join(cluster.shared, claim["persistentVolumeClaim"]["claimName"],
                       manifests.env_value(job.learner, "RUN_NAME"))
    os.makedirs(os.path.join(run, "ranks", "1"))
    for path in ("config.toml", "ranks/1/config.toml"):
        open(os.path.join(run, path), "w").close()

    def started(rank, attempt):
        code, process = cluster.run_rank(rank, attempt)
        expect(code == 0, f"rank {rank}, attempt {attempt}: the wrapper exited {code}\n{process.output()}")
        argv = cluster.argv_lines()[-1]
        expect(argv[argv.index("--name") + 1] == job.hostname(rank), f"rank {rank}'s --name in {argv}")
        return argv[argv.index("--resume") + 1] if "--resume" in argv else "fresh"

    # A rank lost before the first checkpoint; the group's next attempt.
    expect(started(1, 1) == "fresh" and os.path.isfile(os.path.join(run, "ranks/1/config.toml")),
           "rank 1 without a checkpoint: not a fresh start that leaves the run to rank 0")
    expect(started(0, 1) == "fresh", "rank 0 without a checkpoint: not a fresh start")
    aside = glob.glob(run + ".no-checkpoint-*")
    expect(not os.path.exists(run) and len(aside) == 1 and os.path.isfile(os.path.join(aside[0], "config.toml")),
           f"rank 0 did not move the run without a checkpoint aside: {aside}")
    # A JobSet applied again after maxRestarts (attempt 0) to a run with a checkpoint.
    os.makedirs(os.path.join(run, "checkpoints"))
    open(os.path.join(run, "checkpoints", "000001.ckpt"), "w").close()
    for rank in range(job.world_size):
        expect(started(rank, 0) == run, f"rank {rank}, attempt 0, a checkpoint there: not --resume {run}")
    expect(len(glob.glob(run + ".no-checkpoint-*")) == 1, "a run with a checkpoint was moved aside")
    print("learner wrapper: no checkpoint → fresh start (rank 0 moves the run aside), "
          "a checkpoint → --resume, at any attempt")


def run_job(cluster, deadline):
    job = cluster.job
    claim = [v for v in job.learner_pod["spec"]["volumes"] if "persistentVolumeClaim" in v][0]
    run = os.path.join(cluster.shared, claim["persistentVolumeClaim"]["claimName"],
                       manifests.env_value(job.learner, "RUN_NAME"))
    node_name = "pronghorn-actors-5d9f7c-x2k4p"
    started = time.monotonic()
    ranks = [cluster.start_rank(r, 0) for r in range(job.world_size)]
    # The node's pod starts once the learners listen for nodes, as after
    # `kubectl scale deployment pronghorn-actors --replicas=1`: it joins at
    # once instead of after its back-off, well before total_steps.
    for r in range(job.world_size):
        rank_dir = run if r == 0 else os.path.join(run, "ranks", str(r))
        wait_for(f"rank {r}'s remote.address", lambda: os.path.exists(os.path.join(rank_dir, "remote.address")),
                 deadline, ranks)
    node = cluster.start_actor_node(node_name)
    control = cluster.ports[0]["control"]
    health = wait_for("SERVING from rank 0's grpc.health.v1",
                      lambda: {1: "SERVING", NO_GRPC: NO_GRPC}.get(k8s_local.health_status(control)), deadline, ranks)
    wait_for("rank 0's /metrics", lambda: "pronghorn_" in k8s_local.metrics(cluster.ports[0]["metrics"]), deadline, ranks)
    print(f"attempt 0: rank 0 serves /metrics; grpc.health.v1 on its control port: {health}")
    fed = wait_for(f"unrolls from {node_name}",
                   lambda: k8s_local.node_unrolls([p["metrics"] for p in cluster.ports], node_name), deadline, ranks + [node])
    print(f"attempt 0: actor node {node_name} joined; a learner committed {fed} of its unrolls "
          f"({time.monotonic() - started:.1f} s after the pods started)")
    wait_for("checkpoint", lambda: checkpoints(run), deadline, ranks)
    # Rank 1's pod is drained, evicted or preempted: the kubelet sends
    # SIGTERM to its main process, the wrapper. train stops every rank with a
    # checkpoint (exit 0); the wrapper exits 143, so the group restarts.
    ranks[1].signal_main(signal.SIGTERM)
    codes = [r.wait(deadline) for r in ranks]
    expect(codes == [0, 143], f"attempt 0 after SIGTERM to rank 1's pod: exit codes {codes}, expected [0, 143]\n"
           + ranks[1].output()[-3000:])
    expect(exit_status(run, 1).startswith("0 "), f"rank 1's train did not stop cleanly: {exit_status(run, 1)}")
    decision = jobset_decision(job, codes)
    expect(decision == "restart", f"the JobSet's policies {decision} on exit codes {codes}")
    print("attempt 0: SIGTERM to rank 1's pod: rank 1 exited 143 after a clean stop; the policies restart the group")

    ranks = [cluster.start_rank(r, 1) for r in range(job.world_size)]
    seen = checkpoints(run)
    wait_for("a checkpoint of attempt 1", lambda: checkpoints(run) - seen, deadline, ranks)
    ranks[1].kill(signal.SIGKILL)  # rank 1's pod is lost (a node died, a forced delete)
    ranks[0].wait(deadline)
    codes = wait_group(ranks, deadline)
    expect(codes == [75, 137], f"attempt 1 after losing rank 1: exit codes {codes}, expected [75, 137]\n"
           + ranks[0].output()[-3000:])
    expect(exit_status(run, 0).startswith("75 "), f"rank 0's exit_status: {exit_status(run, 0)}")
    decision = jobset_decision(job, codes)
    expect(decision == "restart", f"the JobSet's policies {decision} on exit codes {codes}")
    for code, want in ((1, "fail"), (2, "fail"), (75, "restart"), (137, "restart"), (143, "restart")):
        expect(jobset_decision(job, [code, 0]) == want, f"exit {code}: the policies do not {want}")
    print("attempt 1: resumed; rank 1 lost, rank 0 exited 75; the JobSet's policies restart the group")

    ranks = [cluster.start_rank(r, 2) for r in range(job.world_size)]
    codes = wait_group(ranks, deadline)
    expect(codes == [0, 0], f"attempt 2 exit codes {codes}\n" + "\n".join(r.output()[-2000:] for r in ranks))
    for r in range(job.world_size):
        expect(exit_status(run, r).startswith("0 "), f"rank {r}'s exit_status: {exit_status(run, r)}")
    # What the learner containers' args ran, as the image's `pronghorn` got it.
    n = job.world_size
    trains = [a for a in cluster.argv_lines() if a[:1] == ["train"]]
    resumed = [a[a.index("--resume") + 1] if "--resume" in a else None for a in trains]
    expect(resumed == [None] * n + [run] * 2 * n, f"--resume of each start, attempts 0 to 2: {resumed}")
    names = sorted(a[a.index("--name") + 1] for a in trains)
    expect(names == sorted([job.hostname(r) for r in range(n)] * 3),
           f"the ranks' --name {names}: not their pods' hostnames")
    print("attempt 2: every rank resumed under its hostname's name and the job ended with exit 0")

    # A node that rejoined hears the job end and leaves; one still between
    # retries is stopped as `kubectl delete deployment` would (SIGTERM).
    code = node.wait(time.monotonic() + 5)
    how = "heard the job end"
    if code is None:
        node.kill(signal.SIGTERM)
        code, how = node.wait(time.monotonic() + 15), "stopped by SIGTERM after the job"
    out = node.output()
    expect(code == 0, f"the actor node exited {code}\n{out[-3000:]}")
    acked = re.search(rf"node {node_name}: unrolls committed \d+ = acked (\d+)", out)
    expect(acked and int(acked.group(1)) > 0, f"the node's unrolls were not acked\n{out[-2000:]}")
    print(f"actor node: {acked.group(1)} unrolls acked; {how}, exit 0")


def main():
    source, pronghorn = sys.argv[1], os.path.abspath(sys.argv[2])
    if shutil.which("kubectl") is None:
        print("SKIPPED: no kubectl on PATH to render deploy/k8s")
        return SKIP
    major = kustomize_major()
    if major is None or major < 5:
        found = f"v{major}" if major is not None else "of no version it reports"
        print(f"SKIPPED: kubectl's kustomize is {found}; deploy/k8s needs v5 or newer")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="pronghorn-k8s-")
    cluster = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        secret = token_secret(tmp)
        with open(os.path.join(source, "deploy/docker/Dockerfile")) as f:
            dockerfile = f.read()
        jobs = {}
        for name in ("base", "overlays/example"):
            jobs[name] = manifests.Job(render(os.path.join(source, "deploy/k8s", name)))
            manifests.check_all(jobs[name], secret, dockerfile)
            print(f"deploy/k8s/{name}: rendered objects check out ({jobs[name].world_size} ranks)")
        expect(jobs["overlays/example"].world_size != jobs["base"].world_size
               and jobs["overlays/example"].learner["image"] != jobs["base"].learner["image"],
               "the example overlay changes neither the ranks nor the image")
        fake = os.path.join(tmp, "fake-pronghorn")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(fake, 0o755)
        os.makedirs(os.path.join(tmp, "wrapper"))
        cluster = Cluster(jobs["base"], secret, fake, os.path.join(tmp, "wrapper"))
        check_wrapper_decisions(cluster)
        cluster.stop_all()
        start = time.monotonic()
        cluster = Cluster(jobs["base"], secret, pronghorn, tmp)
        run_job(cluster, start + TEST_DEADLINE_S)
        print(f"local run of the rendered containers: {time.monotonic() - start:.1f} s")
        return 0
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        if cluster:
            cluster.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
