"""`edgexpert prune`: EdgeXpert's fine-grained pruning mask m with recovery training.

The mask is `pruning_masks(parent, sparsity)` (MASK_RULE): per expert, the `sparsity` share of
input channels with the least weight-column L2 norm (gate and up together for GATE_UP, down's
columns for DOWN); EdgeXpert's policy (golden/policies/edgexpert.py) weighs channel importance by
it. The pruned columns are set to zero and held there while the rest of the model is fine-tuned on
the training split with the training loss (golden/lm/train.py): their gradients are masked, so
AdamW's moments for them stay zero and neither the update nor the weight decay can move them. Short
run, small peak rate, linear warm-up over a tenth of the steps and cosine decay; deterministic for
`train.seed` (it seeds the data order).

The pruned checkpoint records its parent by `weights_sha256` (golden/lm/checkpoint.py: the float16
weights as stored), so that a pruned model is never paired with a parent it was not pruned from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import sys
from pathlib import Path

import torch
from tqdm import tqdm

from ...contracts.config import Config
from ...contracts.errors import InputError
from ...contracts.weight_layout import Matrix
from .checkpoint import (Checkpoint, CheckpointError, load_checkpoint, save_checkpoint,
                         weights_sha256)
from .corpus import load_corpus
from .model import MoEModel
from .train import eval_windows, fit, heldout_loss, keep_freed_memory, token_streams

__all__ = ["MASK_RULE", "SPARSITY_RANGE", "bundled_pruned_dir", "pruning_masks", "apply_masks",
           "check_sparsity", "recover", "load_pruned_checkpoint"]

MASK_RULE = ("per expert, the sparsity share of input channels with the least weight-column L2 "
             "norm: gate and up together (GATE_UP), down (DOWN); pruned columns zero")
#: pruning every channel leaves nothing to recover; 0.95 is the policies' own upper bound
SPARSITY_RANGE = (0.0, 0.95)


def bundled_pruned_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "checkpoint_pruned"


def pruning_masks(model: MoEModel, sparsity: float) -> list[dict[Matrix, torch.Tensor]]:
    """EdgeXpert's fine-grained pruning mask m, per layer and matrix [experts, input channels]:
    in each expert the `sparsity` share of input channels whose weight columns have the least
    L2 norm (gate and up together for GATE_UP) is pruned (0), the rest kept (1)."""
    if not 0 <= sparsity < 1:
        raise ValueError(f"sparsity = {sparsity} is out of range: accepted [0, 1)")
    out = []
    for block in model.layers:
        moe = block.moe
        norms = {Matrix.GATE_UP: (moe.w_gate.pow(2).sum(1) + moe.w_up.pow(2).sum(1)).detach(),
                 Matrix.DOWN: moe.w_down.pow(2).sum(1).detach()}
        masks = {}
        for matrix, norm in norms.items():
            pruned = round(sparsity * norm.shape[1])
            order = torch.argsort(norm, dim=1, stable=True)
            mask = torch.ones_like(norm, dtype=torch.float64)
            mask.scatter_(1, order[:, :pruned], 0.0)
            masks[matrix] = mask
        out.append(masks)
    return out


def _column_masks(model: MoEModel, masks) -> list[tuple[torch.nn.Parameter, torch.Tensor]]:
    """(parameter, 0/1 mask broadcast over its input-channel columns) for every routed-expert
    matrix: w_gate and w_up [E, F, D] by the GATE_UP mask, w_down [E, D, F] by the DOWN mask."""
    out = []
    for block, m in zip(model.layers, masks):
        gate_up = m[Matrix.GATE_UP].to(torch.float32)[:, None, :]
        down = m[Matrix.DOWN].to(torch.float32)[:, None, :]
        out += [(block.moe.w_gate, gate_up), (block.moe.w_up, gate_up), (block.moe.w_down, down)]
    return out


@torch.no_grad()
def apply_masks(model: MoEModel, sparsity: float) -> list[tuple[torch.nn.Parameter, torch.Tensor]]:
    """Zero the pruned columns of `model` in place; returns the column masks."""
    columns = _column_masks(model, pruning_masks(model, sparsity))
    for param, mask in columns:
        param.mul_(mask)
    return columns


def check_sparsity(sparsity: float) -> float:
    """`sparsity` if `edgexpert prune` accepts it (SPARSITY_RANGE), else one InputError line."""
    lo, hi = SPARSITY_RANGE
    if not lo < sparsity <= hi:  # NaN fails this too
        raise InputError(f"sparsity = {sparsity} is out of range: accepted ({lo}, {hi}]")
    return sparsity


def recover(config: Config, sparsity: float, steps: int, lr: float, out: Path, command: str,
            parent: Path | None = None, progress: bool = True, corpus_root: Path | None = None) -> dict:
    """Prune the `parent` checkpoint (default: bundled) at `sparsity`, fine-tune it `steps` steps
    with peak rate `lr`, store the checkpoint in `out` and return its metadata with the run's
    wall time added as `prune.train_seconds` (reported, not stored: it does not reproduce the
    checkpoint). `corpus_root` replaces the standard library as the corpus (tests use a small
    one)."""
    check_sparsity(sparsity)
    if steps < 0:
        raise InputError(f"steps = {steps} is out of range: accepted integers 0..")
    if not 0 < lr <= 1:
        raise InputError(f"lr = {lr} is out of range: accepted (0, 1]")
    base = load_checkpoint(parent)  # its shape, not the config's model section, is what runs
    tc = dataclasses.replace(config.train, steps=max(steps, 1), lr=lr, warmup_steps=steps // 10)
    keep_freed_memory()
    torch.set_num_threads(tc.threads)
    torch.manual_seed(tc.seed)
    log = (lambda msg: tqdm.write(msg, file=sys.stderr)) if progress else (lambda msg: None)
    log(f"edgexpert prune: sparsity {sparsity}, seed {tc.seed}, {steps} steps of "
        f"{tc.batch_size} x {tc.seq_len} tokens, peak lr {lr}")

    corpus = load_corpus(corpus_root)
    train_ids, heldout_ids = token_streams(corpus, base.tokenizer)
    windows = eval_windows(heldout_ids, tc.seq_len, tc.eval_windows)
    model = base.model
    parent_sha = weights_sha256(model)
    loss_parent = heldout_loss(model, windows)
    columns = apply_masks(model, sparsity)
    loss_masked = heldout_loss(model, windows)
    log(f"held-out loss: parent {loss_parent:.4f}, masked {loss_masked:.4f} nats/token")

    for param, mask in columns:
        param.register_hook(lambda grad, mask=mask: grad * mask)
    seconds = fit(model, train_ids, tc, steps, progress)

    meta = {
        "seed": tc.seed, "train": dataclasses.asdict(tc) | {"steps": steps},
        # the parent and the corpus by folder name: the hashes identify them on any machine
        "prune": {"sparsity": sparsity, "mask_rule": MASK_RULE, "parent": base.path.name,
                  "parent_weights_sha256": parent_sha,
                  "parent_heldout_loss": round(loss_parent, 5),
                  "masked_heldout_loss": round(loss_masked, 5), "steps": steps},
        "corpus": {"root": corpus.root.name, "manifest_sha256": corpus.manifest_hash,
                   "train_tokens": int(len(train_ids)), "heldout_tokens": int(len(heldout_ids))},
        "tokenizer_sha256": hashlib.sha256(base.tokenizer.to_str().encode()).hexdigest(),
        "eval": {"windows": tc.eval_windows, "seq_len": tc.seq_len},
        "command": command, "torch": torch.__version__,
    }
    # evaluate the weights as stored (float16), exactly as load_checkpoint gives them back
    save_checkpoint(model, base.tokenizer, meta, out)
    loss = heldout_loss(load_checkpoint(out).model, windows)
    meta.update(heldout_loss=round(loss, 5), heldout_ppl=round(math.exp(loss), 3))
    save_checkpoint(model, base.tokenizer, meta, out)
    log(f"held-out loss after {steps} recovery steps: {loss:.4f} nats/token "
        f"(parent {loss_parent:.4f}, masked {loss_masked:.4f}); {seconds:.0f} s")
    stored = load_checkpoint(out).meta
    return {**stored, "prune": {**stored["prune"], "train_seconds": round(seconds, 1)}}


def load_pruned_checkpoint(path: Path | None, parent: MoEModel) -> Checkpoint:
    """A pruned checkpoint (default: the bundled one), checked against the model it must have
    been pruned from."""
    ckpt = load_checkpoint(path if path is not None else bundled_pruned_dir())
    prune = ckpt.meta.get("prune")
    if not isinstance(prune, dict) or "parent_weights_sha256" not in prune:
        raise CheckpointError(f"checkpoint {ckpt.path} is not a pruned checkpoint (its meta.json "
                              "has no prune.parent_weights_sha256): make one with edgexpert prune")
    have = weights_sha256(parent)
    if prune["parent_weights_sha256"] != have:
        raise CheckpointError(f"pruned checkpoint {ckpt.path} was pruned from weights "
                              f"{prune['parent_weights_sha256'][:16]}, not from this model's "
                              f"{have[:16]}: rerun edgexpert prune on this model")
    return ckpt
