"""quantize_vec of each candidate's hidden vector: int8 values and the dyadic scale."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import (H_WIDTH, SCALE_E_BITS, SCALE_M_BITS, act_layout, check_positive,
                      dyadic_layout, h_layout, hidden_scale_layout, index_bits)

__all__ = ["Quantizer", "SCALE_DIVIDE_CYCLES", "RECIPROCAL_DIVIDE_CYCLES"]

#: 2a < 2**48 (|h| < 2**47, layouts.H_WIDTH) is shifted up to N in [2**48, 2**49)
NORM_BITS = 49
#: the reciprocal R = floor(2**64 / N) lies in (2**15, 2**16]: 17 quotient bits
RECIPROCAL_BITS = 17
RECIPROCAL_DIVIDE_CYCLES = RECIPROCAL_BITS
#: m <= 16513 < 2**15 (docs/contracts.md, quantize_vec): 15 quotient bits
SCALE_DIVIDE_CYCLES = SCALE_M_BITS
#: the reciprocal divider's remainder holds 2**64
DIVIDER_BITS = 65
#: the scale divider's remainder: floor(2a * 2**k) + 127 < 2**22 + 127
SCALE_REM_BITS = 23


class Quantizer(wiring.Component):
    """q, (m, e) = quantize_vec(h, 16) per candidate (docs/contracts.md):
    a = max|h|; q = sign(h) * floor((254 |h| + a) / (2a)); k = 21 - bitlength(a);
    m = floor((2a * 2**k + 127) / 254), e = 16 + k; a = 0 gives q = 0 and m = e = 0.

    The scale: for k < 0 the contract divides 2a + 127 * 2**-k by 254 * 2**-k; since
    127 * 2**-k is a multiple of 2**-k, that equals floor((floor(2a * 2**k) + 127) / 254), so
    one shift and the same division by 254 serve both signs of k (2a * 2**k is in
    [2**21, 2**22)). A restoring divider, one quotient bit per cycle, computes it.

    The values, one per cycle: with s = bitlength(2a), N = 2a * 2**(49-s) in [2**48, 2**49)
    and n = (254|h| + a) * 2**(49-s) (< 2**56, since 254|h| + a < 128 * 2a), q = floor(n / N).
    A second divider computes R = floor(2**64 / N) once per candidate, beside the first;
    q' = floor(n R / 2**64) is q or q - 1 (n R / 2**64 > n / N - n / 2**64 > n / N - 2**-8),
    and q = q' + 1 exactly when (q' + 1) N <= n. A five-stage pipeline: read, take the magnitude
    and shift it by 49 - s; scale: n = 254 |h| 2**(49-s) + N / 2 (a 2**(49-s) = N / 2), the
    shift and the sum in two stages so that each fits 800 MHz at 28 nm; multiply by R; multiply
    back by N; correct and emit.

    Two stages, so that one candidate's vector comes in while the one before it goes out: the
    collector writes h into one half of a memory of 2F 48-bit values and keeps the running max;
    the emitter, handed a complete vector, divides (1 + RECIPROCAL_DIVIDE_CYCLES cycles, both
    dividers at once), sends the `scale` item (1) and the values on `hidden` from the other half
    (F + 5). Per candidate, without back-pressure: F + 24 cycles, the collector's F hidden
    under the emitter's work on the candidate before. The scale is also held in `scales[c]`
    for the DOWN requantization until the next group replaces it.
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
            # with each `hidden` item: its candidate is the group's last (the DOWN MAC starts
            # on that candidate's values as they come, hw/engine/column_mac.py `early`)
            "hidden_final": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        ffn = self._f
        m.submodules.h_mem = h_mem = Memory(shape=signed(H_WIDTH), depth=2 * ffn, init=[])
        h_wr, h_rd = h_mem.write_port(), h_mem.read_port(domain="comb")

        def magnitude(v):
            return Mux(v < 0, -v, v)[:H_WIDTH]

        # the collector: the vector coming in, into half `c_bank` of the memory
        c_a = Signal(H_WIDTH)              # running max |h|
        c_cand = Signal(index_bits(self._c))
        c_last = Signal()                  # the candidate is the group's last
        c_bank = Signal()
        c_full = Signal()                  # a whole vector is in, waiting for the emitter
        # the emitter: the vector going out, from half `bank`
        idle = Signal(init=1)
        a = Signal(H_WIDTH)
        cand = Signal(index_bits(self._c))
        last = Signal()
        bank = Signal()
        hand = c_full & idle               # the collected vector passes to the emitter

        item = self.h.payload
        mag = magnitude(item.value)
        take = self.h.valid & self.h.ready
        # the next vector may start in the cycle the last one is handed over, into the other half
        m.d.comb += [self.h.ready.eq(~c_full | hand),
                     h_wr.addr.eq(item.index + Mux(c_bank ^ hand, ffn, 0)),
                     h_wr.data.eq(item.value), h_wr.en.eq(take)]
        with m.If(hand):
            m.d.sync += [a.eq(c_a), cand.eq(c_cand), last.eq(c_last), bank.eq(c_bank),
                         c_bank.eq(~c_bank), c_full.eq(0), idle.eq(0)]
        with m.If(take):
            m.d.sync += [c_a.eq(Mux((item.index == 0) | (mag > c_a), mag, c_a)),
                         c_cand.eq(item.candidate), c_last.eq(item.last)]
            with m.If(item.index == ffn - 1):
                m.d.sync += c_full.eq(1)

        e = Signal(signed(SCALE_E_BITS))
        norm = Signal(range(NORM_BITS))    # 49 - s: the shift that normalizes 2a
        big_n = Signal(NORM_BITS)          # N
        # two restoring dividers: quotient bit i is set when rem >= den * 2**i
        rem, den, quo = Signal(DIVIDER_BITS), Signal(DIVIDER_BITS), Signal(RECIPROCAL_BITS)
        s_rem, s_den, s_quo = Signal(SCALE_REM_BITS), Signal(SCALE_REM_BITS), Signal(SCALE_M_BITS)
        count = Signal(range(RECIPROCAL_DIVIDE_CYCLES + 1))

        def divide(rem, den, quo):
            ge = rem >= den
            return [rem.eq(Mux(ge, rem - den, rem)), den.eq(den >> 1), quo.eq(Cat(ge, quo[:-1]))]

        length = Signal(range(H_WIDTH + 1))
        for i in range(H_WIDTH):           # bitlength(a): the highest set bit wins
            with m.If(a[i]):
                m.d.comb += length.eq(i + 1)

        # the value pipeline, at most one product or one wide step per stage: M reads h[issue]
        # and takes its magnitude shifted by 49 - s, R scales it to n, A estimates q from n
        # times the reciprocal, B multiplies the estimate back, the output corrects it and emits
        issue = Signal(range(ffn + 1))
        m_valid, m_index, m_neg = Signal(), Signal(range(ffn)), Signal()
        m_mag = Signal(NORM_BITS - 1)      # |h| 2**(49-s) <= n / 254 < 2**48
        r_valid, r_index, r_neg = Signal(), Signal(range(ffn)), Signal()
        r_n = Signal(56)
        a_valid, a_index, a_neg = Signal(), Signal(range(ffn)), Signal()
        a_n = Signal(56)
        a_q = Signal(8)
        b_valid, b_index, b_neg = Signal(), Signal(range(ffn)), Signal()
        b_n, b_product = Signal(56), Signal(9 + NORM_BITS)
        b_q = Signal(8)
        advance = ~self.hidden.valid | self.hidden.ready
        with m.If(self.hidden.ready):
            m.d.sync += self.hidden.valid.eq(0)

        with m.FSM(name="emit"):
            with m.State("Idle"):
                with m.If(hand):
                    m.next = "Start"
            with m.State("Start"):
                k = Signal(signed(8))
                m.d.comb += k.eq(21 - length)
                twice = Cat(0, a)
                scaled = Mux(k >= 0, twice << k.as_unsigned()[:5], twice >> (-k).as_unsigned()[:6])
                shift = Signal(range(NORM_BITS))
                m.d.comb += shift.eq(NORM_BITS - 1 - length)
                normalized = (Cat(0, a) << shift)[:NORM_BITS]
                m.d.sync += [s_rem.eq(scaled[:SCALE_REM_BITS] + 127),
                             s_den.eq(254 << (SCALE_DIVIDE_CYCLES - 1)), s_quo.eq(0),
                             e.eq(Mux(a == 0, 0, 16 + k)),
                             norm.eq(shift),
                             big_n.eq(normalized), rem.eq(Const(1 << 64, DIVIDER_BITS)),
                             den.eq(normalized << (RECIPROCAL_BITS - 1)), quo.eq(0),
                             count.eq(RECIPROCAL_DIVIDE_CYCLES), issue.eq(0),
                             *(v.eq(0) for v in (m_valid, r_valid, a_valid, b_valid))]
                m.next = "Divide"
            with m.State("Divide"):
                m.d.sync += [*divide(rem, den, quo), count.eq(count - 1)]
                # the scale's 15 quotient bits in the first 15 of the reciprocal's 17 cycles
                with m.If(count > RECIPROCAL_DIVIDE_CYCLES - SCALE_DIVIDE_CYCLES):
                    m.d.sync += divide(s_rem, s_den, s_quo)
                with m.If(count == 1):
                    m.next = "Emit-Scale"
            with m.State("Emit-Scale"):
                # a = 0: m = e = 0 whatever the divider left
                m_out = Mux(a == 0, 0, s_quo)
                m.d.comb += [self.scale.valid.eq(1), self.scale.payload.candidate.eq(cand),
                             self.scale.payload.scale.m.eq(m_out),
                             self.scale.payload.scale.e.eq(e)]
                with m.If(self.scale.ready):
                    m.d.sync += [self.scales[cand].m.eq(m_out), self.scales[cand].e.eq(e)]
                    m.next = "Values"
            with m.State("Values"):
                m.d.comb += h_rd.addr.eq(Mux(issue < ffn, issue, 0) + Mux(bank, ffn, 0))
                v = h_rd.data
                # 254 x as a shift and a subtract (a constant product maps as an adder array)
                n = ((m_mag << 8) - (m_mag << 1) + big_n[1:])[:56]
                estimate = ((r_n * quo) >> 64)[:8]
                correct = b_product <= b_n
                q = Mux(a == 0, 0, Mux(correct, b_q + 1, b_q))[:8]
                with m.If(advance):
                    with m.If(b_valid):
                        m.d.sync += [self.hidden.valid.eq(1),
                                     self.hidden.payload.candidate.eq(cand),
                                     self.hidden.payload.channel.eq(b_index),
                                     self.hidden.payload.value.eq(Mux(b_neg, -q, q)),
                                     self.hidden.payload.last.eq(last & (b_index == ffn - 1)),
                                     self.hidden_final.eq(last)]
                    m.d.sync += [m_valid.eq(issue < ffn), m_index.eq(issue), m_neg.eq(v < 0),
                                 m_mag.eq((magnitude(v) << norm)[:NORM_BITS - 1]),
                                 r_valid.eq(m_valid), r_index.eq(m_index), r_neg.eq(m_neg),
                                 r_n.eq(n),
                                 a_valid.eq(r_valid), a_index.eq(r_index), a_neg.eq(r_neg),
                                 a_n.eq(r_n), a_q.eq(estimate),
                                 b_valid.eq(a_valid), b_index.eq(a_index), b_neg.eq(a_neg),
                                 b_n.eq(a_n), b_q.eq(a_q), b_product.eq((a_q + 1) * big_n),
                                 issue.eq(issue + 1)]
                    with m.If(issue == ffn):
                        m.d.sync += issue.eq(issue)
                        with m.If(~m_valid & ~r_valid & ~a_valid & ~b_valid):
                            m.d.sync += idle.eq(1)
                            m.next = "Idle"
        return m
