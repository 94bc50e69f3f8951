"""The EAGLE-3-style draft head and its A8W4 integer twin (golden/decoding/eagle/: the model, apart
from how it drafts, trains and is stored).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...integer.int_model import (INT4_MAX, RESIDUAL_FRAC, quantize_gain, quantize_weight,
                                  weight_rows)
from ...integer.intops import int_matmul, quantize_vec, requant, rshift
from ...lm.model import KVCache, MoEModel, RMSNorm

__all__ = ["EagleSettings", "EagleHead", "IntEagleHead"]

#: the linear layers' storage (docs/contracts.md, A8W4): int4 weights, a 16-bit scale per
#: output channel; the head rows (the target's embedding) int8 with a 16-bit scale per row
INT4_BITS, HEAD_BITS, SCALE_BYTES = 4, 8, 2


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
        """The head in float64 for decoding (as golden.decoding.decode.FloatEngine runs the
        target)."""
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
        """The layer's output feature from its input feature and attention output
        [..., H, T, hd]."""
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

    def unrolled(self, features: torch.Tensor, tokens: torch.Tensor,
                 steps: int) -> list[torch.Tensor]:
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
