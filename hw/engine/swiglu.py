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

    `i` brings each candidate's outputs 0..2F-1 in order (gate 0..F-1, then up 0..F-1, as the
    GATE_UP column holds them): gate values go into a memory of F int32, each up value meets its
    gate there and leaves as h on `o` (index f, 48 bits: |h| <= 2**46 + 1, see layouts.H_WIDTH).
    Widths: gate * sig < 2**46, so |silu| <= |gate| < 2**31; silu * up < 2**62. One value per
    cycle; output registered.
    """

    def __init__(self, candidates: int, ffn: int):
        check_positive("candidates", candidates, 1, 64)
        check_positive("ffn", ffn)
        self._c, self._f = candidates, ffn
        super().__init__({
            "i": In(stream.Signature(sum_layout(candidates, 2 * ffn))),
            "o": Out(stream.Signature(h_layout(candidates, ffn))),
        })

    def elaborate(self, platform):
        m = Module()
        ffn = self._f
        m.submodules.gate_mem = gate_mem = Memory(shape=signed(Q16_WIDTH), depth=ffn, init=[])
        m.submodules.sigmoid = table = Memory(shape=unsigned(15), depth=1024, init=SIGMOID_TABLE)
        gate_wr, gate_rd = gate_mem.write_port(), gate_mem.read_port(domain="comb")
        sig_rd = table.read_port(domain="comb")

        item = self.i.payload
        is_up = item.index >= ffn
        f = Signal(range(ffn))
        m.d.comb += f.eq(Mux(is_up, item.index - ffn, item.index))
        m.d.comb += [gate_rd.addr.eq(f), gate_wr.addr.eq(f), gate_wr.data.eq(item.value)]
        gate = gate_rd.data
        step = (gate + 512) >> 10                       # rshift(gate, 10)
        clamped = Mux(step < -512, -512, Mux(step > 511, 511, step))
        m.d.comb += sig_rd.addr.eq((clamped + 512)[:10])
        silu = Signal(signed(Q16_WIDTH + 1))
        m.d.comb += silu.eq((gate * sig_rd.data + (1 << 14)) >> 15)
        h = (silu * item.value + (1 << 15)) >> 16

        out_free = ~self.o.valid | self.o.ready
        m.d.comb += [gate_wr.en.eq(self.i.valid & ~is_up),
                     self.i.ready.eq(~is_up | out_free)]
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & is_up & out_free):
            m.d.sync += [self.o.valid.eq(1),
                         self.o.payload.candidate.eq(item.candidate),
                         self.o.payload.index.eq(f),
                         self.o.payload.value.eq(h[:H_WIDTH]),
                         self.o.payload.last.eq(item.last)]
        return m
