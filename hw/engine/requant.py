"""Requantization of int32 sums to Q.16 with the candidate's and the output channel's scales."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .layouts import (ACC_WIDTH, Q16_WIDTH, SCALE_M_BITS, check_positive, check_split,
                      check_word, dyadic_layout, fp16_decode, rshift_amounts, rshift_apply,
                      scale_words_layout, sum_layout)

__all__ = ["Requant"]

#: acc * m_x * m_w: |acc| <= 2**31, m_x < 2**15, m_w < 2**11 (float16: 1024 + fraction), so
#: |p| <= 2**57; a right shift of 58 or more leaves 0 (docs/contracts.md, requantization)
PRODUCT_BITS = ACC_WIDTH + SCALE_M_BITS + 11


class Requant(wiring.Component):
    """out[o] = rshift(acc[o] * m_x * m_w[o], e_x + e_w[o] - 16) (docs/contracts.md), Q.16.

    The matrix's scale block arrives on `scales` as buffer words (word_bits / 16 float16 words
    each, output channel 0 in the low half-word) and fills one of the scale memory's two blocks;
    sums are taken only once their block is complete, and the group's `last` sum frees it for
    the block after next: the next group's block loads while this group's sums are scaled.
    `act_scale[c]` is candidate c's (m_x, e_x), held by the caller for the whole group.

    Width analysis: the product is exact in PRODUCT_BITS + 1 signed bits and the rounding half
    adds at most 2**57 (the right shift is capped at 58), so no intermediate wraps. The result
    keeps its low 32 bits: Q.16 gate, up and expert outputs are int32 in the contract (number
    formats table); a value beyond it would wrap here while the golden model keeps int64.
    One sum per cycle, or `parts` side by side, each with its own scale read and product
    (output `index` and `index` + outputs / 2 by `split` "halves", parts x `index` .. parts x
    `index` + parts - 1 by "neighbours", as ColumnMac drains them); back-pressure passes
    through.
    Latency 5: the sum, its candidate's scale and the output's scale word taken into registers
    (the scale memory read registered, and only for a word its port does not already hold: the
    DOWN drain's four neighbours share a word, and consecutive sums of GATE_UP's two halves
    mostly do); times m_x; times m_w in two parts; their sum with the rounding term; the
    shift. Each ends at a register and all move together while the output is free.
    `act_scale` is read as the sum is taken, so the caller may move on to the next group's
    scales once its last sum is.
    """

    def __init__(self, candidates: int, outputs: int, word_bits: int, parts: int = 1,
                 split: str = "halves"):
        check_positive("candidates", candidates, 1, 64)
        check_positive("outputs", outputs)
        check_word(1, word_bits)
        self._c, self._o, self._w, self._parts = candidates, outputs, word_bits, parts
        self._split = check_split(split, parts, outputs)
        super().__init__({
            "i_sums": In(stream.Signature(sum_layout(candidates, outputs, parts))),
            "scales": In(stream.Signature(scale_words_layout(word_bits))),
            "act_scale": In(data.ArrayLayout(dyadic_layout, candidates)),
            "o_sums": Out(stream.Signature(sum_layout(candidates, outputs, parts))),
        })

    @property
    def scale_words(self) -> int:
        """Buffer words of the scale block (the layout's scale_bytes, word_bits at a time)."""
        return -(-self._o * 16 // self._w)

    def elaborate(self, platform):
        m = Module()
        per_word = self._w // 16
        words = self.scale_words
        # two blocks: the next group's scale words load while this group's sums are scaled (one
        # block held the weight stream at the next matrix's scale words for a whole drain)
        m.submodules.scale_mem = mem = Memory(shape=self._w, depth=2 * words, init=[])
        wr = mem.write_port()

        full = Signal(2)              # per block: complete, until its group's last sum
        load_bank, use_bank = Signal(), Signal()
        loaded = Signal(range(words))
        load = self.scales.valid & self.scales.ready
        m.d.comb += [self.scales.ready.eq(~full.bit_select(load_bank, 1)),
                     wr.addr.eq(Mux(load_bank, words, 0) + loaded),
                     wr.data.eq(self.scales.payload.data), wr.en.eq(load)]
        with m.If(load):
            m.d.sync += loaded.eq(loaded + 1)
            with m.If(self.scales.payload.last):
                m.d.sync += [loaded.eq(0), load_bank.eq(~load_bank)]
                for b in range(2):
                    with m.If(load_bank == b):
                        m.d.sync += full[b].eq(1)

        item = self.i_sums.payload
        shift = per_word.bit_length() - 1
        half = self._o // self._parts
        # five stages that move together while the output is free, no path holding more than
        # one product of at most 32 x 15 bits or one wide addition (timing, docs/blocks/engine.md):
        # (0) the sum, its candidate's scale and the output's scale word into registers; (1) the
        # sum times m_x, the word decoded, the shift's amounts; (2) times m_w, the low 24 bits
        # and the rest apart; (3) their sum and the rounding term; (4) the shift
        advance = ~self.o_sums.valid | self.o_sums.ready
        take = self.i_sums.valid & full.bit_select(use_bank, 1) & advance
        m.d.comb += self.i_sums.ready.eq(take)
        depth = 4
        # the stages carry a sum's tag only: its value travels as the products
        tag_layout = data.StructLayout({"candidate": item.candidate.shape(),
                                        "index": item.index.shape(), "last": 1})
        meta = [Signal(tag_layout, name=f"meta_{i}") for i in range(depth)]
        valid = [Signal(name=f"valid_{i}") for i in range(depth)]
        x = Signal(dyadic_layout, name="x_scale")
        with m.If(advance):
            m.d.sync += x.eq(self.act_scale[item.candidate])
        split_at = 24
        product = []
        # neighbours that never straddle a scale word (parts divides its float16 count) share
        # one read of that word: the DOWN drain's four outputs, one word read a cycle where
        # four were (SRAM read energy, docs/blocks/engine.md "Energy")
        shared = self._split == "neighbours" and per_word % self._parts == 0
        for part in range(self._parts):
            at = item.index * self._parts + part if self._split == "neighbours" \
                else item.index + part * half
            # otherwise each part reads its output's scale through a read port of its own
            if part == 0 or not shared:
                rd = mem.read_port()
                addr = Signal.like(rd.addr, name=f"scale_addr_{part}")
                # the address of the word this port's register holds (none after reset). It
                # names the block: the blocks alternate with the groups, so a group's first sum
                # never finds the word of the group two before, whose block has loaded again
                held = Signal.like(rd.addr, name=f"held_{part}")
                held_valid = Signal(name=f"held_valid_{part}")
                m.d.comb += [addr.eq(Mux(use_bank, words, 0) + (at >> shift)),
                             rd.addr.eq(addr),
                             rd.en.eq(take & ~(held_valid & (held == addr)))]
                with m.If(rd.en):
                    m.d.sync += [held.eq(addr), held_valid.eq(1)]
            sum_0 = Signal(signed(ACC_WIDTH), name=f"sum_{part}")
            with m.If(advance):
                m.d.sync += sum_0.eq(item.value if self._parts == 1 else item.value[part])
            if shift:
                place = Signal(shift, name=f"place_{part}")
                with m.If(advance):
                    m.d.sync += place.eq(at[:shift])
                word = rd.data.word_select(place, 16)
            else:
                word = rd.data[:16]
            m_w, e_w = fp16_decode(word)
            right, left, rounding = rshift_amounts(x.e + e_w - 16, max_right=PRODUCT_BITS + 1,
                                                   max_left=Q16_WIDTH)
            stages = [{"right": Signal.like(right, name=f"right_{part}_{i}"),
                       "left": Signal.like(left, name=f"left_{part}_{i}"),
                       "half": Signal.like(rounding, name=f"half_{part}_{i}")}
                      for i in range(3)]
            a = Signal(signed(ACC_WIDTH + SCALE_M_BITS), name=f"partial_{part}")
            m_w_1 = Signal(11, name=f"m_w_{part}")
            low = Signal(split_at + 11, name=f"low_{part}")
            high = Signal(signed(ACC_WIDTH + SCALE_M_BITS - split_at + 11), name=f"high_{part}")
            rounded = Signal(signed(PRODUCT_BITS + 2), name=f"rounded_{part}")
            with m.If(advance):
                m.d.sync += [a.eq(sum_0 * x.m), m_w_1.eq(m_w),
                             low.eq(a[:split_at] * m_w_1),
                             high.eq(a[split_at:].as_signed() * m_w_1),
                             rounded.eq((high << split_at) + low + stages[1]["half"])]
                m.d.sync += [stages[0][k].eq(v) for k, v in
                             (("right", right), ("left", left), ("half", rounding))]
                m.d.sync += [stages[i + 1][k].eq(stages[i][k]) for i in range(2)
                             for k in stages[i]]
            product.append(rshift_apply(rounded, stages[2]["right"], stages[2]["left"])[:Q16_WIDTH])

        with m.If(self.o_sums.ready):
            m.d.sync += self.o_sums.valid.eq(0)
        with m.If(advance):
            m.d.sync += [valid[0].eq(take), meta[0].candidate.eq(item.candidate),
                         meta[0].index.eq(item.index), meta[0].last.eq(item.last)]
            m.d.sync += [valid[i + 1].eq(valid[i]) for i in range(depth - 1)]
            m.d.sync += [meta[i + 1].eq(meta[i]) for i in range(depth - 1)]
            with m.If(valid[-1]):
                m.d.sync += [self.o_sums.valid.eq(1),
                             self.o_sums.payload.candidate.eq(meta[-1].candidate),
                             self.o_sums.payload.index.eq(meta[-1].index),
                             self.o_sums.payload.value.eq(Cat(*product)),
                             self.o_sums.payload.last.eq(meta[-1].last)]
        with m.If(take & item.last):
            m.d.sync += use_bank.eq(~use_bank)
            for b in range(2):
                with m.If(use_bank == b):
                    m.d.sync += full[b].eq(0)
        return m
