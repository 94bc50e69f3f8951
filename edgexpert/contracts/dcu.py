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

A job whose fields are out of range for the instance (docs/contracts.md, "DCU jobs: accepted
ranges") is *rejected*: the DCU takes exactly the beats its header announced, emits no command
for it, reports it on `rejected` (`dcu_reject_layout`: its tag and its first bad field,
`DcuError`), latches the first rejected job in STATUS (`dcu_status_layout`) and counts it
(`DcuCsr`); the next job is taken as usual.

`DcuJob` holds one job on the host side; `encode_job` checks it against the instance (one
`ValueError` naming the first bad field and its accepted range) and returns its beats;
`header_beat`, `prune_beat`, `entry_beat` and `data_beats` pack beats unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import signed, unsigned
from amaranth.lib import data, enum

from .ema import EXPERT_BITS, LAYER_BITS, MASK_BITS, TAG_BITS
from .rejects import reject_layout, reject_status_layout
from .weight_layout import Matrix, WeightLayout

__all__ = ["LANES", "MAX_GROUP", "COUNT_BITS", "KEEP_BITS", "M_BITS", "E_BITS", "G_BITS",
           "G_MAX", "DcuError", "DcuCsr", "dcu_header_layout",
           "dcu_entry_layout", "dcu_route_layout", "dcu_data_layout", "dcu_reject_layout",
           "dcu_status_layout", "DcuJob", "encode_job", "header_beat", "prune_beat",
           "entry_beat", "data_beats"]

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
#: the largest routing weight, 1.0 in Q.16: G_BITS holds more, which m g < 2^31 does not allow
G_MAX = 2**16


class DcuError(enum.IntEnum, shape=3):
    """The first field of a rejected job found out of range for the instance, in beat order
    (the header's fields in layout order, then the prune words, then the entries)."""
    NONE = 0
    #: layer >= the instance's `layers`
    LAYER = 1
    #: expert >= the instance's `experts`
    EXPERT = 2
    #: candidate count n = 0 or above the instance's `max_group`
    COUNT = 3
    #: requested count k = 0 or above the matrix's input channels
    KEEP = 4
    #: a PRUNE bit past the matrix's last channel (the EMA's BAD_DESCRIPTOR for MASK words)
    PRUNE = 5
    #: a routing weight g above G_MAX
    WEIGHT = 6
    #: a bit above the field of a PRUNE (bits 32..47) or ENTRY (bits 40..47) beat
    RESERVED = 7


class DcuCsr(enum.IntEnum, shape=2):
    """Register map of the DCU's read port (read-only, 64 bits, as the EMA's `EmaCsr`): every
    checking block's `RejectCsr`, its completed commands called JOBS."""
    STATUS = 0        # dcu_status_layout
    JOBS = 1          # jobs completed with their commands
    REJECTED = 2      # jobs rejected

dcu_header_layout = data.StructLayout({
    "tag": unsigned(TAG_BITS),
    "layer": unsigned(LAYER_BITS),
    "expert": unsigned(EXPERT_BITS),
    "matrix": unsigned(1),           # weight_layout.Matrix
    "scales": unsigned(1),           # the descriptor's scales flag
    "new_step": unsigned(1),         # emit NEW_STEP before the descriptor
    "count": unsigned(COUNT_BITS),   # candidates n, 1..the instance's max_group
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

#: a rejected job's completion: its header's tag and its first bad field
dcu_reject_layout = reject_layout(DcuError, TAG_BITS)

#: STATUS: the first rejected job since reset (bit 0 error, bits 1-3 the code, bits 8-15 the tag)
dcu_status_layout = reject_status_layout(DcuError, TAG_BITS)


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


def _route(fields: dict) -> int:
    return dcu_route_layout.const(fields).as_value().value


def header_beat(tag: int, layer: int, expert: int, matrix: int, count: int, keep: int,
                scales: bool = False, new_step: bool = False) -> int:
    """A HEADER beat, unchecked (`encode_job` checks; a bench builds bad ones with it)."""
    return _route({"header": {"tag": tag, "layer": layer, "expert": expert,
                              "matrix": int(matrix), "scales": int(scales),
                              "new_step": int(new_step), "count": count, "keep": keep}})


def prune_beat(bits: int) -> int:
    """A PRUNE beat: bit i keeps channel 32 w + i of word w (unchecked)."""
    return _route({"prune": bits})


def entry_beat(m: int, e: int, g: int) -> int:
    """An ENTRY beat of one candidate, unchecked."""
    return _route({"entry": {"m": m, "e": e, "g": g}})


def encode_job(layout: WeightLayout, job: DcuJob,
               max_group: int = MAX_GROUP) -> tuple[list[int], list[int]]:
    """(route beats, data beats) of `job` as integers of `dcu_route_layout` and
    `dcu_data_layout`, for a DCU of `layout`'s channels, layers and experts and groups of up to
    `max_group`; every field is checked first (ValueError naming the accepted range)."""
    channels = layout.in_channels(job.matrix)
    q = np.asarray(job.q, dtype=np.int64)
    if q.ndim != 2 or q.shape[1] != channels:
        raise ValueError(f"job inputs have shape {q.shape}: accepted [n, {channels}]")
    n = q.shape[0]
    _in_range("candidate count n", n, 1, max_group)
    for name, v in (("m", job.m), ("e", job.e), ("g", job.g)):
        if np.asarray(v).shape != (n,):
            raise ValueError(f"job {name} has shape {np.asarray(v).shape}: accepted ({n},)")
    _in_range("tag", job.tag, 0, 2**TAG_BITS - 1)
    _in_range("layer", job.layer, 0, min(layout.n_layers, 2**LAYER_BITS) - 1)
    _in_range("expert", job.expert, 0, min(layout.experts_per_layer, 2**EXPERT_BITS) - 1)
    _in_range("requested count k", job.keep, 1, channels)
    _in_range("input q", q, -127, 127)
    _in_range("scale mantissa m", job.m, 0, 2**M_BITS - 1)
    _in_range("scale exponent e", job.e, -2**(E_BITS - 1), 2**(E_BITS - 1) - 1)
    _in_range("routing weight g", job.g, 0, G_MAX)
    prune = np.ones(channels, dtype=np.int64) if job.prune is None else np.asarray(job.prune)
    if prune.shape != (channels,):
        raise ValueError(f"pruning mask has shape {prune.shape}: accepted ({channels},)")
    _in_range("pruning mask bit", prune, 0, 1)
    words = -(-channels // LANES)
    route = [header_beat(job.tag, job.layer, job.expert, job.matrix, n, job.keep, job.scales,
                         job.new_step)]
    for w in range(words):
        route.append(prune_beat(sum(1 << i for i in range(LANES)
                                    if w * LANES + i < channels and prune[w * LANES + i])))
    for m, e, g in zip(np.asarray(job.m).tolist(), np.asarray(job.e).tolist(),
                       np.asarray(job.g).tolist()):
        route.append(entry_beat(m, e, g))
    return route, data_beats(q)


def data_beats(q) -> list[int]:
    """The data beats of inputs q [n, C]: per row ceil(C / 32) beats, lanes past the last
    channel 0 (unchecked)."""
    q = np.asarray(q, dtype=np.int64)
    words = -(-q.shape[1] // LANES)
    padded = np.zeros((q.shape[0], words * LANES), dtype=np.int64)
    padded[:, :q.shape[1]] = q
    return [sum((int(v) & 0xFF) << (8 * i) for i, v in enumerate(row[w * LANES:(w + 1) * LANES]))
            for row in padded for w in range(words)]
