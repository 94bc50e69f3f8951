"""The prompt routing unit's shared codes and word widths (docs/contracts.md, "Prompt routing").

The RTL (hw/pru/), the reference (golden/blocks/pru.py), the prefill traces and the bench use these, so a
class code or a width is written once.

A prompt whose score beats are out of range for the instance (docs/contracts.md, "PRU prompts:
accepted ranges") is *rejected*: the PRU takes the beats its first score beat announces (its
`length` score beats, then 2 x length x n_layers x n_experts / lanes logit beats; one score beat
and no logit for a length of 0), routes and fetches nothing for it, and reports it as every
checking block does (edgexpert.contracts.rejects: `PruError`, the prompt's number as the tag,
`PruCsr`). `score_beats` and `logit_beats` pack a prompt's beats for an instance and refuse an
out-of-range field with one `ValueError` naming it and its range."""

from __future__ import annotations

from amaranth.lib import enum

from .rejects import reject_layout, reject_status_layout

__all__ = ["TokenClass", "SCORE_BITS", "LOGIT_BITS", "WEIGHT_BITS", "SCORE_MAX", "PROMPT_TAG_BITS",
           "PruError", "PruCsr", "pru_reject_layout", "pru_status_layout", "tau_q16",
           "length_bits", "score_beat", "score_beats", "logit_beats"]


class TokenClass(enum.IntEnum, shape=2):
    MAJOR = 0      # the router's own top-K; its experts make up the shared set
    MINOR = 1      # top-1, then the shared set, policies.prefill.budget_minor experts in all
    TRIVIAL = 2    # the same with policies.prefill.budget_trivial experts


#: Q.16 scores 0..65536 (1.0 itself is a score: a one-token prompt)
SCORE_BITS = 17
#: Q.16 router logits are int32 (the A8W4 path's requant output, docs/contracts.md)
LOGIT_BITS = 32
#: Q.16 routing weights 0..65536 (one chosen expert weighs exactly 1.0)
WEIGHT_BITS = 17
#: the largest score, 1.0 in Q.16 (a one-token prompt's): SCORE_BITS hold more
SCORE_MAX = 1 << 16
#: a rejected prompt's tag: the prompt's number since reset, modulo 256 (the EMA's TAG_BITS)
PROMPT_TAG_BITS = 8


class PruError(enum.IntEnum, shape=2):
    """The first field of a rejected prompt found out of range for the instance, in beat order
    (within a beat: score, then length)."""
    NONE = 0
    #: a score above SCORE_MAX
    SCORE = 1
    #: the first beat's length 0 or above the instance's `max_tokens`
    LENGTH = 2
    #: a later beat's length differs from the first beat's (the first one's counts)
    MISMATCH = 3


class PruCsr(enum.IntEnum, shape=2):
    """Register map of the PRU's read port: every checking block's `RejectCsr`, its completed
    commands the prompts routed."""
    STATUS = 0        # pru_status_layout
    PROMPTS = 1       # prompts routed (their jobs all issued)
    REJECTED = 2      # prompts rejected


#: a rejected prompt's completion: its first bad field and its number
pru_reject_layout = reject_layout(PruError, PROMPT_TAG_BITS)
#: STATUS: the first rejected prompt since reset (bit 0 error, bits 1-2 the code, 8-15 the tag)
pru_status_layout = reject_status_layout(PruError, PROMPT_TAG_BITS)


def tau_q16(tau: float) -> int:
    """A class threshold (in units of the uniform score) as a Q.16 integer, round half up."""
    if not tau >= 0:
        raise ValueError(f"threshold {tau!r} is out of range: accepted values >= 0")
    return int(tau * 65536 + 0.5)


def length_bits(max_tokens: int) -> int:
    """Bits of the score beat's `length` field: 0..max_tokens."""
    return max(1, int(max_tokens).bit_length())


def _in_range(name: str, value: int, lo: int, hi: int) -> int:
    if not lo <= int(value) <= hi:
        raise ValueError(f"{name} = {int(value)} is out of range: accepted {lo}..{hi}")
    return int(value)


def score_beat(score: int, length: int) -> int:
    """One `score` payload (score in bits 0..16, length above), unchecked: `score_beats`
    checks; a bench builds bad beats with it."""
    return score | length << SCORE_BITS


def score_beats(scores_q16, max_tokens: int) -> list[int]:
    """A prompt's `score` payloads for a PRU of `max_tokens`: each Q.16 score (0..SCORE_MAX)
    with the prompt's length (1..max_tokens)."""
    scores = [int(s) for s in scores_q16]
    t = _in_range("prompt length", len(scores), 1, max_tokens)
    return [score_beat(_in_range("score", s, 0, SCORE_MAX), t) for s in scores]


def logit_beats(z_q16, lanes: int) -> list[int]:
    """`logit` payloads of rows of Q.16 router logits (each row a token's n_experts, a
    multiple of `lanes`): `lanes` two's complement LOGIT_BITS words per beat, expert order from
    lane 0. Every int32 value is accepted."""
    lo, hi = -(1 << (LOGIT_BITS - 1)), (1 << (LOGIT_BITS - 1)) - 1
    beats = []
    for row in z_q16:
        row = [_in_range("router logit", v, lo, hi) % (1 << LOGIT_BITS) for v in row]
        if len(row) % lanes:
            raise ValueError(f"a token has {len(row)} logits: accepted a multiple of lanes "
                             f"(= {lanes})")
        beats += [sum(v << (LOGIT_BITS * j) for j, v in enumerate(row[b:b + lanes]))
                  for b in range(0, len(row), lanes)]
    return beats
