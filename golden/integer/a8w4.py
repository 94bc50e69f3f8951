"""A8W4 integer reference arithmetic: int8 activations, int4 weights, int32 accumulation.

This is the contract the RTL matches bit for bit (docs/contracts.md):
- activations are int8 (-128..127), weights int4 (-8..7), both two's complement;
- every product and every partial sum is exact;
- the accumulator is an int32 register: the total wraps modulo 2**32.
"""

from __future__ import annotations

import torch

__all__ = ["INT8_RANGE", "INT4_RANGE", "wrap_int32", "dot_a8w4"]

INT8_RANGE = (-128, 127)
INT4_RANGE = (-8, 7)


def _check_range(name: str, t: torch.Tensor, lo: int, hi: int) -> None:
    if t.dtype.is_floating_point or t.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor, not {t.dtype}")
    if t.numel() and (int(t.min()) < lo or int(t.max()) > hi):
        raise ValueError(f"{name} hold values in {int(t.min())}..{int(t.max())}: "
                         f"accepted {lo}..{hi}")


def wrap_int32(t: torch.Tensor) -> torch.Tensor:
    """Two's complement wrap of an int64 tensor to int32, as a 32-bit register does."""
    t = t.to(torch.int64)
    return (((t + 2**31) % 2**32) - 2**31).to(torch.int32)


def dot_a8w4(act: torch.Tensor, wgt: torch.Tensor) -> torch.Tensor:
    """Dot products along the last axis of int8 `act` and int4 `wgt` (held in any int dtype),
    accumulated exactly and wrapped to int32."""
    _check_range("activations", act, *INT8_RANGE)
    _check_range("weights", wgt, *INT4_RANGE)
    if act.shape != wgt.shape:
        raise ValueError(f"activations {tuple(act.shape)} and weights {tuple(wgt.shape)} "
                         "must have the same shape")
    # int64 products and sums are exact for any vector shorter than 2**49 elements
    return wrap_int32((act.to(torch.int64) * wgt.to(torch.int64)).sum(dim=-1))
