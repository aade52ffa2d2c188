"""Rendered Kubernetes containers run as local processes (tests/deploy_k8s_test.py).

What a kubelet would give a container, made here from the rendered objects:
its environment (values, $(VAR) expansion, fieldRef from the pod's name,
labels and annotations, resourceFieldRef of its CPU limit), its hostname (a
`hostname` command first on PATH, as in the pod's UTS namespace), its mounts
(a ConfigMap or Secret as the kubelet lays one out: files under a timestamped
directory, `..data` pointing at it, each key a link through `..data`, with the
volume's defaultMode; a PersistentVolumeClaim as a directory every pod shares)
and its command and args run as they are. Only what cannot exist here is
substituted, by the caller: mount paths become local directories (`localize`),
DNS names and fixed ports become 127.0.0.1 and free ports.
"""

import base64
import math
import os
import random
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field


@dataclass
class Pod:
    """What the API server and the Job/JobSet controllers give a pod. An
    Indexed Job's pod is named <hostname>-<random suffix>; its hostname, set
    by the Job controller, has no suffix."""

    name: str
    hostname: str
    labels: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)


def random_suffix():
    """The 5 characters a generated pod name ends with."""
    return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))


def hostname_command(directory, hostname):
    """A `hostname` on PATH that prints the pod's hostname, as the image's
    does in the pod's UTS namespace; returns the folder to put first on PATH."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "hostname")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho {hostname}\n")
    os.chmod(path, 0o755)
    return directory


def free_port():
    """A TCP port nothing listens on now (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def expand(text, env):
    """Kubernetes' $(VAR) expansion of command, args and env values: $(NAME)
    becomes NAME's value when NAME is defined, $$ is a literal $, anything
    else stays as written."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if text.startswith("$(", i):
            end = text.find(")", i + 2)
            if end != -1 and text[i + 2 : end] in env:
                out.append(env[text[i + 2 : end]])
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def cpu_quantity(text):
    """A CPU quantity ("2", "500m", "1.5") in cores."""
    if text.endswith("m"):
        return int(text[:-1]) / 1000
    return float(text)


def field_value(path, pod):
    """A downward-API fieldRef of this pod; an unknown field is an error."""
    match = re.fullmatch(r"metadata\.(annotations|labels)\['([^']+)'\]", path)
    if match:
        source = pod.annotations if match.group(1) == "annotations" else pod.labels
        if match.group(2) not in source:
            raise ValueError(f"fieldRef {path}: the pod has no such {match.group(1)[:-1]}")
        return source[match.group(2)]
    if path == "metadata.name":
        return pod.name
    raise ValueError(f"fieldRef {path}: not emulated here")


def container_env(container, pod):
    """The container's environment from its env list, in order."""
    env = {}
    for item in container.get("env", []):
        name = item["name"]
        if "value" in item:
            env[name] = expand(str(item["value"]), env)
        elif "fieldRef" in item.get("valueFrom", {}):
            env[name] = field_value(item["valueFrom"]["fieldRef"]["fieldPath"], pod)
        elif "resourceFieldRef" in item.get("valueFrom", {}):
            ref = item["valueFrom"]["resourceFieldRef"]
            if ref["resource"] != "limits.cpu":
                raise ValueError(f"resourceFieldRef {ref['resource']}: not emulated here")
            limit = cpu_quantity(str(container["resources"]["limits"]["cpu"]))
            divisor = cpu_quantity(str(ref.get("divisor", "1")))
            env[name] = str(math.ceil(limit / divisor))  # the kubelet rounds up
        else:
            raise ValueError(f"env {name}: no value or supported valueFrom")
    return env


def lay_out_volume(directory, files, mode):
    """A ConfigMap or Secret volume as the kubelet writes it (atomic writer)."""
    stamp = "..2026_01_01_00_00_00.000000000"
    os.makedirs(os.path.join(directory, stamp))
    os.symlink(stamp, os.path.join(directory, "..data"))
    for key, content in files.items():
        path = os.path.join(directory, stamp, key)
        with open(path, "wb") as f:
            f.write(content)
        os.chmod(path, mode)
        os.symlink(os.path.join("..data", key), os.path.join(directory, key))


def volume_files(volume, objects, transform):
    """The files a configMap or secret volume holds: (files, mode)."""
    if "configMap" in volume:
        source = volume["configMap"]
        cm = objects[("ConfigMap", source["name"])]
        files = {k: transform(source["name"], k, v).encode() for k, v in cm["data"].items()}
        return files, source.get("defaultMode", 0o644)
    source = volume["secret"]
    secret = objects[("Secret", source["secretName"])]
    files = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    return files, source.get("defaultMode", 0o644)


def mount_volumes(pod_spec, container, objects, pod_dir, shared_dir, transform):
    """Local directories for the container's mounts: {mountPath: local path}.
    A PersistentVolumeClaim is a directory of shared_dir that every pod
    shares; an emptyDir at /dev/shm stays /dev/shm (this machine has one).
    ConfigMap text goes through transform(name, key, text), then has the
    mount paths it names made local."""
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    mounts = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "persistentVolumeClaim" in volume:
            mounts[mount["mountPath"]] = os.path.join(shared_dir, volume["persistentVolumeClaim"]["claimName"])
        elif not ("emptyDir" in volume and mount["mountPath"] == "/dev/shm"):
            mounts[mount["mountPath"]] = os.path.join(pod_dir, "volumes", mount["name"])
    localize = localizer(mounts)
    for mount in container.get("volumeMounts", []):
        volume, local = volumes[mount["name"]], mounts.get(mount["mountPath"])
        if local is None:
            continue
        if "configMap" in volume or "secret" in volume:
            files, mode = volume_files(
                volume, objects, lambda name, key, text: localize(transform(name, key, text)))
            lay_out_volume(local, files, mode)
        else:
            os.makedirs(local, exist_ok=True)
    return mounts


def localizer(mounts):
    """A function that rewrites a container's mount paths in text to local ones."""
    ordered = sorted(mounts.items(), key=lambda kv: -len(kv[0]))

    def localize(text):
        for path, local in ordered:
            text = re.sub(re.escape(path) + r"(?=/|\"|'|\s|$)", local, text)
        return text

    return localize


class Process:
    """One container's command as a process group of its own; stop() ends
    the group whatever state it is in."""

    def __init__(self, argv, env, log_path, cwd):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.popen = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)

    def exit_code(self):
        """None while it runs; the exit status, or 128 + signal as a kubelet says."""
        code = self.popen.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code

    def wait(self, deadline):
        while self.exit_code() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.exit_code()

    def signal_main(self, sig):
        """sig to the container's main process only, as the kubelet sends a
        stop (SIGTERM) to PID 1; its children see only what it passes on."""
        try:
            os.kill(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self, sig):
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self):
        """SIGTERM (a clean stop), then SIGKILL for the whole group after 10 s."""
        if self.exit_code() is None:
            self.kill(signal.SIGTERM)
            self.wait(time.monotonic() + 10)
        self.kill(signal.SIGKILL)  # also any child left in the group
        self.popen.wait()
        self.log.close()

    def output(self):
        self.log.flush()
        with open(self.log_path, errors="replace") as f:
            return f.read()


# --- What a probe and a scraper see of a running container ------------------

NO_GRPC = "not asked: python3-grpcio is not installed (skipped)"


def health_status(port):
    """grpc.health.v1.Health/Check of service "" on 127.0.0.1:port: the status
    number (1 SERVING, 2 NOT_SERVING), None when it did not answer, or NO_GRPC
    when it cannot ask (that check is then skipped, saying so). The
    request is empty and the reply one varint field, so no generated code."""
    try:
        import grpc
    except ImportError:
        return NO_GRPC
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.enable_http_proxy", 0)]) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b, response_deserializer=lambda b: b)
        try:
            reply = check(b"", timeout=2)
        except grpc.RpcError:
            return None
    return reply[1] if reply[:1] == b"\x08" else 0


def metrics(port):
    """127.0.0.1:port/metrics (a scraper's view), or "" when it did not answer."""
    import urllib.request
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            return reply.read().decode()
    except OSError:
        return ""


def node_unrolls(metrics_ports, name):
    """The unrolls the learner ranks committed from actor node `name`, from
    their /metrics (0: none yet)."""
    pattern = rf'^pronghorn_remote_node_unrolls_total{{[^}}]*remote_node="{re.escape(name)}"[^}}]*}} (\S+)$'
    return sum(int(float(m)) for port in metrics_ports for m in re.findall(pattern, metrics(port), re.M))
