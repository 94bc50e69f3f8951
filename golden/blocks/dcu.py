"""The depth coalescing unit's integer contract (docs/contracts.md, "Depth coalescing"): the
channel importance of one depth group and expert, and the selection of the channels fetched.

Pure integer arithmetic on int64 tensors; the DCU's RTL (hw/dcu/) matches it bit for bit, the
policy (golden/policies/edgexpert.py, `salient_channels`) and the mask traces
(golden/traces/masks.py) select with it. This module is the reference: it does not share code with the RTL.

For one depth group of n candidates c that use expert e, with int8 inputs q[c, j] (the MoE input
x_q for GATE_UP, the expert's hidden vector hidden_q for DOWN) with scales m_c * 2^-e_c, Q.16
routing weights g_c and the expert's 0/1 pruning mask p[j]:

    P_c = m_c * g_c                                (exact, < 2^31)
    s_c = bitlen(m_c) + bitlen(g_c) - e_c          (P_c 2^-e_c < 2^s_c: the weighted scale's size)
    S   = max s_c over the candidates with P_c > 0
    W_c = floor(P_c * 2^(WEIGHT_BITS - S - e_c))   (< 2^16, the largest >= 2^14; 0 when P_c = 0)
    I_j = sum_c |q[c, j]| * W_c                    (< 2^29)
    K_j = 2 * I_j * p[j] + p[j]                    (the selection key, < 2^30)

and the channels fetched are the `keep` largest keys, ties to the lower channel index, with
keep = max(1, min(k, number of unpruned channels)) for the requested count k in 1..C
(`keep_count`; k = `requested_count(C, ratio)`, half up). The key's last bit puts every
unpruned channel above every pruned one, so a pruned channel is never chosen while an unpruned
one is left. S follows the routing-weighted scales, not the exponents alone: a candidate with a
negligible weight can no longer shift every other candidate's weight to 0.
"""

from __future__ import annotations

from fractions import Fraction

import torch

from ...contracts.dcu import DcuJob
from ...contracts.ema import Descriptor, encode_descriptor, new_step_command
from ...contracts.weight_layout import WeightLayout

__all__ = ["M_BITS", "G_MAX", "E_RANGE", "MAX_CANDIDATES", "WEIGHT_BITS", "IMPORTANCE_BITS",
           "KEY_BITS", "bit_length", "candidate_weights", "importance", "selection_keys",
           "requested_count", "keep_count", "select", "select_mask", "job_descriptor",
           "job_commands"]

I64 = torch.int64

#: mantissas of the dyadic scales: below 2^15 (docs/contracts.md: quantize_vec gives m in
#: [8257, 16513], normalize keeps products below 2^15)
M_BITS = 15
#: routing weights are Q.16 unsigned, at most 1.0 (docs/traces.md: 0..65536)
G_MAX = 65536
#: exponents the DCU's route port carries (signed 8 bits); the bundled model's traces use 20..40
E_RANGE = (-128, 127)
#: candidates per depth group: the draft tree's max_candidates (configs/default.yaml, EAGLE-3)
MAX_CANDIDATES = 64
#: W_c < 2^WEIGHT_BITS: the group's largest weighted scale is brought to 15-16 bits
WEIGHT_BITS = 16
#: |q| <= 127 (7 bits) times W < 2^16 is below 2^23; 64 candidates add 6 bits
IMPORTANCE_BITS = 29
KEY_BITS = IMPORTANCE_BITS + 1


def _check(name: str, t: torch.Tensor, lo: int, hi: int) -> None:
    if t.numel() and (int(t.min()) < lo or int(t.max()) > hi):
        bad = t[(t < lo) | (t > hi)][0]
        raise ValueError(f"{name} = {int(bad)} is out of range: accepted {lo}..{hi}")


def bit_length(x: torch.Tensor) -> torch.Tensor:
    """bitlen(x) of non-negative int64 values below 2^62: 0 for 0, else floor(log2 x) + 1."""
    x = torch.as_tensor(x).to(I64)
    return ((x[..., None] >> torch.arange(63, dtype=I64)) > 0).sum(-1)


def candidate_weights(m: torch.Tensor, e: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """W_c [n] of the group's candidates from their scales (m, e) [n] and Q.16 weights g [n]."""
    m, e, g = (torch.as_tensor(v).to(I64) for v in (m, e, g))
    _check("scale mantissa m", m, 0, 2**M_BITS - 1)
    _check("scale exponent e", e, *E_RANGE)
    _check("routing weight g", g, 0, G_MAX)
    p = m * g
    live = p > 0
    if not bool(live.any()):
        return torch.zeros_like(p)
    size = bit_length(m) + bit_length(g) - e
    # a right shift; a live candidate's is at least 2 - WEIGHT_BITS (its size >= 2 - e_c)
    shift = e + int(size[live].max()) - WEIGHT_BITS
    right = torch.bitwise_right_shift(p, torch.clamp(shift, min=0, max=62))
    left = torch.bitwise_left_shift(p, torch.clamp(-shift, min=0))
    return torch.where(live, torch.where(shift >= 0, right, left), 0)


def importance(q: torch.Tensor, m, e, g) -> torch.Tensor:
    """I_j [C] of a group: q [n, C] int8 values, (m, e, g) [n] per candidate."""
    q = torch.as_tensor(q).to(I64)
    if q.dim() != 2 or not 1 <= q.shape[0] <= MAX_CANDIDATES:
        raise ValueError(f"a group has {tuple(q.shape)} inputs: accepted [1..{MAX_CANDIDATES}, C]")
    _check("input q", q, -127, 127)
    return (q.abs() * candidate_weights(m, e, g)[:, None]).sum(0)


def selection_keys(q, m, e, g, prune: torch.Tensor | None = None) -> torch.Tensor:
    """K_j = 2 I_j p_j + p_j [C] (p all ones without a pruning mask)."""
    imp = importance(q, m, e, g)
    p = torch.ones_like(imp) if prune is None else (torch.as_tensor(prune) > 0).to(I64)
    return 2 * imp * p + p


def requested_count(channels: int, ratio: float) -> int:
    """k for `ratio` of `channels`: round half up, on the ratio's exact value (a float is a
    dyadic fraction), at least 1: floor(ratio * channels + 1/2). 43/128 of 192 = 64.5 gives 65
    (Python's round, half to even, gave 64). `ratio` in (0, 1], so k is in 1..channels."""
    if not 0 < ratio <= 1:
        raise ValueError(f"ratio = {ratio} is out of range: accepted (0, 1]")
    return max(1, int(Fraction(ratio) * channels + Fraction(1, 2)))


def keep_count(channels: int, k: int, prune: torch.Tensor | None = None) -> int:
    """How many channels are selected for the requested count k (1..channels, else
    ValueError: the DCU rejects the job, KEEP): k, at most the unpruned ones, at least one (a
    fully pruned expert selects channel 0 alone)."""
    if not 1 <= k <= channels:
        raise ValueError(f"requested count k = {k} is out of range: accepted 1..{channels}")
    unpruned = channels if prune is None else int((torch.as_tensor(prune) > 0).sum())
    return max(1, min(k, unpruned))


def select(q, m, e, g, k: int, prune: torch.Tensor | None = None) -> torch.Tensor:
    """The selected channels of one group and expert, ascending: the keep_count(C, k, prune)
    largest keys, ties to the lower channel index."""
    keys = selection_keys(q, m, e, g, prune)
    keep = keep_count(keys.shape[0], k, prune)
    # a stable sort on the negated key keeps the lower channel first among equals
    return torch.sort(torch.sort(-keys, stable=True).indices[:keep]).values


def select_mask(q, m, e, g, k: int, prune: torch.Tensor | None = None) -> torch.Tensor:
    """`select` as a 0/1 int64 mask [C]."""
    chosen = select(q, m, e, g, k, prune)
    out = torch.zeros(torch.as_tensor(q).shape[1], dtype=I64)
    out[chosen] = 1
    return out


def job_descriptor(job: DcuJob) -> Descriptor:
    """The descriptor a good `job` becomes: its selection (`select`) of its matrix's channels."""
    chosen = select(job.q, job.m, job.e, job.g, job.keep, job.prune).tolist()
    return Descriptor(job.tag, job.layer, job.expert, job.matrix, chosen, job.scales)


def job_commands(layout: WeightLayout, job: DcuJob) -> list[int]:
    """The EMA command words the DCU owes a good `job` (docs/contracts.md, "Depth coalescing"):
    NEW_STEP when the job asks, then its descriptor for `layout` with the mask words."""
    words = [new_step_command()] if job.new_step else []
    return words + encode_descriptor(layout, job_descriptor(job))
