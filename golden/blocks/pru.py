"""The prompt routing unit's integer contract (docs/contracts.md, "Prompt routing"): the reference
the PRU RTL (hw/pru/) matches bit for bit and the code EdgeXpert's prefill policy routes with.

Everything here is an integer:
- scores: the encoder's CLS attention per prompt token as unsigned Q.16 (`score_q16`);
- classes: score x prompt length (Q.16) against tau_major and tau_minor in Q.16 (`token_classes`);
- router logits: Q.16 int32, the A8W4 path's `requant` output (`logit_q16` only rounds float
  logits onto that grid for the float path);
- the shared set S per layer, the budgeted routing (`route_layer`) and the routing weights
  (`routing_weights`: `softmax_q16` over the chosen logits, the integer path's own renormalization);
- per chunk of consecutive tokens, the distinct experts fetched (`chunk_fetches`) and the EMA
  command words that fetch them whole (`fetch_commands`).

One tie rule everywhere: between equal keys the lower expert index wins.
The reference sorts (a stable sort over whole preference keys); the RTL picks by a max tree: the
two share the contract, not the arithmetic.
"""

from __future__ import annotations

import torch

from ...contracts.ema import Descriptor, encode_step
from ...contracts.pru import TokenClass, tau_q16
from ...contracts.weight_layout import Matrix, WeightLayout
from .ema import EmaReference
from ..integer.intops import I64, softmax_q16

__all__ = ["MAJOR", "MINOR", "TRIVIAL", "Q16", "score_q16", "tau_q16", "logit_q16",
           "token_classes", "check_budgets", "native_top_k", "shared_set", "route_layer",
           "routing_weights", "chunk_fetches", "experts_per_step", "fetch_commands"]

MAJOR, MINOR, TRIVIAL = (int(c) for c in TokenClass)
Q16 = 1 << 16


def score_q16(scores: torch.Tensor) -> torch.Tensor:
    """Float scores in [0, 1] -> unsigned Q.16 integers, round half up (0..65536)."""
    return torch.floor(scores.to(torch.float64) * Q16 + 0.5).to(I64).clamp(0, Q16)


def logit_q16(logits: torch.Tensor) -> torch.Tensor:
    """Router logits onto the Q.16 grid (exact for the integer path's logits, which are Q.16
    integers / 2**16 already)."""
    return torch.floor(logits.to(torch.float64) * Q16 + 0.5).to(I64)


def token_classes(scores_q16: torch.Tensor, tau_major_q16: int, tau_minor_q16: int) -> torch.Tensor:
    """MAJOR / MINOR / TRIVIAL per token from Q.16 scores [T]: r = score x T (Q.16, exact);
    major if r >= tau_major, minor if r >= tau_minor, else trivial."""
    if not 0 <= tau_minor_q16 <= tau_major_q16:
        raise ValueError(f"tau_minor = {tau_minor_q16 / Q16:g} is out of range: accepted "
                         f"0..tau_major (= {tau_major_q16 / Q16:g})")
    relative = scores_q16.to(I64) * scores_q16.shape[-1]
    classes = torch.full(scores_q16.shape, TRIVIAL, dtype=I64)
    classes[relative >= tau_minor_q16] = MINOR
    classes[relative >= tau_major_q16] = MAJOR
    return classes


def check_budgets(top_k: int, budget_minor: int, budget_trivial: int) -> None:
    if not 1 <= budget_trivial <= budget_minor <= top_k:
        raise ValueError(f"budgets (minor {budget_minor}, trivial {budget_trivial}) are out of "
                         f"range: accepted 1 <= trivial <= minor <= top_k (= {top_k})")


def _order(z: torch.Tensor, group: torch.Tensor | None = None) -> torch.Tensor:
    """Expert indices [T, E] by descending preference: by `group` ascending (if given), then by
    logit descending, ties to the lower index (stable sorts keep the index order)."""
    order = torch.sort(-z, dim=-1, stable=True).indices
    if group is None:
        return order
    regroup = torch.sort(torch.gather(group, -1, order), dim=-1, stable=True).indices
    return torch.gather(order, -1, regroup)


def native_top_k(z_q16: torch.Tensor, top_k: int) -> torch.Tensor:
    """The router's own top-k [T, k] of Q.16 logits [T, E]."""
    return _order(z_q16.to(I64))[:, :top_k]


def shared_set(z_q16: torch.Tensor, classes: torch.Tensor, top_k: int) -> torch.Tensor:
    """S [E] (bool): the union of the major tokens' native top-K experts."""
    native = native_top_k(z_q16, top_k)
    s = torch.zeros(z_q16.shape[-1], dtype=torch.bool)
    s[native[classes == MAJOR].reshape(-1)] = True
    return s


def route_layer(z_q16: torch.Tensor, classes: torch.Tensor, top_k: int, budget_minor: int,
                budget_trivial: int) -> torch.Tensor:
    """Expert indices [T, top_k] (-1 pads), in pick order, for one layer of a prefill pass.

    Major tokens take their native top-K. A minor (trivial) token takes budget_minor
    (budget_trivial) experts: its top-1, then S's experts by its logit, then the others by its
    logit (only when S runs out)."""
    check_budgets(top_k, budget_minor, budget_trivial)
    z = z_q16.to(I64)
    t, e = z.shape
    s = shared_set(z, classes, top_k)
    top1 = native_top_k(z, 1)
    # group 0: the top-1; 1: S's other experts; 2: the rest
    group = torch.where(s, 1, 2).to(I64).expand(t, e).clone()
    group.scatter_(1, top1, 0)
    preference = _order(z, group)[:, :top_k].clone()
    budget = torch.full((t,), top_k, dtype=I64)
    budget[classes == MINOR] = budget_minor
    budget[classes == TRIVIAL] = budget_trivial
    preference[torch.arange(top_k)[None, :] >= budget[:, None]] = -1
    major = classes == MAJOR
    preference[major] = native_top_k(z, top_k)[major]
    return preference


def routing_weights(z_q16: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
    """Q.16 weights [T, k] of the chosen experts (-1: weight 0): `softmax_q16` over the chosen
    logits, as the integer path renormalizes them (norm_topk_prob models)."""
    valid = experts >= 0
    chosen = torch.gather(z_q16.to(I64), -1, torch.where(valid, experts, 0))
    return torch.where(valid, softmax_q16(chosen, valid), 0)


def chunk_fetches(experts: torch.Tensor, chunk: int) -> list[list[int]]:
    """Per run of `chunk` consecutive tokens of one layer, its distinct experts, ascending."""
    if chunk < 1:
        raise ValueError(f"chunk = {chunk} is out of range: accepted integers >= 1")
    return [sorted(set(rows[rows >= 0].tolist())) for rows in experts.split(chunk)]


def experts_per_step(layout: WeightLayout, beat_bytes: int, buffer_bytes: int, slots: int) -> int:
    """The most whole experts one EMA step holds (its slots and its buffer, as the EMA's
    reference model allocates them); 0 when not even one expert fits."""
    reference = EmaReference(layout, beat_bytes, buffer_bytes, slots)
    fits = 0
    for n in range(1, layout.n_experts + 1):
        try:
            reference.step(Descriptor(0, 0, e, m, range(layout.in_channels(m)), True)
                           for e in range(n) for m in Matrix)
        except ValueError:
            break
        fits = n
    return fits


def fetch_commands(layout: WeightLayout, layer: int, experts: list[int],
                   experts_per_step: int) -> list[int]:
    """EMA command words of one chunk's fetch: the experts in ascending index, cut into steps of
    at most `experts_per_step`; each step a NEW_STEP, then per expert GATE_UP and DOWN whole,
    with their scale blocks; descriptor tags count 0, 1, ... within the step."""
    if experts_per_step < 1:
        raise ValueError(f"experts_per_step = {experts_per_step} is out of range: accepted "
                         "integers >= 1")
    words = []
    for first in range(0, len(experts), experts_per_step):
        descriptors = []
        for e in experts[first:first + experts_per_step]:
            for m in Matrix:
                descriptors.append(Descriptor(len(descriptors) % 256, layer, e, m,
                                              range(layout.in_channels(m)), True))
        words += encode_step(layout, descriptors)
    return words
