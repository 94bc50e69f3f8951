"""Policies that keep whole experts on chip between passes (docs/policies.md): their shared
base (`ResidentPolicy`), SpecMoE (a draft on the resident experts by affinity, HotTemporal
refresh) and `ResidentAR`, the reference that decodes plainly with the same slots."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from ...contracts.config import DecodeConfig
from ...contracts.trace import PassKind
from ...contracts.weight_layout import WeightLayout
from ..decoding.policy import ExpertSlots, Policy, hottest, used_experts
from ..lm.model import LayerTrace, MoEModel, Router, route

__all__ = ["affinity_order", "ResidentPolicy", "ResidentAR", "SpecMoE"]


def affinity_order(model: MoEModel) -> list[torch.Tensor]:
    """SpecMoE's offline affinity table, per layer [E, E]: row e lists the experts by the L2
    distance of their weights (gate, up and down together) to e's, e itself first."""
    out = []
    for block in model.layers:
        moe = block.moe
        flat = torch.cat([moe.w_gate.flatten(1), moe.w_up.flatten(1), moe.w_down.flatten(1)],
                         dim=1).detach().double()
        out.append(torch.sort(torch.cdist(flat, flat), dim=1, stable=True).indices)
    return out


class ResidentPolicy(Policy, ABC):
    """Policies that keep `slots` whole experts per layer on chip between passes; after the
    prefill the prompt's hottest experts are the ones kept (they were just loaded)."""

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, slots: int, **base):
        super().__init__(layout, decode, **base)
        if not 1 <= slots <= layout.n_experts:
            raise ValueError(f"slots = {slots} is out of range: accepted 1..{layout.n_experts}")
        self.slots = ExpertSlots(layout.n_layers, slots)

    def start(self, prompt):
        self.slots = ExpertSlots(self.layout.n_layers, self.slots.capacity)

    def keep_hottest(self, traces: list[LayerTrace]) -> None:
        """The experts the pass used most stay; slots they leave free keep what they held, most
        recently used first (it is on chip already)."""
        for layer, trace in enumerate(traces):
            hot = hottest(trace, self.slots.capacity)
            held = [e for e in reversed(self.slots.layers[layer]) if e not in hot]
            self.slots.replace(layer, (hot + held)[:self.slots.capacity])

    def pass_bytes(self, kind, traces, hook):
        if kind != PassKind.PREFILL:
            return self.decode_bytes(kind, traces)
        moved = super().pass_bytes(kind, traces, hook)
        self.keep_hottest(traces)
        return moved

    @abstractmethod
    def decode_bytes(self, kind: PassKind, traces: list[LayerTrace]) -> int:
        """Bytes of an AR, DRAFT or VERIFY pass, given and updating what is on chip."""

    def missing_bytes(self, traces: list[LayerTrace]) -> int:
        """Whole-expert fetches of the experts the pass used that were not on chip."""
        missing = sum(1 for layer, t in enumerate(traces) for e in used_experts(t)
                      if (layer, e) not in self.slots)
        return missing * self.layout.expert_fetch_bytes


class ResidentAR(ResidentPolicy):
    """A reference, not a published policy: plain decoding with the same on-chip slots, least
    recently used evicted. It shows how much of a resident policy's saving is the buffer alone."""
    name = "ar_resident"
    speculative = False

    def decode_bytes(self, kind, traces):
        return sum(not self.slots.touch(layer, e) for layer, t in enumerate(traces)
                   for e in used_experts(t)) * self.layout.expert_fetch_bytes


class SpecMoE(ResidentPolicy):
    """SpecMoE: the draft runs the target's non-expert layers and its gate, on the experts
    resident on chip only: a token's top-k expert that is not resident is replaced by the
    nearest resident one in the affinity table, so drafting moves no bytes. Verification uses
    the target's routing; each missing expert is fetched once. HotTemporal: the experts the
    verification used most become the next draft's resident set (they are on chip already)."""
    name = "specmoe"
    EAGLE_REFUSAL = ("its draft is the target's own layers on the resident experts; accepted "
                     "policies.draft paper or self")

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, model: MoEModel, slots: int,
                 **base):
        super().__init__(layout, decode, slots, **base)
        self.top_k = model.cfg.top_k
        self.affinity = affinity_order(model)

    def resident_router(self) -> Router:
        def draft(layer, logits, h):
            resident = set(self.slots.layers[layer])
            if not resident:      # nothing kept yet (a one-token prompt): load what it wants
                return route(logits, self.top_k)
            out = torch.full((logits.shape[0], self.top_k), -1, dtype=torch.long)
            for t, wanted in enumerate(route(logits, self.top_k).tolist()):
                chosen: list[int] = []
                for e in wanted:
                    # the nearest resident expert not chosen yet (e itself when resident)
                    stand_in = next((int(c) for c in self.affinity[layer][e]
                                     if int(c) in resident and int(c) not in chosen), None)
                    if stand_in is not None:
                        chosen.append(stand_in)
                out[t, :len(chosen)] = torch.tensor(chosen, dtype=torch.long)
            return out
        return draft

    def router(self, kind, tokens):
        if kind == PassKind.DRAFT:
            return self.resident_router()
        return super().router(kind, tokens)

    def decode_bytes(self, kind, traces):
        moved = self.missing_bytes(traces)     # 0 for drafts: resident experts only
        if kind == PassKind.VERIFY:
            self.keep_hottest(traces)
        return moved
