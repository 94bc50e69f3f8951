"""The prefill encoder on the A8W4 integer path (docs/contracts.md, "Prefill encoder").

`IntTokenEncoder(encoder)` quantizes a trained float `TokenEncoder` (golden/policies/prefill.py) and
scores prompts with integers only, as the MAC clusters would run it like any layer:
- linear weights int4 per output channel (`int_model.quantize_weight`), biases Q.16;
- the model's int8 embedding rows (the integer path's own table) into the projection, so the
  first product takes them with their per-row scale as they are;
- activations Q.16, quantized per token (per token and head for queries and keys) to int8
  (`intops.quantize_vec`) before every product;
- LayerNorm (`layernorm_q8`): the integer mean, then `intops.inv_rms` of the centred row,
  Q.12 gains, Q.16 biases;
- GELU as x sigmoid(1.702 x) (`gelu_q16`) from the sigmoid table the experts use;
- attention as the model's: int8 scores, `intops.softmax_q16`, Q.12 values;
- the CLS row's softmax over the prompt per head, averaged over heads in Q.16: the scores the
  PRU takes (unsigned Q.16, summing to about 65536).
"""

from __future__ import annotations

import math

import torch

from .int_model import INT4_MAX, INT8_MAX, QWeight, quantize_gain, quantize_weight, weight_rows
from .intops import (I64, Dyadic, int_matmul, inv_rms, quantize_vec, requant, rshift,
                     sigmoid_q15, softmax_q16)

__all__ = ["IntTokenEncoder", "layernorm_q8", "gelu_q16", "GELU_SIGMOID_Q12", "ACT_FRAC"]

ACT_FRAC = 16         # activations, biases, positions: Q.16 (the model's residual format)
VALUE_FRAC = 12       # attention values: Q.12, as the model caches them
GAIN_FRAC = 12        # LayerNorm gains: Q.12, as the model's RMSNorm gains
#: GELU(x) ~ x sigmoid(1.702 x) (Hendrycks & Gimpel, "Gaussian Error Linear Units", sec. 2):
#: the factor in Q.12
GELU_SIGMOID_Q12 = round(1.702 * (1 << 12))


def _q16(t: torch.Tensor) -> torch.Tensor:
    """A float parameter as Q.16 integers, round half up."""
    return torch.floor(t.detach().to(torch.float64) * (1 << ACT_FRAC) + 0.5).to(I64)


def layernorm_q8(x: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, Dyadic]:
    """LayerNorm of Q.16 rows x [..., n] with Q.12 gains and Q.16 biases, quantized to int8 with
    a per-row scale: mu = floor((sum x + floor(n/2)) / n); d = x - mu; (m, e) = inv_rms(d, 16,
    eps); y = rshift(d g m, e + 12) + bias (Q.16); quantize_vec(y, 16). (The bias keeps 1/rms
    out of the scale, unlike the model's RMSNorm: it must scale d before the bias is added.)"""
    n = x.shape[-1]
    mu = torch.div(x.sum(-1, keepdim=True) + n // 2, n, rounding_mode="floor")
    d = x - mu
    inv = inv_rms(d, ACT_FRAC, eps)
    y = rshift(d * gain * inv.m[..., None], inv.e[..., None] + GAIN_FRAC) + bias
    return quantize_vec(y, ACT_FRAC)


def gelu_q16(x: torch.Tensor) -> torch.Tensor:
    """GELU of Q.16 x as Q.16: rshift(x sig, 15) with sig = sigmoid_q15(rshift(x 6971, 12)),
    the table sigmoid of 1.702 x (GELU_SIGMOID_Q12 = 6971)."""
    return rshift(x * sigmoid_q15(rshift(x * GELU_SIGMOID_Q12, 12)), 15)


class _Linear:
    """An nn.Linear as int4 weights with per-output-channel scales and Q.16 biases."""

    def __init__(self, linear: torch.nn.Linear):
        self.w: QWeight = quantize_weight(linear.weight, INT4_MAX)
        self.b = _q16(linear.bias)

    def __call__(self, x8: torch.Tensor, sx: Dyadic) -> torch.Tensor:
        return requant(int_matmul(x8, self.w.f64), sx, self.w.scale, ACT_FRAC) + self.b


class _Norm:
    def __init__(self, norm: torch.nn.LayerNorm):
        self.gain = quantize_gain(norm.weight, "encoder LayerNorm")
        self.bias, self.eps = _q16(norm.bias), norm.eps

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, Dyadic]:
        return layernorm_q8(x, self.gain, self.bias, self.eps)


def _attention_q16(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Softmax attention probabilities (Q.16) of Q.16 queries q [H, Tq, d] against keys
    k [H, Tk, d], every key allowed: docs/contracts.md, "Attention", steps 3 to 5."""
    q8, sq = quantize_vec(q, ACT_FRAC)
    k8, sk = quantize_vec(k, ACT_FRAC)
    s = torch.matmul(q8.to(torch.float64), k8.to(torch.float64).transpose(-1, -2)).to(I64)
    z = rshift(s * sq.m[..., None] * sk.m[:, None, :],
               sq.e[..., None] + sk.e[:, None, :] - ACT_FRAC)
    return softmax_q16(rshift(z * round((1 << 15) / math.sqrt(q.shape[-1])), 15))


class IntTokenEncoder:
    """Integer twin of a `TokenEncoder`: `scores_q16(tokens)` gives a prompt's Q.16 scores;
    calling it on tokens [B, T] gives them as float64 (score_q16 / 2**16, which golden.blocks.pru's
    `score_q16` maps back exactly), the float encoder's interface."""

    def __init__(self, encoder):
        s = self.settings = encoder.settings
        self.heads = s.heads
        self.emb = quantize_weight(encoder.embeddings, INT8_MAX)
        self.proj = _Linear(encoder.proj)
        self.pos, self.cls = _q16(encoder.pos), _q16(encoder.cls)
        self.blocks = [{"norm1": _Norm(b.norm1), "qkv": _Linear(b.qkv), "out": _Linear(b.out),
                        "norm2": _Norm(b.norm2), "fc1": _Linear(b.mlp[0]), "fc2": _Linear(b.mlp[2])}
                       for b in encoder.blocks]
        self.score_norm = _Norm(encoder.score_norm)
        self.score_qk = _Linear(encoder.score_qk)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """[T, W] -> [H, T, W / H]."""
        return x.view(x.shape[0], self.heads, -1).transpose(0, 1)

    @torch.no_grad()
    def scores_q16(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [T] -> unsigned Q.16 scores [T] (int64, 0..65536, summing to about 65536)."""
        t = len(tokens)
        if not 1 <= t <= self.settings.window:
            raise ValueError(f"prompt of {t} tokens is out of range for the prefill encoder: "
                             f"accepted 1..{self.settings.window} tokens")
        emb = weight_rows(self.emb, tokens.long())
        x = torch.cat([self.cls[None], self.proj(emb.q, emb.scale) + self.pos[:t]])
        for b in self.blocks:
            qkv = b["qkv"](*b["norm1"](x))
            q, k, v = (self._heads(part) for part in qkv.chunk(3, dim=-1))
            p = _attention_q16(q, k)
            o = rshift(torch.matmul(p.to(torch.float64),
                                    rshift(v, ACT_FRAC - VALUE_FRAC).to(torch.float64)).to(I64), 16)
            x = x + b["out"](*quantize_vec(o.transpose(0, 1).reshape(t + 1, -1), VALUE_FRAC))
            h = gelu_q16(b["fc1"](*b["norm2"](x)))
            x = x + b["fc2"](*quantize_vec(h, ACT_FRAC))
        q, k = self.score_qk(*self.score_norm(x)).chunk(2, dim=-1)
        p = _attention_q16(self._heads(q[:1]), self._heads(k[1:]))[:, 0]    # [H, T]
        return torch.div(p.sum(0) + self.heads // 2, self.heads, rounding_mode="floor")

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.scores_q16(row) for row in tokens]).to(torch.float64) / (1 << 16)
