"""Small combinational helpers of the DCU's datapath."""

from __future__ import annotations

from amaranth.hdl import Value

__all__ = ["popcount"]


def popcount(bits: Value) -> Value:
    """The number of ones of `bits`, as a balanced tree of adders (depth log2 of the width)."""
    terms = [bits[i] for i in range(len(bits))]
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]
