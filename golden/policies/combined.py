"""Ours (docs/policies.md, "The combined policy"): lossless, the EAGLE head kept on chip, the
SRAM by reuse, a tree chosen for the fewest total bytes; self-drafting, SpecMoE's resident draft
with S2-MoE's adaptive expansion priced by what is not on chip."""

from __future__ import annotations

import dataclasses

from ...contracts.config import DecodeConfig
from ...contracts.trace import PassKind
from ...contracts.weight_layout import WeightLayout
from ..decoding.eagle.head import EagleHead
from ..decoding.policy import Policy
from ..lm.model import MoEModel
from .prefill import PrefillRouting
from .resident import SpecMoE
from .s2moe import AdaptiveExpansion

__all__ = ["Combined"]


class Combined(SpecMoE):
    """Ours. Verification always uses the target's routing, so decoding is lossless: the output
    is exactly the target's greedy output. With `prefill`, EdgeXpert's shared-set routing in the
    prefill pass (lossy, policies.combined.prefill_reuse).

    With the EAGLE head (its paper draft, docs/policies.md "The combined policy"), priced on
    every byte a token costs:
    - the head drafts (no target pass, no expert per draft token);
    - the SRAM goes to what a step reads most often (`onchip = "reuse"`, priced by
      sim/perf/traffic.py `onchip_plan`): the head, read once per draft pass, before the target's
      non-expert weights, read once per verification; no expert slots (an expert's byte is read
      at most once a step, and only when a candidate picks it);
    - the tree is `tree` = (depth, candidates), chosen offline for the fewest total bytes per
      token (`edgexpert ablate tree`), as Specter chooses its chain.
    With its self-draft, SpecMoE's resident draft (no draft traffic; the draft routes into the
    resident experts by affinity) with S2-MoE's adaptive expansion priced by what is *not* on
    chip (resident experts cost nothing to verify) and HotTemporal refresh."""
    name = "combined"
    EAGLE_REFUSAL = None

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, model: MoEModel, slots: int,
                 threshold: float, tree: tuple[int, int], prefill: PrefillRouting | None = None,
                 eagle: EagleHead | None = None, **base):
        if eagle is not None:              # the head drafts the tree chosen for it
            decode = dataclasses.replace(decode, max_depth=tree[0], max_candidates=tree[1])
        super().__init__(layout, decode, model, slots, eagle=eagle, **base)
        self.threshold, self.prefill = threshold, prefill
        self.onchip = "reuse" if eagle is not None else "configured"

    def router(self, kind, tokens):
        if kind == PassKind.PREFILL and self.prefill is not None:
            return self.prefill.router(tokens, self.top_k)
        return super().router(kind, tokens)

    def expansion(self, cfg, top_k):
        if self.eagle is not None:         # the head does not route: nothing to price by
            return super().expansion(cfg, top_k)
        return AdaptiveExpansion(cfg, self.layout.n_layers * top_k, self.threshold,
                                 free=lambda layer, e: (layer, e) in self.slots)

    def pass_bytes(self, kind, traces, hook):
        if self.eagle is not None:         # no expert slots: every used expert is fetched
            return Policy.pass_bytes(self, kind, traces, hook)
        return super().pass_bytes(kind, traces, hook)
