"""MoE-Spec (docs/policies.md): verification-time expert budgeting with substitution."""

from __future__ import annotations

import torch

from ...contracts.config import DecodeConfig
from ...contracts.trace import PassKind
from ...contracts.weight_layout import WeightLayout
from ..decoding.policy import Policy
from ..lm.model import Router, route

__all__ = ["MoESpec"]


class MoESpec(Policy):
    """MoE-Spec: in every verification pass and layer, the experts with the largest summed
    router probability over the tree's tokens form a budget of B; each token takes its top-k
    within the budget (substitution, not truncation)."""
    name = "moe_spec"

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, top_k: int, budget: int,
                 **base):
        super().__init__(layout, decode, **base)
        if not top_k <= budget <= layout.n_experts:
            raise ValueError(f"budget = {budget} is out of range: accepted "
                             f"{top_k}..{layout.n_experts}")
        self.top_k, self.budget = top_k, budget

    def router(self, kind: PassKind, tokens: torch.Tensor) -> Router | None:
        if kind != PassKind.VERIFY:
            return super().router(kind, tokens)
        k, budget = self.top_k, self.budget

        def within_budget(layer, logits, h):
            score = torch.softmax(logits, dim=-1).sum(0)
            keep = torch.sort(-score, stable=True).indices[:budget]
            outside = torch.ones(logits.shape[-1], dtype=torch.bool)
            outside[keep] = False
            return route(logits.masked_fill(outside, float("-inf")), k)
        return within_budget
