"""The prompt routing unit's shared codes and word widths (docs/contracts.md, "Prompt routing").

The RTL (hw/pru/), the reference (golden/blocks/pru.py), the prefill traces and the bench use these, so a
class code or a width is written once."""

from __future__ import annotations

from amaranth.lib import enum

__all__ = ["TokenClass", "SCORE_BITS", "LOGIT_BITS", "WEIGHT_BITS", "tau_q16"]


class TokenClass(enum.IntEnum, shape=2):
    MAJOR = 0      # the router's own top-K; its experts make up the shared set
    MINOR = 1      # top-1, then the shared set, policies.prefill_budget_minor experts in all
    TRIVIAL = 2    # the same with policies.prefill_budget_trivial experts


#: Q.16 scores 0..65536 (1.0 itself is a score: a one-token prompt)
SCORE_BITS = 17
#: Q.16 router logits are int32 (the A8W4 path's requant output, docs/contracts.md)
LOGIT_BITS = 32
#: Q.16 routing weights 0..65536 (one chosen expert weighs exactly 1.0)
WEIGHT_BITS = 17


def tau_q16(tau: float) -> int:
    """A class threshold (in units of the uniform score) as a Q.16 integer, round half up."""
    if not tau >= 0:
        raise ValueError(f"threshold {tau!r} is out of range: accepted values >= 0")
    return int(tau * 65536 + 0.5)
