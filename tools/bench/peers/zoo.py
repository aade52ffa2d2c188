"""What the SB3 drivers share of the RL Zoo's hyperparameter files."""


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
    import os
    import subprocess
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
