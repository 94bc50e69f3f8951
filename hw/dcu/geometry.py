"""The DCU's elaboration parameters and everything derived from them."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Mux

from ...contracts.dcu import KEEP_BITS, LANES, MAX_GROUP
from ...contracts.ema import EXPERT_BITS, LAYER_BITS
from ...contracts.weight_layout import Matrix

__all__ = ["DcuGeometry", "IMPORTANCE_BITS", "KEY_BITS", "WEIGHT_BITS", "LEFT_SHIFT"]

#: the contract's widths (docs/contracts.md, "Depth coalescing"): W_c < 2^16; |q| W summed over
#: 64 candidates < 2^29; the key adds the pruning bit
WEIGHT_BITS = 16
IMPORTANCE_BITS = 29
KEY_BITS = IMPORTANCE_BITS + 1
#: the most a live candidate's product is shifted left: its shift e_c + S - 16 is at least
#: bitlen(m_c) + bitlen(g_c) - 16 >= 2 - 16
LEFT_SHIFT = WEIGHT_BITS - 2


@dataclass(frozen=True)
class DcuGeometry:
    """Channels of each matrix (GATE_UP: d_model, DOWN: the expert's hidden width), the most
    candidates a depth group has, and the layers and experts per layer a job may name."""
    gate_up_channels: int
    down_channels: int
    max_group: int
    layers: int = 2**LAYER_BITS
    experts: int = 2**EXPERT_BITS

    def __post_init__(self):
        for name in ("gate_up_channels", "down_channels"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value < 2**KEEP_BITS:
                raise ValueError(f"{name} = {value!r} is out of range: accepted 1..{2**KEEP_BITS - 1}")
        for name, top in (("max_group", MAX_GROUP), ("layers", 2**LAYER_BITS),
                          ("experts", 2**EXPERT_BITS)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
                raise ValueError(f"{name} = {value!r} is out of range: accepted 1..{top}")

    def channels(self, matrix: Matrix) -> int:
        return self.gate_up_channels if matrix == Matrix.GATE_UP else self.down_channels

    def words(self, matrix: Matrix) -> int:
        """Beats of 32 channels per candidate: mask words of the matrix."""
        return -(-self.channels(matrix) // LANES)

    def last_lanes(self, matrix: Matrix) -> int:
        """Lanes of the matrix's last word that are channels, as a bit mask."""
        return (1 << (self.channels(matrix) - (self.words(matrix) - 1) * LANES)) - 1

    @property
    def max_words(self) -> int:
        return max(self.words(Matrix.GATE_UP), self.words(Matrix.DOWN))

    @property
    def word_bits(self) -> int:
        return max(1, (self.max_words - 1).bit_length())

    @property
    def bank_addr_bits(self) -> int:
        """Address bits of the prune and importance memories: two banks of max_words words (one
        job is selected from one bank while the next is collected and accumulated in the other)."""
        return self.word_bits + 1

    def bank_address(self, word, bank):
        """The prune and importance memories' address of `word` in `bank`: bank b's words start
        at b * max_words (the memories hold 2 * max_words words). Not Cat(word, bank): with a
        word count that is not a power of two (the bundled GATE_UP's 6) bank 1's last words
        would fall past the memory's end."""
        return word + Mux(bank, self.max_words, 0)

    @property
    def cand_bits(self) -> int:
        return max(1, (self.max_group - 1).bit_length())
