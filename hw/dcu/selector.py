"""Stage 4: the selection. A bit-serial search for the k-th largest key (one pass over the
importance words per key bit, a popcount per word), then the mask words, ties to the lower
channel, out as EMA commands."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import KEEP_BITS, LANES
from ...contracts.ema import EmaOp, ema_command_layout
from ...contracts.weight_layout import Matrix
from .accumulator import importance_layout
from .arith import popcount
from .collector import job_layout
from .geometry import KEY_BITS, DcuGeometry
from ..ema.ports import ReadSignature

__all__ = ["Selector"]


class Selector(wiring.Component):
    """The key of channel j is 2 I_j + 1 when it is kept, 0 when pruned (docs/contracts.md).

    Search: the threshold T (the keep-th largest key) is built from its top bit down. For bit b
    every word is read once and the channels whose key agrees with T above b and has bit b set
    are counted (a 32-bit popcount per word); if the channels already known to be above T plus
    these reach `keep`, T's bit b is 1, else they are above T. One word per cycle, the next bit's
    pass starting as the last word's count arrives: B * words + 1 cycles per job, B the bit length
    of the largest key (the accumulator's OR of the sums; at most 30), with no comparator between
    two channels.

    Emit: NEW_STEP if the header asks, the DESCRIPTOR, then per word the mask: keys above T, and
    keys equal to T while fewer than keep - above of them are taken, in channel order. `cmd` holds
    its payload until `ready`; `release` pulses with the last mask word."""

    def __init__(self, geometry: DcuGeometry):
        self._g = geometry
        super().__init__({
            "job": In(stream.Signature(job_layout)),
            "cmd": Out(stream.Signature(ema_command_layout)),
            "sums_rd": Out(ReadSignature(geometry.word_bits, importance_layout.size)),
            "prune_rd": Out(ReadSignature(geometry.word_bits, LANES)),
            "release": Out(1),
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
        bit = Signal(KEY_BITS)          # one-hot: the bit being decided
        above_bit = Signal(KEY_BITS)    # ones above it
        above = Signal(KEEP_BITS + 1)   # channels known to be above T
        count = Signal(KEEP_BITS + 1)   # this pass's matches so far
        word = Signal(g.word_bits)      # the word being read
        arrived = Signal(g.word_bits)   # the word whose data is on the read port
        pending = Signal()
        matches = Signal(LANES)
        m.d.comb += matches.eq(Cat(((key ^ threshold) & above_bit == 0) & (key & bit).any()
                                   for key in keys))
        total = Signal(KEEP_BITS + 1)
        m.d.comb += total.eq(count + popcount(matches))

        # emit: equal keys are taken in channel order until `ties` of them are
        ties = Signal(KEEP_BITS + 1)
        greater, equal = Signal(LANES), Signal(LANES)
        m.d.comb += [greater.eq(Cat(key > threshold for key in keys)),
                     equal.eq(Cat(key == threshold for key in keys))]
        mask = Signal(LANES)
        taken_equal = Signal(range(LANES + 1))
        # seen[i]: equal keys below lane i (a chain of small adders: one per lane)
        seen = [Signal(range(LANES + 1), name=f"seen{i}") for i in range(LANES + 1)]
        for i in range(LANES):
            m.d.comb += [mask[i].eq(greater[i] | (equal[i] & (seen[i] < ties))),
                         seen[i + 1].eq(seen[i] + equal[i])]
        # the word takes its first `ties` equal keys, or all of them: the count needs no chain
        m.d.comb += taken_equal.eq(popcount(equal))
        handshake = self.cmd.valid & self.cmd.ready

        # the search starts at the top bit any key can have (keys are 2 I + 1 or 0): the bits
        # above are 0 in every key and in T, so skipping them changes nothing
        start = Signal(KEY_BITS)
        top_key = Cat(Const(1, 1), self.job.payload.top)
        for i in range(KEY_BITS):
            with m.If(top_key[i]):
                m.d.comb += start.eq(1 << i)

        with m.FSM():
            with m.State("Idle"):
                m.d.comb += self.job.ready.eq(1)
                with m.If(self.job.valid):
                    m.d.sync += [job.eq(self.job.payload), threshold.eq(0),
                                 bit.eq(start), above_bit.eq(0), above.eq(0),
                                 count.eq(0), word.eq(0), pending.eq(0)]
                    m.next = "Search"
            with m.State("Search"):
                m.d.comb += [self.sums_rd.addr.eq(word), self.prune_rd.addr.eq(word)]
                m.d.sync += [word.eq(Mux(word == last_word, 0, word + 1)), arrived.eq(word),
                             pending.eq(1)]
                with m.If(pending):
                    m.d.sync += count.eq(total)
                    with m.If(arrived == last_word):
                        m.d.sync += [count.eq(0), bit.eq(bit >> 1), above_bit.eq(above_bit | bit)]
                        with m.If(above + total >= job.keep):
                            m.d.sync += threshold.eq(threshold | bit)
                        with m.Else():
                            m.d.sync += above.eq(above + total)
                        with m.If(bit[0]):
                            m.next = "Ties"
            with m.State("Ties"):
                m.d.sync += ties.eq(job.keep - above)
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
                             self.sums_rd.addr.eq(0), self.prune_rd.addr.eq(0)]
                with m.If(handshake):
                    m.d.sync += word.eq(0)
                    m.next = "Mask"
            with m.State("Mask"):
                # the word's data is on the read ports; the next word is read as this one leaves
                nxt = Mux(handshake, word + 1, word)
                m.d.comb += [self.cmd.valid.eq(1), self.cmd.payload.op.eq(EmaOp.MASK),
                             self.cmd.payload.arg.mask.eq(mask),
                             self.sums_rd.addr.eq(nxt), self.prune_rd.addr.eq(nxt)]
                with m.If(handshake):
                    m.d.sync += [word.eq(word + 1),
                                 ties.eq(Mux(taken_equal >= ties, 0, ties - taken_equal))]
                    with m.If(word == last_word):
                        m.d.comb += self.release.eq(1)
                        m.next = "Idle"
        return m
