"""Stage 2: the sequencer. Holds the prompt's classes and turns them into the selector's jobs."""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.pru import PROMPT_TAG_BITS, PruError, TokenClass
from ..rejects import reject_signature
from .params import PruParams

__all__ = ["Sequencer"]


class Sequencer(wiring.Component):
    """Takes a prompt's classes (up to `max_tokens`, the last one marked), then issues per layer
    two jobs per token, in token order: the shared-set phase (major tokens pick their top-K into
    S, the others only let their logits pass), then the routing phase (picks by the token's
    class and budget). One job per cycle; the next prompt's classes wait until every job of this
    one has left, and then the prompt completes: a pulse of `completed`, or for a prompt with a
    bad field (its last class beat's `error`) one cycle of `rejected` (the code and the prompt's
    number). A rejected prompt's jobs pick nothing, so its logits are taken and dropped; one
    that announced no token (`empty`) has no job and completes at once."""
    def __init__(self, params: PruParams):
        self._p = params
        super().__init__({"token_class": In(stream.Signature(params.class_layout)),
                          "job": Out(stream.Signature(params.job_layout)),
                          "rejected": Out(reject_signature(PruError, PROMPT_TAG_BITS)),
                          "completed": Out(1)})

    def elaborate(self, platform):
        m = Module()
        p, o = self._p, self.job
        # flip-flops, not a memory: max_tokens x 2 bits is far below any SRAM macro
        # written by the classifier before the jobs read them: no reset
        classes = Array(Signal(TokenClass, name=f"class_{t}", reset_less=True)
                        for t in range(p.max_tokens))
        count = Signal(p.length_bits)       # tokens of the prompt (a rejected one's up to 2^bits - 1)
        token = Signal(p.length_bits)
        in_chunk = Signal(range(p.chunk))   # the token's place in its chunk
        layer = Signal(range(p.n_layers))
        shared = Signal()
        error = Signal(PruError)            # the prompt's first bad field
        number = Signal(PROMPT_TAG_BITS)    # prompts taken since reset, modulo 256
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
        bad = error != PruError.NONE

        def complete(code):
            m.d.comb += [self.rejected.valid.eq(code != PruError.NONE),
                         self.rejected.payload.code.eq(code),
                         self.rejected.payload.tag.eq(number),
                         self.completed.eq(code == PruError.NONE)]
            m.d.sync += [number.eq(number + 1), count.eq(0)]

        with m.FSM(name="fsm"):
            with m.State("Take-Classes"):
                m.d.comb += self.token_class.ready.eq(1)
                beat = self.token_class.payload
                with m.If(self.token_class.valid):
                    # a rejected prompt's tokens past max_tokens have no class to keep
                    with m.If(count < p.max_tokens):
                        m.d.sync += classes[count].eq(beat.cls)
                    m.d.sync += count.eq(count + 1)
                    with m.If(beat.last):
                        m.d.sync += [token.eq(0), in_chunk.eq(0), layer.eq(0), shared.eq(1),
                                     error.eq(beat.error)]
                        with m.If(beat.empty):
                            complete(beat.error)
                        with m.Else():
                            m.next = "Issue-Jobs"
            with m.State("Issue-Jobs"):
                m.d.comb += [o.valid.eq(1), o.payload.cls.eq(cls), o.payload.shared.eq(shared),
                             o.payload.clear.eq(shared & (token == 0)),
                             o.payload.picks.eq(Mux(bad, 0, picks)),
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
                                complete(error)
                                m.next = "Take-Classes"
        return m
