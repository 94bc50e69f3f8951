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
import threading
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

from tqdm import tqdm

__all__ = ["set_quiet", "is_quiet", "progress_bar", "phases"]

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


#: seconds between redraws of a phase bar: its elapsed time keeps moving during a phase that
#: reports nothing (a Verilator build of the top takes minutes)
PHASE_TICK_S = 1.0


@contextmanager
def phases(command: str, total: int) -> Iterator[Callable[[str], None]]:
    """For a command whose phases each run long without a loop to count (prepare vectors,
    build, simulate): yields `enter(text)`, which writes a line `command [k/total] text` and
    keeps `command [k/total], MM:SS elapsed` below it, redrawn every PHASE_TICK_S seconds.
    Like `progress_bar`: stderr, only on a terminal, nothing under --quiet."""
    bar = progress_bar(total=total, desc=command, unit="phase")
    # no rate or time left: phases are few and unequal, so tqdm's estimates would mislead
    bar.bar_format = "{desc}, {elapsed} elapsed"
    stop = threading.Event()
    ticker = None

    def tick() -> None:
        while not stop.wait(PHASE_TICK_S):
            bar.refresh()

    if not bar.disable:
        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
    entered = 0

    def enter(text: str) -> None:
        nonlocal entered
        if entered:
            bar.update(1)
        entered += 1
        if not bar.disable:
            # the line names the phase; the bar stays short, so its elapsed time fits the width
            bar.write(f"{command} [{entered}/{total}] {text}", file=sys.stderr)
            bar.set_description_str(f"{command} [{entered}/{total}]")

    try:
        yield enter
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
        bar.close()
