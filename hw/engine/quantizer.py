"""quantize_vec of each candidate's hidden vector: int8 values and the dyadic scale."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import (H_WIDTH, SCALE_E_BITS, SCALE_M_BITS, act_layout, check_positive,
                      dyadic_layout, h_layout, hidden_scale_layout, index_bits)

__all__ = ["Quantizer", "SCALE_DIVIDE_CYCLES", "VALUE_DIVIDE_CYCLES"]

#: a = max|h| < 2**47 (layouts.H_WIDTH): 254 |h| + a < 2**56 is the widest dividend
DIVIDEND_BITS = H_WIDTH + 8
#: quotient bits: |q| <= 127 (7 bits); m <= 16513 < 2**15 (docs/contracts.md, quantize_vec)
VALUE_DIVIDE_CYCLES = 7
SCALE_DIVIDE_CYCLES = SCALE_M_BITS


class Quantizer(wiring.Component):
    """q, (m, e) = quantize_vec(h, 16) per candidate (docs/contracts.md):
    a = max|h|; q = sign(h) * floor((254 |h| + a) / (2a)); k = 21 - bitlength(a);
    m = floor((2a * 2**k + 127) / 254), e = 16 + k; a = 0 gives q = 0 and m = e = 0.

    For k < 0 the contract divides 2a + 127 * 2**-k by 254 * 2**-k; since 127 * 2**-k is a
    multiple of 2**-k, that equals floor((floor(2a * 2**k) + 127) / 254), so one right shift and
    the same division by 254 serve both signs of k. 2a * 2**k lies in [2**21, 2**22).

    Per candidate: F cycles to collect h (a memory of F 48-bit values and the running max),
    1 + SCALE_DIVIDE_CYCLES for the scale (a restoring divider, one quotient bit per cycle), its
    `scale` item, then per value 1 + VALUE_DIVIDE_CYCLES + 1 cycles (read, divide, emit) on
    `hidden`: 9F + 17 cycles without back-pressure. The scale is also held in `scales[c]` for
    the DOWN requantization until the next group overwrites it.
    """

    def __init__(self, candidates: int, ffn: int):
        check_positive("candidates", candidates, 1, 64)
        check_positive("ffn", ffn)
        self._c, self._f = candidates, ffn
        super().__init__({
            "h": In(stream.Signature(h_layout(candidates, ffn))),
            "hidden": Out(stream.Signature(act_layout(candidates, ffn))),
            "scale": Out(stream.Signature(hidden_scale_layout(candidates))),
            "scales": Out(data.ArrayLayout(dyadic_layout, candidates)),
        })

    def elaborate(self, platform):
        m = Module()
        ffn = self._f
        m.submodules.h_mem = h_mem = Memory(shape=signed(H_WIDTH), depth=ffn, init=[])
        h_wr, h_rd = h_mem.write_port(), h_mem.read_port(domain="comb")

        a = Signal(H_WIDTH)                # max |h| of the candidate
        cand = Signal(index_bits(self._c))
        last = Signal()                    # the candidate is the group's last
        f = Signal(range(ffn))
        e = Signal(signed(SCALE_E_BITS))
        neg = Signal()
        # the restoring divider: quotient bit i is set when rem >= den * 2**i
        rem = Signal(DIVIDEND_BITS)
        den = Signal(DIVIDEND_BITS)
        quo = Signal(SCALE_M_BITS)
        count = Signal(range(SCALE_DIVIDE_CYCLES + 1))
        ge = rem >= den
        divide = [rem.eq(Mux(ge, rem - den, rem)), den.eq(den >> 1), quo.eq(Cat(ge, quo[:-1])),
                  count.eq(count - 1)]

        def magnitude(v):
            return Mux(v < 0, -v, v)[:H_WIDTH]

        with m.FSM(name="phase"):
            with m.State("Collect"):
                item = self.h.payload
                mag = magnitude(item.value)
                m.d.comb += [self.h.ready.eq(1), h_wr.addr.eq(item.index),
                             h_wr.data.eq(item.value), h_wr.en.eq(self.h.valid)]
                with m.If(self.h.valid):
                    m.d.sync += [a.eq(Mux((item.index == 0) | (mag > a), mag, a)),
                                 cand.eq(item.candidate), last.eq(item.last)]
                    with m.If(item.index == ffn - 1):
                        m.next = "Scale"
            with m.State("Scale"):
                length = Signal(range(H_WIDTH + 1))
                for i in range(H_WIDTH):       # bitlength(a): the highest set bit wins
                    with m.If(a[i]):
                        m.d.comb += length.eq(i + 1)
                k = Signal(signed(8))
                m.d.comb += k.eq(21 - length)
                twice = Cat(0, a)
                scaled = Mux(k >= 0, twice << k.as_unsigned()[:5], twice >> (-k).as_unsigned()[:6])
                m.d.sync += [rem.eq(scaled[:23] + 127), den.eq(254 << (SCALE_DIVIDE_CYCLES - 1)),
                             quo.eq(0), count.eq(SCALE_DIVIDE_CYCLES),
                             e.eq(Mux(a == 0, 0, 16 + k))]
                m.next = "Divide-Scale"
                with m.If(a == 0):
                    m.next = "Emit-Scale"
            with m.State("Divide-Scale"):
                m.d.sync += divide
                with m.If(count == 1):
                    m.next = "Emit-Scale"
            with m.State("Emit-Scale"):
                m.d.comb += [self.scale.valid.eq(1), self.scale.payload.candidate.eq(cand),
                             self.scale.payload.scale.m.eq(quo), self.scale.payload.scale.e.eq(e)]
                with m.If(self.scale.ready):
                    m.d.sync += [self.scales[cand].m.eq(quo), self.scales[cand].e.eq(e), f.eq(0)]
                    m.next = "Read"
            with m.State("Read"):
                v = h_rd.data
                m.d.comb += h_rd.addr.eq(f)
                m.d.sync += [rem.eq(254 * magnitude(v) + a),
                             den.eq(Cat(0, a) << (VALUE_DIVIDE_CYCLES - 1)),
                             quo.eq(0), count.eq(VALUE_DIVIDE_CYCLES), neg.eq(v < 0)]
                m.next = "Divide-Value"
                with m.If(a == 0):
                    m.next = "Emit-Value"
            with m.State("Divide-Value"):
                m.d.sync += divide
                with m.If(count == 1):
                    m.next = "Emit-Value"
            with m.State("Emit-Value"):
                q = quo[:8]
                m.d.comb += [self.hidden.valid.eq(1),
                             self.hidden.payload.candidate.eq(cand),
                             self.hidden.payload.channel.eq(f),
                             self.hidden.payload.value.eq(Mux(neg, -q, q)),
                             self.hidden.payload.last.eq(last & (f == ffn - 1))]
                with m.If(self.hidden.ready):
                    m.d.sync += f.eq(f + 1)
                    m.next = "Read"
                    with m.If(f == ffn - 1):
                        m.next = "Collect"
        return m
