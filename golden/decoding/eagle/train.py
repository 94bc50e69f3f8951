"""Training the EAGLE head (golden/decoding/eagle/: training, apart from the head and drafting).

Training (`train_eagle`): the target as teacher on training-split windows, the loss the
KL divergence from the target's next-token distribution to the draft's; EAGLE-3's training-time
test unrolls `unroll` steps, step k feeding the head's own output of step k - 1, attending as a
depth-k tree node does (to the true prefix and to its own chain). Deterministic for the seed on
one thread.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict

import numpy as np
import torch
from tqdm import tqdm

from ...lm.checkpoint import weights_sha256
from ...lm.model import MoEModel
from ...lm.train import eval_windows
from .files import EAGLE_VERSION
from .head import EagleHead, EagleSettings

__all__ = ["draft_vocabulary", "train_eagle"]


def draft_vocabulary(train_stream: np.ndarray, vocab: int, size: int) -> torch.Tensor | None:
    """The `size` most frequent tokens of the training stream, ascending ids (ties: lower id);
    None for the whole vocabulary (size 0 or >= vocab)."""
    if size <= 0 or size >= vocab:
        return None
    counts = torch.from_numpy(np.bincount(train_stream, minlength=vocab).astype(np.int64))
    return torch.sort(torch.sort(-counts, stable=True).indices[:size]).values


@torch.no_grad()
def _teacher(model: MoEModel, windows: torch.Tensor, fused: tuple[int, ...]):
    """The target's fused-layer outputs [B, S, len(fused) D] and logits [B, S, V] for windows
    [B, S] (causal, its own routing)."""
    outputs = []

    def keep(module, args, result):   # returns None: the output is left as it is
        outputs.append(result[0])
    hooks = [model.layers[layer].register_forward_hook(keep) for layer in fused]
    try:
        logits = model(windows)[0]
    finally:
        for hook in hooks:
            hook.remove()
    return torch.cat(outputs, dim=-1), logits


def _losses(head: EagleHead, model: MoEModel, windows: torch.Tensor):
    """Per unroll step: KL(target || draft) and the draft's top-1 agreement with the target,
    over the entries with a true prefix. Entry i of a window is (feature after token i, token
    i + 1), predicting what the target predicts after token i + 1."""
    features, logits = _teacher(model, windows, head.settings.fused)
    teacher = logits[:, 1:]
    if head.vocab is not None:
        teacher = teacher[..., head.vocab]
    p = torch.softmax(teacher, dim=-1)
    entropy = (p * torch.log_softmax(teacher, dim=-1)).sum(-1)
    out = []
    for k, q in enumerate(head.unrolled(features[:, :-1], windows[:, 1:], head.settings.unroll)):
        kl = entropy[:, k:] - (p[:, k:] * torch.log_softmax(q[:, k:], dim=-1)).sum(-1)
        agree = (q[:, k:].argmax(-1) == teacher[:, k:].argmax(-1)).double().mean()
        out.append((kl.mean(), float(agree)))
    return out


def train_eagle(model: MoEModel, train_stream: np.ndarray, heldout_stream: np.ndarray,
                settings: EagleSettings = EagleSettings(), progress: bool = True,
                log=print) -> tuple[EagleHead, dict]:
    """Train the head on random training-split windows with the target as teacher (module doc);
    report the held-out KL and top-1 agreement per unroll step. Deterministic for settings.seed
    on one thread (the caller sets torch's thread count)."""
    start = time.time()
    torch.manual_seed(settings.seed)
    model.eval()
    vocab = draft_vocabulary(train_stream, model.cfg.vocab_size, settings.draft_vocab)
    head = EagleHead(model, settings, vocab)
    log(f"eagle draft head: seed {settings.seed}, {settings.steps} steps of {settings.batch} x "
        f"{settings.window} training tokens, unroll {settings.unroll}, fused layers "
        f"{list(settings.fused)}, {sum(p.numel() for p in head.parameters())} parameters")
    optimizer = torch.optim.AdamW(head.parameters(), lr=settings.lr, weight_decay=0.01)
    warmup = max(1, settings.steps // 20)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(
        (step + 1) / warmup, 0.5 * (1 + math.cos(math.pi * step / settings.steps))))
    data = torch.from_numpy(train_stream.astype(np.int64))
    gen = torch.Generator().manual_seed(settings.seed)
    head.train()
    bar = tqdm(range(settings.steps), disable=not progress, unit="step", file=sys.stderr)
    loss = torch.zeros(())
    for step in bar:
        starts = torch.randint(0, len(data) - settings.window, (settings.batch,), generator=gen)
        windows = torch.stack([data[s:s + settings.window] for s in starts.tolist()])
        losses = _losses(head, model, windows)
        loss = sum(kl for kl, _ in losses) / len(losses)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 10 == 0 or step == settings.steps - 1:
            bar.set_postfix(kl=f"{loss.item():.3f}", top1=f"{losses[0][1]:.3f}")
    head.eval()
    held = eval_windows(heldout_stream, settings.window - 1, settings.heldout_windows)
    with torch.no_grad():
        measured = [_losses(head, model, held[i:i + 4]) for i in range(0, len(held), 4)]
    steps = len(measured[0])
    meta = {
        "eagle_version": EAGLE_VERSION, "settings": asdict(settings),
        "checkpoint_sha256": weights_sha256(model),
        "parameters": sum(p.numel() for p in head.parameters()),
        "draft_pass_bytes": head.weight_bytes(),
        "draft_vocab_size": int(head.head_rows.shape[0]),
        "train_kl": round(float(loss.detach()), 4),
        "heldout_kl": [round(sum(float(m[k][0]) for m in measured) / len(measured), 4)
                       for k in range(steps)],
        "heldout_top1": [round(sum(m[k][1] for m in measured) / len(measured), 4)
                         for k in range(steps)],
        "heldout_windows": len(held), "torch": torch.__version__,
        "train_seconds": round(time.time() - start, 1)}
    log(f"eagle draft head: train KL {meta['train_kl']}, held-out KL per unroll step "
        f"{meta['heldout_kl']}, top-1 agreement {meta['heldout_top1']}; {meta['train_seconds']} s")
    return head, meta
