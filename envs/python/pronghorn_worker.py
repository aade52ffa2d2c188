# An env worker: steps K envs of the user's own Python (Gymnasium's, or a
# callable of theirs) as one vector per call, for one actor of Pronghorn
# (envs/python_env.h starts it, in the interpreter env.python names). It
# loads no LibTorch and no Pronghorn library: its only imports are the
# standard library, NumPy, pronghorn_vector.py (its other half: making and
# describing the env) and what the env itself imports.
#
# Talk, over the socket the actor passes as fd 3, one line each way:
#   worker: "spec {…}" (a TOML inline table) once the env exists, with the
#           shared memory (a memfd) passed beside it (SCM_RIGHTS); or
#           "error <line>" and exit 2
#   actor:  "reset" | "step" | "step S"; worker: "ok" | "error <line>"
#           (traceback on stderr)
#   actor:  "render"; worker: "frame H W" with env 0's frame, RGB uint8
#           [H, W, 3], in a memfd passed beside it; or "error <line>"
# The memory holds, at the offsets the spec's "layout" gives: actions [K, ...]
# (int32, or float32 [K, D]), obs [K, obs...], rewards float32 [K],
# terminated and truncated uint8 [K], final_obs [K, obs...], episode_info
# float32 [K, N]: for a row whose episode ended, the N numbers of the ended
# step's info the actor asked for (env.episode_info), NaN where it had none.
#
# Splits (env.splits): the K envs are S vector envs of K/S, rows [s·K/S,
# (s+1)·K/S) of the memory. "step S" steps split S alone, so the actor acts
# for one split while this process steps another (double buffering);
# "step" and "reset" take every split in turn.
#
# Semantics: Pronghorn's, which are Gymnasium's SAME_STEP autoreset: a row
# whose episode ended returns the next episode's first observation, and the
# ended episode's last observation goes to final_obs. Seeds: the actor's env
# i (row j of split s here, i = first_envs[s] + j) gets env_seed(seed, i) at
# the first reset, EnvPool's and a vector entry point's (ale-py's)
# envpool_seed(seed) + i (both in pronghorn_vector.py); later resets and
# autoresets continue each env's generator.
import json
import os
import socket
import sys
import traceback

from pronghorn_vector import (Refused, describe, env_packages, env_seed, envpool_seed,
                              episode_value, make_vector, takes_c_int_seeds, time_limit)


def one_line(text):
    """`text` as one line of the protocol."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def last_line(e):
    """An exception as its type and its message's last line."""
    return (f"{type(e).__name__}: {e}".splitlines() or [type(e).__name__])[-1]


def field(what, env):
    """A field's name in an error: "rewards", "final_obs of env 3"."""
    return what if env is None else f"{what} of env {env}"


class Memory:
    """The shared memory and the NumPy views of it."""

    def __init__(self, spec, k):
        import mmap

        import numpy as np

        obs_dtype = np.uint8 if spec["obs_dtype"] == "uint8" else np.float32
        obs_shape = (k, *spec["obs_shape"])
        discrete = spec["action_kind"] == "discrete"
        action_shape = (k,) if discrete else (k, spec["action_size"])
        fields = [("actions", np.int32 if discrete else np.float32, action_shape),
                  ("obs", obs_dtype, obs_shape), ("rewards", np.float32, (k,)),
                  ("terminated", np.uint8, (k,)), ("truncated", np.uint8, (k,)),
                  ("final_obs", obs_dtype, obs_shape),
                  ("episode_info", np.float32, (k, len(spec["episode_info"])))]
        layout, offset = {}, 0
        for field, dtype, shape in fields:
            offset = (offset + 63) // 64 * 64  # each field on its own cache lines
            layout[field] = offset
            offset += int(np.prod(shape)) * np.dtype(dtype).itemsize
        layout["size"] = max(offset, 1)
        self.layout = layout
        self.fd = os.memfd_create("pronghorn-env", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, layout["size"])
        # The actor reads this memory: nothing here may shrink it under it.
        import fcntl
        fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        self.map = mmap.mmap(self.fd, layout["size"])
        for field, dtype, shape in fields:
            view = np.frombuffer(self.map, dtype=dtype, count=int(np.prod(shape)),
                                 offset=layout[field]).reshape(shape)
            setattr(self, field, view)


class Split:
    """One vector env of the worker and its rows of the memory (NumPy views)."""

    def __init__(self, vec, memory, rows, first):
        self.vec, self.first = vec, first  # first: the actor's env index of row 0
        for name in ("actions", "obs", "rewards", "terminated", "truncated", "final_obs",
                     "episode_info"):
            setattr(self, name, getattr(memory, name)[rows])


class Worker:
    def __init__(self, vecs, spec, k, seed, firsts, c_int_seeds):
        import numpy as np

        self.np = np
        self.seed = seed
        self.c_int_seeds = c_int_seeds  # takes_c_int_seeds()
        self.memory = Memory(spec, k)
        n = k // len(vecs)
        self.splits = [Split(vec, self.memory, slice(s * n, (s + 1) * n), first)
                       for s, (vec, first) in enumerate(zip(vecs, firsts))]
        self.start = spec.get("action_start", 0)
        self.episode_info = spec["episode_info"]
        self.seeded = False

    def reset(self):
        for split in self.splits:
            # One int: Gymnasium's vector envs seed their env i with it + i, which
            # gives env_seed(seed, first + i) (ale-py's takes no list); a vector
            # entry point's seeds are C ints, as EnvPool's.
            first_seed = envpool_seed(self.seed) + split.first if self.c_int_seeds \
                else env_seed(self.seed, split.first)
            obs, _ = split.vec.reset(seed=None if self.seeded else first_seed)
            self.put("observations", split.obs, obs)
        self.seeded = True

    def step(self, s):
        np, m = self.np, self.splits[s]
        actions = m.actions + self.start if self.start else m.actions
        obs, rewards, terminated, truncated, info = m.vec.step(actions.copy())
        self.put("observations", m.obs, obs)
        self.put("rewards", m.rewards, rewards)
        self.put("terminated", m.terminated, terminated)
        self.put("truncated", m.truncated, truncated)
        done = np.logical_or(m.terminated, m.truncated)
        if not done.any():
            return  # most steps: nothing ended
        ended = np.flatnonzero(done)
        has_final = info.get("_final_obs")
        final = info.get("final_obs")
        if has_final is None and isinstance(final, np.ndarray) and final.dtype != object:
            has_final = done  # ale-py's: every row, no mask
        for i in ended:
            if has_final is None or not has_final[i]:
                raise ValueError(f"env {m.first + i} ended but the vector env gave no final_obs "
                                 f"for it (not a SAME_STEP autoreset?)")
            self.put("final_obs", m.final_obs[i], final[i], env=m.first + i)
        if self.episode_info:
            final_info = info.get("final_info", {})
            for i in ended:
                for j, key in enumerate(self.episode_info):
                    m.episode_info[i, j] = episode_value(final_info, key, i, m.first + i)

    def render(self, control):
        """Sends env 0's frame (`pronghorn eval --video`)."""
        np = self.np
        frames = self.splits[0].vec.render()
        frame = frames[0] if isinstance(frames, (tuple, list)) else frames
        if frame is None:
            raise ValueError("the env drew no frame: it draws rgb_array frames when made with "
                             "render_mode='rgb_array' (env.options.render_mode)")
        frame = np.ascontiguousarray(frame)
        if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"the env drew a frame of {frame.dtype} {list(frame.shape)}; a video "
                             f"takes uint8 [H, W, 3] RGB frames")
        import fcntl
        fd = os.memfd_create("pronghorn-frame", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            data = memoryview(frame.tobytes())
            while data:
                data = data[os.write(fd, data):]
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
            socket.send_fds(control, [f"frame {frame.shape[0]} {frame.shape[1]}\n".encode()], [fd])
        finally:
            os.close(fd)

    def put(self, what, into, value, env=None):
        """`value` into `into`, of exactly its shape and a kind that casts safely
        (float64 to float32, bool to uint8; never floats into uint8). On every
        step: the checks are NumPy's own (copyto's casting rule), and the
        error's words are made only for an error."""
        np = self.np
        if not isinstance(value, np.ndarray):
            value = np.asarray(value)
        if value.shape != into.shape:
            raise ValueError(f"the env returned {field(what, env)} of shape {value.shape}, "
                             f"expected {into.shape}")
        try:
            np.copyto(into, value, casting="same_kind")
        except TypeError:
            raise ValueError(f"the env returned {field(what, env)} of {value.dtype}, expected "
                             f"{into.dtype}") from None


def toml_inline(value):
    """`value` (a dict, list, str, bool, int or float) as TOML text."""
    if isinstance(value, dict):
        # Keys quoted: a distribution's name may hold a dot ("zope.interface").
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_inline(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_inline(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)  # finite: checked where it matters
    if isinstance(value, int):
        return str(value)
    return json.dumps(str(value))  # a TOML basic string for what a spec holds


class Commands:
    """The actor's commands, a line each. Polled for 2 ms before sleeping on
    them, as the actor polls for replies (envs/python_env.h, kPollFor): a
    process woken from sleep can take longer to run again than a step."""

    POLL_S = 0.002

    def __init__(self, control):
        self.control, self.buffer = control, b""

    def next(self):
        import time

        poll_until = time.perf_counter() + self.POLL_S
        while b"\n" not in self.buffer:
            if time.perf_counter() < poll_until:
                try:
                    data = self.control.recv(4096, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    os.sched_yield()
                    continue
            else:
                data = self.control.recv(4096)
            if not data:
                return None  # the actor is gone
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


def serve(control, worker):
    commands = Commands(control)
    failed = None  # the error line, once the env raised
    while True:
        command = commands.next()
        if command is None:
            return
        if failed is not None:
            # The actor may have sent a split's step before it read the error:
            # each command in flight gets the env's line, not a closed socket.
            reply(control, failed)
            continue
        try:
            if command == "reset":
                worker.reset()
            elif command == "step":
                for s in range(len(worker.splits)):
                    worker.step(s)
            elif command.startswith("step ") and command[5:].isdigit() \
                    and int(command[5:]) < len(worker.splits):
                worker.step(int(command[5:]))
            elif command == "render":
                worker.render(control)  # its own reply
                continue
            else:
                raise RuntimeError(f"unknown command {command!r}")
            ok = True
        except Exception as e:  # the env's own: the job ends naming it
            traceback.print_exc()
            failed, ok = f"error {one_line(last_line(e))}\n".encode(), False
        if not reply(control, b"ok\n" if ok else failed):
            return


def reply(control, line):
    """Sends `line`; False when the actor is gone (it ended first, with its own
    line: nothing to add)."""
    try:
        control.sendall(line)
        return True
    except (BrokenPipeError, ConnectionResetError):
        return False


def watch_parent(parent):
    """Die with the actor, even while an env step never returns."""
    import ctypes
    import threading
    import time

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)

    def loop():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=loop, daemon=True).start()


def main(argv):
    args = json.loads(argv[0])
    if args["options"].get("render_mode") == "rgb_array":
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # frames off screen, no display asked
    watch_parent(args["parent"])
    control = socket.socket(fileno=args["control_fd"])
    loaded_before = set(sys.modules)
    try:
        firsts = args["first_envs"]  # one a split
        vecs = [make_vector(args["name"], args["options"], args["num_envs"] // len(firsts),
                            args["max_episode_steps"], args["seed"], first) for first in firsts]
        spec = describe(vecs[0], args["name"])
        spec["max_episode_steps"] = time_limit(vecs[0], args["options"],
                                               args["max_episode_steps"])
        spec["episode_info"] = list(args["episode_info"])
        if args.get("packages"):  # the start check's: other nodes and ranks compare them
            spec["packages"] = env_packages(loaded_before)
        worker = Worker(vecs, spec, args["num_envs"], args["seed"], firsts,
                        takes_c_int_seeds(args["name"], args["options"]))
    except Refused as e:
        control.sendall(f"error {one_line(e)}\n".encode())
        return 2
    except Exception as e:
        traceback.print_exc()
        control.sendall(f"error {one_line(args['name'])}: {one_line(last_line(e))}\n".encode())
        return 2
    spec["layout"] = worker.memory.layout
    socket.send_fds(control, [f"spec {toml_inline(spec)}\n".encode()], [worker.memory.fd])
    serve(control, worker)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
