"""Checkpoint files of the golden model: a folder with

- `model.safetensors`: the float weights, stored in float16 (the shipped checkpoint must stay
  under 16 MB); loaded back as float32;
- `tokenizer.json`: the BPE vocabulary;
- `meta.json`: model config, training config and seed, corpus manifest hash, held-out loss of the
  stored weights, the bigram baseline, the command that produced it.

Bundled metadata holds only what reproduces the artefact (hashes, settings, relative names,
versions): no absolute path of the machine that wrote it and no wall time (a run reports those,
the files do not keep them). The bundled checkpoint lives in golden/checkpoint/
(`bundled_checkpoint_dir()`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save
from tokenizers import Tokenizer

from ...contracts.config import (MODEL_NAMES, ConfigError, ModelConfig, build_dataclass,
                                 checkpoint_folder)
from ...contracts.errors import InputError
from .model import MoEModel
from .tokenizer import load_tokenizer

__all__ = ["CheckpointError", "Checkpoint", "save_checkpoint", "load_checkpoint",
           "bundled_checkpoint_dir", "load_bundled", "META_VERSION", "weights_sha256", "save_tensors", "save_meta"]

META_VERSION = 1


class CheckpointError(InputError):
    """A checkpoint folder is missing a file, or a file does not match the model it describes."""


@dataclass
class Checkpoint:
    model: MoEModel
    tokenizer: Tokenizer
    meta: dict
    path: Path


def bundled_checkpoint_dir(name: str = MODEL_NAMES[0]) -> Path:
    """The bundled model `name`'s folder (`model.name`): golden/checkpoint/ for the first,
    golden/checkpoint_<name>/ for the others."""
    if name not in MODEL_NAMES:
        raise InputError(f"model {name!r} is not a bundled model: accepted {', '.join(MODEL_NAMES)}")
    golden = Path(__file__).resolve().parents[1]
    return golden / checkpoint_folder(name)


def load_bundled(cfg: ModelConfig) -> "Checkpoint":
    """The bundled checkpoint `cfg.name` names, checked to have `cfg`'s shape: a configuration
    that changes the shape without naming the model trained at it is refused in one line."""
    ckpt = load_checkpoint(bundled_checkpoint_dir(cfg.name))
    differ = [f"model.{f.name} = {getattr(cfg, f.name)!r} (the checkpoint has "
              f"{getattr(ckpt.model.cfg, f.name)!r})" for f in dataclasses.fields(cfg)
              if f.name != "name" and getattr(cfg, f.name) != getattr(ckpt.model.cfg, f.name)]
    if differ:
        raise InputError(f"the bundled {cfg.name} model does not have this shape: {differ[0]}; "
                         f"accepted the shape it was trained at, or --checkpoint DIR for another")
    return ckpt


def weights_sha256(model: MoEModel, dtype: torch.dtype = torch.float16, shapes: bool = False) -> str:
    """SHA-256 over the model's parameters, names sorted: per parameter its name (with its shape
    when `shapes`), then its values as `dtype`. The default is the weights as a checkpoint stores
    them (float16): the same for a model and the model loaded back from its checkpoint, whatever
    folder it lives in.

    Bundled metadata records two forms, and their values must not change: a pruned checkpoint's
    parent (`prune.parent_weights_sha256`, the default form) and the model a prefill encoder was
    trained for (`model_sha256` in encoder.json: float32 with shapes, golden/policies/prefill.py)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update((f"{name}:{tuple(tensor.shape)}" if shapes else name).encode())
        digest.update(tensor.detach().to(dtype).contiguous().numpy().tobytes())
    return digest.hexdigest()


def save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> Path:
    """Write a safetensors file whose mode follows the umask like every other file written here
    (0644 under the usual 022); safetensors' own save_file creates it 0600. The bytes are those
    save_file writes."""
    path = Path(path)
    path.write_bytes(save(tensors))
    return path


def save_meta(meta: dict, path: Path) -> Path:
    """A trained part's metadata as sorted, indented JSON, without its wall time
    (`train_seconds`): the same training writes the same file."""
    stored = {key: value for key, value in meta.items() if key != "train_seconds"}
    Path(path).write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n")
    return Path(path)


def save_checkpoint(model: MoEModel, tokenizer: Tokenizer, meta: dict, out: Path) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {name: p.detach().to(torch.float16).contiguous() for name, p in model.state_dict().items()}
    save_tensors(tensors, out / "model.safetensors")
    tokenizer.save(str(out / "tokenizer.json"))
    meta = {"meta_version": META_VERSION, "model": dataclasses.asdict(model.cfg), **meta}
    (out / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out


def load_checkpoint(path: Path | None = None) -> Checkpoint:
    """Load a checkpoint folder (default: the bundled one), validating every file."""
    path = Path(path) if path is not None else bundled_checkpoint_dir()
    for name in ("model.safetensors", "tokenizer.json", "meta.json"):
        if not (path / name).is_file():
            raise CheckpointError(f"checkpoint {path} has no {name}")
    try:
        meta = json.loads((path / "meta.json").read_text())
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path / 'meta.json'} is not valid JSON: {exc}") from None
    if meta.get("meta_version") != META_VERSION:
        raise CheckpointError(f"{path / 'meta.json'} has meta_version {meta.get('meta_version')!r}: "
                              f"accepted {META_VERSION}")
    try:
        cfg = build_dataclass(ModelConfig, meta.get("model"), "model")
    except ConfigError as exc:
        raise CheckpointError(f"{path / 'meta.json'}: {exc}") from None
    try:
        tensors = load_file(str(path / "model.safetensors"))
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{path / 'model.safetensors'} is not a safetensors file: {exc}") from None
    model = MoEModel(cfg)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{path / 'model.safetensors'} does not match the model in meta.json: "
                              f"missing {missing[:3]}, unexpected {extra[:3]}")
    for name, ref in expected.items():
        if tuple(tensors[name].shape) != tuple(ref.shape):
            raise CheckpointError(f"{path / 'model.safetensors'}: {name} has shape "
                                  f"{tuple(tensors[name].shape)}, the config needs {tuple(ref.shape)}")
    model.load_state_dict({k: v.to(torch.float32) for k, v in tensors.items()})
    model.eval()
    tokenizer = load_tokenizer(path / "tokenizer.json")
    if tokenizer.get_vocab_size() != cfg.vocab_size:
        raise CheckpointError(f"{path / 'tokenizer.json'} has {tokenizer.get_vocab_size()} tokens, "
                              f"the model {cfg.vocab_size}")
    return Checkpoint(model, tokenizer, meta, path)
