# The user's env as a vector env, for an env worker (pronghorn_worker.py,
# which imports this module; both are compiled into Pronghorn and handed to
# the user's interpreter, envs/python_worker.cpp): made from env.name and
# env.options with Gymnasium's SAME_STEP autoreset (Gymnasium's ids,
# EnvPool's tasks, a user's callable), described as the spec Pronghorn reads
# (core/env_spec.h), its time limit, an ended episode's info numbers, the
# packages it loaded, and each env's seed. Nothing else: the protocol, the
# shared memory and the steps are pronghorn_worker.py's.
import os
import sys


def env_seed(seed, i):
    """Env i's Gymnasium seed: distinct for every (actor seed < 2^43, i < 2^20)."""
    return ((seed << 20) + i) & (2**63 - 1)


class Refused(Exception):
    """Something the user named cannot be hosted: exit 2 (usage)."""


def parse_name(name):
    """("gymnasium", id), ("envpool", task) or ("python", "module:callable")."""
    kind, _, rest = name.partition(":")
    if kind not in ("gymnasium", "envpool", "python") or not rest:
        raise Refused(f"env.name = {name!r}: expected \"gymnasium:<id>\", \"envpool:<task>\" "
                      f"or \"python:<module>:<callable>\"")
    if kind == "python" and rest.count(":") != 1:
        raise Refused(f"env.name = {name!r}: expected \"python:<module>:<callable>\"")
    return kind, rest


class EnvPoolVector:
    """EnvPool's envs as a SAME_STEP vector env. EnvPool resets an ended env
    on its next step (it returns the final observation first); stepping just
    the ended envs once more (env_id) gives their first observations, so no
    transition is lost or made up. EnvPool seeds at creation: env i gets
    pool_seed + i."""

    def __init__(self, task, k, seed, first, options, max_episode_steps):
        import envpool
        import numpy as np

        kwargs = dict(options)
        if max_episode_steps > 0:
            kwargs["max_episode_steps"] = max_episode_steps
        self.np, self.num_envs = np, k
        self.pool = envpool.make(task, env_type="gymnasium", num_envs=k,
                                 seed=envpool_seed(seed) + first, **kwargs)
        self.single_observation_space = self.pool.observation_space
        self.single_action_space = self.pool.action_space
        config = getattr(self.pool, "config", {}) or {}
        self.max_episode_steps = int(config.get("max_episode_steps", 0) or 0)
        self.spec = self.pool.spec  # its reward_threshold

    def reset(self, seed=None):
        obs, info = self.pool.reset()
        return obs, info

    def step(self, actions):
        np = self.np
        obs, rewards, terminated, truncated, step_info = self.pool.step(actions)
        ended = np.flatnonzero(np.logical_or(terminated, truncated))
        info = {}
        if len(ended):
            final = np.empty(self.num_envs, dtype=object)
            final[ended] = list(obs[ended])
            mask = np.zeros(self.num_envs, dtype=bool)
            mask[ended] = True
            # The ended step's info, as Gymnasium's SAME_STEP vector envs give it.
            # arrays over all K envs, no masks: episode_value reads row i.
            info = {"final_obs": final, "_final_obs": mask, "final_info": step_info,
                    "_final_info": mask}
            obs = obs.copy()
            first, _, _, _, again = self.pool.step(actions[ended], env_id=ended.astype(np.int32))
            obs[again["env_id"]] = first
        return obs, rewards, terminated, truncated, info


def envpool_seed(seed):
    """The pool seed of an actor's env 0: EnvPool takes a C int and gives env
    i of a pool seed + i; env i of the actor gets envpool_seed(seed) + i, i <
    2^20, whichever worker holds it."""
    return (seed << 20) % (2**31 - 2**20)


def takes_c_int_seeds(name, options):
    """Whether a Gymnasium id's vector entry point (ale-py's, whose C++ takes
    its seeds as C ints, as EnvPool's) steps the envs."""
    return (name.startswith("gymnasium:")
            and options.get("vectorization_mode") == "vector_entry_point")


def make_vector(name, options, k, max_episode_steps, seed, first):
    """A Gymnasium vector env of k envs with SAME_STEP autoreset."""
    try:
        import gymnasium
    except ImportError as e:
        raise Refused(f"cannot import gymnasium ({e}): install it in this interpreter "
                      f"(pip install gymnasium), or name one that has it") from e
    from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv
    from gymnasium.wrappers import TimeLimit

    kind, rest = parse_name(name)
    if kind == "envpool":
        try:
            return EnvPoolVector(rest, k, seed, first, options, max_episode_steps)
        except ImportError as e:
            raise Refused(f"env.name = {name!r}: cannot import envpool: {e}") from e
        except (KeyError, ValueError, TypeError) as e:
            raise Refused(f"env.name = {name!r}: {type(e).__name__}: {e}") from e
    if kind == "gymnasium":
        if rest.startswith("ALE/"):
            try:
                import ale_py  # noqa: F401  (registers the ALE/ ids)
            except ImportError as e:
                raise Refused(f"env.name = {name!r}: cannot import ale_py ({e}): install it in "
                              f"this interpreter (pip install ale-py)") from e
        kwargs = dict(options)
        # make_vec's own argument: "vector_entry_point" steps the library's own
        # vector env (ale-py's AtariVectorEnv, its preprocessing in C++).
        mode = kwargs.pop("vectorization_mode", "sync")
        if mode not in ("sync", "vector_entry_point"):
            raise Refused(f"env.options.vectorization_mode = {mode!r}: expected \"sync\" or "
                          f"\"vector_entry_point\" (env.workers are the processes)")
        if max_episode_steps > 0:
            if mode != "sync":
                raise Refused(f"env.name = {name!r}: env.max_episode_steps cannot cut the "
                              f"episodes of a vector entry point; set its own option")
            kwargs["max_episode_steps"] = max_episode_steps
        try:
            if mode == "sync":
                return gymnasium.make_vec(
                    rest, num_envs=k, vectorization_mode="sync",
                    vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **kwargs)
            vec = gymnasium.make_vec(rest, num_envs=k, vectorization_mode=mode,
                                     autoreset_mode=AutoresetMode.SAME_STEP, **kwargs)
        except (gymnasium.error.Error, TypeError, ValueError) as e:
            raise Refused(f"env.name = {name!r}: {type(e).__name__}: {e}") from e
        if vec.metadata.get("autoreset_mode") != AutoresetMode.SAME_STEP:
            raise Refused(f"env.name = {name!r}: its vector entry point does not autoreset "
                          f"SAME_STEP; use env.options.vectorization_mode = \"sync\"")
        return vec
    module_name, _, attribute = rest.partition(":")
    try:
        module = __import__(module_name, fromlist=["_"])
    except ImportError as e:
        raise Refused(f"env.name = {name!r}: cannot import {module_name}: {e}") from e
    factory = getattr(module, attribute, None)
    if not callable(factory):
        raise Refused(f"env.name = {name!r}: {module_name} has no callable {attribute}")

    def one():
        env = factory(**options)
        if max_episode_steps > 0 and not isinstance(env, VectorEnv):
            env = TimeLimit(env, max_episode_steps)
        return env

    first = one()
    if isinstance(first, VectorEnv):
        mode = first.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if mode != AutoresetMode.SAME_STEP or first.num_envs != k:
            raise Refused(
                f"env.name = {name!r}: a vector env must autoreset SAME_STEP and hold "
                f"{k} envs, env.num_envs / env.workers / env.splits (it has "
                f"{first.num_envs}, {mode}); or return one env and let Pronghorn make the vector")
        if max_episode_steps > 0:
            raise Refused(f"env.name = {name!r}: env.max_episode_steps cannot cut the episodes "
                          f"of a vector env; set the time limit where the callable makes it")
        return first
    made = [first]

    def each():
        return made.pop() if made else one()

    return SyncVectorEnv([each] * k, autoreset_mode=AutoresetMode.SAME_STEP)


def time_limit(vec, options, max_episode_steps):
    """The time limit the envs run under; 0: none known."""
    if max_episode_steps > 0:
        return max_episode_steps
    if isinstance(options.get("max_episode_steps"), int):
        return options["max_episode_steps"]
    if getattr(vec, "max_episode_steps", 0):  # EnvPool's
        return int(vec.max_episode_steps)
    env_spec = getattr(vec, "spec", None)
    if getattr(env_spec, "max_episode_steps", None):
        return int(env_spec.max_episode_steps)
    envs = getattr(vec, "envs", None) or []  # a SyncVectorEnv of the user's envs
    return int(getattr(envs[0], "_max_episode_steps", 0) or 0) if envs else 0


def describe(vec, name):
    """The spec Pronghorn reads (core/env_spec.h), or Refused."""
    import numpy as np
    from gymnasium import spaces

    obs_space, action_space = vec.single_observation_space, vec.single_action_space
    if (not isinstance(obs_space, spaces.Box) or not 1 <= len(obs_space.shape) <= 4
            or min(obs_space.shape) < 1):
        raise Refused(f"{name}: observation space {obs_space}: expected a Box of rank 1 to 4, "
                      f"no dimension 0 (Dict, Tuple, MultiDiscrete, Text: not supported yet)")
    if obs_space.dtype == np.uint8:
        obs_dtype = "uint8"
    elif obs_space.dtype in (np.float32, np.float64):
        obs_dtype = "float32"  # float64 observations arrive as float32
    else:
        raise Refused(f"{name}: observation space {obs_space}: expected float32, float64 or "
                      f"uint8 values")
    spec = {"obs_dtype": obs_dtype, "obs_shape": list(obs_space.shape)}
    if isinstance(action_space, spaces.Discrete):
        spec.update(action_kind="discrete", action_size=int(action_space.n),
                    action_start=int(action_space.start))
    elif (isinstance(action_space, spaces.Box) and len(action_space.shape) == 1
          and action_space.shape[0] >= 1):
        # float32, rounded inward: every float32 action within them is in the space
        low64 = np.asarray(action_space.low, dtype=np.float64)
        high64 = np.asarray(action_space.high, dtype=np.float64)
        with np.errstate(over="ignore"):
            low, high = low64.astype(np.float32), high64.astype(np.float32)
        low = np.where(low < low64, np.nextafter(low, np.float32(np.inf)), low)
        high = np.where(high > high64, np.nextafter(high, np.float32(-np.inf)), high)
        if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(low < high)):
            raise Refused(f"{name}: action space {action_space}: expected finite bounds, low "
                          f"below high, within float32")
        spec.update(action_kind="continuous", action_size=int(action_space.shape[0]),
                    action_low=low.tolist(), action_high=high.tolist())
    else:
        raise Refused(f"{name}: action space {action_space}: expected Discrete or a Box of "
                      f"rank 1 (MultiDiscrete, Tuple, Dict: not supported yet)")
    env_spec = getattr(vec, "spec", None)
    spec["target_return"] = float(getattr(env_spec, "reward_threshold", None) or 0)
    return spec


def episode_value(final_info, key, i, env):
    """The number at `key` ("a/b": info["a"]["b"]) of env i's ended-step info
    (a vector info: arrays over the envs, each with its "_name" mask); NaN
    where env i's has none or holds None. ValueError, naming the actor's
    `env`, for what is not a number."""
    import numbers

    import numpy as np

    node = final_info
    for part in key.split("/"):
        if not isinstance(node, dict) or part not in node:
            return float("nan")
        mask = node.get("_" + part)
        if mask is not None and not mask[i]:
            return float("nan")
        node = node[part]
    if isinstance(node, np.ndarray):
        node = node[i] if node.ndim >= 1 else node
    if isinstance(node, np.ndarray) and node.size == 1:
        node = node.reshape(())[()]
    if node is None:
        return float("nan")
    if isinstance(node, (bool, np.bool_, numbers.Real)):
        return float(node)
    raise ValueError(f"info[{key!r}] of env {env} at its episode's end is {type(node).__name__}, "
                     f"expected a number (env.episode_info)")


def env_packages(before):
    """The versions of the distributions the env loaded (the files of its
    modules that were not loaded at `before`, a set of module names, looked
    up in each installed distribution's RECORD), and Python's major.minor:
    what a node or rank must have the same of. A module of no installed
    distribution (a user's folder on PYTHONPATH) names none. A distribution
    whose metadata cannot be read is left out, not fatal."""
    import platform
    from importlib import metadata

    loaded = {}  # a new module's file -> its module
    for name in set(sys.modules) - before:
        path = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(path, str):
            loaded[os.path.abspath(path)] = name
    packages = {"python": ".".join(platform.python_version_tuple()[:2])}
    for dist in metadata.distributions():
        try:
            name, version = dist.metadata["Name"], dist.version
            if not isinstance(name, str) or not isinstance(version, str) or name in packages:
                continue
            if any(os.path.abspath(dist.locate_file(f)) in loaded for f in dist.files or ()):
                packages[name] = version
        except Exception as e:  # a broken dist-info of something else: said, not fatal
            print(f"pronghorn env worker: skipping a distribution's metadata: {e}",
                  file=sys.stderr)
    return packages
