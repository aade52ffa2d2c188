"""What the rendered deploy/k8s objects must say (tests/deploy_k8s_test.py).

Each check raises Failure naming the object and what was wrong. `Job` holds
the objects of one rendering and the pieces the checks and the local run
share: the learner and actor pod templates, their containers, the ports.
"""

import re
import tomllib

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
# What JobSet's webhook (v0.6 to v0.12) accepts as a failurePolicy rule name.
RULE_NAME = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")


class Failure(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Failure(message)


def env_item(container, name):
    items = [e for e in container.get("env", []) if e["name"] == name]
    expect(len(items) == 1, f"container {container['name']}: env {name} defined {len(items)} times")
    return items[0]


def env_value(container, name):
    item = env_item(container, name)
    expect("value" in item, f"container {container['name']}: env {name} has no literal value")
    return str(item["value"])


def env_field(container, name):
    item = env_item(container, name)
    ref = item.get("valueFrom", {}).get("fieldRef", {})
    expect("fieldPath" in ref, f"container {container['name']}: env {name} is no fieldRef")
    return ref["fieldPath"]


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


class Job:
    def __init__(self, objects):
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        jobsets = [o for o in objects if o["kind"] == "JobSet"]
        deployments = [o for o in objects if o["kind"] == "Deployment"]
        expect(len(jobsets) == 1, f"{len(jobsets)} JobSets rendered; expected the learners' one")
        expect(len(deployments) == 1, f"{len(deployments)} Deployments; expected the actors' one")
        self.jobset, self.actors = jobsets[0], deployments[0]
        expect(self.jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2",
               f"JobSet apiVersion {self.jobset['apiVersion']}")
        rjobs = self.jobset["spec"]["replicatedJobs"]
        expect(len(rjobs) == 1 and rjobs[0].get("replicas", 1) == 1,
               "JobSet: expected one ReplicatedJob of one Job (one Indexed Job of all ranks)")
        self.rjob = rjobs[0]
        self.job_spec = self.rjob["template"]["spec"]
        self.learner_pod = self.job_spec["template"]
        self.actor_pod = self.actors["spec"]["template"]
        self.learner = self.only_container(self.learner_pod, "learner")
        self.actor = self.only_container(self.actor_pod, "actor")
        self.subdomain = self.jobset["spec"]["network"]["subdomain"]
        self.world_size = int(env_value(self.learner, "WORLD_SIZE"))
        self.config = tomllib.loads(self.objects[("ConfigMap", "pronghorn-config")]["data"]["config.toml"])
        self.ports = {p["name"]: p["containerPort"] for p in self.learner.get("ports", [])}

    @staticmethod
    def only_container(pod, name):
        containers = pod["spec"]["containers"]
        expect([c["name"] for c in containers] == [name], f"pod containers {[c['name'] for c in containers]}")
        return containers[0]

    def hostname(self, rank):
        """A learner pod's hostname, as the JobSet and Job controllers make it
        (its DNS name's first label); the pod's name adds a random suffix."""
        return f"{self.jobset['metadata']['name']}-{self.rjob['name']}-0-{rank}"

    def learner_labels(self, rank):
        """A learner pod's labels: its template's and what the controllers add."""
        return {**self.learner_pod["metadata"].get("labels", {}),
                "jobset.sigs.k8s.io/jobset-name": self.jobset["metadata"]["name"],
                "jobset.sigs.k8s.io/replicatedjob-name": self.rjob["name"],
                COMPLETION_INDEX: str(rank)}

    def actor_labels(self):
        return {**self.actor_pod["metadata"].get("labels", {}), "pod-template-hash": "5d9f7c"}

    def services(self):
        return {name: o for (kind, name), o in self.objects.items() if kind == "Service"}


def check_ranks(job):
    """One Indexed Job of WORLD_SIZE pods, rank = completion index, rank 0 by DNS."""
    spec = job.job_spec
    expect(spec.get("completionMode") == "Indexed", "Job: completionMode is not Indexed")
    expect(spec["completions"] == spec["parallelism"] == job.world_size,
           f"completions {spec['completions']}, parallelism {spec['parallelism']} and "
           f"WORLD_SIZE {job.world_size} differ")
    expect(env_field(job.learner, "RANK") == f"metadata.annotations['{COMPLETION_INDEX}']",
           "RANK is not the completion index")
    expect(job.jobset["spec"]["network"].get("enableDNSHostnames") is True,
           "JobSet: network.enableDNSHostnames is off: pods get no DNS names")
    master = env_value(job.learner, "MASTER_ADDR")
    expect(master == f"{job.hostname(0)}.{job.subdomain}",
           f"MASTER_ADDR {master} is not rank 0's name {job.hostname(0)}.{job.subdomain}")
    expect(int(env_value(job.learner, "MASTER_PORT")) == job.ports.get("rendezvous"),
           "MASTER_PORT is not the rendezvous containerPort")
    expect(env_field(job.learner, "RESTART_ATTEMPT") == f"metadata.annotations['{RESTART_ATTEMPT}']",
           "RESTART_ATTEMPT is not the JobSet's restart-attempt annotation")
    script = "\n".join(job.learner["command"] + job.learner["args"])
    expect('--resume "$run"' in script and '"$run"/checkpoints/*.ckpt' in script,
           "the learner's args do not resume a run that has a checkpoint")
    expect('--name "$(hostname)"' in script and "POD_NAME" not in script,
           "the learner's rank is not named by its pod's hostname (its pod name has a random suffix)")
    actor_world = int(env_value(job.actor, "WORLD_SIZE"))
    expect(actor_world == job.world_size, f"actor nodes' WORLD_SIZE {actor_world} ≠ {job.world_size}")
    expect(env_value(job.actor, "LEARNER_POD_PREFIX") + "0" == job.hostname(0),
           "LEARNER_POD_PREFIX does not name the learner pods")
    expect(env_value(job.actor, "LEARNER_SERVICE") == job.subdomain,
           "LEARNER_SERVICE is not the JobSet's subdomain")


def check_failure_policy(job):
    """Exit 1 and 2 end the JobSet; 75 and signals restart the whole group."""
    spec = job.job_spec
    expect(spec.get("backoffLimit") == 0, "Job: backoffLimit is not 0 (a rank must not restart alone)")
    expect(job.learner_pod["spec"].get("restartPolicy") == "Never", "learner restartPolicy is not Never")
    rules = spec.get("podFailurePolicy", {}).get("rules", [])
    fail_job = [r for r in rules if r["action"] == "FailJob" and "onExitCodes" in r]
    expect(len(fail_job) == 1, "podFailurePolicy: expected one FailJob rule on exit codes")
    codes = fail_job[0]["onExitCodes"]
    expect(codes["operator"] == "In" and sorted(codes["values"]) == [1, 2]
           and codes.get("containerName") == "learner",
           f"podFailurePolicy FailJob rule {codes}: expected exit codes In [1, 2] of the learner")
    policy = job.jobset["spec"].get("failurePolicy", {})
    expect(policy.get("maxRestarts", 0) >= 1, "JobSet: failurePolicy.maxRestarts < 1: no resume")
    for rule in policy.get("rules", []):
        expect(RULE_NAME.fullmatch(rule.get("name", "")),
               f"JobSet failurePolicy rule name {rule.get('name')!r}: the webhook wants {RULE_NAME.pattern}")
    fail_set = [r for r in policy.get("rules", []) if r["action"] == "FailJobSet"]
    expect(len(fail_set) == 1 and fail_set[0].get("onJobFailureReasons") == ["PodFailurePolicy"],
           "JobSet failurePolicy: expected one FailJobSet rule on reason PodFailurePolicy")


def check_ports_and_probes(job):
    """The config's listeners, the containerPorts, the Services and the probes agree."""
    server, remote = job.config["server"], job.config["remote"]
    expect(server["address"] == f"0.0.0.0:{job.ports['control']}",
           f"server.address {server['address']} vs containerPort control {job.ports['control']}")
    expect(server.get("metrics_address") == "0.0.0.0" and server["metrics_port"] == job.ports["metrics"],
           "server.metrics_address/metrics_port do not serve containerPort metrics on all interfaces")
    expect(remote["address"] == f"0.0.0.0:{job.ports['remote']}", "remote.address vs containerPort remote")
    expect(int(env_value(job.actor, "REMOTE_PORT")) == job.ports["remote"], "REMOTE_PORT vs remote port")
    for name, service in job.services().items():
        for port in service["spec"].get("ports", []):
            target = port.get("targetPort", port["port"])
            number = job.ports.get(target) if isinstance(target, str) else target
            expect(number == port["port"] == job.ports.get(port["name"]),
                   f"Service {name} port {port['name']}: {port['port']} → {target} is not the learner's")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc = job.learner.get(probe, {}).get("grpc")
        expect(grpc is not None and grpc["port"] == job.ports["control"] and not grpc.get("service"),
               f"learner {probe}: expected a grpc probe (grpc.health.v1, service \"\") on the control port")
    annotations = job.learner_pod["metadata"].get("annotations", {})
    expect(annotations.get("prometheus.io/scrape") == "true"
           and annotations.get("prometheus.io/port") == str(job.ports["metrics"])
           and annotations.get("prometheus.io/path") == "/metrics",
           f"learner pods' scrape annotations {annotations}")


def check_token_and_mounts(job, secret, dockerfile):
    """The token Secret read-only, mode 0400, the file the learners and nodes read."""
    for pod, container in ((job.learner_pod, job.learner), (job.actor_pod, job.actor)):
        who = container["name"]
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        token = [m for m in container["volumeMounts"] if "secret" in volumes[m["name"]]]
        expect(len(token) == 1 and token[0].get("readOnly") is True, f"{who}: token not mounted read-only")
        source = volumes[token[0]["name"]]["secret"]
        expect(source["secretName"] == secret["metadata"]["name"], f"{who}: mounts Secret {source['secretName']}")
        expect(source.get("defaultMode") == 0o400, f"{who}: token defaultMode {source.get('defaultMode')}")
        path = token[0]["mountPath"] + "/" + next(iter(secret["data"]))
        if who == "learner":
            expect(job.config["server"]["token_file"] == path, f"server.token_file is not {path}")
        else:
            expect(f"--token-file {path}" in container["args"][0], f"the node's --token-file is not {path}")
        for mount in container["volumeMounts"]:
            if "configMap" in volumes[mount["name"]]:
                expect(mount.get("readOnly") is True, f"{who}: config mounted writable")
        context = pod["spec"].get("securityContext", {})
        uid = context.get("runAsUser")
        expect(context.get("runAsNonRoot") is True and uid and context.get("fsGroup") == uid
               and context.get("runAsGroup") == uid, f"{who}: securityContext {context}")
        expect(re.search(rf"^USER {uid}(:{uid})?$", dockerfile, re.M),
               f"{who}: runAsUser {uid} is not the Dockerfile's USER")
        resources = container.get("resources", {})
        expect(all(resources.get(kind, {}).get(r) for kind in ("requests", "limits") for r in ("cpu", "memory")),
               f"{who}: resources {resources}: requests and limits of cpu and memory expected")
    runs = [v for v in job.learner_pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
    claim = job.objects[("PersistentVolumeClaim", runs[0]["persistentVolumeClaim"]["claimName"])]
    expect("ReadWriteMany" in claim["spec"]["accessModes"], "the run volume is not ReadWriteMany")
    mount = [m for m in job.learner["volumeMounts"] if m["name"] == runs[0]["name"]][0]
    expect(env_value(job.learner, "RUN_DIR") == mount["mountPath"], "RUN_DIR is not the run volume")


def check_pod_security(job):
    """Pod Security Standard "restricted" for every container; the run
    volume chowned only when its root is not the pod's group yet."""
    for pod, container in ((job.learner_pod, job.learner), (job.actor_pod, job.actor)):
        who = container["name"]
        pod_context = pod["spec"].get("securityContext", {})
        expect(pod_context.get("fsGroupChangePolicy") == "OnRootMismatch",
               f"{who}: pod fsGroupChangePolicy {pod_context.get('fsGroupChangePolicy')}, expected OnRootMismatch")
        context = container.get("securityContext", {})
        expect(context.get("allowPrivilegeEscalation") is False, f"{who}: allowPrivilegeEscalation is not false")
        expect(context.get("capabilities", {}).get("drop") == ["ALL"], f"{who}: capabilities do not drop ALL")
        expect(context.get("capabilities", {}).get("add") in (None, []), f"{who}: capabilities added")
        expect(context.get("seccompProfile", {}).get("type") == "RuntimeDefault",
               f"{who}: seccompProfile {context.get('seccompProfile')}, expected RuntimeDefault")
        expect(context.get("runAsNonRoot") is True, f"{who}: container runAsNonRoot is not true")
        expect(context.get("privileged") in (None, False), f"{who}: privileged")


def check_selectors(job):
    """Each Service and the Deployment select their pods and no others."""
    ranks = [job.learner_labels(r) for r in range(job.world_size)]
    actor = job.actor_labels()
    services = job.services()
    headless = services[job.subdomain]
    expect(headless["spec"].get("clusterIP") == "None" and headless["spec"].get("publishNotReadyAddresses"),
           f"Service {job.subdomain}: not headless with names published before readiness")
    for name, service in services.items():
        selector = service["spec"]["selector"]
        chosen = [r for r, labels in enumerate(ranks) if selects(selector, labels)]
        expect(not selects(selector, actor), f"Service {name} selects actor-node pods")
        want = list(range(job.world_size)) if name == job.subdomain else [0]
        expect(chosen == want, f"Service {name} selects ranks {chosen}; expected {want}")
    match = job.actors["spec"]["selector"]["matchLabels"]
    expect(selects(match, actor), "the actor Deployment's selector misses its own pods")
    expect(not any(selects(match, labels) for labels in ranks), "the actor Deployment selects learners")


def check_all(job, secret, dockerfile):
    check_ranks(job)
    check_failure_policy(job)
    check_ports_and_probes(job)
    check_token_and_mounts(job, secret, dockerfile)
    check_pod_security(job)
    check_selectors(job)
