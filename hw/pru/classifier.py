"""Stage 1: token classes from the encoder's Q.16 scores."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.pru import TokenClass
from .params import PruParams

__all__ = ["Classifier"]


class Classifier(wiring.Component):
    """Per score beat one class beat: r = score x length (exact) against the Q.16 thresholds;
    `last` marks the prompt's `length`-th token. One beat per cycle; the class is a register
    (one cycle of latency), held until taken."""
    def __init__(self, params: PruParams):
        self._p = params
        super().__init__({"i_score": In(stream.Signature(params.score_layout)),
                          "o_class": Out(stream.Signature(params.class_layout))})

    def elaborate(self, platform):
        m = Module()
        p, i, o = self._p, self.i_score, self.o_class
        seen = Signal(p.length_bits)        # tokens of this prompt already classified
        relative = i.payload.score * i.payload.length
        cls = Mux(relative >= p.tau_major_q16, TokenClass.MAJOR,
                  Mux(relative >= p.tau_minor_q16, TokenClass.MINOR, TokenClass.TRIVIAL))
        last = seen + 1 >= i.payload.length
        m.d.comb += i.ready.eq(~o.valid | o.ready)
        with m.If(o.ready):
            m.d.sync += o.valid.eq(0)
        with m.If(i.valid & i.ready):
            m.d.sync += [o.valid.eq(1), o.payload.cls.eq(cls), o.payload.last.eq(last),
                         seen.eq(Mux(last, 0, seen + 1))]
        return m
