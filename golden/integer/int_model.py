"""The A8W4 integer reference path of the MoE model (docs/contracts.md writes it out).

`quantize_model(model)` turns a float `MoEModel` into an `IntModel`:
- linear weights (attention, experts) int4, symmetric in [-7, 7], one scale per output channel,
  chosen per row among clipped maxima to minimise the squared error, stored as float16 (the
  16-bit scale word of the weight layout) and used as its exact Dyadic value;
- the router int8 per output channel (routing decisions are sensitive, and the router is 0.3% of
  the weights); the token (and position) embedding, which is also the output head, int8 per row;
- RMSNorm gains as Q.12 integers.

`IntModel.step` has the interface of `MoEModel.step` and computes with integers only
(golden.integer.intops): int8 activations with a per-token Dyadic scale, int32 accumulation, fixed-point
requantization, table-based sigmoid and exp. The residual stream is Q.16 and must stay within
int32. Nothing depends on which other tokens share a pass, so speculative verification
reproduces plain decoding exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...contracts.weight_image import ExpertWeights
from .intops import (I64, Dyadic, dyadic_mul, fp16_dyadic, int_matmul, inv_rms, quantize_vec,
                     requant, rshift, sigmoid_q15, softmax_q16)
from ..lm.checkpoint import bundled_checkpoint_dir, load_checkpoint
from ..lm.model import KVCache, LayerTrace, MoEModel, Router, route

__all__ = ["IntModel", "quantize_model", "quantize_weight", "quantize_gain", "weight_rows",
           "expert_hidden", "expert_down", "scale_words_dyadic", "image_weights",
           "load_int_model", "RESIDUAL_FRAC", "INT4_MAX"]

RESIDUAL_FRAC = 16   # the residual stream and every fixed-point activation: Q.16
VALUE_FRAC = 12      # cached attention values: Q.12
GAIN_FRAC = 12       # RMSNorm gains: Q.12
ROPE_FRAC = 14       # rotary cos / sin tables: Q.14
INT4_MAX = 7
INT8_MAX = 127
#: candidate clipping ratios of a weight row's maximum for its int4 scale
CLIP_RATIOS = torch.linspace(1.0, 0.5, 11, dtype=torch.float64)


@dataclass
class QWeight:
    """Integer weight [out, in] (values in int64 storage) and its per-output-channel scale."""
    q: torch.Tensor
    scale: Dyadic
    words: torch.Tensor   # float16 bit patterns of the scales (the layout's scale words)

    def __post_init__(self):
        # the same integers as float64, for exact float64 matrix products (intops.int_matmul)
        self.f64 = self.q.to(torch.float64)


def quantize_weight(w: torch.Tensor, qmax: int) -> QWeight:
    """Symmetric per-output-channel quantization of w [..., out, in] to [-qmax, qmax]; each row's
    scale is the clipped maximum (ratio from CLIP_RATIOS) with the least squared error, rounded
    to float16."""
    w = w.detach().to(torch.float64)
    peak = w.abs().amax(dim=-1).clamp(min=1e-8)
    best_err, best_scale = None, None
    for ratio in CLIP_RATIOS:
        scale = (peak * ratio / qmax).to(torch.float16).to(torch.float64)
        err = (w - torch.clamp(torch.round(w / scale[..., None]), -qmax, qmax) * scale[..., None]).pow(2).sum(-1)
        if best_err is None:
            best_err, best_scale = err, scale
        else:
            better = err < best_err
            best_err = torch.where(better, err, best_err)
            best_scale = torch.where(better, scale, best_scale)
    words, dyadic = fp16_dyadic(best_scale)
    q = torch.clamp(torch.round(w / dyadic.value()[..., None]), -qmax, qmax).to(I64)
    return QWeight(q, dyadic, words)


def quantize_gain(weight: torch.Tensor, name: str) -> torch.Tensor:
    """An RMSNorm gain as Q.12 int16 values (`name` names it in the error)."""
    g = torch.round(weight.detach().to(torch.float64) * (1 << GAIN_FRAC)).to(I64)
    if int(g.abs().max()) >= 1 << 15:
        raise ValueError(f"{name} has a gain of {float(weight.abs().max()):.2f}: accepted "
                         f"|gain| < {(1 << 15) / (1 << GAIN_FRAC)} (a Q.{GAIN_FRAC} int16)")
    return g


def weight_rows(w: QWeight, index) -> QWeight:
    """The rows `index` of a quantized weight, with their scales."""
    return QWeight(w.q[index], w.scale[index], w.words[index])


def expert_hidden(x8: torch.Tensor, sx: Dyadic, gate: QWeight, up: QWeight,
                  channels: torch.Tensor | None = None) -> tuple[torch.Tensor, Dyadic]:
    """A SwiGLU expert's hidden vector on int8 rows x8 [T, D] (docs/contracts.md): Q.16 gate
    and up, sigmoid from the table, h = silu(gate) * up in Q.16, re-quantized to int8 over all
    F values: (h8 [T, F], its scale). `channels`: a 0/1 mask [D] of the GATE_UP input channels
    that give products (a DCU's or host's selection); None: every channel."""
    xm = x8 if channels is None else x8 * torch.as_tensor(channels, dtype=I64)
    g = requant(int_matmul(xm, gate.f64), sx, gate.scale, RESIDUAL_FRAC)
    u = requant(int_matmul(xm, up.f64), sx, up.scale, RESIDUAL_FRAC)
    silu = rshift(g * sigmoid_q15(g), 15)
    return quantize_vec(rshift(silu * u, RESIDUAL_FRAC), RESIDUAL_FRAC)


def expert_down(h8: torch.Tensor, sh: Dyadic, down: QWeight,
                channels: torch.Tensor | None = None) -> torch.Tensor:
    """The expert's Q.16 output [T, D] from its hidden vectors; `channels`: a 0/1 mask [F] of
    the DOWN input channels that give products (None: every channel)."""
    hm = h8 if channels is None else h8 * torch.as_tensor(channels, dtype=I64)
    return requant(int_matmul(hm, down.f64), sh, down.scale, RESIDUAL_FRAC)


def scale_words_dyadic(words) -> Dyadic:
    """float16 scale words (uint16, as the weight image holds them) as their exact values
    (`fp16_dyadic`); ValueError for a word that is not a positive finite float16."""
    words = np.asarray(words)
    half = torch.from_numpy(words.astype(np.int16)).view(torch.float16)
    bits, scale = fp16_dyadic(half.to(torch.float32))
    if not bool((bits == torch.from_numpy(words.astype(np.int64))).all()):
        raise ValueError("scale words must be positive finite float16 values")
    return scale


def image_weights(w: ExpertWeights) -> tuple[QWeight, QWeight, QWeight]:
    """An expert's gate, up and down as the weight image holds them (int4 values, float16 scale
    words: edgexpert.contracts.weight_image), for `IntModel.expert`."""
    f = w.gate.shape[0]
    gu, dn = scale_words_dyadic(w.scales_gate_up), scale_words_dyadic(w.scales_down)
    gu_words = torch.as_tensor(np.asarray(w.scales_gate_up, np.int64))
    return (QWeight(torch.as_tensor(np.asarray(w.gate, np.int64)), gu[:f], gu_words[:f]),
            QWeight(torch.as_tensor(np.asarray(w.up, np.int64)), gu[f:], gu_words[f:]),
            QWeight(torch.as_tensor(np.asarray(w.down, np.int64)), dn,
                    torch.as_tensor(np.asarray(w.scales_down, np.int64))))


class IntModel:
    """Integer twin of a MoEModel; `step` mirrors `MoEModel.step`."""

    def __init__(self, model: MoEModel):
        cfg = self.cfg = model.cfg
        self.emb = quantize_weight(model.tok_emb.weight, INT8_MAX)
        self.pos = None if cfg.rope_theta else quantize_weight(model.pos_emb.weight, INT8_MAX)
        self.head = self.emb if cfg.tie_embeddings else quantize_weight(model.lm_head.weight, INT8_MAX)
        self.norm_f = quantize_gain(model.norm_f.weight, "norm_f")
        self.layers = []
        for n, block in enumerate(model.layers):
            moe = block.moe
            layer = {
                "norm1": quantize_gain(block.norm1.weight, f"layers.{n}.norm1"),
                "qkv": quantize_weight(block.qkv.weight, INT4_MAX),
                "proj": quantize_weight(block.proj.weight, INT4_MAX),
                "norm2": quantize_gain(block.norm2.weight, f"layers.{n}.norm2"),
                "router": quantize_weight(moe.router.weight, INT8_MAX),
                "gate": quantize_weight(moe.w_gate, INT4_MAX),
                "up": quantize_weight(moe.w_up, INT4_MAX),
                "down": quantize_weight(moe.w_down, INT4_MAX),
                "s_gate": quantize_weight(moe.s_gate, INT4_MAX),
                "s_up": quantize_weight(moe.s_up, INT4_MAX),
                "s_down": quantize_weight(moe.s_down, INT4_MAX),
            }
            if cfg.qk_norm != "none":
                layer["q_norm"] = quantize_gain(block.q_norm.weight, f"layers.{n}.q_norm")
                layer["k_norm"] = quantize_gain(block.k_norm.weight, f"layers.{n}.k_norm")
            self.layers.append(layer)
        self.eps_cache: dict[int, int] = {}
        self.rope_cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    # --- building blocks -------------------------------------------------------------------
    def _inv_rms(self, x: torch.Tensor, frac: int) -> Dyadic:
        """1 / sqrt(mean(x^2) + eps) per row of Q.frac `x` (intops.inv_rms, the model's eps)."""
        return inv_rms(x, frac, self.cfg.rms_eps)

    def rmsnorm_q8(self, r: torch.Tensor, gain: torch.Tensor) -> tuple[torch.Tensor, Dyadic]:
        """RMSNorm of the Q.16 residual, quantized to int8 with a per-token scale. Per-row int8
        quantization divides by the row maximum, so the int8 values are those of r * gain and
        1/rms enters only the scale."""
        q, scale = quantize_vec(r * gain, RESIDUAL_FRAC + GAIN_FRAC)
        return q, dyadic_mul(scale, self._inv_rms(r, RESIDUAL_FRAC))

    def rmsnorm_fixed(self, x: torch.Tensor, gain: torch.Tensor) -> torch.Tensor:
        """RMSNorm of Q.16 rows into Q.16 (query / key norms)."""
        inv = self._inv_rms(x, RESIDUAL_FRAC)
        return rshift(x * gain * inv.m[..., None], inv.e[..., None] + GAIN_FRAC)

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin [T, head_dim] as Q.14 integers (rotate-half convention), each entry from
        Python's math library so the table does not depend on vectorized float paths."""
        hd, theta = self.cfg.dim_head, self.cfg.rope_theta
        rows = []
        for p in positions.tolist():
            if p not in self.rope_cache:
                angles = [p / theta ** (2 * i / hd) for i in range(hd // 2)] * 2
                self.rope_cache[p] = (
                    torch.tensor([round(math.cos(a) * (1 << ROPE_FRAC)) for a in angles], dtype=I64),
                    torch.tensor([round(math.sin(a) * (1 << ROPE_FRAC)) for a in angles], dtype=I64))
            rows.append(self.rope_cache[p])
        return torch.stack([c for c, _ in rows]), torch.stack([s for _, s in rows])

    @staticmethod
    def expert(x8: torch.Tensor, sx: Dyadic, gate: QWeight, up: QWeight, down: QWeight,
               gate_up_channels=None, down_channels=None):
        """One SwiGLU expert on int8 rows: Q.16 gate and up, sigmoid from the table,
        h = silu(gate) * up in Q.16, h re-quantized to int8, down projection to Q.16; only the
        input channels the 0/1 masks select give products (`expert_hidden`, `expert_down`;
        None: every channel). Returns (output Q.16 [T, D], hidden int8 [T, F], its scale)."""
        h8, sh = expert_hidden(x8, sx, gate, up, gate_up_channels)
        return expert_down(h8, sh, down, down_channels), h8, sh

    def expert_weights(self) -> dict[tuple[int, int], ExpertWeights]:
        """Every routed expert's weights per (layer, expert) as the weight image holds them
        (`edgexpert.contracts.weight_image.memory_image` packs them)."""
        out = {}
        for layer, w in enumerate(self.layers):
            for e in range(w["gate"].q.shape[0]):
                out[layer, e] = ExpertWeights(
                    gate=w["gate"].q[e].numpy(), up=w["up"].q[e].numpy(),
                    down=w["down"].q[e].numpy(),
                    scales_gate_up=np.concatenate([w["gate"].words[e].numpy(),
                                                   w["up"].words[e].numpy()]).astype(np.uint16),
                    scales_down=w["down"].words[e].numpy().astype(np.uint16))
        return out

    def routing_weights_q16(self, z: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """Q.16 weights of the chosen experts idx [T, j] (-1: none) from Q.16 logits z [T, E]."""
        valid = idx >= 0
        safe = torch.where(valid, idx, torch.zeros_like(idx))
        if self.cfg.norm_topk_prob:
            return torch.where(valid, softmax_q16(torch.gather(z, -1, safe), valid), 0)
        return torch.where(valid, torch.gather(softmax_q16(z), -1, safe), 0)

    def attention(self, layer: int, q, k, v, cache: KVCache, allowed) -> tuple[torch.Tensor, Dyadic]:
        """Attention of Q.16 queries q [H, T, hd] against `cache`'s entries of `layer` and the
        new keys and values k, v [H_kv, T, hd] (appended: keys int8 with a Dyadic scale per head
        and token, values Q.12), allowed [T, len(cache) + T]: the int8 attention output
        [T, H hd] and its per-token scale."""
        h_n, t, hd = q.shape
        score_scale = round((1 << 15) / math.sqrt(hd))
        q8, sq = quantize_vec(q, RESIDUAL_FRAC)
        k8, sk = quantize_vec(k, RESIDUAL_FRAC)
        keys, kms, kes, values = cache.extend(layer, k=k8, km=sk.m, ke=sk.e,
                                              v=rshift(v, RESIDUAL_FRAC - VALUE_FRAC))
        group = h_n // k.shape[0]
        keys, kms, kes, values = (a.repeat_interleave(group, 0) for a in (keys, kms, kes, values))
        s = torch.matmul(q8.to(torch.float64), keys.to(torch.float64).transpose(-1, -2)).to(I64)
        z = rshift(s * sq.m[..., None] * kms[:, None, :], sq.e[..., None] + kes[:, None, :] - RESIDUAL_FRAC)
        p = softmax_q16(rshift(z * score_scale, 15), allowed)
        o = rshift(torch.matmul(p.to(torch.float64), values.to(torch.float64)).to(I64), 16)
        return quantize_vec(o.transpose(0, 1).reshape(t, h_n * hd), VALUE_FRAC)

    def _check_residual(self, r: torch.Tensor, where: str):
        if int(r.abs().max()) >= 1 << 31:
            raise OverflowError(f"residual stream left int32 at {where}: "
                                f"|r| = {float(r.abs().max()) / 65536:.1f} (accepted < 32768)")

    # --- decoding --------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, tokens, positions, cache: KVCache, allowed, router: Router | None = None,
             channels=None):
        if channels is not None:
            raise ValueError("the integer path computes whole experts: channel policies run on "
                             "the float path (FloatEngine)")
        cfg = self.cfg
        if self.pos is not None and positions.numel() and int(positions.max()) >= cfg.max_seq_len:
            raise ValueError(f"position {int(positions.max())} is beyond max_seq_len "
                             f"{cfg.max_seq_len}: accepted 0..{cfg.max_seq_len - 1}")
        t = len(tokens)
        emb = weight_rows(self.emb, tokens)
        r = rshift(emb.q * emb.scale.m[:, None], emb.scale.e[:, None] - RESIDUAL_FRAC)
        if self.pos is not None:
            pos = weight_rows(self.pos, positions)
            r = r + rshift(pos.q * pos.scale.m[:, None], pos.scale.e[:, None] - RESIDUAL_FRAC)
        self._check_residual(r, "the embedding")
        h_n, kv_n, hd = cfg.n_heads, cfg.kv_heads, cfg.dim_head
        traces = []
        for n, w in enumerate(self.layers):
            # attention
            x8, sx = self.rmsnorm_q8(r, w["norm1"])
            qkv = requant(int_matmul(x8, w["qkv"].f64), sx, w["qkv"].scale, RESIDUAL_FRAC)
            q, k, v = qkv.split([h_n * hd, kv_n * hd, kv_n * hd], dim=-1)
            if cfg.qk_norm == "full":
                q, k = self.rmsnorm_fixed(q, w["q_norm"]), self.rmsnorm_fixed(k, w["k_norm"])
            q = q.view(t, h_n, hd).transpose(0, 1)
            k = k.view(t, kv_n, hd).transpose(0, 1)
            v = v.view(t, kv_n, hd).transpose(0, 1)
            if cfg.qk_norm == "head":
                q, k = self.rmsnorm_fixed(q, w["q_norm"]), self.rmsnorm_fixed(k, w["k_norm"])
            if cfg.rope_theta:
                cos, sin = self.rope(positions)
                half = hd // 2
                q = rshift(q * cos + torch.cat([-q[..., half:], q[..., :half]], -1) * sin, ROPE_FRAC)
                k = rshift(k * cos + torch.cat([-k[..., half:], k[..., :half]], -1) * sin, ROPE_FRAC)
            a8, sa = self.attention(n, q, k, v, cache, allowed)
            r = r + requant(int_matmul(a8, w["proj"].f64), sa, w["proj"].scale, RESIDUAL_FRAC)
            self._check_residual(r, f"layer {n} attention")

            # mixture of experts
            x8, sx = self.rmsnorm_q8(r, w["norm2"])
            z = requant(int_matmul(x8, w["router"].f64), sx, w["router"].scale, RESIDUAL_FRAC)
            logits = z.to(torch.float64) / 65536
            moe_in = x8.to(torch.float64) * sx.value()[:, None]
            idx = route(z, cfg.top_k) if router is None else router(n, logits, moe_in)
            g = self.routing_weights_q16(z, idx)
            out = torch.zeros_like(r)
            expert_out = torch.zeros(idx.shape + (cfg.d_model,), dtype=I64)
            hidden = torch.zeros(idx.shape + (cfg.expert_ffn,), dtype=I64)
            hidden_m, hidden_e = torch.zeros(idx.shape, dtype=I64), torch.zeros(idx.shape, dtype=I64)
            for e in torch.unique(idx[idx >= 0]).tolist():
                rows, slots = torch.nonzero(idx == e, as_tuple=True)
                y, h8, sh = self.expert(x8[rows], sx[rows], weight_rows(w["gate"], e), weight_rows(w["up"], e),
                                        weight_rows(w["down"], e))
                expert_out[rows, slots] = y
                hidden[rows, slots], hidden_m[rows, slots], hidden_e[rows, slots] = h8, sh.m, sh.e
                out.index_add_(0, rows, rshift(y * g[rows, slots, None], 16))
            for s_e in range(w["s_gate"].q.shape[0]):
                out = out + self.expert(x8, sx, weight_rows(w["s_gate"], s_e), weight_rows(w["s_up"], s_e),
                                        weight_rows(w["s_down"], s_e))[0]
            r = r + out
            self._check_residual(r, f"layer {n} experts")
            traces.append(LayerTrace(moe_in, logits, idx, g.to(torch.float64) / 65536,
                                     {"x8": x8, "x_scale": sx, "router_q16": z, "weights_q16": g,
                                      "hidden_q": hidden, "hidden_scale": Dyadic(hidden_m, hidden_e),
                                      "expert_out_q16": expert_out, "moe_out_q16": out},
                                     output=r.to(torch.float64) / (1 << RESIDUAL_FRAC)))
        cache.positions = torch.cat([cache.positions, positions])
        f8, sf = self.rmsnorm_q8(r, self.norm_f)
        logits = requant(int_matmul(f8, self.head.f64), sf, self.head.scale, RESIDUAL_FRAC)
        return logits.to(torch.float64) / 65536, traces


def quantize_model(model: MoEModel) -> IntModel:
    return IntModel(model)


#: `load_int_model`'s models by resolved checkpoint folder (a process holds a few at most)
_INT_MODELS: dict[Path, IntModel] = {}


def load_int_model(checkpoint: str | Path | None = None,
                   model: MoEModel | None = None) -> IntModel:
    """The integer model of a checkpoint folder (default: the bundled one), loaded and
    quantized once per process: the benches' vectors (the trace's decode, the memory image, the
    masked outputs) all read the same one, and quantizing takes seconds. `model`: the folder's
    float model, when the caller has loaded it already. Callers must not change the result."""
    path = Path(checkpoint or bundled_checkpoint_dir()).resolve()
    if path not in _INT_MODELS:
        model = load_checkpoint(path).model if model is None else model
        _INT_MODELS[path] = IntModel(model.eval())
    return _INT_MODELS[path]
