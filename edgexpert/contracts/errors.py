"""Error classes the command line knows: each message is one line that names the problem."""

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad input from the user: a configuration value, a checkpoint, a trace or prompt file.
    The command line prints the message and exits with status 2."""
