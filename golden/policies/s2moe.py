"""S2-MoE (docs/policies.md): routing-aware adaptive expansion of the draft tree, reuse-aware
gating in verification."""

from __future__ import annotations

import math

import torch

from ...contracts.config import DecodeConfig
from ...contracts.trace import PassKind
from ...contracts.weight_layout import WeightLayout
from ..decoding.policy import Expansion, Policy
from ..lm.model import Router, route

__all__ = ["reuse_aware_router", "AdaptiveExpansion", "S2MoE"]


def reuse_aware_router(top_k: int, cap: int) -> Router:
    """S2-MoE's reuse-aware gating for one verification pass: token weights w_b = max(0, max_e
    l_b,e - mean_e l_b,e) (normalized) score the experts g_e = sum_b w_b l_b,e; the `cap` best
    form the preferred set E*, whose logits get the bias lambda = mean_b (l_b,(1) - l_b,(k+1)),
    and each token takes its top-k of the biased logits. Only the choice is biased: the model
    computes the combine weights from the unbiased logits."""
    def gate(layer, logits, h):
        ordered = torch.sort(logits, dim=-1, descending=True).values
        w = torch.clamp(ordered[:, 0] - logits.mean(-1), min=0)
        w = w / w.sum() if float(w.sum()) > 0 else torch.full_like(w, 1 / len(w))
        score = (w[:, None] * logits).sum(0)
        preferred = torch.sort(-score, stable=True).indices[:cap]
        gap = (ordered[:, 0] - ordered[:, min(top_k, logits.shape[-1] - 1)]).mean()
        bias = torch.zeros(logits.shape[-1], dtype=logits.dtype)
        bias[preferred] = gap
        return route(logits + bias, top_k)
    return gate


class AdaptiveExpansion(Expansion):
    """S2-MoE's routing-aware adaptive expansion of one draft tree. Nodes are weighed best path
    first. A node is considered only when its parent is in the tree and its draft probability
    (its confidence) exceeds 0.1 (the branching rule). It joins the tree when, at depth 1, its
    confidence is at least 0.5, or when its score a * T_AR / (n_new * t_expert) reaches
    `threshold`: a = the product of the confidences along its path (its chance of acceptance),
    n_new = the (layer, expert) pairs its verification would add to those already selected,
    T_AR / t_expert = `ar_cost` (the experts an autoregressive step fetches), so that a node
    joins when it is expected to bring more tokens per fetched expert than plain decoding.
    Only nodes in the tree grow: drafting stops when no drafted node joins. n_new comes from
    the draft router's top-k for the node; the deepest proposals, on which no draft pass ran,
    are priced with their parent's. Pairs for which `free(layer, expert)` holds (already on
    chip) cost nothing."""

    def __init__(self, cfg: DecodeConfig, ar_cost: int, threshold: float,
                 free=lambda layer, expert: False):
        super().__init__(cfg)
        self.ar_cost, self.threshold, self.free = ar_cost, threshold, free
        self.selected: set[tuple[int, int]] = set()
        self.inside: list[int] = []
        self.decided: set[int] = set()

    def _pairs(self, pool, routed, n) -> set[tuple[int, int]]:
        while n not in routed:
            n = pool.parents[n]
        experts = routed[n]
        return {(layer, int(e)) for layer in range(experts.shape[0]) for e in experts[layer]
                if not self.free(layer, int(e))}

    def _weigh(self, pool, routed, nodes) -> None:
        for n in sorted(nodes, key=lambda n: (-pool.scores[n], n)):
            self.decided.add(n)
            parent = pool.parents[n]
            confidence = math.exp(pool.scores[n] - (pool.scores[parent] if parent >= 0 else 0.0))
            if len(self.inside) == self.cfg.max_candidates or confidence <= 0.1 or \
                    not (parent < 0 or parent in self.inside):
                continue
            new = self._pairs(pool, routed, n) - self.selected
            gain = math.exp(pool.scores[n]) * self.ar_cost
            if (pool.depths[n] == 1 and confidence >= 0.5) or \
                    gain >= self.threshold * max(len(new), 1e-9):
                self.inside.append(n)
                self.selected |= new

    def admit(self, pool, routed, drafted):
        if drafted == [-1]:                       # the root's pass: the root is always verified
            self.selected = self._pairs(pool, routed, -1)
            return drafted
        self._weigh(pool, routed, drafted)
        return [n for n in drafted if n in self.inside]

    def select(self, pool, routed):
        self._weigh(pool, routed, [n for n in range(len(pool.tokens)) if n not in self.decided])
        return list(self.inside)


class S2MoE(Policy):
    """S2-MoE: the self-speculative draft (top-`draft_experts`, the target's KV cache: context
    alignment, as every self-speculative policy here); the verified tree chosen by routing-aware
    adaptive expansion; reuse-aware gating in verification (cap experts preferred)."""
    name = "s2moe"
    EAGLE_REFUSAL = ("its adaptive expansion prices each node by the experts the draft's "
                     "per-layer routing names; accepted policies.draft paper or self")

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, top_k: int, threshold: float,
                 cap: int, **base):
        super().__init__(layout, decode, **base)
        if not top_k <= cap <= layout.n_experts:
            raise ValueError(f"cap = {cap} is out of range: accepted {top_k}..{layout.n_experts}")
        self.top_k, self.threshold, self.cap = top_k, threshold, cap

    def router(self, kind, tokens):
        if kind == PassKind.VERIFY:
            return reuse_aware_router(self.top_k, self.cap)
        return super().router(kind, tokens)

    def expansion(self, cfg, top_k):
        return AdaptiveExpansion(cfg, self.layout.n_layers * top_k, self.threshold)
