"""An EAGLE-3-style draft head for the golden MoE model (docs/golden-model.md, "EAGLE draft").

The head is one small decoder layer that drafts from the target's own features:

- feature fusion: a linear layer over the concatenation of the target's residual stream after
  layers `fused` = (0, 1, 3) of the bundled four: low (after the first layer), middle (after two
  of four, half the depth) and high (after the last, the feature the head reads). EAGLE-3 fuses
  a low, a middle and a high layer because the last layer alone is tuned to the very next token
  and carries less about the ones after it; with four layers, layer 2's output would sit between
  middle and high and add nothing the other two lack;
- the embedding of the token that follows the feature (the target's tied embedding, frozen);
- one decoder layer: RMSNorm on both, their concatenation projected to queries, keys and values
  of the target's head shape (so one draft KV entry is one target layer's), attention over the
  head's own KV cache, the fused feature as the residual, then a dense SwiGLU FFN (no experts);
  no position encoding: the target's features carry position, and a causal layer orders its
  inputs itself;
- the target's head (the tied embedding, frozen) on the layer's normed output for logits,
  optionally restricted to a draft vocabulary of the `draft_vocab` most frequent training tokens
  (EAGLE-3's reduced vocabulary: fewer head rows to read per draft pass).

Decoding (`EagleTree`): the draft's KV cache lives next to the target's (`KVCache.draft`). Entry
i of it holds (target feature after token i - 1, token i): the target's verification pass gives
the features of the accepted tokens, which the first draft pass of the next step adds (with the
new root); deeper draft passes feed the head's own output feature instead of the target's (the
tree nodes' entries are dropped when the next step starts).

Training (`train_eagle`): the target as teacher on training-split windows, the loss the
KL divergence from the target's next-token distribution to the draft's; EAGLE-3's training-time
test unrolls `unroll` steps, step k feeding the head's own output of step k - 1, attending as a
depth-k tree node does (to the true prefix and to its own chain). Deterministic for the seed on
one thread.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn
from tqdm import tqdm

from ...contracts.errors import InputError
from ..lm.checkpoint import bundled_checkpoint_dir, save_meta, save_tensors, weights_sha256
from ..integer.int_model import INT4_MAX, RESIDUAL_FRAC, quantize_gain, quantize_weight, weight_rows
from ..integer.intops import int_matmul, quantize_vec, requant, rshift
from ..lm.model import KVCache, LayerTrace, MoEModel, RMSNorm
from ..lm.train import eval_windows

__all__ = ["EagleSettings", "EagleHead", "IntEagleHead", "EagleError", "EagleTree", "draft_vocabulary",
           "record_features", "train_eagle", "save_eagle", "load_eagle", "bundled_eagle_dir",
           "EAGLE_VERSION"]

EAGLE_VERSION = 1
#: the linear layers' storage (docs/contracts.md, A8W4): int4 weights, a 16-bit scale per
#: output channel; the head rows (the target's embedding) int8 with a 16-bit scale per row
INT4_BITS, HEAD_BITS, SCALE_BYTES = 4, 8, 2


class EagleError(InputError):
    """The draft head's files are missing, malformed, or belong to another checkpoint."""


@dataclass(frozen=True)
class EagleSettings:
    """The head's shape and how `edgexpert draft train` trains it."""
    fused: tuple[int, ...] = (0, 1, 3)   # target layers whose outputs are fused (module doc)
    ffn: int = 384                 # the dense SwiGLU's hidden width (2 x d_model)
    draft_vocab: int = 1024        # the most frequent training tokens (0: the whole vocabulary)
    window: int = 128              # tokens per training window
    batch: int = 8
    steps: int = 600
    unroll: int = 3                # training-time test steps
    lr: float = 3e-3
    heldout_windows: int = 16
    seed: int = 20261129


def draft_vocabulary(train_stream: np.ndarray, vocab: int, size: int) -> torch.Tensor | None:
    """The `size` most frequent tokens of the training stream, ascending ids (ties: lower id);
    None for the whole vocabulary (size 0 or >= vocab)."""
    if size <= 0 or size >= vocab:
        return None
    counts = torch.from_numpy(np.bincount(train_stream, minlength=vocab).astype(np.int64))
    return torch.sort(torch.sort(-counts, stable=True).indices[:size]).values


class EagleHead(nn.Module):
    """The draft head (module doc). The embedding and head rows are the target's, neither
    trained nor stored with the head."""

    def __init__(self, model: MoEModel, settings: EagleSettings, vocab: torch.Tensor | None = None):
        super().__init__()
        cfg = model.cfg
        if not all(0 <= layer < cfg.n_layers for layer in settings.fused) or not settings.fused:
            raise ValueError(f"fused layers {settings.fused} are out of range: accepted 0.."
                             f"{cfg.n_layers - 1}")
        d = cfg.d_model
        self.settings, self.cfg = settings, cfg
        self.n_heads, self.hd = cfg.n_heads, cfg.dim_head
        self.embeddings = model.tok_emb.weight.detach().float()
        self.vocab = vocab
        self.fc = nn.Linear(len(settings.fused) * d, d, bias=False)
        self.norm_emb = RMSNorm(d, cfg.rms_eps)
        self.norm_feat = RMSNorm(d, cfg.rms_eps)
        self.qkv = nn.Linear(2 * d, 3 * self.n_heads * self.hd, bias=False)
        self.proj = nn.Linear(self.n_heads * self.hd, d, bias=False)
        self.norm2 = RMSNorm(d, cfg.rms_eps)
        self.gate = nn.Linear(d, settings.ffn, bias=False)
        self.up = nn.Linear(d, settings.ffn, bias=False)
        self.down = nn.Linear(settings.ffn, d, bias=False)
        self.norm_f = RMSNorm(d, cfg.rms_eps)
        self._head = model.head_weight().detach().float()

    def to_double(self) -> "EagleHead":
        """The head in float64 for decoding (as golden.decoding.decode.FloatEngine runs the target)."""
        self.double()
        self.embeddings, self._head = self.embeddings.double(), self._head.double()
        return self.eval()

    @property
    def head_rows(self) -> torch.Tensor:
        return self._head if self.vocab is None else self._head[self.vocab]

    def weight_bytes(self) -> int:
        """What one draft pass reads of the head at its storage precision: the linear layers
        int4 with a 16-bit scale per output channel, the RMSNorm gains 16-bit, and the head
        rows int8 with a 16-bit scale per row (only the draft vocabulary's)."""
        linear = sum(m.in_features * m.out_features * INT4_BITS // 8 + SCALE_BYTES * m.out_features
                     for m in (self.fc, self.qkv, self.proj, self.gate, self.up, self.down))
        norms = 4 * self.cfg.d_model * SCALE_BYTES
        rows = self.head_rows.shape[0]
        return linear + norms + rows * (self.cfg.d_model * HEAD_BITS // 8 + SCALE_BYTES)

    def fuse(self, features: torch.Tensor) -> torch.Tensor:
        """The target's fused-layer outputs [..., len(fused) x D] -> the head's feature [..., D]."""
        return self.fc(features)

    def _qkv(self, feature, tokens):
        """q, k, v [..., H, T, hd] of inputs (feature [..., T, D], tokens [..., T])."""
        x = torch.cat([self.norm_emb(self.embeddings[tokens]), self.norm_feat(feature)], dim=-1)
        *lead, t, _ = x.shape
        return [y.view(*lead, t, self.n_heads, self.hd).transpose(-2, -3)
                for y in self.qkv(x).chunk(3, dim=-1)]

    def _finish(self, feature, att):
        """The layer's output feature from its input feature and attention output [..., H, T, hd]."""
        *lead, h, t, hd = att.shape
        x = feature + self.proj(att.transpose(-2, -3).reshape(*lead, t, h * hd))
        y = self.norm2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))

    def logits(self, out: torch.Tensor) -> torch.Tensor:
        """Logits over the draft vocabulary [..., V'] of output features [..., D]."""
        return F.linear(self.norm_f(out), self.head_rows)

    def full_logits(self, out: torch.Tensor) -> torch.Tensor:
        """Logits over the target's vocabulary, -inf outside the draft vocabulary."""
        small = self.logits(out)
        if self.vocab is None:
            return small
        full = small.new_full(small.shape[:-1] + (self._head.shape[0],), float("-inf"))
        full[..., self.vocab] = small
        return full

    def step(self, feature, tokens, cache: KVCache, allowed) -> torch.Tensor:
        """Decode: run entries (feature [T, D], tokens [T]) against the head's `cache` (one
        layer), appending their keys and values; allowed [T, len(cache) + T]. Returns the output
        features [T, D]."""
        q, k, v = self._qkv(feature, tokens)
        keys, values = cache.extend(0, k=k, v=v)
        mask = torch.zeros(allowed.shape, dtype=q.dtype).masked_fill(~allowed, float("-inf"))
        att = torch.softmax(q @ keys.transpose(-1, -2) / math.sqrt(self.hd) + mask, dim=-1)
        cache.positions = torch.cat([cache.positions, torch.zeros(len(tokens), dtype=torch.long)])
        return self._finish(feature, att @ values)

    def unrolled(self, features: torch.Tensor, tokens: torch.Tensor, steps: int) -> list[torch.Tensor]:
        """Training-time test: draft logits per step [B, L, V'] for entries (target features
        [B, L, len(fused) D], tokens [B, L]). Step k's entry i takes the step k - 1 output of
        entry i - 1 as its feature and attends to the step-0 entries 0..i-k and to the step-m
        entries i-k+m (m = 1..k), as a depth-k node of a draft tree does (rows i < k have no
        true prefix and are left out of the loss)."""
        b, n, _ = features.shape
        feature = self.fuse(features)
        causal = torch.ones(n, n, dtype=torch.bool).tril()
        keys, values, out = [], [], []
        for k in range(steps):
            if k:
                feature = torch.cat([torch.zeros_like(feature[:, :1]), prev[:, :-1]], dim=1)
            q, key, value = self._qkv(feature, tokens)
            keys.append(key)
            values.append(value)
            scores = [(q @ keys[0].transpose(-1, -2)).masked_fill(~causal.tril(-k), float("-inf"))]
            shifted = []
            for m in range(1, k + 1):
                shift = k - m      # entry i reads step m's entry i - shift
                km, vm = (F.pad(t, (0, 0, shift, 0))[..., :n, :] for t in (keys[m], values[m]))
                shifted.append(vm)
                scores.append((q * km).sum(-1, keepdim=True))
            att = torch.softmax(torch.cat(scores, dim=-1) / math.sqrt(self.hd), dim=-1)
            mixed = att[..., :n] @ values[0]
            for m, vm in enumerate(shifted):
                mixed = mixed + att[..., n + m:n + m + 1] * vm
            prev = self._finish(feature, mixed)
            out.append(self.logits(prev))
        return out


class IntEagleHead:
    """The head's A8W4 integer path (docs/contracts.md), drafting for the integer target
    (golden.integer.int_model.IntModel, whose arithmetic it shares): the linear layers int4 with one
    scale per output channel, the RMSNorm gains Q.12, the embedding and head rows the target's
    int8 rows; activations int8 with a per-token scale, the residual Q.16. The query-key-value
    projection reads two inputs normed apart (the embedding and the feature): one int4 matrix,
    its two column halves multiplied by their own int8 input and requantized with the same
    weight scale, so its storage is that of one layer. Features and outputs are Q.16 integers;
    `fuse` takes the target's dequantized features (LayerTrace.output) back to them exactly."""

    def __init__(self, head: EagleHead, target):
        self.settings, self.cfg, self.target = head.settings, head.cfg, target
        self.vocab, self.d = head.vocab, head.cfg.d_model
        self.w = {name: quantize_weight(getattr(head, name).weight, INT4_MAX)
                  for name in ("fc", "qkv", "proj", "gate", "up", "down")}
        self.gain = {name: quantize_gain(getattr(head, name).weight, f"eagle.{name}")
                     for name in ("norm_emb", "norm_feat", "norm2", "norm_f")}
        self.head_rows = target.head if head.vocab is None else weight_rows(target.head, head.vocab)
        self.n_heads, self.hd = head.n_heads, head.hd

    def fuse(self, features: torch.Tensor) -> torch.Tensor:
        """The target's dequantized fused-layer outputs -> the head's Q.16 feature."""
        q16 = torch.round(features.to(torch.float64) * (1 << RESIDUAL_FRAC)).to(torch.int64)
        x8, sx = quantize_vec(q16, RESIDUAL_FRAC)
        return requant(int_matmul(x8, self.w["fc"].f64), sx, self.w["fc"].scale, RESIDUAL_FRAC)

    def step(self, feature, tokens, cache: KVCache, allowed) -> torch.Tensor:
        """EagleHead.step on Q.16 features: the output features, Q.16 [T, D]."""
        t, d, ops = len(tokens), self.d, self.target
        emb = weight_rows(ops.emb, tokens)
        e = rshift(emb.q * emb.scale.m[:, None], emb.scale.e[:, None] - RESIDUAL_FRAC)
        e8, se = ops.rmsnorm_q8(e, self.gain["norm_emb"])
        h8, sh = ops.rmsnorm_q8(feature, self.gain["norm_feat"])
        qkv = self.w["qkv"]
        mixed = (requant(int_matmul(e8, qkv.f64[:, :d]), se, qkv.scale, RESIDUAL_FRAC)
                 + requant(int_matmul(h8, qkv.f64[:, d:]), sh, qkv.scale, RESIDUAL_FRAC))
        q, k, v = (y.view(t, self.n_heads, self.hd).transpose(0, 1) for y in mixed.chunk(3, dim=-1))
        a8, sa = ops.attention(0, q, k, v, cache, allowed)
        cache.positions = torch.cat([cache.positions, torch.zeros(t, dtype=torch.long)])
        r = feature + requant(int_matmul(a8, self.w["proj"].f64), sa, self.w["proj"].scale,
                              RESIDUAL_FRAC)
        x8, sx = ops.rmsnorm_q8(r, self.gain["norm2"])
        return r + ops.expert(x8, sx, self.w["gate"], self.w["up"], self.w["down"])[0]

    def full_logits(self, out: torch.Tensor) -> torch.Tensor:
        """EagleHead.full_logits of Q.16 output features (Q.16 logits, dequantized)."""
        f8, sf = self.target.rmsnorm_q8(out, self.gain["norm_f"])
        small = requant(int_matmul(f8, self.head_rows.f64), sf, self.head_rows.scale,
                        RESIDUAL_FRAC).to(torch.float64) / (1 << RESIDUAL_FRAC)
        if self.vocab is None:
            return small
        full = small.new_full(small.shape[:-1] + (self.target.head.q.shape[0],), float("-inf"))
        full[..., self.vocab] = small
        return full


# ---------------------------------------------------------------------------------------------
# the target's features


def record_features(cache: KVCache, tokens: torch.Tensor, traces: list[LayerTrace],
                    fused: tuple[int, ...]) -> None:
    """Keep, per entry a target pass appended to `cache`, its token and the fused layers'
    outputs (what the draft of the next step reads; `KVCache.keep` drops the rejected ones)."""
    features = torch.cat([traces[layer].output for layer in fused], dim=-1).to(torch.float64)
    old = cache.entries
    cache.entries = {
        "tokens": torch.cat([old["tokens"], tokens]) if old else tokens.clone(),
        "features": torch.cat([old["features"], features]) if old else features}


class EagleTree:
    """The draft passes of one tree, by `head` (an EagleHead in float64, or an IntEagleHead):
    the head's state across steps lives in `target.draft` (its KV cache and how many of its
    entries hold true target features)."""

    def __init__(self, head, target: KVCache, root: int):
        if target.draft is None:
            target.draft = {"cache": KVCache(), "valid": 0}
        self.head, self.target, self.root = head, target, root
        self.state = target.draft
        self.out: dict[int, torch.Tensor] = {}     # node (-1: the root) -> its output feature
        self.entry: dict[int, int] = {}            # node -> its entry in the head's cache

    @torch.no_grad()
    def run(self, frontier: list[int], parents: list[int], tokens: list[int]) -> tuple[torch.Tensor, int, int]:
        """One draft pass over the frontier nodes (tokens): (logits [len(frontier), V], tokens
        processed, cache entries attended that were there before the pass)."""
        cache = self.state["cache"]
        if frontier == [-1]:
            return self._first(cache)
        first = len(cache)
        for r, n in enumerate(frontier):
            self.entry[n] = first + r
        allowed = torch.zeros(len(frontier), first + len(frontier), dtype=torch.bool)
        allowed[:, :self.state["valid"]] = True
        allowed[:, self.entry[-1]] = True
        for r, n in enumerate(frontier):
            while n >= 0:
                allowed[r, self.entry[n]] = True
                n = parents[n]
        feature = torch.stack([self.out[parents[n]] for n in frontier])
        out = self.head.step(feature, torch.tensor(tokens), cache, allowed)
        for r, n in enumerate(frontier):
            self.out[n] = out[r]
        return self.head.full_logits(out), len(frontier), first

    def _first(self, cache: KVCache) -> tuple[torch.Tensor, int, int]:
        """The root's pass: drop the last tree's entries, then add every target entry since the
        last step (entry i: feature after token i - 1, token i; the root last)."""
        valid, known = self.state["valid"], len(self.target)
        cache.keep(torch.arange(valid))
        if known == 0:     # a one-token prompt: no target feature yet, the root drafts on zeros
            features = torch.zeros(1, len(self.head.settings.fused) * self.head.cfg.d_model,
                                   dtype=torch.float64)
            tokens = torch.tensor([self.root])
        else:
            # entry i - 1 holds position i (position 0 has no feature before it): `valid`
            # entries cover positions 1..valid, the new ones valid + 1..known (the root)
            features = self.target.entries["features"][valid:known]
            tokens = torch.cat([self.target.entries["tokens"][valid + 1:known],
                                torch.tensor([self.root])])
        n = len(tokens)
        allowed = torch.cat([torch.ones(n, valid, dtype=torch.bool),
                             torch.ones(n, n, dtype=torch.bool).tril()], dim=1)
        out = self.head.step(self.head.fuse(features), tokens, cache, allowed)
        # a one-token prompt's root drafted on zeros: its entry is dropped at the next step
        self.state["valid"] = len(cache) if known else 0
        self.entry[-1] = len(cache) - 1
        self.out[-1] = out[-1]
        return self.head.full_logits(out[-1:]), n, valid


# ---------------------------------------------------------------------------------------------
# training


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


# ---------------------------------------------------------------------------------------------
# files


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
