"""What the SB3 drivers share of the RL Zoo's hyperparameter files."""


def schedule(value):
    """The Zoo's "lin_X": X falling linearly to 0 over training; any other value as it is."""
    if isinstance(value, str) and value.startswith("lin_"):
        start = float(value[4:])
        return lambda progress_remaining: progress_remaining * start
    return value
