"""The float MoE language model: decoder-only, RMSNorm, multi-head (or grouped-query) attention
with learned or rotary positions, and a Mixture-of-Experts FFN of SwiGLU experts in every layer.

Routing: router logits z = W_r x; the top-k experts by logit are chosen (ties to the lower expert
index). Weights: a softmax over the k chosen logits (`norm_topk_prob`, Mixtral / Qwen3; the
bundled model), or the chosen experts' entries of a softmax over all logits (OLMoE). Optional
shared experts are always active with weight 1.

Two forward paths share the weights:
- `forward(tokens)` for training and evaluation: causal attention over whole sequences, experts
  dispatched by grouping token-expert pairs per expert (`MoE.dispatch_grouped`);
- `step(...)` for decoding: a KV cache, any attention mask (draft trees), and routing that a
  policy may replace. golden/decoding/decode.py runs it in float64, so that a token's logits do not depend
  on which other tokens share the pass.

Expert weights are stored batched: w_gate / w_up [E, F, D] and w_down [E, D, F]; their layout in
external memory is edgexpert.contracts.weight_layout's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ...contracts.config import ModelConfig

__all__ = ["RMSNorm", "MoE", "Block", "MoEModel", "route", "routing_weights", "balance_losses",
           "rope_tables", "apply_rope", "KVCache", "LayerTrace", "Router"]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def route(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Indices of the top-k experts by logit, ties to the lower index."""
    # a stable sort on the negated logits keeps the lower index first among equals, which
    # torch.topk does not promise
    return torch.sort(-logits, dim=-1, stable=True).indices[..., :k]


def routing_weights(logits: torch.Tensor, idx: torch.Tensor, norm_topk_prob: bool) -> torch.Tensor:
    """Weights of the chosen experts idx [T, j] (-1: none, weight 0)."""
    valid = idx >= 0
    safe = torch.where(valid, idx, torch.zeros_like(idx))
    if norm_topk_prob:
        chosen = torch.gather(logits, -1, safe).masked_fill(~valid, float("-inf"))
        return torch.softmax(chosen, dim=-1)
    return torch.gather(torch.softmax(logits, dim=-1), -1, safe).masked_fill(~valid, 0.0)


def rope_tables(positions: torch.Tensor, dim: int, theta: float, dtype=torch.float32):
    """cos and sin [T, dim] of rotary positions, in the rotate-half convention (GPT-NeoX / HF)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


#: a policy's routing for one layer: (layer, router logits [T, E], MoE input [T, D]) ->
#: expert ids [T, j] (-1 pads a token that uses fewer); the weights follow the model's rule
#: over the chosen experts (`routing_weights`)
Router = Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class LayerTrace:
    """What one layer of a decoding pass did (for metrics, traces and policies)."""
    moe_input: torch.Tensor       # [T, D] MoE input (after norm2; dequantized on the int path)
    router_logits: torch.Tensor   # [T, E]
    experts: torch.Tensor         # [T, j] chosen routed experts, -1 for none
    weights: torch.Tensor         # [T, j] their routing weights
    int_data: dict | None = None  # the integer path's exact values (golden.integer.int_model)
    #: [T, D] the residual stream after the layer (dequantized on the int path): the feature an
    #: EAGLE draft head reads (golden/decoding/eagle/)
    output: torch.Tensor | None = None


@dataclass
class KVCache:
    """Per layer, named tensors whose axis 1 runs over cached tokens (keys and values
    [H_kv, L, head_dim], and on the integer path the keys' scales [H_kv, L]), plus each entry's
    position, and `entries`: named tensors whose axis 0 runs over the cached tokens, kept and
    dropped with them (an EAGLE draft keeps each entry's token and target features there,
    golden/decoding/eagle/draft.py), and `draft`: what a draft head keeps across steps next to
    this cache (golden/decoding/eagle/draft.py; a fork shares it)."""
    layers: list = field(default_factory=list)
    positions: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))
    entries: dict = field(default_factory=dict)
    draft: dict | None = None

    def __len__(self):
        return int(self.positions.numel())

    def extend(self, layer: int, **new: torch.Tensor) -> list[torch.Tensor]:
        """Append the new entries of `layer` and return the whole cache of each name, in order."""
        if len(self.layers) <= layer:
            self.layers.append({name: t[:, :0] for name, t in new.items()})
        stored = self.layers[layer]
        for name, t in new.items():
            stored[name] = torch.cat([stored[name], t], dim=1)
        return [stored[name] for name in new]

    def fork(self) -> "KVCache":
        """A cache that starts with these entries and grows on its own (tensors are shared until
        either side appends, which makes new ones)."""
        return KVCache([dict(layer) for layer in self.layers], self.positions, dict(self.entries),
                       self.draft)

    def keep(self, index: torch.Tensor) -> None:
        """Keep only the entries at `index` (e.g. the prefix and the accepted tree path)."""
        self.layers = [{name: t[:, index] for name, t in layer.items()} for layer in self.layers]
        self.positions = self.positions[index]
        self.entries = {name: t[index] for name, t in self.entries.items()}


class MoE(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d, f, e = cfg.d_model, cfg.expert_ffn, cfg.n_experts
        self.top_k = cfg.top_k
        self.norm_topk_prob = cfg.norm_topk_prob
        self.dispatch = "grouped"   # or "loop": the per-expert reference (bench dispatch)
        self.router = nn.Linear(d, e, bias=False)
        self.w_gate = nn.Parameter(torch.empty(e, f, d))
        self.w_up = nn.Parameter(torch.empty(e, f, d))
        self.w_down = nn.Parameter(torch.empty(e, d, f))
        s = cfg.n_shared_experts
        self.s_gate = nn.Parameter(torch.empty(s, f, d))
        self.s_up = nn.Parameter(torch.empty(s, f, d))
        self.s_down = nn.Parameter(torch.empty(s, d, f))

    @staticmethod
    def expert_ffn(x, gate, up, down):
        """SwiGLU of token rows x [..., C, D] through experts stacked on the leading axis."""
        return torch.matmul(F.silu(torch.matmul(x, gate.transpose(-1, -2)))
                            * torch.matmul(x, up.transpose(-1, -2)), down.transpose(-1, -2))

    def dispatch_grouped(self, x, idx, weights):
        """The routed experts' output [N, D] for inputs x [N, D] routed to experts idx [N, k]
        with weights [N, k] (the shared experts not included). Every (token, expert) pair is
        computed once: pairs are sorted by expert, copied into an [E, C, D] buffer (C = the
        busiest expert's count, so nothing is dropped), run through one batched matmul per
        weight, and gathered back with their routing weights."""
        n, k = idx.shape
        n_exp = self.w_gate.shape[0]
        flat = idx.reshape(-1)
        order = torch.argsort(flat, stable=True)
        expert_of = flat[order]
        counts = torch.bincount(flat, minlength=n_exp)
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(n * k, device=x.device) - starts[expert_of]
        token_of = order // k
        capacity, d = int(counts.max()), x.shape[-1]
        # index_copy / index_select on a flat view: their backward passes are gathers, much
        # cheaper on the CPU than the scatter that advanced-index assignment needs
        row = expert_of * capacity + slot
        buf = x.new_zeros(n_exp * capacity, d).index_copy(0, row, x.index_select(0, token_of))
        out = self.expert_ffn(buf.view(n_exp, capacity, d), self.w_gate, self.w_up, self.w_down)
        contrib = out.reshape(-1, d).index_select(0, row) * weights.reshape(-1)[order, None]
        return x.new_zeros(x.shape).index_add(0, token_of, contrib)

    def dispatch_loop(self, x, idx, weights):
        """The plain per-expert loop (each expert gathers its tokens and runs alone): the
        reference the grouped dispatch is checked against and the baseline of
        `edgexpert bench dispatch`."""
        y = torch.zeros_like(x)
        for e in range(self.w_gate.shape[0]):
            rows, slots = torch.nonzero(idx == e, as_tuple=True)
            if len(rows):
                out = self.expert_ffn(x[rows], self.w_gate[e], self.w_up[e], self.w_down[e])
                y = y.index_add(0, rows, out * weights[rows, slots, None])
        return y

    def shared(self, x):
        if not self.s_gate.shape[0]:
            return torch.zeros_like(x)
        return self.expert_ffn(x.unsqueeze(0), self.s_gate, self.s_up, self.s_down).sum(0)

    def forward(self, x):
        """x [N, D] -> (y [N, D], router logits [N, E], chosen experts [N, k])."""
        logits = self.router(x)
        idx = route(logits, self.top_k)
        dispatch = self.dispatch_grouped if self.dispatch == "grouped" else self.dispatch_loop
        y = dispatch(x, idx, routing_weights(logits, idx, self.norm_topk_prob))
        return y + self.shared(x), logits, idx


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.n_heads, self.n_kv, self.hd = cfg.n_heads, cfg.kv_heads, cfg.dim_head
        self.norm1 = RMSNorm(cfg.d_model, cfg.rms_eps)
        self.qkv = nn.Linear(cfg.d_model, (self.n_heads + 2 * self.n_kv) * self.hd, bias=False)
        self.proj = nn.Linear(self.n_heads * self.hd, cfg.d_model, bias=False)
        if cfg.qk_norm != "none":
            full = cfg.qk_norm == "full"
            self.q_norm = RMSNorm(self.n_heads * self.hd if full else self.hd, cfg.rms_eps)
            self.k_norm = RMSNorm(self.n_kv * self.hd if full else self.hd, cfg.rms_eps)
        self.norm2 = RMSNorm(cfg.d_model, cfg.rms_eps)
        self.moe = MoE(cfg)

    def project(self, x, positions):
        """x [..., S, D] -> q [..., H, S, hd], k and v [..., H_kv, S, hd] (normed, rotated)."""
        *lead, s, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(
            [self.n_heads * self.hd, self.n_kv * self.hd, self.n_kv * self.hd], dim=-1)
        if self.cfg.qk_norm == "full":
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(*lead, s, self.n_heads, self.hd).transpose(-2, -3)
        k = k.view(*lead, s, self.n_kv, self.hd).transpose(-2, -3)
        v = v.view(*lead, s, self.n_kv, self.hd).transpose(-2, -3)
        if self.cfg.qk_norm == "head":
            q, k = self.q_norm(q), self.k_norm(k)
        if self.cfg.rope_theta:
            cos, sin = rope_tables(positions, self.hd, self.cfg.rope_theta, x.dtype)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        return q, k, v

    def forward(self, x, positions):
        b, s, d = x.shape
        q, k, v = self.project(x, positions)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             enable_gqa=self.n_kv != self.n_heads)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, self.n_heads * self.hd))
        y, logits, idx = self.moe(self.norm2(x).reshape(b * s, d))
        return x + y.view(b, s, d), logits, idx


class MoEModel(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if not cfg.rope_theta:
            self.pos_emb = nn.Embedding(cfg.max_seq_len, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm_f = RMSNorm(cfg.d_model, cfg.rms_eps)
        if not cfg.tie_embeddings:
            self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        # residual-branch outputs shrink with depth (GPT-2), so the stream's scale stays put
        out_std = std / math.sqrt(2 * self.cfg.n_layers)
        norms = {id(m.weight) for m in self.modules() if isinstance(m, RMSNorm)}
        for name, p in self.named_parameters():
            if id(p) in norms:
                nn.init.ones_(p)
            elif name.endswith(("proj.weight", "w_down", "s_down")):
                nn.init.normal_(p, 0.0, out_std)
            else:
                nn.init.normal_(p, 0.0, std)

    def head_weight(self):
        return self.tok_emb.weight if self.cfg.tie_embeddings else self.lm_head.weight

    def embed(self, tokens, positions):
        x = self.tok_emb(tokens)
        return x if self.cfg.rope_theta else x + self.pos_emb(positions)

    def _check_positions(self, positions):
        if not self.cfg.rope_theta and positions.numel() and int(positions.max()) >= self.cfg.max_seq_len:
            raise ValueError(f"position {int(positions.max())} is beyond max_seq_len "
                             f"{self.cfg.max_seq_len}: accepted 0..{self.cfg.max_seq_len - 1}")

    def forward(self, tokens):
        """tokens [B, S] -> (logits [B, S, V], per-layer router logits, per-layer chosen experts)."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        self._check_positions(positions)
        x = self.embed(tokens, positions)
        router_logits, chosen = [], []
        for layer in self.layers:
            x, logits, idx = layer(x, positions)
            router_logits.append(logits)
            chosen.append(idx)
        return F.linear(self.norm_f(x), self.head_weight()), router_logits, chosen

    @torch.no_grad()
    def step(self, tokens, positions, cache: KVCache, allowed, router: Router | None = None,
             channels=None):
        """Decode `tokens` [T] at `positions` [T] against `cache`, appending their keys and values.

        allowed [T, len(cache) + T]: which cached and new entries each token attends to (causal
        for plain decoding, ancestors for a draft tree). `router(layer, logits, moe_input)`
        replaces top-k routing; `channels` (a golden.decoding.policy.ChannelHook) masks the input channels
        each routed expert computes on. Returns (logits [T, V], [LayerTrace per layer]).
        """
        self._check_positions(positions)
        x = self.embed(tokens, positions)
        mask = torch.zeros(allowed.shape, dtype=x.dtype).masked_fill(~allowed, float("-inf"))
        traces = []
        for n, layer in enumerate(self.layers):
            q, k, v = layer.project(x, positions)
            keys, values = cache.extend(n, k=k, v=v)
            group = layer.n_heads // layer.n_kv
            att = torch.softmax(q @ keys.repeat_interleave(group, 0).transpose(-1, -2)
                                / math.sqrt(layer.hd) + mask, dim=-1)
            out = (att @ values.repeat_interleave(group, 0)).transpose(0, 1).reshape(len(tokens), -1)
            x = x + layer.proj(out)
            h = layer.norm2(x)
            logits = layer.moe.router(h)
            idx = route(logits, layer.moe.top_k) if router is None else router(n, logits, h)
            weights = routing_weights(logits, idx, layer.moe.norm_topk_prob)
            y = layer.moe.shared(h)
            for e in torch.unique(idx[idx >= 0]).tolist():
                rows, slots = torch.nonzero(idx == e, as_tuple=True)
                xe, g = h[rows], weights[rows, slots]
                if channels is not None:
                    xe = xe * channels.gate_up(n, e, rows, xe, g)
                hidden = F.silu(xe @ layer.moe.w_gate[e].t()) * (xe @ layer.moe.w_up[e].t())
                if channels is not None:
                    hidden = hidden * channels.down(n, e, rows, hidden, g)
                y = y.index_add(0, rows, g[:, None] * (hidden @ layer.moe.w_down[e].t()))
            x = x + y
            traces.append(LayerTrace(h, logits, idx, weights, output=x))
        cache.positions = torch.cat([cache.positions, positions])
        return F.linear(self.norm_f(x), self.head_weight()), traces


def balance_losses(router_logits: list[torch.Tensor], chosen: list[torch.Tensor],
                   n_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Load-balancing loss (Switch Transformer / OLMoE: E * sum_e f_e * P_e, f_e the share of
    token-expert pairs routed to e, P_e the mean router probability of e; 1 when uniform) and
    the router z-loss (OLMoE: mean of logsumexp(z)^2), each averaged over layers."""
    lb, z = 0.0, 0.0
    for logits, idx in zip(router_logits, chosen):
        probs = torch.softmax(logits, dim=-1)
        share = torch.bincount(idx.reshape(-1), minlength=n_experts).to(probs.dtype) / idx.numel()
        lb = lb + n_experts * torch.sum(share * probs.mean(0))
        z = z + torch.logsumexp(logits, dim=-1).pow(2).mean()
    return lb / len(chosen), z / len(chosen)
