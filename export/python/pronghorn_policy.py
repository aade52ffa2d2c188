"""A policy exported by `pronghorn export`, run with NumPy alone.

    import pronghorn_policy
    policy = pronghorn_policy.load("exported/")   # the export's directory
    action, state = policy.predict(obs)           # greedy; deterministic=False samples

obs is one observation or a batch [batch, *shape] of the env's dtype. A
recurrent policy returns its core's state: pass it back with the next
observation, and episode_start (bool [batch]) where an episode begins.

The network is rebuilt from policy.json (its layers, in order, with the names
of their parameters) and model.safetensors (the parameters), in float32 as
Pronghorn runs it. Pronghorn's tanh is a fast approximation: outputs agree
with Pronghorn's to about 1e-5 (docs/export.md states the tolerance tested).
"""

import json
import os
import struct

import numpy as np

FORMAT = "pronghorn-policy"
FORMAT_VERSIONS = (1, 2)  # 2: observation["normalize"] or "value_torso" may be present

_DTYPES = {"F32": np.dtype("<f4"), "U8": np.dtype("u1")}


def read_safetensors(path):
    """The tensors of a safetensors file, by name (read-only NumPy arrays);
    ValueError naming the file and the tensor for a file not of the format."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (length,) = struct.unpack("<Q", data[:8])
    if 8 + length > len(data):
        raise ValueError(f"{path}: its header length {length} runs past the file")
    header = json.loads(data[8:8 + length])
    body = memoryview(data)[8 + length:]
    tensors, ranges = {}, []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry.get("dtype") not in _DTYPES:
            raise ValueError(f"{path}: tensor {name} has dtype {entry.get('dtype')}")
        dtype = _DTYPES[entry["dtype"]]
        shape = [int(d) for d in entry["shape"]]
        begin, end = (int(x) for x in entry["data_offsets"])
        if not 0 <= begin <= end <= len(body):
            raise ValueError(f"{path}: tensor {name} lies at bytes [{begin}, {end}) of "
                             f"{len(body)}")
        if end - begin != int(np.prod(shape)) * dtype.itemsize:
            raise ValueError(f"{path}: tensor {name} of shape {shape} does not fill its "
                             f"{end - begin} bytes")
        tensors[name] = np.frombuffer(body[begin:end], dtype=dtype).reshape(shape)
        ranges.append((begin, end, name))
    at = 0
    for begin, end, name in sorted(ranges):
        if begin != at:
            raise ValueError(f"{path}: tensor {name} starts at byte {begin}, not {at} "
                             f"(ranges overlap or leave a gap)")
        at = end
    if at != len(body):
        raise ValueError(f"{path}: {len(body) - at} bytes after the last tensor")
    return tensors


def _windows(x, kernel, stride, padding, fill):
    """[N, C, H, W] → [N, C, H', W', k, k]: the kernel's windows at stride."""
    p = padding
    padded = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    view = np.lib.stride_tricks.sliding_window_view(padded, (kernel, kernel), axis=(2, 3))
    return view[:, :, ::stride, ::stride]


def _conv(x, weight, bias, kernel, stride, padding):
    n = x.shape[0]
    out = weight.shape[0]
    cols = _windows(x, kernel, stride, padding, 0.0)  # [N, C, H', W', k, k]
    h, w = cols.shape[2], cols.shape[3]
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * w, -1)
    y = cols @ weight.reshape(out, -1).T + bias
    return y.reshape(n, h, w, out).transpose(0, 3, 1, 2)


def _sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


class Policy:
    """The exported policy: forward() gives the network's outputs, predict() actions."""

    def __init__(self, directory):
        with open(os.path.join(directory, "policy.json")) as f:
            self.description = json.load(f)
        d = self.description
        if d.get("format") != FORMAT or d.get("format_version") not in FORMAT_VERSIONS:
            raise ValueError(
                f"{directory}/policy.json: format {d.get('format')!r} version "
                f"{d.get('format_version')!r}; this loader reads {FORMAT!r} versions "
                f"{', '.join(map(str, FORMAT_VERSIONS))}")
        self.weights = read_safetensors(os.path.join(directory, d["weights"]))
        obs = d["observation"]
        self.obs_shape = tuple(obs["shape"])
        self.obs_dtype = np.dtype(obs["dtype"])
        self.action = d["action"]
        self.core = d.get("core")

    def initial_state(self, batch):
        """Zeros (h, c) [batch, H] for a recurrent core; None for a feed-forward policy."""
        if self.core is None:
            return None
        zeros = np.zeros((batch, self.core["hidden"]), np.float32)
        return zeros, zeros.copy()

    def _param(self, name):
        return self.weights[name]

    def _torso(self, x, layers=None):
        for layer in self.description["torso"] if layers is None else layers:
            kind, name = layer["kind"], layer["name"]
            if kind == "linear":
                x = x @ self._param(name + ".weight").T + self._param(name + ".bias")
            elif kind == "conv":
                x = _conv(x, self._param(name + ".weight"), self._param(name + ".bias"),
                          layer["kernel"], layer["stride"], layer["padding"])
            elif kind == "max_pool":
                windows = _windows(x, layer["kernel"], layer["stride"], layer["padding"], -np.inf)
                x = windows.max(axis=(-2, -1))
            elif kind == "residual":
                r = np.maximum(x, 0)
                for conv in ("first", "second"):
                    r = _conv(r, self._param(f"{name}.{conv}.weight"),
                              self._param(f"{name}.{conv}.bias"), layer["kernel"],
                              layer["stride"], layer["padding"])
                    if conv == "first":
                        r = np.maximum(r, 0)
                x = x + r
            elif kind == "relu":
                x = np.maximum(x, 0)
            elif kind == "tanh":
                x = np.tanh(x)
            elif kind == "flatten":
                x = x.reshape(x.shape[0], -1)
            else:
                raise ValueError(f"policy.json: unknown torso layer kind {kind!r}")
        return x

    def _batch(self, obs):
        obs = np.asarray(obs)
        single = obs.shape == self.obs_shape
        if single:
            obs = obs[None]
        if obs.shape[1:] != self.obs_shape:
            raise ValueError(f"observations of shape {obs.shape}; the policy takes "
                             f"{self.obs_shape} or [batch, *{self.obs_shape}]")
        return obs, single

    def forward(self, obs, state=None):
        """The network on a batch [batch, *shape]: a dict of "logits" (discrete)
        or "mean" and "log_std" (continuous) [batch, A], "value" [batch], and
        "state" (h, c) after this step (recurrent) or None."""
        obs, _ = self._batch(obs)
        d = self.description["observation"]
        x = obs.astype(np.float32) / np.float32(d["divide"]) if d["divide"] != 1 else obs.astype(np.float32)
        norm = d.get("normalize")
        if norm is not None:  # the running statistics the policy was trained under, frozen
            scale = np.sqrt(self._param(norm["var"]) + np.float32(norm["epsilon"]))
            clip = np.float32(norm["clip"])
            x = np.clip((x - self._param(norm["mean"])) / scale, -clip, clip)
        if d["flatten"]:
            x = x.reshape(x.shape[0], -1)
        value_x = self._torso(x, self.description["value_torso"]) if "value_torso" in self.description else None
        x = self._torso(x)
        if self.core is not None:
            h, c = state if state is not None else self.initial_state(x.shape[0])
            name = self.core["name"]
            gates = (x @ self._param(name + ".weight_ih").T + self._param(name + ".bias_ih") +
                     h @ self._param(name + ".weight_hh").T + self._param(name + ".bias_hh"))
            i, f, g, o = np.split(gates, 4, axis=1)  # torch's order: input, forget, cell, output
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            x, state = h, (h, c)
        heads = self.description["heads"]
        out = {"state": state if self.core is not None else None}
        policy = x @ self._param(heads["policy"] + ".weight").T + self._param(heads["policy"] + ".bias")
        if value_x is None:  # the value head on the policy's features
            value_x = x
        value = value_x @ self._param(heads["value"] + ".weight").T + self._param(heads["value"] + ".bias")
        out["value"] = value[:, 0]
        if self.action["kind"] == "continuous":
            out["mean"] = policy
            out["log_std"] = np.broadcast_to(self._param(heads["log_std"]), policy.shape)
        else:
            out["logits"] = policy
        return out

    def predict(self, obs, state=None, episode_start=None, deterministic=True, rng=None):
        """Actions for one observation or a batch, and the core's next state
        (None for a feed-forward policy). Greedy by default: the most likely
        action, or the Gaussian's mean; else sampled (rng: a NumPy Generator).
        Continuous actions are clipped to the env's bounds, as Pronghorn's
        actors step them."""
        batch, single = self._batch(obs)
        if self.core is not None:
            if state is None:
                state = self.initial_state(batch.shape[0])
            if episode_start is not None:
                keep = 1.0 - np.asarray(episode_start, np.float32).reshape(-1, 1)
                state = (state[0] * keep, state[1] * keep)
        out = self.forward(batch, state)
        rng = rng if rng is not None else np.random.default_rng()
        if self.action["kind"] == "continuous":
            actions = out["mean"]
            if not deterministic:
                actions = actions + np.exp(out["log_std"]) * rng.standard_normal(actions.shape)
            low = np.asarray(self.action["low"], np.float32)
            high = np.asarray(self.action["high"], np.float32)
            actions = np.clip(actions, low, high).astype(np.float32)
        else:
            logits = out["logits"].astype(np.float64)
            if deterministic:
                actions = logits.argmax(axis=1)
            else:
                p = np.exp(logits - logits.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                actions = np.array([rng.choice(len(row), p=row) for row in p])
        return (actions[0] if single else actions), out["state"]


def load(directory):
    """The policy `pronghorn export --out DIRECTORY` wrote."""
    return Policy(directory)
