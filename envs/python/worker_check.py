# Checks envs/python/pronghorn_worker.py against Gymnasium itself, in the
# interpreter that runs this file: the worker is driven as the actor drives
# it (its socket as fd 3, the spec, the memfd), and every observation,
# reward, flag and final observation must equal, bit for bit, what K plain
# Gymnasium envs give in a plain loop from the same seeds and actions.
#   python worker_check.py ENV_ID K SEED STEPS [MAX_EPISODE_STEPS]
import mmap
import os
import socket
import subprocess
import sys

import gymnasium
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def start_worker(name, k, seed, max_steps):
    ours, theirs = socket.socketpair()
    args = ('{"name": "%s", "options": {}, "num_envs": %d, "seed": %d, "max_episode_steps": %d, '
            '"parent": %d, "control_fd": %d}' % (name, k, seed, max_steps, os.getpid(),
                                             theirs.fileno()))
    child = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "pronghorn_worker.py"), args],
        pass_fds=[theirs.fileno()])
    theirs.close()
    message, fds, _, _ = socket.recv_fds(ours, 1 << 16, 1)
    line = message.decode()
    assert line.startswith("spec "), line
    return child, ours, line[5:].strip(), fds[0]


def parse_inline(text):
    import tomllib
    return tomllib.loads("v = " + text)["v"]


def views(spec, k, fd):
    memory = mmap.mmap(fd, spec["layout"]["size"])
    obs_dtype = np.uint8 if spec["obs_dtype"] == "uint8" else np.float32
    shape = (k, *spec["obs_shape"])
    discrete = spec["action_kind"] == "discrete"
    n = int(np.prod(shape))

    def at(field, dtype, count, shape_):
        return np.frombuffer(memory, dtype=dtype, count=count,
                             offset=spec["layout"][field]).reshape(shape_)

    return {
        "actions": at("actions", np.int32 if discrete else np.float32,
                      k if discrete else k * spec["action_size"],
                      (k,) if discrete else (k, spec["action_size"])),
        "obs": at("obs", obs_dtype, n, shape), "final_obs": at("final_obs", obs_dtype, n, shape),
        "rewards": at("rewards", np.float32, k, (k,)),
        "terminated": at("terminated", np.uint8, k, (k,)),
        "truncated": at("truncated", np.uint8, k, (k,)),
    }


def command(sock, word):
    sock.sendall(word.encode() + b"\n")
    reply = b""
    while not reply.endswith(b"\n"):
        reply += sock.recv(4096)
    assert reply == b"ok\n", reply


def main():
    env_id, k, seed, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    max_steps = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    child, sock, spec_text, fd = start_worker("gymnasium:" + env_id, k, seed, max_steps)
    spec = parse_inline(spec_text)
    m = views(spec, k, fd)
    kwargs = {"max_episode_steps": max_steps} if max_steps else {}
    plain = [gymnasium.make(env_id, **kwargs) for _ in range(k)]
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(plain)])
    command(sock, "reset")
    assert np.array_equal(m["obs"], obs.astype(m["obs"].dtype)), "reset"
    rng = np.random.default_rng(1)
    ends = [0, 0]
    for t in range(steps):
        if spec["action_kind"] == "discrete":
            actions = rng.integers(0, spec["action_size"], size=k).astype(np.int32)
        else:
            actions = rng.uniform(spec["action_low"], spec["action_high"],
                                  size=(k, spec["action_size"])).astype(np.float32)
        m["actions"][...] = actions
        command(sock, "step")
        for i, env in enumerate(plain):
            o, r, term, trunc, _ = env.step(actions[i])
            what = f"step {t} env {i}"
            assert m["rewards"][i] == np.float32(r), what
            assert m["terminated"][i] == term and m["truncated"][i] == trunc, what
            if term or trunc:
                assert np.array_equal(m["final_obs"][i], np.asarray(o).astype(m["obs"].dtype)), what
                ends[0 if term else 1] += 1
                o, _ = env.reset()
            assert np.array_equal(m["obs"][i], np.asarray(o).astype(m["obs"].dtype)), what
    sock.close()
    assert child.wait(timeout=10) == 0
    print(f"{env_id}: {steps} steps of {k} envs equal, {ends[0]} terminated, {ends[1]} truncated")


main()
