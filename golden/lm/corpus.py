"""The training corpus: the Python standard library's own source files.

Every machine of this kind has them without a download (the stdlib path from sysconfig, about
34 MB of .py files), so training is repeatable anywhere the same Python is installed. The split is
by file and deterministic: a file is held out when the first byte of the SHA-256 of its relative
path is below HELDOUT_FRACTION * 256, so the split does not depend on the order of a directory
listing or on which other files exist.

The manifest (relative path, size, SHA-256 of the content, split) is hashed; the checkpoint's
metadata records that hash, and a different stdlib is reported as such instead of silently
giving other numbers.
"""

from __future__ import annotations

import hashlib
import sysconfig
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HELDOUT_FRACTION", "CorpusFile", "Corpus", "load_corpus", "stdlib_root"]

HELDOUT_FRACTION = 0.05


@dataclass(frozen=True)
class CorpusFile:
    path: str       # relative to the stdlib root, '/'-separated
    size: int
    sha256: str
    heldout: bool


@dataclass(frozen=True)
class Corpus:
    root: Path
    files: tuple[CorpusFile, ...]
    skipped: tuple[str, ...]  # files that are not valid UTF-8

    @property
    def manifest_hash(self) -> str:
        digest = hashlib.sha256()
        for f in self.files:
            digest.update(f"{f.path}\t{f.size}\t{f.sha256}\t{int(f.heldout)}\n".encode())
        return digest.hexdigest()

    def texts(self, heldout: bool) -> list[str]:
        """The files of one split, in manifest order."""
        return [(self.root / f.path).read_text(encoding="utf-8")
                for f in self.files if f.heldout == heldout]

    def count(self, heldout: bool) -> tuple[int, int]:
        """(files, bytes) of one split."""
        chosen = [f for f in self.files if f.heldout == heldout]
        return len(chosen), sum(f.size for f in chosen)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _is_heldout(relpath: str) -> bool:
    return hashlib.sha256(relpath.encode()).digest()[0] < HELDOUT_FRACTION * 256


def load_corpus(root: Path | None = None) -> Corpus:
    """Every .py file under `root` (default: the stdlib), site-packages excluded."""
    root = Path(root) if root is not None else stdlib_root()
    if not root.is_dir():
        raise FileNotFoundError(f"corpus root {root} is not a folder")
    files, skipped = [], []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("site-packages/") or "/site-packages/" in rel or not path.is_file():
            continue
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            # a few test files carry other encodings on purpose; a text model trained on UTF-8
            # leaves them out, and the manifest says so
            skipped.append(rel)
            continue
        files.append(CorpusFile(rel, len(data), hashlib.sha256(data).hexdigest(), _is_heldout(rel)))
    if not files:
        raise FileNotFoundError(f"corpus root {root} holds no .py files")
    return Corpus(root, tuple(files), tuple(skipped))
