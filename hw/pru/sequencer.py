"""Stage 2: the sequencer. Holds the prompt's classes and turns them into the selector's jobs."""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.pru import TokenClass
from .params import PruParams

__all__ = ["Sequencer"]


class Sequencer(wiring.Component):
    """Takes a prompt's classes (up to `max_tokens`, the last one marked), then issues per layer
    two jobs per token, in token order: the shared-set phase (major tokens pick their top-K into
    S, the others only let their logits pass), then the routing phase (picks by the token's
    class and budget). One job per cycle; the next prompt's classes wait until every job of this
    one has left."""
    def __init__(self, params: PruParams):
        self._p = params
        super().__init__({"i_class": In(stream.Signature(params.class_layout)),
                          "o_job": Out(stream.Signature(params.job_layout))})

    def elaborate(self, platform):
        m = Module()
        p, o = self._p, self.o_job
        # flip-flops, not a memory: max_tokens x 2 bits is far below any SRAM macro
        # written by the classifier before the jobs read them: no reset
        classes = Array(Signal(TokenClass, name=f"class_{t}", reset_less=True)
                        for t in range(p.max_tokens))
        count = Signal(p.length_bits)       # tokens of the prompt
        token = Signal(p.length_bits)
        in_chunk = Signal(range(p.chunk))   # the token's place in its chunk
        layer = Signal(range(p.n_layers))
        shared = Signal()
        cls = classes[token]
        picks = Signal(p.pick_bits)     # a minor or trivial token picks nothing into S
        with m.Switch(cls):
            with m.Case(TokenClass.MAJOR):
                m.d.comb += picks.eq(p.top_k)
            with m.Case(TokenClass.MINOR):
                m.d.comb += picks.eq(Mux(shared, 0, p.budget_minor))
            with m.Default():
                m.d.comb += picks.eq(Mux(shared, 0, p.budget_trivial))
        last_token = token + 1 == count
        chunk_last = last_token | (in_chunk == p.chunk - 1)
        with m.FSM(name="fsm"):
            with m.State("Take-Classes"):
                m.d.comb += self.i_class.ready.eq(1)
                with m.If(self.i_class.valid):
                    m.d.sync += [classes[count].eq(self.i_class.payload.cls), count.eq(count + 1)]
                    with m.If(self.i_class.payload.last):
                        m.d.sync += [token.eq(0), in_chunk.eq(0), layer.eq(0), shared.eq(1)]
                        m.next = "Issue-Jobs"
            with m.State("Issue-Jobs"):
                m.d.comb += [o.valid.eq(1), o.payload.cls.eq(cls), o.payload.shared.eq(shared),
                             o.payload.clear.eq(shared & (token == 0)), o.payload.picks.eq(picks),
                             o.payload.layer.eq(layer), o.payload.chunk_last.eq(chunk_last)]
                with m.If(o.ready):
                    m.d.sync += [token.eq(token + 1), in_chunk.eq(in_chunk + 1)]
                    with m.If(chunk_last):
                        m.d.sync += in_chunk.eq(0)
                    with m.If(last_token):
                        m.d.sync += [token.eq(0), in_chunk.eq(0), shared.eq(~shared)]
                        with m.If(~shared):
                            m.d.sync += layer.eq(layer + 1)
                            with m.If(layer == p.n_layers - 1):
                                m.d.sync += count.eq(0)
                                m.next = "Take-Classes"
        return m

