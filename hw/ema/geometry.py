"""Every number the EMA controller's parts, its memories and its models derive from the
parameters, and the constants of the bus."""

from __future__ import annotations

from dataclasses import dataclass

from ...contracts.ema import MASK_BITS
from ...contracts.weight_layout import ALIGN, Matrix, WeightLayout

__all__ = ["DATA_WIDTHS", "AXI_ID_WIDTH", "COUNTER_BITS", "PAGE_BYTES", "MAX_BURST_BEATS",
           "EmaGeometry", "bits_for"]

#: the AXI data widths the controller is built for (`hardware.ema.axi_data_width`)
DATA_WIDTHS = (64, 128, 256)
#: AXI ID bits on the ports; the controller issues ID 0 only and expects its bursts in order
AXI_ID_WIDTH = 4
#: counter width: days at 800 MHz before a byte counter wraps (docs/blocks/ema.md, registers)
COUNTER_BITS = 48
#: the 4 KB rule: an AXI burst may not cross a 4 KB address boundary (AMBA AXI spec, A3.4.1)
PAGE_BYTES = 4096
#: the longest AXI4 INCR burst (AMBA AXI spec, A3.4.1: AxLEN is 8 bits)
MAX_BURST_BEATS = 256


def bits_for(n: int) -> int:
    """Bits that hold 0..n."""
    return max(1, int(n).bit_length())


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class EmaGeometry:
    """Every number the controller, its memories and its models derive from the parameters."""
    layout: WeightLayout
    data_width: int
    buffer_bytes: int
    slots: int

    @property
    def beat_bytes(self) -> int:
        return self.data_width // 8

    @property
    def lines(self) -> int:
        return self.buffer_bytes // self.beat_bytes

    @property
    def line_bits(self) -> int:
        return (self.lines - 1).bit_length() or 1

    def row_bits(self, banks: int) -> int:
        """A buffer bank's row address width: line L is row L // banks of bank L % banks."""
        return (self.lines // banks - 1).bit_length() or 1

    @property
    def max_in_channels(self) -> int:
        return max(self.layout.in_channels(m) for m in Matrix)

    @property
    def chan_stride(self) -> int:
        """Location-table entries per slot: every input channel plus the scale block's entry."""
        return _pow2_at_least(self.max_in_channels + 1)

    @property
    def scale_entry(self) -> int:
        """Location-table index (within a slot) of the scale block: the last entry."""
        return self.chan_stride - 1

    @property
    def res_words_per_slot(self) -> int:
        return max(1, self.chan_stride // MASK_BITS)

    def mask_words(self, matrix: Matrix) -> int:
        return -(-self.layout.in_channels(matrix) // MASK_BITS)

    def stride_beats(self, matrix: Matrix) -> int:
        return self.layout.column_stride(matrix) // self.beat_bytes

    def column_beats(self, matrix: Matrix) -> int:
        return -(-self.layout.column_bytes(matrix) // self.beat_bytes)

    def scale_beats(self, matrix: Matrix) -> int:
        return -(-self.layout.scale_bytes(matrix) // ALIGN) * ALIGN // self.beat_bytes

    def run_beats(self, matrix: Matrix, count: int) -> int:
        """Beats of one read of `count` neighbouring columns (padding between them included)."""
        return (count - 1) * self.stride_beats(matrix) + self.column_beats(matrix)

    @property
    def max_read_beats(self) -> int:
        return max(max(self.run_beats(m, self.layout.in_channels(m)), self.scale_beats(m))
                   for m in Matrix)

    # --- widths of the fields the controller's parts pass each other -----------------------
    @property
    def channel_bits(self) -> int:
        """A channel number or a count of channels, 0..max_in_channels."""
        return bits_for(self.max_in_channels)

    @property
    def read_beats_bits(self) -> int:
        """The beats of one read, 0..max_read_beats."""
        return bits_for(self.max_read_beats)

    @property
    def slot_bits(self) -> int:
        return bits_for(self.slots - 1)

    @property
    def mask_word_bits(self) -> int:
        """The index of a mask word within its descriptor."""
        return bits_for(max(self.mask_words(m) for m in Matrix))

    @property
    def stride_bits(self) -> int:
        """A column stride in beats."""
        return bits_for(max(self.stride_beats(m) for m in Matrix))

    @property
    def loc_addr_bits(self) -> int:
        """A location-table entry, slot * chan_stride + channel."""
        return (self.slots * self.chan_stride - 1).bit_length() or 1

    @property
    def res_addr_bits(self) -> int:
        """A residency word, slot * res_words_per_slot + word."""
        return (self.slots * self.res_words_per_slot - 1).bit_length() or 1
