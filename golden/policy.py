"""What a decoding policy decides, and the EMA accounting every policy shares.

A policy is asked, for every forward pass (kind "prefill", "ar", "draft" or "verify"):
- `router(kind, tokens)`: the experts each token uses (None: the model's own top-k);
- `channels(kind, depths)`: which input channels of each used expert are fetched and computed
  on (None: all of them), as a `ChannelHook` that also counts the bytes it fetched;
- `pass_bytes(...)`: the external-memory bytes the pass moved.

The base class is naive speculative decoding: the draft is the model with top-`draft_experts`
routing, verification uses the model's own routing, and every pass fetches the whole of every
expert its tokens use, once per pass, with nothing kept on chip between passes. Other policies
(golden/policies.py) override what they change.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from ..config import DecodeConfig
from ..weight_layout import Matrix, WeightLayout, channel_runs
from .model import LayerTrace, Router, route

__all__ = ["KINDS", "ChannelHook", "Policy", "PassFetches"]

KINDS = ("prefill", "ar", "draft", "verify")


class PassFetches:
    """Bytes fetched by one pass when channels are chosen: per (layer, expert, matrix) the
    channels already on chip in this pass are not fetched again (the EMA controller's
    residency), the scale block comes with the first fetch of a matrix."""

    def __init__(self, layout: WeightLayout):
        self.layout = layout
        self.resident: dict[tuple[int, int, Matrix], set[int]] = {}
        self.bytes = 0

    def fetch(self, layer: int, expert: int, matrix: Matrix, channels) -> None:
        key = (layer, expert, matrix)
        first = key not in self.resident
        have = self.resident.setdefault(key, set())
        new = sorted(set(channels) - have)
        if first and new:
            self.bytes += self.layout.scale_bytes(matrix)
        stride, used = self.layout.column_stride(matrix), self.layout.column_bytes(matrix)
        self.bytes += sum((count - 1) * stride + used for _, count in channel_runs(new))
        have.update(new)


class ChannelHook(ABC):
    """Chooses the input channels an expert computes on, per group of a pass's tokens.

    `gate_up(layer, expert, rows, x, weights)` returns a 0/1 mask [len(rows), d_model] over the
    MoE inputs x of the tokens `rows` that use `expert` (routing weights `weights`); `down(...)`
    the same over the hidden vectors [len(rows), expert_ffn]. Subclasses record what they fetch
    in `self.fetches`."""

    def __init__(self, layout: WeightLayout, depths: torch.Tensor):
        self.depths = depths
        self.fetches = PassFetches(layout)

    @property
    def bytes(self) -> int:
        return self.fetches.bytes

    @abstractmethod
    def gate_up(self, layer, expert, rows, x, weights) -> torch.Tensor: ...

    @abstractmethod
    def down(self, layer, expert, rows, hidden, weights) -> torch.Tensor: ...


class Policy:
    """Naive speculative decoding (see the module doc)."""
    name = "naive_sd"
    speculative = True
    #: the model this policy decodes with when it is not the compared one (EdgeXpert on a
    #: pruned-and-recovered checkpoint); None: the compared model
    model = None

    def __init__(self, layout: WeightLayout, decode: DecodeConfig):
        self.layout = layout
        self.decode = decode

    def start(self, prompt: list[int]) -> None:
        """Called before each prompt (policies with state across passes reset it here)."""

    def router(self, kind: str, tokens: torch.Tensor) -> Router | None:
        if kind == "draft":
            k = self.decode.draft_experts
            return lambda layer, logits, h: route(logits, k)
        return None

    def channels(self, kind: str, depths: torch.Tensor) -> ChannelHook | None:
        return None

    def pass_bytes(self, kind: str, traces: list[LayerTrace], hook: ChannelHook | None) -> int:
        if hook is not None:
            return hook.bytes
        experts = sum(int(torch.unique(t.experts[t.experts >= 0]).numel()) for t in traces)
        return experts * self.layout.expert_fetch_bytes
