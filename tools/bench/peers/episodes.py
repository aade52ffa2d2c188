"""One finished-episode log shared by every peer driver, and the watch that
ends a run once it is solved.

Solved as the peers measure it: the mean return of the last 100 finished
training episodes is at least 475. `Monitor` wraps one gymnasium env; each
finished episode appends "pid return steps" to the file named by
$PEERS_EPISODES, where steps is that process's env steps so far (the peers
that step envs in worker processes are counted too: O_APPEND writes of one
short line are atomic). `watch` tails the file on a thread in the driver and,
when the run is solved or its time limit passes, prints one JSON line
{solved, wall_s, env_steps, episodes, last_100_mean} and ends the process
(tools/bench-peers then ends its process group: the peer's workers too).
Wall time counts from $PEERS_T0, the moment tools/bench-peers started the
driver: imports included.
"""
import collections
import json
import os
import sys
import threading
import time

import gymnasium as gym

TARGET = 475.0
WINDOW = 100


class Monitor(gym.Wrapper):
    steps = 0  # this process's env steps, over all its envs

    def __init__(self, env):
        super().__init__(env)
        self._return = 0.0
        self._fd = os.open(os.environ["PEERS_EPISODES"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def reset(self, **kwargs):
        self._return = 0.0
        return self.env.reset(**kwargs)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        Monitor.steps += 1
        self._return += float(reward)
        if terminated or truncated:
            os.write(self._fd, f"{os.getpid()} {self._return} {Monitor.steps}\n".encode())
            self._return = 0.0
        return obs, reward, terminated, truncated, info


def make_env(name, cfg=None, env_config=None, render_mode=None):
    """A gymnasium env by name, monitored (Sample Factory's env factory signature;
    a module-level function, so its worker processes can unpickle it)."""
    return Monitor(gym.make(name, render_mode=render_mode))


class _Tally:
    """What the watch has read so far; the last 100 returns and each process's steps."""

    def __init__(self):
        self.returns = collections.deque(maxlen=WINDOW)
        self.steps_by_pid = {}
        self.episodes = 0

    def add(self, line):
        pid, ret, steps = line.split()
        self.returns.append(float(ret))
        self.steps_by_pid[pid] = int(steps)
        self.episodes += 1

    def solved(self):
        return len(self.returns) == WINDOW and sum(self.returns) / WINDOW >= TARGET

    def finish(self, solved):
        """Prints the result and ends this process; tools/bench-peers ends its group."""
        wall = time.time() - float(os.environ["PEERS_T0"])
        line = {"solved": solved, "wall_s": round(wall, 2),
                "env_steps": sum(self.steps_by_pid.values()), "episodes": self.episodes,
                "last_100_mean": round(sum(self.returns) / max(1, len(self.returns)), 1)}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        os._exit(0)


_tally = _Tally()


def _read(log, pending):
    pending += log.read()
    *lines, pending = pending.split("\n")
    for line in lines:
        _tally.add(line)
        if _tally.solved():
            _tally.finish(True)
    return pending


_ended = threading.Event()


def _watch(limit_s):
    deadline = float(os.environ["PEERS_T0"]) + limit_s
    with open(os.environ["PEERS_EPISODES"]) as log:
        pending = ""
        while time.time() < deadline and not _ended.is_set():
            pending = _read(log, pending)
            time.sleep(0.005)
        _read(log, pending)  # the newest lines first: they may solve it
        _tally.finish(False)


def watch(limit_s):
    """Starts the watch on a thread; call before the peer's training begins."""
    open(os.environ["PEERS_EPISODES"], "a").close()
    threading.Thread(target=_watch, args=(limit_s,), daemon=True).start()


def ended():
    """The peer's run ended on its own (its step budget spent) unsolved, unless
    the last lines the watch has not read yet solve it."""
    _ended.set()
    time.sleep(60)  # the watch ends the process
