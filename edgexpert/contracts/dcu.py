"""The depth coalescing unit's port contract and its host side.

The DCU (hw/dcu/, docs/blocks/dcu.md) takes one *job* per depth group, expert and matrix on two
streams and answers with EMA commands (`edgexpert.contracts.ema`):

- `route` (`dcu_route_layout`, one union beat per cycle, in this order): a HEADER
  (`dcu_header_layout`: the descriptor's fields, the candidate count n, the requested count k),
  then ceil(C / 32) PRUNE words (bit i of word w: channel 32 w + i is kept), then n ENTRY beats
  (`dcu_entry_layout`: one candidate's scale m, e and routing weight g);
- `data` (`dcu_data_layout`): per candidate, in the ENTRY order, ceil(C / 32) beats of 32 int8
  lanes (lane i of beat w: channel 32 w + i; lanes past the last channel are ignored).

C is the matrix's input channels. The selection is golden/blocks/dcu.py's (docs/contracts.md, "Depth
coalescing"). Out come, per job, a NEW_STEP when the header asks for one, then the DESCRIPTOR
and its ceil(C / 32) MASK words: what the EMA's command port takes.

`DcuJob` holds one job on the host side; `encode_job` checks it and returns its beats.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from .ema import EXPERT_BITS, LAYER_BITS, MASK_BITS, TAG_BITS
from .weight_layout import Matrix, WeightLayout

__all__ = ["LANES", "MAX_GROUP", "COUNT_BITS", "KEEP_BITS", "M_BITS", "E_BITS", "G_BITS",
           "dcu_header_layout", "dcu_entry_layout", "dcu_route_layout", "dcu_data_layout",
           "DcuJob", "encode_job"]

#: channels per data beat and per prune word: one EMA mask word, so a word of importance is a
#: word of mask
LANES = MASK_BITS
#: candidates of one depth group: the draft tree's max_candidates (configs/default.yaml); the
#: contract's 29-bit importance holds up to 64 (docs/contracts.md)
MAX_GROUP = 64
COUNT_BITS = 7
#: channels a job may select: up to 4095 (the full-size point's 2048 fits)
KEEP_BITS = 12
#: scale mantissa (< 2^15), signed exponent, Q.16 routing weight (0..65536): docs/contracts.md
M_BITS, E_BITS, G_BITS = 15, 8, 17

dcu_header_layout = data.StructLayout({
    "tag": unsigned(TAG_BITS),
    "layer": unsigned(LAYER_BITS),
    "expert": unsigned(EXPERT_BITS),
    "matrix": unsigned(1),           # weight_layout.Matrix
    "scales": unsigned(1),           # the descriptor's scales flag
    "new_step": unsigned(1),         # emit NEW_STEP before the descriptor
    "count": unsigned(COUNT_BITS),   # candidates n, 1..MAX_GROUP
    "keep": unsigned(KEEP_BITS),     # requested channels k, 1..C
})

dcu_entry_layout = data.StructLayout({
    "m": unsigned(M_BITS),
    "e": signed(E_BITS),
    "g": unsigned(G_BITS),
})

dcu_route_layout = data.UnionLayout({
    "header": dcu_header_layout,
    "prune": unsigned(LANES),
    "entry": dcu_entry_layout,
})

dcu_data_layout = data.StructLayout({"lanes": data.ArrayLayout(signed(8), LANES)})


@dataclass(frozen=True)
class DcuJob:
    """One depth group's selection for one expert and matrix: the candidates' int8 inputs q
    [n, C], their scales (m, e) [n] and routing weights g [n] (Q.16), the expert's pruning mask
    [C] (None: all kept) and the requested count k."""
    tag: int
    layer: int
    expert: int
    matrix: Matrix
    q: np.ndarray
    m: np.ndarray
    e: np.ndarray
    g: np.ndarray
    keep: int
    prune: np.ndarray | None = None
    scales: bool = False
    new_step: bool = False


def _in_range(name: str, values, lo: int, hi: int) -> None:
    values = np.asarray(values)
    if values.size and (int(values.min()) < lo or int(values.max()) > hi):
        bad = values[(values < lo) | (values > hi)].flat[0]
        raise ValueError(f"{name} = {int(bad)} is out of range: accepted {lo}..{hi}")


def encode_job(layout: WeightLayout, job: DcuJob) -> tuple[list[int], list[int]]:
    """(route beats, data beats) of `job` as integers of `dcu_route_layout` and
    `dcu_data_layout`; every field is checked first (ValueError naming the accepted range)."""
    channels = layout.in_channels(job.matrix)
    q = np.asarray(job.q, dtype=np.int64)
    if q.ndim != 2 or q.shape[1] != channels or not 1 <= q.shape[0] <= MAX_GROUP:
        raise ValueError(f"job inputs have shape {q.shape}: accepted [1..{MAX_GROUP}, {channels}]")
    n = q.shape[0]
    for name, v in (("m", job.m), ("e", job.e), ("g", job.g)):
        if np.asarray(v).shape != (n,):
            raise ValueError(f"job {name} has shape {np.asarray(v).shape}: accepted ({n},)")
    _in_range("tag", job.tag, 0, 2**TAG_BITS - 1)
    _in_range("layer", job.layer, 0, min(layout.n_layers, 2**LAYER_BITS) - 1)
    _in_range("expert", job.expert, 0, min(layout.experts_per_layer, 2**EXPERT_BITS) - 1)
    _in_range("keep", job.keep, 1, channels)
    _in_range("input q", q, -127, 127)
    _in_range("scale mantissa m", job.m, 0, 2**M_BITS - 1)
    _in_range("scale exponent e", job.e, -2**(E_BITS - 1), 2**(E_BITS - 1) - 1)
    _in_range("routing weight g", job.g, 0, 2**(G_BITS - 1))
    prune = np.ones(channels, dtype=np.int64) if job.prune is None else np.asarray(job.prune)
    if prune.shape != (channels,):
        raise ValueError(f"pruning mask has shape {prune.shape}: accepted ({channels},)")
    words = -(-channels // LANES)
    route = [dcu_route_layout.const({"header": {
        "tag": job.tag, "layer": job.layer, "expert": job.expert, "matrix": int(job.matrix),
        "scales": int(job.scales), "new_step": int(job.new_step), "count": n,
        "keep": job.keep}}).as_value().value]
    for w in range(words):
        bits = sum(1 << i for i in range(LANES) if w * LANES + i < channels and prune[w * LANES + i] > 0)
        route.append(dcu_route_layout.const({"prune": bits}).as_value().value)
    for m, e, g in zip(np.asarray(job.m).tolist(), np.asarray(job.e).tolist(), np.asarray(job.g).tolist()):
        route.append(dcu_route_layout.const({"entry": {"m": m, "e": e, "g": g}}).as_value().value)
    beats = []
    padded = np.zeros((n, words * LANES), dtype=np.int64)
    padded[:, :channels] = q
    for row in padded:
        for w in range(words):
            beats.append(sum((int(v) & 0xFF) << (8 * i)
                             for i, v in enumerate(row[w * LANES:(w + 1) * LANES])))
    return route, beats
