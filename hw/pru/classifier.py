"""Stage 1: token classes from the encoder's Q.16 scores, and the prompt's field checks."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.pru import SCORE_MAX, PruError, TokenClass
from .params import PruParams

__all__ = ["Classifier"]


class Classifier(wiring.Component):
    """Per score beat one class beat: r = score x length (exact) against the Q.16 thresholds;
    `last` marks the prompt's `length`-th token, the length being the first beat's (a later
    beat's is only checked). Checks each beat (docs/contracts.md, "PRU prompts: accepted
    ranges") and gives the prompt's first bad field in `error` on its last class beat; a first
    beat of length 0 is a prompt of its own, `last` and `empty` (it announces no token). One
    beat per cycle; the class is a register (one cycle of latency), held until taken."""
    def __init__(self, params: PruParams):
        self._p = params
        super().__init__({"score": In(stream.Signature(params.score_layout)),
                          "token_class": Out(stream.Signature(params.class_layout))})

    def elaborate(self, platform):
        m = Module()
        p, i, o = self._p, self.score, self.token_class
        seen = Signal(p.length_bits)        # tokens of this prompt already classified
        held = Signal(p.length_bits)        # the prompt's length, from its first beat
        error = Signal(PruError)            # the prompt's first bad field so far
        first = seen == 0
        length = Mux(first, i.payload.length, held)
        relative = i.payload.score * i.payload.length
        cls = Mux(relative >= p.tau_major_q16, TokenClass.MAJOR,
                  Mux(relative >= p.tau_minor_q16, TokenClass.MINOR, TokenClass.TRIVIAL))
        last = seen + 1 >= length
        found = Signal(PruError)            # this beat's first bad field
        with m.If(i.payload.score > SCORE_MAX):
            m.d.comb += found.eq(PruError.SCORE)
        with m.Elif(first & ((i.payload.length == 0) | (i.payload.length > p.max_tokens))):
            m.d.comb += found.eq(PruError.LENGTH)
        with m.Elif(~first & (i.payload.length != held)):
            m.d.comb += found.eq(PruError.MISMATCH)
        code = Mux(first | (error == PruError.NONE), found, error)
        m.d.comb += i.ready.eq(~o.valid | o.ready)
        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)
        with m.If(i.valid & i.ready):
            m.d.sync += [o.valid.eq(1), o.payload.cls.eq(cls), o.payload.last.eq(last),
                         o.payload.error.eq(code), o.payload.empty.eq(length == 0),
                         seen.eq(Mux(last, 0, seen + 1)), error.eq(code)]
            with m.If(first):
                m.d.sync += held.eq(i.payload.length)
        return m
