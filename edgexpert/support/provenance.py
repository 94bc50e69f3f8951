"""Where a result came from: the command that wrote it, the settings it ran with (those that
differ from the bundled defaults), whether it was a `--quick` run, when, and at which commit.

The record sits beside each result file (`summary.json` -> `summary.run.json`), not inside it,
so that the same run gives the same result bytes (results compare byte for byte across reruns,
cli/common.py `write_result`) while `edgexpert report` can still say which run each section
shows. One command is one process: the command line begins the record (`begin`), loading the
configuration adds its settings (`note_settings`), and every result written adds the record
beside it (`record`).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

__all__ = ["begin", "note_settings", "record", "read", "sidecar", "describe"]

_run: dict = {}

#: the repository the sources were installed from (editable install): its commit names the code
_REPO = Path(__file__).resolve().parents[2]


def _commit() -> str | None:
    """The source tree's commit, with "+dirty" when tracked files differ from it; None outside
    a git checkout (an installed wheel)."""
    def git(*cmd: str) -> str:
        return subprocess.run(["git", "-C", str(_REPO), *cmd], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        head = git("rev-parse", "--short=10", "HEAD")
        return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return None


def begin(command_line: str, quick: bool) -> None:
    """Start this process's record: the command as typed, --quick or not, the time (UTC) and
    the commit."""
    _run.clear()
    _run.update({"command": command_line, "quick": bool(quick),
                 "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "commit": _commit(), "settings": []})


def note_settings(changed: list[str]) -> None:
    """The settings the command ran with, as `key=value` for each that differs from the
    bundled defaults (cli/common.py `changed_settings`)."""
    if _run:
        _run["settings"] = list(changed)


def sidecar(path: Path) -> Path:
    """The record's file beside a result: `summary.json` -> `summary.run.json`."""
    return path.with_name(f"{path.stem}.run.json")


def record(path: Path) -> None:
    """Write this process's record beside the result at `path` (nothing when no command began
    one: a library call writes results without a command line)."""
    if _run:
        sidecar(path).write_text(json.dumps(
            {**_run, "written_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            indent=2, sort_keys=True))


def read(path: Path) -> dict | None:
    """The record beside the result at `path`, or None (a result written before records were
    kept, or by a library call)."""
    try:
        return json.loads(sidecar(path).read_text())
    except (OSError, ValueError):
        return None


def describe(path: Path) -> str:
    """One sentence for a report: which command wrote the result at `path`, when, with which
    settings, at which commit."""
    run = read(path)
    if run is None:
        return (f"Provenance of {path.name}: not recorded (written before runs were recorded, "
                "or outside the command line).")
    settings = ", ".join(f"`{s}`" for s in run["settings"]) or "the bundled defaults"
    return (f"Run: `{run['command']}` ({'--quick' if run['quick'] else 'full, not --quick'}), "
            f"written {run['written_utc'].replace('T', ' ').replace('Z', ' UTC')}, settings: "
            f"{settings}; code at commit {run['commit'] or 'unknown (not a git checkout)'}.")
