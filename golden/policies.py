"""The policies compared by `edgexpert compare` (docs/policies.md says what each does and why).

- `Autoregressive`: plain decoding (one token per pass, whole experts).
- `Policy` (golden/policy.py): naive speculative decoding.
- `EdgeXpert`: depth-aware channel coalescing in every draft and verification pass.
- `MoESpec`: verification-time expert budgeting with substitution.
"""

from __future__ import annotations

import torch

from ..config import DecodeConfig
from ..weight_layout import Matrix, WeightLayout
from .model import MoEModel, Router, route
from .policy import ChannelHook, Policy

__all__ = ["Autoregressive", "EdgeXpert", "MoESpec", "pruning_masks", "CoalescingHook"]


class Autoregressive(Policy):
    """Plain decoding: the speculative machinery is not used."""
    name = "ar"
    speculative = False


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


class CoalescingHook(ChannelHook):
    """EdgeXpert's depth coalescing for one pass: for each depth group and expert, the input
    channels with the largest summed importance sum_c |x_c[j]| * g_c,e * m_e,j over the group's
    candidates c that use the expert are fetched once for the group (`ratio` of the channels;
    DOWN likewise over the hidden vectors). With `calibration` every candidate of the group
    computes on all fetched channels; without it, on the fetched channels its own importance
    would also have chosen."""

    def __init__(self, layout: WeightLayout, depths: torch.Tensor, masks, ratio: float,
                 calibration: bool):
        super().__init__(layout, depths)
        self.masks = masks
        self.ratio = ratio
        self.calibration = calibration

    def _select(self, layer, expert, matrix, rows, values, weights) -> torch.Tensor:
        prune = self.masks[layer][matrix][expert]
        # a pruned channel (m = 0) has no importance whatever x is: it is never fetched
        keep = max(1, min(round(self.ratio * values.shape[1]), int(prune.sum())))
        out = torch.zeros_like(values)
        for depth in torch.unique(self.depths[rows]).tolist():
            group = torch.nonzero(self.depths[rows] == depth)[:, 0]
            importance = values[group].abs() * weights[group, None] * prune
            chosen = torch.sort(-importance.sum(0), stable=True).indices[:keep]
            self.fetches.fetch(layer, expert, matrix, chosen.tolist())
            fetched = torch.zeros(values.shape[1], dtype=values.dtype)
            fetched[chosen] = 1
            if self.calibration:
                out[group] = fetched
            else:
                own = torch.sort(-importance, dim=1, stable=True).indices[:, :keep]
                mine = torch.zeros(len(group), values.shape[1], dtype=values.dtype)
                mine.scatter_(1, own, 1.0)
                out[group] = mine * fetched
        return out

    def gate_up(self, layer, expert, rows, x, weights):
        return self._select(layer, expert, Matrix.GATE_UP, rows, x, weights)

    def down(self, layer, expert, rows, hidden, weights):
        return self._select(layer, expert, Matrix.DOWN, rows, hidden, weights)


class EdgeXpert(Policy):
    """Decode: depth-aware channel coalescing (`CoalescingHook`) in every draft and
    verification pass, with the model's pruning mask in the importance."""
    name = "edgexpert"

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, model: MoEModel,
                 ratio: float = 0.5, sparsity: float = 0.25, calibration: bool = True):
        super().__init__(layout, decode)
        if not 0 < ratio <= 1:
            raise ValueError(f"ratio = {ratio} is out of range: accepted (0, 1]")
        self.ratio, self.calibration = ratio, calibration
        self.masks = pruning_masks(model, sparsity)

    def channels(self, kind, depths):
        if kind not in ("draft", "verify"):
            return None
        return CoalescingHook(self.layout, depths, self.masks, self.ratio, self.calibration)


class MoESpec(Policy):
    """MoE-Spec: in every verification pass and layer, the experts with the largest summed
    router probability over the tree's tokens form a budget of B; each token takes its top-k
    within the budget (substitution, not truncation)."""
    name = "moe_spec"

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, top_k: int, budget: int):
        super().__init__(layout, decode)
        if not top_k <= budget <= layout.n_experts:
            raise ValueError(f"budget = {budget} is out of range: accepted {top_k}..{layout.n_experts}")
        self.top_k, self.budget = top_k, budget

    def router(self, kind: str, tokens: torch.Tensor) -> Router | None:
        if kind != "verify":
            return super().router(kind, tokens)
        k, budget = self.top_k, self.budget

        def within_budget(layer, logits, h):
            score = torch.softmax(logits, dim=-1).sum(0)
            keep = torch.sort(-score, stable=True).indices[:budget]
            outside = torch.ones(logits.shape[-1], dtype=torch.bool)
            outside[keep] = False
            return route(logits.masked_fill(outside, float("-inf")), k)
        return within_budget
