"""Progress bars: one way for every long loop of the project to show how far it is.

A bar is tqdm's, on stderr, so a command's stdout (its table, or its JSON under `--json`) stays
exactly what it prints. It is shown only on a terminal (tqdm's `disable=None`: logs and captured
runs get nothing) and never under the command line's global `--quiet` (`set_quiet`). Loops
that take a `progress: bool` argument (golden/lm/train.py's pattern) pass it as `enabled`.

In `edgexpert.contracts` because golden/, sim/ and synth/ all use it and may import only
downwards (tests/test_layers.py).
"""

from __future__ import annotations

import sys
from typing import Iterable, TypeVar

from tqdm import tqdm

__all__ = ["set_quiet", "is_quiet", "progress_bar"]

T = TypeVar("T")

_quiet = False


def set_quiet(quiet: bool) -> None:
    """No bar anywhere in this process (the command line's `--quiet`)."""
    global _quiet
    _quiet = bool(quiet)


def is_quiet() -> bool:
    return _quiet


def progress_bar(iterable: Iterable[T] | None = None, *, total: int | None = None,
                 desc: str | None = None, unit: str = "it", enabled: bool = True) -> tqdm:
    """A tqdm bar on stderr over `iterable` (or, without one, updated by hand with `total`),
    removed when it finishes; off when `enabled` is False, under `--quiet`, and when stderr is
    not a terminal."""
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, leave=False,
                disable=True if (_quiet or not enabled) else None)
