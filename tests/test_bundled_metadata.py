"""Bundled metadata holds only what reproduces an artefact (hashes, settings, relative names,
versions): no JSON file shipped with the package records an absolute path of the machine that
wrote it, nor a wall time (golden/lm/checkpoint.py)."""

import json
from pathlib import Path, PurePosixPath, PureWindowsPath

import pytest

import edgexpert

#: the folders that install as edgexpert's packages (setup.py's ROOTS)
REPO = Path(edgexpert.__file__).resolve().parent.parent
PACKAGE_FOLDERS = ("edgexpert", "hw", "golden", "sim", "synth", "cocotb_tests")
#: a tokenizer's vocabulary and merges are BPE strings ("/" is a token), not metadata
NOT_METADATA = {"tokenizer.json"}
#: keys whose value is a run's wall time
WALL_TIME_KEYS = {"train_seconds", "train_tokens_per_second"}


def bundled_metadata() -> list[Path]:
    return sorted(path for folder in PACKAGE_FOLDERS for path in (REPO / folder).rglob("*.json")
                  if path.name not in NOT_METADATA and ".venv" not in path.parts)


def is_absolute_path(word: str) -> bool:
    """A POSIX path from the root with at least one named part ("/" alone is a division sign in
    a formula), or a Windows path with a drive and a root."""
    posix, windows = PurePosixPath(word), PureWindowsPath(word)
    return (posix.is_absolute() and len(posix.parts) > 1) or bool(windows.drive and windows.root)


def offending(value, where: str = "") -> list[str]:
    """Every place in a JSON value holding an absolute path (the whole string or one of its
    words, e.g. in a recorded command) or a wall time."""
    if isinstance(value, dict):
        return [f"{where}.{key}: a wall time" for key in value if key in WALL_TIME_KEYS] + \
            [hit for key, item in value.items() for hit in offending(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [hit for i, item in enumerate(value) for hit in offending(item, f"{where}[{i}]")]
    if isinstance(value, str) and any(is_absolute_path(w) for w in [value, *value.split()]):
        return [f"{where} = {value!r}: an absolute path"]
    return []


def test_the_walk_finds_the_bundled_metadata():
    names = {path.relative_to(REPO).as_posix() for path in bundled_metadata()}
    assert {"golden/checkpoint/meta.json", "golden/checkpoint/encoder.json",
            "golden/checkpoint_pruned/meta.json", "golden/prompts.json"} <= names


@pytest.mark.parametrize("path", bundled_metadata(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_bundled_metadata_holds_no_absolute_path_or_wall_time(path):
    assert offending(json.loads(path.read_text())) == []


def test_the_check_finds_what_it_refuses():
    meta = {"corpus": {"root": "/root/.pyenv/versions/3.11.7/lib/python3.11"},
            "prune": {"parent": "C:\\work\\checkpoint", "train_seconds": 409.2},
            "command": "edgexpert prune --checkpoint /tmp/x", "files": ["test/a.py"],
            "target": "||MoE(h)||^2 / mean", "train_tokens_per_second": 3312}
    assert sorted(offending(meta)) == [
        ".command = 'edgexpert prune --checkpoint /tmp/x': an absolute path",
        ".corpus.root = '/root/.pyenv/versions/3.11.7/lib/python3.11': an absolute path",
        ".prune.parent = 'C:\\\\work\\\\checkpoint': an absolute path",
        ".prune.train_seconds: a wall time", ".train_tokens_per_second: a wall time"]
