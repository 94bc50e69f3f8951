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

    `sums` brings each candidate's hidden channels f = 0..F-1 in order, gate[f] and up[f] side by
    side (the GATE_UP drain's two parts), and h leaves on `h` (index f, 48 bits:
    |h| <= 2**46 + 1, see layouts.H_WIDTH). Widths: gate * sig < 2**46, so
    |silu| <= |gate| < 2**31; silu * up < 2**62. One value per cycle, latency 4 (the table
    read, silu, the two halves of silu * up, their sum).
    """

    def __init__(self, candidates: int, ffn: int):
        check_positive("candidates", candidates, 1, 64)
        check_positive("ffn", ffn)
        self._c, self._f = candidates, ffn
        super().__init__({
            "sums": In(stream.Signature(sum_layout(candidates, 2 * ffn, 2))),
            "h": Out(stream.Signature(h_layout(candidates, ffn))),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.sigmoid = table = Memory(shape=unsigned(15), depth=1024, init=SIGMOID_TABLE)
        sig_rd = table.read_port(domain="comb")

        item = self.sums.payload
        gate, up = item.value[0], item.value[1]
        step = (gate + 512) >> 10                       # rshift(gate, 10)
        clamped = Mux(step < -512, -512, Mux(step > 511, 511, step))
        m.d.comb += sig_rd.addr.eq((clamped + 512)[:10])
        # four stages that move together while the output is free, at most a product of 32 x 16
        # bits each: (1) the table read, (2) silu = rshift(gate * sig, 15), (3) silu times the
        # low and the high half of up, (4) their sum, h = rshift(silu * up, 16)
        advance = ~self.h.valid | self.h.ready
        m.d.comb += self.sums.ready.eq(advance)
        meta = [Signal(h_layout(self._c, self._f), name=f"meta_{i}") for i in (1, 2, 3)]
        valid = [Signal(name=f"valid_{i}") for i in (1, 2, 3)]
        gate_1, up_1, up_2 = (Signal(signed(Q16_WIDTH), name=n) for n in ("gate_1", "up_1", "up_2"))
        sig_1 = Signal(unsigned(15))
        silu = Signal(signed(Q16_WIDTH + 1))
        half = Q16_WIDTH // 2
        # silu * up = silu * up_high * 2**16 + silu * up_low, up_low unsigned
        low = Signal(signed(Q16_WIDTH + 1 + half + 1))
        high = Signal(signed(Q16_WIDTH + 1 + half))
        with m.If(self.h.ready):
            m.d.sync += self.h.valid.eq(0)
        with m.If(advance):
            m.d.sync += [valid[0].eq(self.sums.valid), valid[1].eq(valid[0]), valid[2].eq(valid[1]),
                         meta[0].candidate.eq(item.candidate), meta[0].index.eq(item.index),
                         meta[0].last.eq(item.last), meta[1].eq(meta[0]), meta[2].eq(meta[1]),
                         gate_1.eq(gate), up_1.eq(up), sig_1.eq(sig_rd.data),
                         silu.eq((gate_1 * sig_1 + (1 << 14)) >> 15), up_2.eq(up_1),
                         low.eq(silu * up_2[:half]), high.eq(silu * up_2[half:].as_signed())]
            with m.If(valid[2]):
                h = ((high << half) + low + (1 << 15)) >> 16
                m.d.sync += [self.h.valid.eq(1),
                             self.h.payload.candidate.eq(meta[2].candidate),
                             self.h.payload.index.eq(meta[2].index),
                             self.h.payload.value.eq(h[:H_WIDTH]),
                             self.h.payload.last.eq(meta[2].last)]
        return m
