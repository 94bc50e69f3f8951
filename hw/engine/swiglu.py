"""SiLU(gate) * up of one candidate's Q.16 gate and up values."""

from __future__ import annotations

import math

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import H_WIDTH, Q16_WIDTH, check_positive, h_layout, sum_layout

__all__ = ["SIGMOID_TABLE", "SwiGlu"]

#: docs/contracts.md, mixture of experts step 3: SIG[i] = round(2**15 / (1 + exp(-i/64))) for
#: i in -512..511, stored at i + 512; every entry lies in 11..32757, 15 bits
SIGMOID_TABLE = [round(2**15 / (1 + math.exp(-i / 64))) for i in range(-512, 512)]


class SwiGlu(wiring.Component):
    """h[f] = rshift(silu * up[f], 16) with silu = rshift(gate[f] * sig, 15) and
    sig = SIG[clamp(rshift(gate[f], 10), -512, 511)] (docs/contracts.md).

    `i` brings each candidate's hidden channels f = 0..F-1 in order, gate[f] and up[f] side by
    side (the GATE_UP drain's two parts), and h leaves on `o` (index f, 48 bits:
    |h| <= 2**46 + 1, see layouts.H_WIDTH). Widths: gate * sig < 2**46, so
    |silu| <= |gate| < 2**31; silu * up < 2**62. One value per cycle; output registered.
    """

    def __init__(self, candidates: int, ffn: int):
        check_positive("candidates", candidates, 1, 64)
        check_positive("ffn", ffn)
        self._c, self._f = candidates, ffn
        super().__init__({
            "i": In(stream.Signature(sum_layout(candidates, 2 * ffn, 2))),
            "o": Out(stream.Signature(h_layout(candidates, ffn))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.sigmoid = table = Memory(shape=unsigned(15), depth=1024, init=SIGMOID_TABLE)
        sig_rd = table.read_port(domain="comb")

        item = self.i.payload
        gate, up = item.value[0], item.value[1]
        step = (gate + 512) >> 10                       # rshift(gate, 10)
        clamped = Mux(step < -512, -512, Mux(step > 511, 511, step))
        m.d.comb += sig_rd.addr.eq((clamped + 512)[:10])
        silu = Signal(signed(Q16_WIDTH + 1))
        m.d.comb += silu.eq((gate * sig_rd.data + (1 << 14)) >> 15)
        h = (silu * up + (1 << 15)) >> 16

        out_free = ~self.o.valid | self.o.ready
        m.d.comb += self.i.ready.eq(out_free)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & out_free):
            m.d.sync += [self.o.valid.eq(1),
                         self.o.payload.candidate.eq(item.candidate),
                         self.o.payload.index.eq(item.index),
                         self.o.payload.value.eq(h[:H_WIDTH]),
                         self.o.payload.last.eq(item.last)]
        return m
