"""Stage 5: the fetch list. Per chunk, the distinct experts its tokens chose, as EMA commands."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import LAYER_BITS, MASK_BITS, TAG_BITS, EmaOp, ema_command_layout
from ...contracts.weight_layout import Matrix
from .params import PruParams

__all__ = ["FetchList"]


class FetchList(wiring.Component):
    """Watches the routing picks (`pick`): every pick's expert joins the chunk's set; the pick
    that ends a chunk (`chunk_last` and `last`) hands the set to the emitter, which writes the
    chunk's EMA steps on `cmd`: per `experts_per_step` experts in ascending index a NEW_STEP,
    then per expert a GATE_UP and a DOWN descriptor (scale blocks wanted, tags 0, 1, ... within
    the step), each followed by all-ones MASK words over the matrix's input channels. One word per cycle; the next chunk
    collects while one is emitted; a chunk's end waits only while the previous chunk is still
    being emitted. The lowest expert left is found by a priority encoder."""
    def __init__(self, params: PruParams):
        self._p = params
        super().__init__({"pick": In(stream.Signature(params.pick_layout)),
                          "cmd": Out(stream.Signature(ema_command_layout))})

    def elaborate(self, platform):
        m = Module()
        p, i, o = self._p, self.pick, self.cmd
        e = p.n_experts
        collecting = Signal(e)
        emitting = Signal(e)
        layer = Signal(LAYER_BITS)
        busy = Signal()
        ends = i.payload.chunk_last & i.payload.last
        bit = (Const(1, 1) << i.payload.expert)[:e]
        m.d.comb += i.ready.eq(~(ends & busy))
        with m.If(i.valid & i.ready):
            with m.If(ends):
                m.d.sync += [emitting.eq(collecting | bit), collecting.eq(0), busy.eq(1),
                             layer.eq(i.payload.layer)]
            with m.Else():
                m.d.sync += collecting.eq(collecting | bit)

        lowest = Signal(p.expert_bits)
        for j in reversed(range(e)):          # the last assignment wins: the lowest set bit
            with m.If(emitting[j]):
                m.d.comb += lowest.eq(j)
        matrix = Signal(Matrix)
        tag = Signal(TAG_BITS)
        in_step = Signal(range(p.experts_per_step))     # experts already in this EMA step
        word = Signal(range(max(p.mask_words(p.d_model), p.mask_words(p.expert_ffn)) + 1))
        words = [p.mask_words(p.d_model), p.mask_words(p.expert_ffn)]       # GATE_UP, DOWN
        tails = [p.d_model % MASK_BITS, p.expert_ffn % MASK_BITS]
        last_word = Signal()
        tail_mask = Signal(MASK_BITS)
        with m.If(matrix == Matrix.GATE_UP):
            m.d.comb += [last_word.eq(word == words[0] - 1),
                         tail_mask.eq((1 << (tails[0] or MASK_BITS)) - 1)]
        with m.Else():
            m.d.comb += [last_word.eq(word == words[1] - 1),
                         tail_mask.eq((1 << (tails[1] or MASK_BITS)) - 1)]

        with m.FSM(name="fsm"):
            with m.State("Idle"):
                with m.If(busy):
                    m.next = "New-Step"
            with m.State("New-Step"):
                m.d.comb += [o.valid.eq(1), o.payload.op.eq(EmaOp.NEW_STEP)]
                with m.If(o.ready):
                    m.d.sync += [tag.eq(0), matrix.eq(Matrix.GATE_UP), in_step.eq(0)]
                    m.next = "Descriptor"
            with m.State("Descriptor"):
                d = o.payload.arg.descriptor
                m.d.comb += [o.valid.eq(1), o.payload.op.eq(EmaOp.DESCRIPTOR), d.tag.eq(tag),
                             d.layer.eq(layer), d.expert.eq(lowest), d.matrix.eq(matrix),
                             d.scales.eq(1)]
                with m.If(o.ready):
                    m.d.sync += [tag.eq(tag + 1), word.eq(0)]
                    m.next = "Mask"
            with m.State("Mask"):
                m.d.comb += [o.valid.eq(1), o.payload.op.eq(EmaOp.MASK),
                             o.payload.arg.mask.eq(Mux(last_word, tail_mask, (1 << MASK_BITS) - 1))]
                with m.If(o.ready):
                    m.d.sync += word.eq(word + 1)
                    with m.If(last_word):
                        with m.If(matrix == Matrix.GATE_UP):
                            m.d.sync += matrix.eq(Matrix.DOWN)
                            m.next = "Descriptor"
                        with m.Else():
                            remaining = emitting & ~(Const(1, 1) << lowest)[:e]
                            m.d.sync += [matrix.eq(Matrix.GATE_UP), emitting.eq(remaining)]
                            m.d.sync += in_step.eq(in_step + 1)
                            with m.If(remaining == 0):
                                m.d.sync += busy.eq(0)
                                m.next = "Idle"
                            with m.Elif(in_step == p.experts_per_step - 1):
                                m.next = "New-Step"     # the step is full: the rest in a new one
                            with m.Else():
                                m.next = "Descriptor"
        return m
