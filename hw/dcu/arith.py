"""Small combinational helpers of the DCU's datapath."""

from __future__ import annotations

from amaranth.hdl import Mux, Value

__all__ = ["popcount", "bit_length"]


def popcount(bits: Value) -> Value:
    """The number of ones of `bits`, as a balanced tree of adders (depth log2 of the width)."""
    terms = [bits[i] for i in range(len(bits))]
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


def bit_length(bits: Value) -> Value:
    """floor(log2 bits) + 1, 0 for 0: the halves' leading-one detectors and a mux per level
    (depth log2 of the width, not a chain of one mux per bit)."""
    if len(bits) == 1:
        return bits
    half = len(bits) // 2
    high, low = bits[half:], bits[:half]
    return Mux(high.any(), half + bit_length(high), bit_length(low))
