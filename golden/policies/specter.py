"""Specter (docs/policies.md): a quantized-expert draft chain whose routing prefetches experts
into LRU slots."""

from __future__ import annotations

import dataclasses
import math

import torch

from ...contracts.config import DecodeConfig
from ...contracts.trace import PassKind
from ...contracts.weight_layout import WeightLayout
from ..decoding.decode import FloatEngine
from ..decoding.policy import Policy, used_experts
from ..lm.model import MoEModel
from .resident import ResidentPolicy

__all__ = ["quantized_experts", "Specter"]


def quantized_experts(model: MoEModel, bits: int) -> MoEModel:
    """A copy of `model` with its routed experts' weights quantized to `bits` bits, symmetric,
    per output channel: round-to-nearest on the absolute maximum, or for 2 bits the ternary
    rule of Ternary Weight Networks (Li et al., 2016: threshold 0.7 mean |w|, scale the mean
    |w| above it), since a 2-bit absmax grid zeroes most weights."""
    copy = MoEModel(model.cfg).to(next(model.parameters()).dtype)
    copy.load_state_dict(model.state_dict())
    copy.eval()
    with torch.no_grad():
        for block in copy.layers:
            for w in (block.moe.w_gate, block.moe.w_up, block.moe.w_down):
                if bits == 2:
                    delta = 0.7 * w.abs().mean(-1, keepdim=True)
                    big = w.abs() > delta
                    scale = ((w.abs() * big).sum(-1, keepdim=True)
                             / big.sum(-1, keepdim=True).clamp(min=1))
                    w.copy_(torch.sign(w) * big * scale)
                else:
                    qmax = 2 ** (bits - 1) - 1
                    scale = w.abs().amax(-1, keepdim=True).clamp(min=1e-12) / qmax
                    w.copy_(torch.round(w / scale).clamp(-qmax, qmax) * scale)
    return copy


class Specter(ResidentPolicy):
    """Specter: the draft is the target with its routed experts quantized to `draft_bits` (a
    chain of `chain` tokens, the target's top-k routing); a draft pass fetches its experts'
    quantized copies. The draft's per-layer histogram of chosen experts names the experts to
    load into the LRU slots before verification (as many as there are slots); verification uses
    the resident experts first and demand-loads the rest into the slots (least recently used
    evicted)."""
    name = "specter"
    EAGLE_REFUSAL = ("its quantized self-draft's routing names the experts it prefetches; "
                     "accepted policies.draft paper or self")

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, model: MoEModel, slots: int,
                 chain: int, draft_bits: int, **base):
        super().__init__(layout, dataclasses.replace(decode, max_depth=chain, max_candidates=chain,
                                                     branch=1, width=1), slots, **base)
        if not 2 <= draft_bits <= 4:
            raise ValueError(f"draft_bits = {draft_bits} is out of range: accepted 2..4")
        self.target, self.draft_bits = model, draft_bits   # quantized on first use
        self.drafter = None
        self.histogram = torch.zeros(layout.n_layers, layout.n_experts, dtype=torch.long)

    def start(self, prompt):
        super().start(prompt)
        self.histogram.zero_()

    def draft_engine(self, engine):
        if self.drafter is None:
            self.drafter = FloatEngine(quantized_experts(self.target, self.draft_bits))
        return self.drafter

    def router(self, kind, tokens):
        return None        # the draft routes as the target does

    def decode_bytes(self, kind, traces):
        if kind == PassKind.DRAFT:
            for layer, t in enumerate(traces):
                self.histogram[layer] += torch.bincount(t.experts[t.experts >= 0],
                                                        minlength=self.layout.n_experts)
            # the quantized copies stream in like the int4 experts (the base policy's whole-expert
            # fetches), at draft_bits / 4 the size
            return math.ceil(Policy.pass_bytes(self, kind, traces, None) * self.draft_bits / 4)
        moved = 0
        for layer, t in enumerate(traces):
            if kind == PassKind.VERIFY:
                counts = self.histogram[layer]
                order = torch.sort(-counts, stable=True).indices[:self.slots.capacity]
                ahead = [e for e in order.tolist() if counts[e] > 0]
                moved += sum(not self.slots.touch(layer, e) for e in ahead)
            used = used_experts(t)
            # resident experts run first, then the demand loads
            for e in sorted(used, key=lambda e: (layer, e) not in self.slots):
                moved += not self.slots.touch(layer, e)
        self.histogram.zero_()
        return moved * self.layout.expert_fetch_bytes
