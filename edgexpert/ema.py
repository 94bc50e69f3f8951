"""Host side of the EMA controller: descriptors, their command words, and a reference model.

`Descriptor` checks its fields against a `WeightLayout` when it is encoded, so a bad layer,
expert or channel is a `ValueError` naming the field and the accepted range before anything
reaches the hardware. `encode_step` turns a step's descriptors into the command words of
`hw/layouts.py` (a NEW_STEP, then per descriptor its header and mask words).

`EmaReference` is what the controller must do, written from the contract without looking at the
RTL: de-duplication against what is resident in the step, one read per run of neighbouring
channels at the address `WeightLayout.bursts` gives, bump allocation of buffer lines, locations,
and the AXI bursts after the 4 KB / 256-beat split. Benches and tests compare the RTL with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from .hw.ema import MAX_BURST_BEATS, PAGE_BYTES, EmaGeometry
from .hw.layouts import (EXPERT_BITS, LAYER_BITS, MASK_BITS, TAG_BITS, EmaOp, EmaStatus,
                         ema_command_layout)
from .weight_layout import Matrix, WeightLayout, channel_runs

__all__ = ["Descriptor", "Read", "Completion", "StepResult", "EmaReference", "split_bursts",
           "encode_descriptor", "encode_step", "new_step_command", "SCALE"]

#: pseudo-channel naming a matrix's scale block in `StepResult.locations`
SCALE = "scale"


@dataclass(frozen=True)
class Descriptor:
    tag: int
    layer: int
    expert: int
    matrix: Matrix
    channels: frozenset[int]
    scales: bool = False

    def __init__(self, tag: int, layer: int, expert: int, matrix: Matrix,
                 channels: Iterable[int], scales: bool = False):
        object.__setattr__(self, "tag", tag)
        object.__setattr__(self, "layer", layer)
        object.__setattr__(self, "expert", expert)
        object.__setattr__(self, "matrix", Matrix(matrix))
        object.__setattr__(self, "channels", frozenset(channels))
        object.__setattr__(self, "scales", bool(scales))

    def check(self, layout: WeightLayout):
        """Raise ValueError naming the first field out of range for `layout`."""
        if not isinstance(self.tag, int) or not 0 <= self.tag < 2**TAG_BITS:
            raise ValueError(f"descriptor tag {self.tag!r} is out of range: accepted "
                             f"0..{2**TAG_BITS - 1}")
        layout.block_address(self.layer, self.expert, self.matrix)  # layer, expert, matrix
        for ch in sorted(self.channels):
            if not isinstance(ch, int) or not 0 <= ch < layout.in_channels(self.matrix):
                raise ValueError(f"channel {ch!r} of {self.matrix.name} is out of range: "
                                 f"accepted 0..{layout.in_channels(self.matrix) - 1}")


def _command(op: EmaOp, arg) -> int:
    return ema_command_layout.const({"op": op, "arg": arg}).as_value().value


def new_step_command() -> int:
    return _command(EmaOp.NEW_STEP, {"mask": 0})


def encode_descriptor(layout: WeightLayout, d: Descriptor) -> list[int]:
    """The header and the mask words of one descriptor (fields checked against `layout`)."""
    d.check(layout)
    if layout.n_layers > 2**LAYER_BITS or layout.experts_per_layer > 2**EXPERT_BITS:
        raise ValueError("the layout has more layers or experts than a descriptor can name")
    words = [_command(EmaOp.DESCRIPTOR, {"descriptor": {
        "tag": d.tag, "layer": d.layer, "expert": d.expert, "matrix": int(d.matrix),
        "scales": int(d.scales)}})]
    n_words = -(-layout.in_channels(d.matrix) // MASK_BITS)
    for k in range(n_words):
        mask = sum(1 << (ch - k * MASK_BITS) for ch in d.channels
                   if k * MASK_BITS <= ch < (k + 1) * MASK_BITS)
        words.append(_command(EmaOp.MASK, {"mask": mask}))
    return words


def encode_step(layout: WeightLayout, descriptors: Iterable[Descriptor]) -> list[int]:
    """NEW_STEP, then every descriptor of the step."""
    words = [new_step_command()]
    for d in descriptors:
        words += encode_descriptor(layout, d)
    return words


def split_bursts(address: int, beats: int, beat_bytes: int) -> list[tuple[int, int]]:
    """(address, beats) of the AXI INCR bursts of one read: none crosses a 4 KB boundary, none
    is longer than 256 beats."""
    out = []
    while beats:
        to_page = (PAGE_BYTES - address % PAGE_BYTES) // beat_bytes
        n = min(beats, to_page, MAX_BURST_BEATS)
        out.append((address, n))
        address += n * beat_bytes
        beats -= n
    return out


@dataclass(frozen=True)
class Read:
    """One contiguous read: a run of columns, or a scale block."""
    tag: int
    slot: int
    matrix: Matrix
    address: int
    beats: int
    line: int
    first: int | None     # first channel of the run; None for a scale block
    count: int


@dataclass(frozen=True)
class Completion:
    tag: int
    slot: int
    status: EmaStatus


@dataclass
class StepResult:
    """What one step leaves behind."""
    reads: list[Read] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)
    #: (slot, channel or SCALE) -> buffer line where the column (scale block) starts
    locations: dict = field(default_factory=dict)
    #: slot -> (layer, expert, matrix)
    slots: dict = field(default_factory=dict)
    #: slot -> resident channels
    resident: dict = field(default_factory=dict)
    fetched_channels: int = 0
    skipped_channels: int = 0
    lines_used: int = 0


class EmaReference:
    """The controller's behaviour on well-formed steps (errors are checked by the benches)."""

    def __init__(self, geometry: EmaGeometry):
        self.g = geometry

    def step(self, descriptors: Iterable[Descriptor]) -> StepResult:
        g, layout = self.g, self.g.layout
        out = StepResult()
        slot_of: dict = {}
        scales_in: set[int] = set()
        alloc = 0
        for d in descriptors:
            d.check(layout)
            key = (d.layer, d.expert, d.matrix)
            if key not in slot_of:
                if len(slot_of) == g.slots:
                    raise ValueError(f"step needs more than {g.slots} slots")
                slot_of[key] = len(slot_of)
                out.slots[slot_of[key]] = key
                out.resident[slot_of[key]] = set()
            slot = slot_of[key]
            resident = out.resident[slot]
            if d.scales and slot not in scales_in:
                scales_in.add(slot)
                beats = g.scale_beats(d.matrix)
                out.reads.append(Read(d.tag, slot, d.matrix,
                                      layout.block_address(d.layer, d.expert, d.matrix), beats,
                                      alloc, None, 1))
                out.locations[slot, SCALE] = alloc
                alloc += beats
            fetch = sorted(d.channels - resident)
            out.skipped_channels += len(d.channels & resident)
            out.fetched_channels += len(fetch)
            resident |= d.channels
            for (first, count), burst in zip(channel_runs(fetch),
                                             layout.bursts(d.layer, d.expert, d.matrix, fetch)):
                beats = -(-burst.length // g.beat_bytes)
                for i in range(count):
                    out.locations[slot, first + i] = alloc + i * g.stride_beats(d.matrix)
                out.reads.append(Read(d.tag, slot, d.matrix, burst.address, beats, alloc,
                                      first, count))
                alloc += beats
            if alloc > g.lines:
                raise ValueError(f"step needs {alloc} buffer lines, the buffer has {g.lines}")
            out.completions.append(Completion(d.tag, slot, EmaStatus.OK))
        out.lines_used = alloc
        return out

    def bursts(self, result: StepResult) -> list[tuple[int, int]]:
        """The AR bursts (address, beats) of a step, in issue order."""
        return [b for r in result.reads for b in split_bursts(r.address, r.beats,
                                                              self.g.beat_bytes)]

    def buffer_lines(self, result: StepResult, image: bytes, base_address: int = 0) -> dict:
        """line -> the bytes the buffer must hold there after the step, from the memory image."""
        B = self.g.beat_bytes
        out = {}
        for r in result.reads:
            for i in range(r.beats):
                at = r.address - base_address + i * B
                out[r.line + i] = bytes(image[at:at + B])
        return out
