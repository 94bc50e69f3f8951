"""The policies compared by `edgexpert compare` (docs/policies.md says what each does and why).

- `Autoregressive`: plain decoding (one token per pass, whole experts).
- `Policy` (golden/decoding/policy.py): naive speculative decoding.
- `EdgeXpert`: depth-aware channel coalescing in every draft and verification pass; with a
  prefill encoder, prompt-wise expert reuse in the prefill pass (golden/policies/prefill.py).
- `MoESpec`: verification-time expert budgeting with substitution.
- `S2MoE`: routing-aware adaptive expansion of the tree, reuse-aware gating in verification.
- `SpecMoE`: a draft on resident experts only (affinity substitution), HotTemporal refresh.
- `Specter`: a quantized-expert draft chain whose routing prefetches experts into LRU slots.
- `Combined`: ours, lossless: the EAGLE head kept on chip, the SRAM by reuse, a tree chosen for
  the fewest total bytes (or, self-drafting, the resident draft and the cost-aware tree).
- `ResidentAR`: a reference, plain decoding with the same on-chip slots.

The registry `POLICIES` builds each of them by name from the configuration (`build_policy`);
`COMPARED` are the ones `edgexpert compare` runs, in its order (`build_policies`). Each
speculative policy drafts with its own layers ("self") or with the EAGLE head (golden/decoding/eagle.py),
as `policies.draft` says; "paper" is the draft of each policy's paper (`PAPER_DRAFT`).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from typing import Callable

import torch

from ...contracts.config import Config, ConfigError, DecodeConfig
from ...contracts.weight_layout import Matrix, WeightLayout
from ..blocks import dcu
from ..decoding.decode import FloatEngine
from ..integer.int_model import RESIDUAL_FRAC
from ..integer.intops import quantize_vec
from ..lm.model import LayerTrace, MoEModel, Router, route
from ..decoding.policy import ChannelHook, Expansion, ExpertSlots, Policy, hottest, used_experts
from .prefill import PrefillRouting, TokenEncoder, prefill_routing
from ..lm.prune import load_pruned_checkpoint, pruning_masks

__all__ = ["Autoregressive", "EdgeXpert", "MoESpec", "S2MoE", "SpecMoE", "Specter", "Combined",
           "ResidentAR", "selected_count", "integer_inputs", "salient_channels", "CoalescingHook", "affinity_order",
           "quantized_experts", "AdaptiveExpansion", "reuse_aware_router", "on_chip_slots",
           "pruned_edgexpert", "POLICIES", "COMPARED", "PAPER_DRAFT", "build_policy",
           "build_policies"]


class Autoregressive(Policy):
    """Plain decoding: the speculative machinery is not used."""
    name = "ar"
    speculative = False


def selected_count(channels: int, ratio: float, prune: torch.Tensor | None = None) -> int:
    """How many channels a depth group fetches: `ratio` of them (rounded, at least one), and
    never a channel the pruning mask removed (golden/blocks/dcu.py, `keep_count`)."""
    return dcu.keep_count(channels, dcu.requested_count(channels, ratio), prune)


def integer_inputs(values: torch.Tensor, weights: torch.Tensor):
    """Float inputs [C rows, channels] and routing weights [C] as the integer path carries them
    into the DCU: each row in Q.16 quantized to int8 with its dyadic scale (`quantize_vec`,
    docs/contracts.md), the weights in Q.16. Returns (q, m, e, g_q16)."""
    q, scale = quantize_vec(torch.round(values.double() * 2**RESIDUAL_FRAC).to(torch.int64),
                            RESIDUAL_FRAC)
    return q, scale.m, scale.e, torch.round(weights.double() * 65536).to(torch.int64)


def salient_channels(values: torch.Tensor, weights: torch.Tensor, ratio: float,
                     prune: torch.Tensor | None = None) -> torch.Tensor:
    """EdgeXpert's selection for one depth group and expert, ascending: the DCU's integer
    selection (golden/blocks/dcu.py: importance sum_c |q_c[j]| * W_c over the group's candidates c,
    W_c from each candidate's scale and routing weight, the pruning mask m; the `ratio` share of
    the channels, at least one, ties to the lower channel) on the float inputs values [C,
    channels] and weights g [C] brought to the integer path's formats (`integer_inputs`). The
    mask traces (golden/traces/masks.py) call golden/blocks/dcu.py on the traces' integers directly."""
    q, m, e, g = integer_inputs(values, weights)
    return dcu.select(q, m, e, g, dcu.requested_count(values.shape[1], ratio), prune)


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
        keep = selected_count(values.shape[1], self.ratio, prune)
        out = torch.zeros_like(values)
        for depth in torch.unique(self.depths[rows]).tolist():
            group = torch.nonzero(self.depths[rows] == depth)[:, 0]
            chosen = salient_channels(values[group], weights[group], self.ratio, prune)
            self.fetches.fetch(layer, expert, matrix, chosen.tolist())
            fetched = torch.zeros(values.shape[1], dtype=values.dtype)
            fetched[chosen] = 1
            if self.calibration:
                out[group] = fetched
            else:
                # each candidate's own choice: the same selection on a group of one
                q, m, e, g = integer_inputs(values[group], weights[group])
                mine = torch.stack([dcu.select_mask(q[i:i + 1], m[i:i + 1], e[i:i + 1],
                                                    g[i:i + 1], keep, prune)
                                    for i in range(len(group))]).to(values.dtype)
                out[group] = mine * fetched
        return out

    def gate_up(self, layer, expert, rows, x, weights):
        return self._select(layer, expert, Matrix.GATE_UP, rows, x, weights)

    def down(self, layer, expert, rows, hidden, weights):
        return self._select(layer, expert, Matrix.DOWN, rows, hidden, weights)


class EdgeXpert(Policy):
    """Decode: depth-aware channel coalescing (`CoalescingHook`) in every draft and
    verification pass, with the model's pruning mask (golden/lm/prune.py) in the importance. Prefill: with
    `prefill` (the encoder and the thresholds and budgets), the shared-set routing of
    golden/policies/prefill.py; without, the model's own routing."""
    name = "edgexpert"

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, model: MoEModel,
                 ratio: float = 0.5, sparsity: float = 0.25, calibration: bool = True,
                 prefill: PrefillRouting | None = None):
        super().__init__(layout, decode)
        if not 0 < ratio <= 1:
            raise ValueError(f"ratio = {ratio} is out of range: accepted (0, 1]")
        self.ratio, self.calibration = ratio, calibration
        self.masks = pruning_masks(model, sparsity)
        self.top_k, self.prefill = model.cfg.top_k, prefill

    def router(self, kind: str, tokens: torch.Tensor) -> Router | None:
        if kind == "prefill" and self.prefill is not None:
            return self.prefill.router(tokens, self.top_k)
        return super().router(kind, tokens)

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
            if (pool.depths[n] == 1 and confidence >= 0.5) or gain >= self.threshold * max(len(new), 1e-9):
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
                 cap: int):
        super().__init__(layout, decode)
        if not top_k <= cap <= layout.n_experts:
            raise ValueError(f"cap = {cap} is out of range: accepted {top_k}..{layout.n_experts}")
        self.top_k, self.threshold, self.cap = top_k, threshold, cap

    def router(self, kind, tokens):
        if kind == "verify":
            return reuse_aware_router(self.top_k, self.cap)
        return super().router(kind, tokens)

    def expansion(self, cfg, top_k):
        return AdaptiveExpansion(cfg, self.layout.n_layers * top_k, self.threshold)


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


class _Resident(Policy, ABC):
    """Policies that keep `slots` whole experts per layer on chip between passes; after the
    prefill the prompt's hottest experts are the ones kept (they were just loaded)."""

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, slots: int):
        super().__init__(layout, decode)
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
        if kind != "prefill":
            return self.decode_bytes(kind, traces)
        moved = super().pass_bytes(kind, traces, hook)
        self.keep_hottest(traces)
        return moved

    @abstractmethod
    def decode_bytes(self, kind: str, traces: list[LayerTrace]) -> int:
        """Bytes of an "ar", "draft" or "verify" pass, given and updating what is on chip."""

    def missing_bytes(self, traces: list[LayerTrace]) -> int:
        """Whole-expert fetches of the experts the pass used that were not on chip."""
        missing = sum(1 for layer, t in enumerate(traces) for e in used_experts(t)
                      if (layer, e) not in self.slots)
        return missing * self.layout.expert_fetch_bytes


class ResidentAR(_Resident):
    """A reference, not a published policy: plain decoding with the same on-chip slots, least
    recently used evicted. It shows how much of a resident policy's saving is the buffer alone."""
    name = "ar_resident"
    speculative = False

    def decode_bytes(self, kind, traces):
        return sum(not self.slots.touch(layer, e) for layer, t in enumerate(traces)
                   for e in used_experts(t)) * self.layout.expert_fetch_bytes


class SpecMoE(_Resident):
    """SpecMoE: the draft runs the target's non-expert layers and its gate, on the experts
    resident on chip only: a token's top-k expert that is not resident is replaced by the
    nearest resident one in the affinity table, so drafting moves no bytes. Verification uses
    the target's routing; each missing expert is fetched once. HotTemporal: the experts the
    verification used most become the next draft's resident set (they are on chip already)."""
    name = "specmoe"
    EAGLE_REFUSAL = ("its draft is the target's own layers on the resident experts; accepted "
                     "policies.draft paper or self")

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, model: MoEModel, slots: int):
        super().__init__(layout, decode, slots)
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
        if kind == "draft":
            return self.resident_router()
        return super().router(kind, tokens)

    def decode_bytes(self, kind, traces):
        moved = self.missing_bytes(traces)     # 0 for drafts: resident experts only
        if kind == "verify":
            self.keep_hottest(traces)
        return moved


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
                    scale = (w.abs() * big).sum(-1, keepdim=True) / big.sum(-1, keepdim=True).clamp(min=1)
                    w.copy_(torch.sign(w) * big * scale)
                else:
                    qmax = 2 ** (bits - 1) - 1
                    scale = w.abs().amax(-1, keepdim=True).clamp(min=1e-12) / qmax
                    w.copy_(torch.round(w / scale).clamp(-qmax, qmax) * scale)
    return copy


class Specter(_Resident):
    """Specter: the draft is the target with its routed experts quantized to `draft_bits` (a
    chain of `chain` tokens, the target's top-k routing); a draft pass fetches its experts'
    quantized copies. The draft's per-layer histogram of chosen experts names the experts to
    load into the LRU slots before verification (as many as there are slots); verification uses the resident
    experts first and demand-loads the rest into the slots (least recently used evicted)."""
    name = "specter"
    EAGLE_REFUSAL = ("its quantized self-draft's routing names the experts it prefetches; "
                     "accepted policies.draft paper or self")

    def __init__(self, layout: WeightLayout, decode: DecodeConfig, model: MoEModel, slots: int,
                 chain: int, draft_bits: int):
        super().__init__(layout, dataclasses.replace(decode, max_depth=chain, max_candidates=chain,
                                                     branch=1, width=1), slots)
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
        if kind == "draft":
            for layer, t in enumerate(traces):
                self.histogram[layer] += torch.bincount(t.experts[t.experts >= 0],
                                                        minlength=self.layout.n_experts)
            # the quantized copies stream in like the int4 experts (the base policy's whole-expert
            # fetches), at draft_bits / 4 the size
            return math.ceil(Policy.pass_bytes(self, kind, traces, None) * self.draft_bits / 4)
        moved = 0
        for layer, t in enumerate(traces):
            if kind == "verify":
                counts = self.histogram[layer]
                ahead = [e for e in torch.sort(-counts, stable=True).indices[:self.slots.capacity].tolist()
                         if counts[e] > 0]
                moved += sum(not self.slots.touch(layer, e) for e in ahead)
            used = used_experts(t)
            # resident experts run first, then the demand loads
            for e in sorted(used, key=lambda e: (layer, e) not in self.slots):
                moved += not self.slots.touch(layer, e)
        self.histogram.zero_()
        return moved * self.layout.expert_fetch_bytes


class Combined(SpecMoE):
    """Ours. Verification always uses the target's routing, so decoding is lossless: the output
    is exactly the target's greedy output. With `prefill`, EdgeXpert's shared-set routing in the
    prefill pass (lossy, policies.combined_prefill_reuse).

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
                 threshold: float, tree: tuple[int, int], prefill: PrefillRouting | None = None):
        super().__init__(layout, decode, model, slots)
        self.threshold, self.tree, self.prefill = threshold, tree, prefill

    def use_eagle(self, head) -> None:
        Policy.use_eagle(self, head)
        depth, candidates = self.tree
        self.decode = dataclasses.replace(self.decode, max_depth=depth,
                                          max_candidates=candidates)
        self.onchip = "reuse"

    def router(self, kind, tokens):
        if kind == "prefill" and self.prefill is not None:
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


# ---------------------------------------------------------------------------------------------
# the registry: every policy by name, built from the configuration


def on_chip_slots(kib: int, layout: WeightLayout) -> int:
    """Whole experts per layer that `kib` KiB of on-chip buffer hold (split over the layers)."""
    slots = kib * 1024 // (layout.n_layers * layout.expert_fetch_bytes)
    if slots < 1:
        raise ConfigError(f"policies.onchip_expert_kib = {kib} holds no expert: accepted >= "
                          f"{math.ceil(layout.n_layers * layout.expert_fetch_bytes / 1024)}")
    return min(slots, layout.n_experts)


def pruned_edgexpert(layout: WeightLayout, decode: DecodeConfig, model: MoEModel, ratio: float,
                     calibration: bool, prefill: PrefillRouting | None = None) -> EdgeXpert:
    """EdgeXpert decoding on the bundled pruned-and-recovered checkpoint of `model`, with that
    checkpoint's own mask (`Policy.model`: golden.studies.evaluate.measure runs it on that model)."""
    pruned = load_pruned_checkpoint(None, model)
    policy = EdgeXpert(layout, decode, pruned.model, ratio, pruned.meta["prune"]["sparsity"],
                       calibration, prefill=prefill)
    policy.model = pruned.model
    return policy


def _checked(key: str, make: Callable[[], Policy]) -> Policy:
    """A policy whose constructor checks a configuration value against the model: its
    ValueError is reported as the key's ConfigError."""
    try:
        return make()
    except ValueError as exc:
        raise ConfigError(f"policies.{key}: {exc}") from None


def _edgexpert(config: Config, model: MoEModel, layout: WeightLayout,
               encoder: TokenEncoder | None) -> Policy:
    p, d = config.policies, config.decode
    prefill = prefill_routing(p, encoder, model.cfg.top_k)
    if p.pruned_checkpoint == "bundled":
        return pruned_edgexpert(layout, d, model, p.coalescing_ratio, p.calibration, prefill)
    return EdgeXpert(layout, d, model, p.coalescing_ratio, p.pruning_sparsity, p.calibration,
                     prefill=prefill)


def _combined(config: Config, model: MoEModel, layout: WeightLayout,
              encoder: TokenEncoder | None) -> Policy:
    p = config.policies
    prefill = prefill_routing(p, encoder, model.cfg.top_k) if p.combined_prefill_reuse else None
    return Combined(layout, config.decode, model, on_chip_slots(p.onchip_expert_kib, layout),
                    p.combined_threshold, (p.combined_depth, p.combined_candidates),
                    prefill=prefill)


#: name (the policy's `name`) -> builder(config, model, layout, prefill encoder or None): the
#: configuration's `policies` and `decode` sections fix every setting
POLICIES: dict[str, Callable[[Config, MoEModel, WeightLayout, TokenEncoder | None], Policy]] = {
    "ar": lambda c, m, layout, e: Autoregressive(layout, c.decode),
    "naive_sd": lambda c, m, layout, e: Policy(layout, c.decode),
    "edgexpert": _edgexpert,
    "moe_spec": lambda c, m, layout, e: _checked(
        "moe_spec_budget", lambda: MoESpec(layout, c.decode, m.cfg.top_k, c.policies.moe_spec_budget)),
    "s2moe": lambda c, m, layout, e: _checked(
        "s2moe_cap", lambda: S2MoE(layout, c.decode, m.cfg.top_k, c.policies.s2moe_threshold,
                                   c.policies.s2moe_cap)),
    "specmoe": lambda c, m, layout, e: SpecMoE(
        layout, c.decode, m, on_chip_slots(c.policies.onchip_expert_kib, layout)),
    "specter": lambda c, m, layout, e: Specter(
        layout, c.decode, m, on_chip_slots(c.policies.onchip_expert_kib, layout),
        c.policies.specter_chain, c.policies.specter_draft_bits),
    "combined": _combined,
    "ar_resident": lambda c, m, layout, e: ResidentAR(
        layout, c.decode, on_chip_slots(c.policies.onchip_expert_kib, layout)),
}
#: what `edgexpert compare` runs, in its order (ar_resident is a reference for `edgexpert ablate`)
COMPARED = ("ar", "naive_sd", "edgexpert", "moe_spec", "s2moe", "specmoe", "specter", "combined")

#: each speculative policy's draft in its paper (docs/golden-model.md, "Drafts"): EdgeXpert and
#: MoE-Spec speculate with an EAGLE-3 head; naive speculative decoding is EdgeXpert's baseline,
#: so it drafts as EdgeXpert does (issue 11: EdgeXpert against naive speculative decoding with
#: the same draft); SpecMoE and S2-MoE self-draft, Specter with its quantized self-draft; ours
#: (combined) drafts with the head and keeps it on chip (docs/policies.md, "The combined policy")
PAPER_DRAFT = {"naive_sd": "eagle", "edgexpert": "eagle", "moe_spec": "eagle", "s2moe": "self",
               "specmoe": "self", "specter": "self", "combined": "eagle"}


def build_policy(name: str, config: Config, model: MoEModel, layout: WeightLayout,
                 encoder: TokenEncoder | None = None, eagle=None, draft: str | None = None) -> Policy:
    """Policy `name` for `model` from the configuration (a value the policy rejects is reported
    as the configuration key's error); EdgeXpert's prefill, and the combined policy's with
    policies.combined_prefill_reuse, use the shared-set routing when a prefill `encoder`
    (golden/policies/prefill.py) is given. The draft is `draft` ("self" or "eagle", refused by a policy
    that cannot draft with the head) or else policies.draft: "paper" (`PAPER_DRAFT`), "self",
    or "eagle" wherever the policy can (the others keep self). `eagle`: the EAGLE head
    (golden/decoding/eagle.py), needed when a policy drafts with it."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}: accepted {', '.join(POLICIES)}")
    if draft not in (None, "self", "eagle"):
        raise ValueError(f"draft {draft!r} is not known: accepted self, eagle")
    policy = POLICIES[name](config, model, layout, encoder)
    policy.prefill_chunk = config.policies.prefill_chunk
    if not policy.speculative:
        return policy
    wanted = draft or config.policies.draft
    if wanted == "paper":
        wanted = PAPER_DRAFT[name]
    elif wanted == "eagle" and draft is None and policy.EAGLE_REFUSAL is not None:
        wanted = "self"
    if wanted == "eagle":
        if eagle is None:
            raise ConfigError(f"policies.draft: {name} drafts with the eagle head and none was "
                              "loaded: accepted policies.draft=self, or a head for this model "
                              "(`edgexpert draft train --install`)")
        _checked("draft", lambda: policy.use_eagle(eagle))
    return policy


def build_policies(config: Config, model: MoEModel, layout: WeightLayout,
                   encoder: TokenEncoder | None = None, eagle=None) -> list[Policy]:
    """Every policy `edgexpert compare` runs (COMPARED), from the configuration."""
    return [build_policy(name, config, model, layout, encoder, eagle) for name in COMPARED]
