"""The routing-weighted sum over a token's experts, and its read-out."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import (Q16_WIDTH, WEIGHT_BITS, check_positive, flush_layout, index_bits,
                      moe_layout, sum_layout)

__all__ = ["Combine"]


class Combine(wiring.Component):
    """moe_out[t][d] += rshift(y[d] * g, 16) for every expert output y of a candidate whose token
    slot is t and routing weight g (docs/contracts.md, mixture of experts step 4).

    A memory of `tokens` x d_model int32 sums (wrapping like int32 registers; the contract keeps
    the residual in int32) takes one `y` value per cycle; `group_done` pulses with the group's
    last. `flush` asks for token t's sums: they leave on `moe_out` (d = 0..D-1, one per cycle).
    A flush waits while `y` is valid; `y` waits during a flush. `token[c]` and `weight[c]` are
    candidate c's, held by the caller for the group; a candidate's values come in index order
    (the DOWN drain's).
    A register bit per slot, not the memory, says a slot is empty: set by the reset and by the
    slot's flush, cleared by the last value of the first candidate written into it. An empty
    slot's sums read as 0, so the first candidate writes its terms over whatever the memory
    holds, a flush writes nothing back, and a reset mid-step leaves no partial sums behind.
    Width: |y * g| <= 2**31 * 2**16, the rounded shift leaves at most 2**31.
    """

    def __init__(self, candidates: int, d_model: int, tokens: int):
        check_positive("candidates", candidates, 1, 64)
        check_positive("d_model", d_model)
        check_positive("tokens", tokens, 1, 4096)
        self._c, self._d, self._t = candidates, d_model, tokens
        super().__init__({
            "y": In(stream.Signature(sum_layout(candidates, d_model))),
            "token": In(data.ArrayLayout(unsigned(index_bits(tokens)), candidates)),
            "weight": In(data.ArrayLayout(unsigned(WEIGHT_BITS), candidates)),
            "group_done": Out(1),
            "flush": In(stream.Signature(flush_layout(tokens))),
            "moe_out": Out(stream.Signature(moe_layout(tokens, d_model))),
        })

    def elaborate(self, platform):
        m = Module()
        d_model = self._d
        m.submodules.sums = sums = Memory(shape=signed(Q16_WIDTH), depth=self._t * d_model, init=[])
        wr, rd = sums.write_port(), sums.read_port(domain="comb")
        empty = Signal(self._t, init=(1 << self._t) - 1)
        token = Signal(index_bits(self._t))
        d = Signal(range(d_model))
        with m.FSM(name="phase"):
            with m.State("Combine"):
                item = self.y.payload
                slot = self.token[item.candidate]
                address = slot * d_model + item.index
                weighted = (item.value * self.weight[item.candidate] + (1 << 15)) >> 16
                m.d.comb += [self.y.ready.eq(1), rd.addr.eq(address), wr.addr.eq(address),
                             wr.data.eq(Mux(empty.bit_select(slot, 1), 0, rd.data) + weighted),
                             wr.en.eq(self.y.valid),
                             self.group_done.eq(self.y.valid & item.last),
                             self.flush.ready.eq(~self.y.valid)]
                with m.If(self.y.valid & (item.index == d_model - 1)):
                    m.d.sync += empty.bit_select(slot, 1).eq(0)
                with m.If(self.flush.valid & ~self.y.valid):
                    m.d.sync += [token.eq(self.flush.payload.token), d.eq(0)]
                    m.next = "Flush"
            with m.State("Flush"):
                m.d.comb += [rd.addr.eq(token * d_model + d),
                             self.moe_out.valid.eq(1),
                             self.moe_out.payload.token.eq(token),
                             self.moe_out.payload.index.eq(d),
                             self.moe_out.payload.value.eq(
                                 Mux(empty.bit_select(token, 1), 0, rd.data)),
                             self.moe_out.payload.last.eq(d == d_model - 1)]
                with m.If(self.moe_out.ready):
                    m.d.sync += d.eq(d + 1)
                    with m.If(d == d_model - 1):
                        m.d.sync += empty.bit_select(token, 1).eq(1)
                        m.next = "Combine"
        return m
