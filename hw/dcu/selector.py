"""Stage 4: the selection. A radix-16 search for the k-th largest key (one pass over the
importance words per four key bits, fifteen popcounts per word), then the mask words, ties to
the lower channel, out as EMA commands."""

from __future__ import annotations

import functools
import operator

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import KEEP_BITS, LANES, DcuError
from ...contracts.ema import TAG_BITS, EmaOp, ema_command_layout
from ...contracts.weight_layout import Matrix
from .accumulator import importance_layout
from .arith import popcount
from .collector import job_layout
from .geometry import KEY_BITS, DcuGeometry
from ..rejects import reject_signature
from ..streams import ReadSignature

__all__ = ["Selector", "DIGIT_BITS"]

#: key bits decided per pass: a radix-16 digit, 15 popcounts a word; radix 4 took twice the
#: passes (docs/blocks/dcu.md, "The selection")
DIGIT_BITS = 4
#: the keys in whole digits: the padding bits are 0 in every key and in T
DIGIT_GROUPS = -(-KEY_BITS // DIGIT_BITS)
SEARCH_BITS = DIGIT_GROUPS * DIGIT_BITS


class Selector(wiring.Component):
    """The key of channel j is 2 I_j + 1 when it is kept, 0 when pruned (docs/contracts.md).

    Search: the threshold T (the keep-th largest key) is built from its top down, DIGIT_BITS = 4
    bits (a digit 0..15) per pass. For each digit every word is read once and the channels whose
    key agrees with T above the digit are counted fifteen times: those whose digit is at least
    d for d = 1..15 (fifteen 32-bit popcounts per word). T's digit is the largest d for which
    the channels already known to be above T plus those at least d reach `keep`; the channels
    at least d + 1 join the ones above T. One word per cycle, the next pass starting as the
    last word's counts arrive: ceil(B / 4) * words + 1 cycles per job at most, B the bit length
    of the largest key (the accumulator's OR of the sums; at most 30), with no comparator
    between two channels. The
    search stops early once the channels above T and those agreeing with it number exactly
    `keep` (the pass that separates the keep-th key from the next): the mask is then settled
    whatever T's lower bits, which stay 0. It also stops after a pass whose agreeing keys were
    all one key (their OR equals their AND): that key is T, however far down a tie at the
    boundary would have searched.

    Emit: NEW_STEP if the header asks, the DESCRIPTOR, then per word the mask: keys above T, and
    keys equal to T while fewer than keep - above of them are taken, in channel order. `cmd` holds
    its payload until `ready`. The job's words are in its bank of the prune and importance
    memories; the next job is taken only after the last mask word, so the front may fill the
    other bank meanwhile. `completed` is high on the cycle the last mask word is taken.

    A rejected job (`error` set) is taken in one cycle and emits nothing on `cmd`: its
    completion is one cycle of `rejected`: its tag and first bad field."""

    def __init__(self, geometry: DcuGeometry):
        self._g = geometry
        super().__init__({
            "job": In(stream.Signature(job_layout)),
            "cmd": Out(stream.Signature(ema_command_layout)),
            "rejected": Out(reject_signature(DcuError, TAG_BITS)),
            "completed": Out(1),
            "sums_rd": Out(ReadSignature(geometry.bank_addr_bits, importance_layout.size)),
            "prune_rd": Out(ReadSignature(geometry.bank_addr_bits, LANES)),
            # both memories are read only while searching and emitting (their read energy)
            "rd_en": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        job = Signal(job_layout)
        last_word = Mux(job.header.matrix == Matrix.DOWN, g.words(Matrix.DOWN) - 1,
                        g.words(Matrix.GATE_UP) - 1)
        sums = data.View(importance_layout, self.sums_rd.data)
        keys = [Signal(KEY_BITS, name=f"key{i}") for i in range(LANES)]
        for i, key in enumerate(keys):
            kept = self.prune_rd.data[i]
            m.d.comb += key.eq(Mux(kept, Cat(Const(1, 1), sums[i]), 0))

        threshold = Signal(KEY_BITS)
        group = Signal(DIGIT_GROUPS)    # one-hot: the digit being decided (bits r g .. r g + r - 1)
        above_bits = Signal(SEARCH_BITS)  # ones above it
        # keep minus the channels known to be above T: what T's digits still have to reach (a
        # register, so the digit's comparisons need no adder: 9.85 ns at 180 nm with one)
        need = Signal(KEEP_BITS + 1)
        word = Signal(g.word_bits)      # the word being read
        arrived = Signal(g.word_bits)   # the word whose data is on the read port
        pending = Signal()
        # per pass, the channels that agree with T above the digit and whose digit is at least
        # d, for every d from 1 to 2^r - 1: 2^r - 1 popcounts of the same word
        agree = [Signal(name=f"agree{i}") for i in range(LANES)]
        digits = [Signal(DIGIT_BITS, name=f"digit{i}") for i in range(LANES)]
        for i, key in enumerate(keys):
            padded = Cat(key, Const(0, SEARCH_BITS - KEY_BITS))
            m.d.comb += agree[i].eq(((padded ^ threshold) & above_bits) == 0)
            for b in range(DIGIT_BITS):
                m.d.comb += digits[i][b].eq(
                    Cat(padded[DIGIT_BITS * k + b] & group[k] for k in range(DIGIT_GROUPS)).any())
        at_least = {d: Cat(a & (digit >= d) for a, digit in zip(agree, digits))
                    for d in range(1, 2**DIGIT_BITS)}
        count = {d: Signal(KEEP_BITS + 1, name=f"count{d}") for d in at_least}   # so far
        total = {d: Signal(KEEP_BITS + 1, name=f"total{d}") for d in at_least}
        for d, bits in at_least.items():
            m.d.comb += total[d].eq(count[d] + popcount(bits))
        # T's digit: the largest d whose channels agreeing with T and at least d reach `need`.
        # The counts fall as d grows, so `is_digit[d]` (d reaches it, d + 1 does not) is one-hot
        # and the digit its encoding (no chain of 2^r - 1 priority muxes)
        reach = Signal(2**DIGIT_BITS - 1)
        m.d.comb += reach.eq(Cat(total[d] >= need for d in at_least))
        is_digit = {d: Signal(name=f"is_digit{d}") for d in range(2**DIGIT_BITS)}
        for d, flag in is_digit.items():
            below = reach[d - 1] if d else Const(1)
            here = reach[d] if d < 2**DIGIT_BITS - 1 else Const(0)
            m.d.comb += flag.eq(below & ~here)
        digit = Signal(DIGIT_BITS)
        m.d.comb += digit.eq(functools.reduce(operator.or_, (Mux(is_digit[d], d, 0)
                                                             for d in at_least)))
        # the channels whose digit is above T's join those above it, so `need` falls by their
        # count: each digit's result is subtracted beside the comparisons and the one-hot picks
        # one (a subtraction after the pick was the top's critical path, 9.14 ns at 180 nm).
        # Settled: the channels above T and those agreeing with it are exactly `keep` (the
        # keep-th and the next key differ above the bits left), so every agreeing channel is
        # taken whatever its lower bits: T keeps 0 in them and the emit takes the agreeing keys
        # as greater or equal to it
        left, settled = Signal(KEEP_BITS + 1), Signal()
        m.d.comb += [
            left.eq(functools.reduce(operator.or_, (
                Mux(is_digit[d], need - total[d + 1] if d + 1 < 2**DIGIT_BITS else need, 0)
                for d in is_digit))),
            settled.eq(Cat(is_digit[d] & (total[d] == need)
                           for d in at_least).any())]
        # per pass, the OR and the AND of the agreeing keys (this word's with those so far):
        # equal when every agreeing key is one key, which is then the keep-th (a tie at the
        # boundary, where the digits alone would search down to bit 0)
        ones = Const(2**KEY_BITS - 1, KEY_BITS)
        agree_or, agree_and = Signal(KEY_BITS), Signal(KEY_BITS, init=2**KEY_BITS - 1)
        pass_or, pass_and = Signal(KEY_BITS), Signal(KEY_BITS)
        word_or, word_and = Const(0, KEY_BITS), ones
        for a, key in zip(agree, keys):
            word_or, word_and = word_or | Mux(a, key, 0), word_and & Mux(a, key, ones)
        one_key = Signal()
        m.d.comb += [pass_or.eq(agree_or | word_or), pass_and.eq(agree_and & word_and),
                     one_key.eq(pass_or == pass_and)]

        # emit: equal keys are taken in channel order until `need` of them are (after the
        # search, `need` is the count of keys equal to T the mask takes)
        greater, equal = Signal(LANES), Signal(LANES)
        m.d.comb += [greater.eq(Cat(key > threshold for key in keys)),
                     equal.eq(Cat(key == threshold for key in keys))]
        mask = Signal(LANES)
        taken_equal = Signal(range(LANES + 1))
        # seen[i]: equal keys below lane i, as a parallel prefix sum (log2(32) = 5 levels of
        # adders; a chain of 32 adders was the critical path, 11.0 ns at 180 nm)
        upto = [equal[i] for i in range(LANES)]     # becomes: equal keys at lanes <= i
        step = 1
        while step < LANES:
            level = [Signal(range(LANES + 1), name=f"upto{step}_{i}") for i in range(LANES)]
            m.d.comb += [level[i].eq(upto[i] + upto[i - step] if i >= step else upto[i])
                         for i in range(LANES)]
            upto, step = level, 2 * step
        seen = [Const(0, 1)] + upto[:-1]
        for i in range(LANES):
            m.d.comb += mask[i].eq(greater[i] | (equal[i] & (seen[i] < need)))
        # the word takes its first `need` equal keys, or all of them: the count needs no chain
        m.d.comb += taken_equal.eq(popcount(equal))
        handshake = self.cmd.valid & self.cmd.ready

        # the search starts at the digit of the top bit any key can have (keys are 2 I + 1 or
        # 0): the bits above are 0 in every key and in T, so skipping them changes nothing
        start = Signal(DIGIT_GROUPS)
        top_key = Cat(Const(1, 1), self.job.payload.top)
        for i in range(KEY_BITS):
            with m.If(top_key[i]):
                m.d.comb += start.eq(1 << (i // DIGIT_BITS))

        with m.FSM():
            with m.State("Idle"):
                m.d.comb += self.job.ready.eq(1)
                with m.If(self.job.valid & (self.job.payload.error != DcuError.NONE)):
                    m.d.comb += [self.rejected.valid.eq(1),
                                 self.rejected.payload.code.eq(self.job.payload.error),
                                 self.rejected.payload.tag.eq(self.job.payload.header.tag)]
                with m.Elif(self.job.valid):
                    m.d.sync += [job.eq(self.job.payload), threshold.eq(0),
                                 group.eq(start), above_bits.eq(0),
                                 need.eq(self.job.payload.keep),
                                 word.eq(0), pending.eq(0)]
                    m.d.sync += [c.eq(0) for c in count.values()]
                    m.d.sync += [agree_or.eq(0), agree_and.eq(ones)]
                    m.next = "Search"
            with m.State("Search"):
                m.d.comb += [self.sums_rd.addr.eq(g.bank_address(word, job.bank)),
                             self.prune_rd.addr.eq(g.bank_address(word, job.bank)),
                             self.rd_en.eq(1)]
                m.d.sync += [word.eq(Mux(word == last_word, 0, word + 1)), arrived.eq(word),
                             pending.eq(1)]
                with m.If(pending):
                    m.d.sync += [count[d].eq(total[d]) for d in count]
                    m.d.sync += [agree_or.eq(pass_or), agree_and.eq(pass_and)]
                    with m.If(arrived == last_word):
                        m.d.sync += [agree_or.eq(0), agree_and.eq(ones)]
                        m.d.sync += [c.eq(0) for c in count.values()]
                        m.d.sync += [group.eq(group >> 1), need.eq(left),
                                     above_bits.eq(above_bits | Cat(
                                         bit.replicate(DIGIT_BITS) for bit in group))]
                        with m.If(one_key):
                            # one key agrees: it is T (this pass's digit is its digit, so no
                            # channel joined those above)
                            m.d.sync += threshold.eq(pass_or)
                        with m.Else():
                            m.d.sync += threshold.eq(threshold | Cat(
                                Mux(bit, digit, 0) for bit in group))
                        with m.If(group[0] | settled | one_key):
                            m.next = "Step"
            with m.State("Step"):
                m.d.comb += [self.cmd.valid.eq(job.header.new_step),
                             self.cmd.payload.op.eq(EmaOp.NEW_STEP)]
                with m.If(handshake | ~job.header.new_step):
                    m.next = "Head"
            with m.State("Head"):
                d = self.cmd.payload.arg.descriptor
                m.d.comb += [self.cmd.valid.eq(1), self.cmd.payload.op.eq(EmaOp.DESCRIPTOR),
                             d.tag.eq(job.header.tag), d.layer.eq(job.header.layer),
                             d.expert.eq(job.header.expert), d.matrix.eq(job.header.matrix),
                             d.scales.eq(job.header.scales),
                             self.sums_rd.addr.eq(g.bank_address(Const(0, g.word_bits), job.bank)),
                             self.prune_rd.addr.eq(g.bank_address(Const(0, g.word_bits), job.bank)),
                             self.rd_en.eq(1)]
                with m.If(handshake):
                    m.d.sync += word.eq(0)
                    m.next = "Mask"
            with m.State("Mask"):
                # the word's data is on the read ports; the next word is read as this one leaves
                nxt = Mux(handshake, word + 1, word)[:g.word_bits]
                m.d.comb += [self.cmd.valid.eq(1), self.cmd.payload.op.eq(EmaOp.MASK),
                             self.cmd.payload.arg.mask.eq(mask),
                             self.sums_rd.addr.eq(g.bank_address(nxt, job.bank)),
                             self.prune_rd.addr.eq(g.bank_address(nxt, job.bank)), self.rd_en.eq(1)]
                with m.If(handshake):
                    m.d.sync += [word.eq(word + 1),
                                 need.eq(Mux(taken_equal >= need, 0, need - taken_equal))]
                    with m.If(word == last_word):
                        m.d.comb += self.completed.eq(1)
                        m.next = "Idle"
        return m
