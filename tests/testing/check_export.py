"""What tests/export_test.cpp asks of an export, in the test venv's Python.

    check_export.py observations EXPORT OBS T K    random observations for the
                                                   policy (and episode starts)
    check_export.py compare EXPORT OBS DUMP        the NumPy loader and
                                                   onnxruntime against the
                                                   binary's outputs (DUMP)
    check_export.py play EXPORT ENV_ID EPISODES    the greedy policy in
                                                   Gymnasium's own env

Each prints one line of results (key=value) and exits 1 on a failed check.
The expected numbers are the binary's (`pronghorn eval --dump-forward`); the
safetensors files are read and written by the `safetensors` package itself.
"""

import json
import os
import sys

import numpy as np
import onnx
import onnxruntime
from safetensors.numpy import load_file, save_file

# Float32 outputs of the same network computed two ways agree to this:
# |ours − binary| ≤ ATOL + RTOL·|binary| (the binary's tanh is a fast
# approximation, within 4e-7 relative; sums run in another order).
ATOL = 1e-5
RTOL = 1e-4


def load_policy(export):
    sys.path.insert(0, export)
    import pronghorn_policy  # the copy the export wrote
    return pronghorn_policy.load(export)


def observations(export, obs_path, steps, envs):
    with open(os.path.join(export, "policy.json")) as f:
        d = json.load(f)["observation"]
    rng = np.random.default_rng(7)
    shape = (steps, envs, *d["shape"])
    if d["dtype"] == "uint8":
        obs = rng.integers(0, 256, shape, dtype=np.uint8)
    else:
        obs = (rng.standard_normal(shape) * 2).astype(np.float32)
    start = np.zeros((steps, envs), np.uint8)
    if steps > 1:
        start[1, ::2] = 1  # every other env starts a new episode at step 1
    save_file({"obs": obs, "episode_start": start}, obs_path)
    print(f"obs={shape} dtype={obs.dtype}")


def worst(name, ours, expected, failures):
    ours = np.asarray(ours, np.float64)
    expected = np.asarray(expected, np.float64)
    if ours.shape != expected.shape:
        failures.append(f"{name}: shape {ours.shape} against {expected.shape}")
        return 0.0
    excess = np.abs(ours - expected) - (ATOL + RTOL * np.abs(expected))
    if (excess > 0).any():
        failures.append(f"{name}: off by up to {np.abs(ours - expected).max():.3g}")
    return float(np.abs(ours - expected).max())


def compare(export, obs_path, dump_path):
    inputs = load_file(obs_path)
    expected = load_file(dump_path)
    policy = load_policy(export)
    weights = load_file(os.path.join(export, "model.safetensors"))  # the library's reading
    failures = []
    for name, w in weights.items():
        if not np.array_equal(w, policy.weights[name]):
            failures.append(f"weights: {name} reads differently in the loader")

    model = onnx.load(os.path.join(export, "policy.onnx"))
    onnx.checker.check_model(model, full_check=True)
    session = onnxruntime.InferenceSession(os.path.join(export, "policy.onnx"),
                                           providers=["CPUExecutionProvider"])
    outputs = [o.name for o in session.get_outputs()]

    obs, start = inputs["obs"], inputs["episode_start"]
    steps, envs = obs.shape[:2]
    numpy_state = policy.initial_state(envs)
    onnx_state = policy.initial_state(envs)
    errors = {}
    for t in range(steps):
        keep = (1 - start[t].astype(np.float32)).reshape(-1, 1)
        feed = {"obs": obs[t]}
        if numpy_state is not None:
            numpy_state = (numpy_state[0] * keep, numpy_state[1] * keep)
            onnx_state = (onnx_state[0] * keep, onnx_state[1] * keep)
            feed["h_in"], feed["c_in"] = onnx_state
        ours = policy.forward(obs[t], numpy_state)
        numpy_state = ours["state"]
        run = dict(zip(outputs, session.run(None, feed)))
        if numpy_state is not None:
            onnx_state = (run["h_out"], run["c_out"])
            ours["h_out"], ours["c_out"] = numpy_state
        for name in expected:
            for who, got in (("numpy", ours), ("onnx", run)):
                error = worst(f"{who} {name} step {t}", got[name], expected[name][t], failures)
                errors[f"{who}_{name}"] = max(errors.get(f"{who}_{name}", 0.0), error)
    print(" ".join(f"{k}={v:.3g}" for k, v in sorted(errors.items())) +
          f" outputs={','.join(sorted(expected))} steps={steps}")
    for f in failures[:10]:
        print("FAIL", f)
    return 1 if failures else 0


def play(export, env_id, episodes):
    import gymnasium
    policy = load_policy(export)
    env = gymnasium.make(env_id)
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=1000 + episode)
        state, total, done = None, 0.0, False
        while not done:
            action, state = policy.predict(obs.astype(np.float32), state)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    print(f"mean_return={np.mean(returns):.1f} min_return={np.min(returns):.1f} episodes={episodes}")
    return 0


def main():
    command, export = sys.argv[1], sys.argv[2]
    if command == "observations":
        observations(export, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return 0
    if command == "compare":
        return compare(export, sys.argv[3], sys.argv[4])
    if command == "play":
        return play(export, sys.argv[3], int(sys.argv[4]))
    raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    sys.exit(main())
