"""What a decoding policy decides, and the EMA accounting every policy shares.

A policy is asked, for every forward pass (its `PassKind`: PREFILL, AR, DRAFT or VERIFY):
- `router(kind, tokens)`: the experts each token uses (None: the model's own top-k);
- `channels(kind, depths)`: which input channels of each used expert are fetched and computed
  on (None: all of them), as a `ChannelHook` that also counts the bytes it fetched;
- `pass_bytes(...)`: the external-memory bytes the pass moved (policies that keep experts on
  chip between passes update what they keep here);
and, for speculative decoding, `draft_engine(engine)`: the model the draft runs (Specter's has
quantized experts), and `expansion(...)`: which drafted nodes grow and are verified. `decode` is the
policy's own DecodeConfig (Specter drafts a chain). `draft` says what drafts: "self" (the target's
own layers, `draft_engine`) or "eagle" (the EAGLE head of golden/decoding/eagle/, given to the
constructor; refused by the policies whose rules read the draft's per-layer routing,
`EAGLE_REFUSAL`).

Prefill is costed for an accelerator whose on-chip buffers hold the activations of
`prefill_chunk` consecutive prompt tokens and which streams each expert's weights once per chunk
(docs/policies.md): a 96-token prompt touches nearly every expert, so charging one fetch per
expert per pass would leave no routing policy anything to save.

The base class is naive speculative decoding: the draft is the model with top-`draft_experts`
routing, verification uses the model's own routing, the tree is the `max_candidates` nodes of
highest draft probability (`Expansion`), and every pass fetches the whole of every expert its
tokens use, once per pass, with nothing kept on chip between passes. `Autoregressive` beside it is
plain decoding; the other policies (golden/policies/, one module per family) override what they
change.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod

import torch

from ...contracts.config import DecodeConfig
from ...contracts.trace import PassKind
from ...contracts.weight_layout import Matrix, WeightLayout, channel_runs
from .eagle.head import EagleHead, IntEagleHead
from ..integer.int_model import IntModel
from ..lm.model import LayerTrace, Router, route

__all__ = ["ChannelHook", "Policy", "Autoregressive", "PassFetches", "ExpertSlots", "Expansion",
           "used_experts", "hottest", "chunked_expert_fetches"]


def chunked_expert_fetches(experts: torch.Tensor, chunk: int) -> int:
    """Whole-expert fetches for one layer's routing experts [T, j] (-1: none) when the tokens are
    processed in runs of `chunk` consecutive tokens and each run fetches its distinct experts."""
    if chunk < 1:
        raise ValueError(f"chunk = {chunk} is out of range: accepted integers >= 1")
    return sum(int(torch.unique(rows[rows >= 0]).numel()) for rows in experts.split(chunk))


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


class ExpertSlots:
    """Whole experts kept on chip between passes: per layer at most `capacity` experts, in
    least-recently-used order (the last entry was used last)."""

    def __init__(self, n_layers: int, capacity: int):
        self.capacity = capacity
        self.layers: list[list[int]] = [[] for _ in range(n_layers)]

    def __contains__(self, key: tuple[int, int]) -> bool:
        layer, expert = key
        return expert in self.layers[layer]

    def touch(self, layer: int, expert: int) -> bool:
        """Use `expert`: True if it was on chip; otherwise it is loaded, evicting the least
        recently used expert when the layer is full."""
        slots = self.layers[layer]
        hit = expert in slots
        if hit:
            slots.remove(expert)
        elif len(slots) >= self.capacity:
            slots.pop(0)
        slots.append(expert)
        return hit

    def replace(self, layer: int, experts: list[int]) -> None:
        """Keep exactly `experts` (at most `capacity`; the first is treated as used last)."""
        if len(experts) > self.capacity:
            raise ValueError(f"{len(experts)} experts do not fit {self.capacity} slots")
        self.layers[layer] = list(reversed(experts))


def used_experts(trace: LayerTrace) -> list[int]:
    """The distinct experts a layer's tokens used, ascending."""
    return torch.unique(trace.experts[trace.experts >= 0]).tolist()


def hottest(trace: LayerTrace, count: int) -> list[int]:
    """The `count` experts a layer's tokens used most (ties: larger summed routing weight, then
    lower index), hottest first."""
    idx, w = trace.experts.reshape(-1), trace.weights.reshape(-1)
    valid = idx >= 0
    uses = torch.bincount(idx[valid], minlength=trace.router_logits.shape[-1]).to(torch.float64)
    weight = torch.zeros_like(uses).index_add(0, idx[valid], w[valid].to(torch.float64))
    # uses dominate: a weight sum is below the number of uses, so it only breaks ties
    order = torch.sort(-(uses * (weight.sum() + 1) + weight), stable=True).indices
    return [e for e in order[:count].tolist() if uses[e] > 0]


class Expansion:
    """How one draft tree grows: after each draft pass, `admit` names the nodes just drafted
    (the root is -1) whose children are proposed; at the end `select` names the nodes to verify.
    `routed[n]` [layers, top_k] holds the draft router's top-k for every node a draft pass ran
    on. Base (EAGLE-2): every node grows, the `max_candidates` most probable are verified (a
    path's probability never rises, so they include their ancestors)."""

    def __init__(self, cfg: DecodeConfig):
        self.cfg = cfg

    def admit(self, pool, routed: dict[int, torch.Tensor], drafted: list[int]) -> list[int]:
        return drafted

    def select(self, pool, routed: dict[int, torch.Tensor]) -> list[int]:
        return sorted(range(len(pool.tokens)),
                      key=lambda n: (-pool.scores[n], n))[:self.cfg.max_candidates]


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
    """Naive speculative decoding (see the module doc).

    Every policy is whole when constructed: `prefill_chunk` (policies.prefill.chunk; 16, its
    default there, for a policy built by hand) and `eagle`, the EAGLE head it drafts with (None:
    its own layers), are keyword arguments that subclasses pass through as `**base`."""
    name = "naive_sd"
    speculative = True
    #: the model this policy decodes with when it is not the compared one (EdgeXpert on a
    #: pruned-and-recovered checkpoint); None: the compared model
    model = None
    #: why this policy cannot draft with an EAGLE head (None: it can)
    EAGLE_REFUSAL: str | None = None
    #: how the platform's SRAM is used (sim/perf/traffic.py `onchip_plan`): "configured", the
    #: configuration's split (policies.onchip_expert_kib for expert slots, resident_nonexpert_kib
    #: for non-expert weights); "reuse", by reads per step (the draft head, then non-expert weights)
    onchip = "configured"

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, *, prefill_chunk: int = 16,
                 eagle: EagleHead | None = None):
        self.layout = layout
        self.decode = decode
        #: prompt tokens whose activations the on-chip buffers hold at once
        self.prefill_chunk = prefill_chunk
        if eagle is not None:
            self.check_eagle()
        # the head drafts in float64 (a copy), as golden.decoding.decode.FloatEngine runs the target
        self.eagle = None if eagle is None else copy.deepcopy(eagle).to_double()
        # what one of the head's draft passes reads of its weights
        self.eagle_bytes = 0 if eagle is None else eagle.weight_bytes()
        self.draft = "eagle" if eagle is not None else "self" if self.speculative else "none"
        self._int_eagle = None

    @classmethod
    def check_eagle(cls) -> None:
        """Raises ValueError when this policy cannot draft with an EAGLE head."""
        if not cls.speculative:
            raise ValueError(f"{cls.name} does not draft: it takes no eagle head")
        if cls.EAGLE_REFUSAL is not None:
            raise ValueError(f"{cls.name} cannot draft with the eagle head: {cls.EAGLE_REFUSAL}")

    def eagle_for(self, engine):
        """The head that drafts for `engine`: on the integer path its A8W4 twin
        (golden.decoding.eagle.head.IntEagleHead, built once per integer model), else the
        float64 head."""
        if not isinstance(engine, IntModel):
            return self.eagle
        if self._int_eagle is None or self._int_eagle[0] is not engine:
            self._int_eagle = (engine, IntEagleHead(self.eagle, engine))
        return self._int_eagle[1]

    def start(self, prompt: list[int]) -> None:
        """Called before each prompt (policies with state across passes reset it here)."""

    def router(self, kind: PassKind, tokens: torch.Tensor) -> Router | None:
        if kind == PassKind.DRAFT:
            k = self.decode.draft_experts
            return lambda layer, logits, h: route(logits, k)
        return None

    def channels(self, kind: PassKind, depths: torch.Tensor) -> ChannelHook | None:
        return None

    def draft_engine(self, engine):
        return engine

    def expansion(self, cfg: DecodeConfig, top_k: int) -> "Expansion":
        return Expansion(cfg)

    def pass_bytes(self, kind: PassKind, traces: list[LayerTrace],
                   hook: ChannelHook | None) -> int:
        if hook is not None:
            return hook.bytes
        if kind == PassKind.PREFILL:
            experts = sum(chunked_expert_fetches(t.experts, self.prefill_chunk) for t in traces)
        else:
            experts = sum(len(used_experts(t)) for t in traces)
        return experts * self.layout.expert_fetch_bytes


class Autoregressive(Policy):
    """Plain decoding: the speculative machinery is not used."""
    name = "ar"
    speculative = False
