"""What the SB3 benchmarks share: the RL Zoo's hyperparameter files, SB3's
venv on Gymnasium 1.x, and timing a run (tools/bench-mujoco,
tools/bench-lunarlander)."""
import os
import re
import resource
import subprocess
import sys
import time

ZOO = "rl_zoo3==2.9.2"
# SB3 on Gymnasium 1.x, with Gymnasium, Box2D and MuJoCo as
# tools/test-python-requirements.txt pins them, so Pronghorn's envs and SB3's
# are the same; torch is whatever SB3 brings from PyPI.
SB3_PACKAGES = ["stable-baselines3==2.9.2", "gymnasium[box2d,mujoco]==1.4.0", "mujoco==3.3.7",
                "pyyaml"]


def schedule(value):
    """The Zoo's "lin_X": X falling linearly to 0 over training; any other value as it is."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress_remaining: progress_remaining * start
    return value


def fetch_ppo_yml(pip, zoo, target):
    """Writes the Zoo's hyperparams/ppo.yml, read from the wheel `zoo` (e.g.
    "rl_zoo3==2.9.2") that `pip` (a command, a list) downloads, to `target`;
    rl_zoo3 itself is not installed. Raises RuntimeError saying why not."""
    import tempfile
    import zipfile
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(pip + ["download", "-q", "--no-deps", zoo, "-d", scratch],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{zoo}: {(done.stderr.strip().splitlines() or [''])[-1][:300]}")
        wheel = next(f for f in os.listdir(scratch) if f.endswith(".whl"))
        with zipfile.ZipFile(os.path.join(scratch, wheel)) as z, open(target, "wb") as out:
            out.write(z.read("rl_zoo3/hyperparams/ppo.yml"))


def last_line(text):
    return (text.strip().splitlines() or [""])[-1][:300]


def pinned_venv(venv, packages, tool, label, also=""):
    """The interpreter of the venv at `venv`, created (or kept when every
    pinned package of `packages` is installed, extras aside, and `also`, a
    name, is among them) and given `packages`. `tool` names the caller in the
    one line it exits with when pip fails; `label` the venv in what it prints."""
    python = os.path.join(venv, "bin", "python")
    pip = [python, "-m", "pip"]
    frozen = subprocess.run(pip + ["freeze"], capture_output=True, text=True).stdout \
        if os.path.exists(python) else ""
    frozen = frozen.replace("_", "-").lower()  # pip writes stable_baselines3
    pinned = [re.sub(r"\[.*\]", "", pkg) for pkg in packages if "==" in pkg]  # no extras
    if not all(pkg.lower() in frozen for pkg in pinned) or also not in frozen:
        print(f"# {label}: installing {' '.join(packages)} into {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        done = subprocess.run(pip + ["install", "-q", *packages], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"{tool}: pip install: {last_line(done.stderr)}")
    return python


def sb3_venv(venv, tool):
    """SB3's venv at `venv` with SB3_PACKAGES (created, or kept when its pins
    match) and the Zoo's ppo.yml beside it: (python, yml). `tool` names the
    caller in the one line it exits with when pip fails."""
    python = pinned_venv(venv, SB3_PACKAGES, tool, "sb3", also="box2d")
    pip = [python, "-m", "pip"]
    yml = os.path.join(venv, f"zoo-ppo-{ZOO.split('==')[1]}.yml")
    if not os.path.exists(yml):
        try:
            fetch_ppo_yml(pip, ZOO, yml)
        except RuntimeError as why:
            sys.exit(f"{tool}: {why}")
    return python, yml


def timed(command, **kwargs):
    """Runs a command to its end: (CompletedProcess, wall s, CPU s of its
    process tree, the 1-minute load average at its start)."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    done = subprocess.run(command, capture_output=True, text=True, **kwargs)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done, time.time() - start, cpu, load


def test_python(root, tool):
    """The test venv's interpreter (tools/setup-test-python creates it): it
    has Gymnasium, Box2D and MuJoCo at the pinned versions."""
    done = subprocess.run([os.path.join(root, "tools", "setup-test-python")],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{tool}: tools/setup-test-python: {last_line(done.stderr)}")
    return done.stdout.strip()
