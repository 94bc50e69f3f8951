"""Payloads and codes shared by the blocks around the EMA controller, defined once.

The command stream into the EMA controller carries three kinds of beats (`EmaOp`):

- DESCRIPTOR: `ema_descriptor_layout`: which matrix of which expert, and whether its scale block
  is wanted too; followed by exactly ceil(in_channels(matrix) / MASK_BITS) MASK beats;
- MASK: one word of the channel mask, bit i of word k selects input channel k * MASK_BITS + i;
- NEW_STEP: forget what is resident (residency and slot table) and reuse the buffer from line 0.

Every descriptor yields one completion (`ema_completion_layout`), in command order, once its data
is in the buffer or it is known that it never will be (`EmaStatus`).
"""

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

__all__ = ["MASK_BITS", "TAG_BITS", "LAYER_BITS", "EXPERT_BITS", "SLOT_BITS", "CSR_ADDR_BITS",
           "CSR_DATA_BITS", "EmaOp", "EmaStatus", "EmaError", "EmaCsr",
           "ema_descriptor_layout", "ema_command_layout", "ema_completion_layout",
           "ema_status_layout"]

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


class EmaOp(enum.Enum, shape=2):
    DESCRIPTOR = 0
    MASK = 1
    NEW_STEP = 2


class EmaStatus(enum.Enum, shape=2):
    #: every byte of the descriptor's fetch is in the buffer, at the recorded locations
    OK = 0
    #: this descriptor failed: a bad field, a bus error on its data, no free slot or buffer
    FAILED = 1
    #: an earlier error stopped the engine; this descriptor's data was not (fully) fetched
    ABORTED = 2


class EmaError(enum.Enum, shape=3):
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


class EmaCsr(enum.Enum, shape=4):
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
    "slot": unsigned(SLOT_BITS),      # where the location table keeps this matrix's channels
    "status": EmaStatus,
})

ema_status_layout = data.StructLayout({
    "busy": 1,
    "error": 1,
    "code": EmaError,
    "reserved": 3,
    "tag": unsigned(TAG_BITS),        # the descriptor the first error belongs to
})
