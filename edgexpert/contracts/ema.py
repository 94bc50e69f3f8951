"""The EMA controller's command, completion and register contract, and its host side.

The command stream into the EMA controller carries three kinds of beats (`EmaOp`):

- DESCRIPTOR: `ema_descriptor_layout`: which matrix of which expert, and whether its scale block
  is wanted too; followed by exactly ceil(in_channels(matrix) / MASK_BITS) MASK beats;
- MASK: one word of the channel mask, bit i of word k selects input channel k * MASK_BITS + i;
- NEW_STEP: forget what is resident (residency and slot table) and reuse the buffer from line 0.

Every descriptor yields one completion (`ema_completion_layout`), in command order, once its data
is in the buffer or it is known that it never will be (`EmaStatus`).

The codes are `IntEnum`s with an Amaranth shape, so the RTL (`hw/ema/`), the reference model
(`golden/blocks/ema.py`) and the benches share one definition and never re-type a literal.

`Descriptor` checks its fields against a `WeightLayout` when it is encoded, so a bad layer,
expert or channel is a `ValueError` naming the field and the accepted range before anything
reaches the hardware. `encode_step` turns a step's descriptors into command words (a NEW_STEP,
then per descriptor its header and mask words).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

from .weight_layout import Matrix, WeightLayout

__all__ = ["MASK_BITS", "TAG_BITS", "LAYER_BITS", "EXPERT_BITS", "SLOT_BITS", "CSR_ADDR_BITS",
           "CSR_DATA_BITS", "EmaOp", "EmaStatus", "EmaError", "EmaCsr",
           "ema_descriptor_layout", "ema_command_layout", "ema_completion_layout",
           "ema_status_layout", "Descriptor", "Completion", "mask_words", "encode_descriptor",
           "encode_step", "new_step_command"]

#: channels per mask word
MASK_BITS = 32
TAG_BITS = 8
LAYER_BITS = 8
#: routed plus shared experts (config allows 512 + 8)
EXPERT_BITS = 10
SLOT_BITS = 8
CSR_ADDR_BITS = 4
#: counters are 48 bits (days at 800 MHz before they wrap); reads are 64 bits wide
CSR_DATA_BITS = 64


class EmaOp(enum.IntEnum, shape=2):
    DESCRIPTOR = 0
    MASK = 1
    NEW_STEP = 2


class EmaStatus(enum.IntEnum, shape=2):
    #: every byte of the descriptor's fetch is in the buffer, at the recorded locations
    OK = 0
    #: this descriptor is the first failure in command order: a bad field, a bus error on its own
    #: data, no free slot or buffer (the one STATUS names; docs/blocks/ema.md)
    FAILED = 1
    #: it comes after the failing descriptor: the engine had stopped; its data was not (fully)
    #: fetched
    ABORTED = 2


class EmaError(enum.IntEnum, shape=3):
    NONE = 0
    SLVERR = 1
    DECERR = 2
    #: layer or expert out of range, or mask bits beyond the matrix's input channels
    BAD_DESCRIPTOR = 3
    #: a MASK beat where a descriptor was expected, or a descriptor cut short
    BAD_COMMAND = 4
    #: more distinct (layer, expert, matrix) in one step than the slot table holds
    SLOTS_FULL = 5
    #: the step's fetches do not fit in the weight buffer
    BUFFER_FULL = 6


class EmaCsr(enum.IntEnum, shape=4):
    """Register map of the controller's read port (all read-only, 64 bits)."""
    STATUS = 0            # ema_status_layout
    BYTES = 1             # bytes written into the buffer
    BEATS = 2             # R beats accepted
    BURSTS = 3            # AR bursts accepted by the memory
    DESCRIPTORS = 4       # completions delivered
    BUSY_CYCLES = 5       # cycles with work in the engine
    STALL_CYCLES = 6      # busy cycles on which no R beat moved
    FETCHED_CHANNELS = 7  # columns fetched
    SKIPPED_CHANNELS = 8  # requested columns already resident (de-duplicated)
    PEAK_OUTSTANDING = 9  # most AR bursts in flight at once


ema_descriptor_layout = data.StructLayout({
    "tag": unsigned(TAG_BITS),        # echoed in the completion and in the error status
    "layer": unsigned(LAYER_BITS),
    "expert": unsigned(EXPERT_BITS),
    "matrix": unsigned(1),            # weight_layout.Matrix: 0 GATE_UP, 1 DOWN
    "scales": unsigned(1),            # fetch the matrix's scale block too
})

ema_command_layout = data.StructLayout({
    "op": EmaOp,
    "arg": data.UnionLayout({"descriptor": ema_descriptor_layout, "mask": unsigned(MASK_BITS)}),
})

ema_completion_layout = data.StructLayout({
    "tag": unsigned(TAG_BITS),
    # where the location table keeps this matrix's channels; 0 when the status is not OK
    "slot": unsigned(SLOT_BITS),
    "status": EmaStatus,
})

ema_status_layout = data.StructLayout({
    "busy": 1,
    "error": 1,
    "code": EmaError,
    "reserved": 3,
    "tag": unsigned(TAG_BITS),        # the descriptor the first error belongs to
})


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


def mask_words(channels, n_channels: int) -> list[int]:
    """A channel set as MASK_BITS-bit words, bit i of word k for channel k * MASK_BITS + i: a
    descriptor's MASK beats, and the residency words the controller keeps per slot."""
    return [sum(1 << (ch - k * MASK_BITS) for ch in channels
                if k * MASK_BITS <= ch < (k + 1) * MASK_BITS)
            for k in range(-(-n_channels // MASK_BITS))]


def encode_descriptor(layout: WeightLayout, d: Descriptor) -> list[int]:
    """The header and the mask words of one descriptor (fields checked against `layout`)."""
    d.check(layout)
    if layout.n_layers > 2**LAYER_BITS or layout.experts_per_layer > 2**EXPERT_BITS:
        raise ValueError("the layout has more layers or experts than a descriptor can name")
    words = [_command(EmaOp.DESCRIPTOR, {"descriptor": {
        "tag": d.tag, "layer": d.layer, "expert": d.expert, "matrix": int(d.matrix),
        "scales": int(d.scales)}})]
    return words + [_command(EmaOp.MASK, {"mask": mask})
                    for mask in mask_words(d.channels, layout.in_channels(d.matrix))]


def encode_step(layout: WeightLayout, descriptors: Iterable[Descriptor]) -> list[int]:
    """NEW_STEP, then every descriptor of the step."""
    words = [new_step_command()]
    for d in descriptors:
        words += encode_descriptor(layout, d)
    return words


@dataclass(frozen=True)
class Completion:
    """One completion as the host reads it (`ema_completion_layout`)."""
    tag: int
    slot: int
    status: EmaStatus
