"""The files that hold a trained EAGLE head (golden/decoding/eagle/: storage, apart from the head
and its training): eagle.safetensors and meta.json, next to the checkpoint they draft for and
tied to it by its weights' hash.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file

from ....contracts.errors import InputError
from ...lm.checkpoint import bundled_checkpoint_dir, save_meta, save_tensors, weights_sha256
from ...lm.model import MoEModel
from .head import EagleHead, EagleSettings

__all__ = ["EAGLE_VERSION", "EagleError", "bundled_eagle_dir", "save_eagle", "load_eagle"]

#: meta.json's format version (`load_eagle` accepts this one only)
EAGLE_VERSION = 1


class EagleError(InputError):
    """The draft head's files are missing, malformed, or belong to another checkpoint."""


def bundled_eagle_dir() -> Path:
    """The bundled head sits next to the checkpoint it drafts for."""
    return bundled_checkpoint_dir() / "eagle"


def save_eagle(head: EagleHead, meta: dict, out: Path) -> Path:
    """eagle.safetensors and meta.json in `out`: the wall time (`train_seconds`) is left out
    (it does not reproduce the head), the checkpoint trained on is kept by its hash."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().float().contiguous() for k, v in head.state_dict().items()}
    if head.vocab is not None:
        tensors["vocab"] = head.vocab.contiguous()
    save_tensors(tensors, out / "eagle.safetensors")
    save_meta(meta, out / "meta.json")
    return out


def load_eagle(model: MoEModel, path: Path | None = None) -> tuple[EagleHead, dict]:
    """The head in `path` (default: the bundled one), checked against `model`."""
    path = Path(path) if path is not None else bundled_eagle_dir()
    meta_file, weights_file = path / "meta.json", path / "eagle.safetensors"
    for f in (meta_file, weights_file):
        if not f.is_file():
            raise EagleError(f"no eagle draft head: {f} is missing (run `edgexpert draft train "
                             "--install`)")
    try:
        meta = json.loads(meta_file.read_text())
        raw = dict(meta["settings"])
        settings = EagleSettings(**{**raw, "fused": tuple(raw["fused"])})
        expected = meta["checkpoint_sha256"]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise EagleError(f"{meta_file} is malformed ({type(exc).__name__}: {exc}): accepted the "
                         "JSON `edgexpert draft train` writes") from None
    if meta.get("eagle_version") != EAGLE_VERSION:
        raise EagleError(f"{meta_file} has eagle_version {meta.get('eagle_version')!r}: accepted "
                         f"{EAGLE_VERSION}")
    actual = weights_sha256(model)
    if actual != expected:
        raise EagleError(f"{path} holds a draft head trained for checkpoint {expected[:12]}..., "
                         f"not this model ({actual[:12]}...): retrain it with `edgexpert draft "
                         "train --install`")
    try:
        tensors = load_file(str(weights_file))
        vocab = tensors.pop("vocab", None)
        head = EagleHead(model, settings, vocab)
        head.load_state_dict(tensors)
    except (SafetensorError, OSError, RuntimeError) as exc:
        first = str(exc).splitlines()[0]
        raise EagleError(f"{weights_file} does not hold the head {meta_file} describes: "
                         f"{first}") from None
    return head.eval(), meta
