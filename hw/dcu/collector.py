"""Stage 1: the route port. A job's header, its pruning words and its candidates' scales and
routing weights in, every field checked against the instance; the prune and entry memories
written; the job out once all its beats are in."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import (COUNT_BITS, G_MAX, KEEP_BITS, LANES, DcuError,
                              dcu_entry_layout, dcu_header_layout, dcu_route_layout)
from ...contracts.weight_layout import Matrix
from .arith import bit_length, popcount
from .geometry import IMPORTANCE_BITS, DcuGeometry

__all__ = ["SIZE_BITS", "job_layout", "Collector"]

#: a candidate's size s = bitlen(m) + bitlen(g) - e lies in [0 - 127, 15 + 17 + 128]
SIZE_BITS = 9

#: a job between the stages: its header, the bank of the prune and importance memories it uses,
#: its first bad field (`DcuError.NONE`: a good job), the group's largest live size S, the
#: number of channels it selects, keep = max(1, min(k, unpruned channels)), and (from the
#: accumulator) the OR of every channel's importance, whose top bit is where the threshold
#: search starts
job_layout = data.StructLayout({
    "header": dcu_header_layout,
    "bank": 1,
    "error": DcuError,
    "size": signed(SIZE_BITS),
    "keep": unsigned(KEEP_BITS),
    "top": unsigned(IMPORTANCE_BITS),
})


class Collector(wiring.Component):
    """Takes one route beat per cycle: the header, then ceil(C / 32) prune words (written to
    the prune memory, kept channels counted), then n entries (written to the entry memory;
    S = the largest size bitlen(m) + bitlen(g) - e of an entry with m > 0 and g > 0). Then
    offers the job; after it is taken, no new header is accepted until `passed` (the
    accumulator handed it to the selector: the weigher and the accumulator are done with the
    entry and weight memories). Jobs alternate between the two banks of the prune memory: the
    selector takes a job only once it is done with the previous one, so when a job is passed
    on, the bank the next one writes is free.

    Every field is checked (docs/contracts.md, "DCU jobs: accepted ranges"); the job carries its
    first bad field in `error`. A bad job still takes exactly the beats its header announces:
    ceil(C / 32) prune words and `count` entries (none for a count of 0; up to 127 for a count
    above `max_group`, not written), so the stream stays in step whatever the fields hold."""

    def __init__(self, geometry: DcuGeometry):
        self._g = geometry
        super().__init__({
            "route": In(stream.Signature(dcu_route_layout)),
            "job": Out(stream.Signature(job_layout)),
            "prune_wr": In(WritePort.Signature(addr_width=geometry.bank_addr_bits, shape=LANES)),
            "entry_wr": In(WritePort.Signature(addr_width=geometry.cand_bits,
                                               shape=dcu_entry_layout)),
            "passed": In(1),
        })

    def _header_error(self, m: Module, header) -> Signal:
        """The header's first bad field, in layout order (tag, matrix, scales and new_step take
        every value they can hold)."""
        g = self._g
        channels = Mux(header.matrix == Matrix.DOWN, g.channels(Matrix.DOWN),
                       g.channels(Matrix.GATE_UP))
        error = Signal(DcuError)
        with m.If(header.layer >= g.layers):
            m.d.comb += error.eq(DcuError.LAYER)
        with m.Elif(header.expert >= g.experts):
            m.d.comb += error.eq(DcuError.EXPERT)
        with m.Elif((header.count == 0) | (header.count > g.max_group)):
            m.d.comb += error.eq(DcuError.COUNT)
        with m.Elif((header.keep == 0) | (header.keep > channels)):
            m.d.comb += error.eq(DcuError.KEEP)
        return error

    def elaborate(self, platform):
        m = Module()
        g = self._g
        header = Signal(dcu_header_layout)
        word = Signal(g.word_bits)
        cand = Signal(COUNT_BITS)
        kept = Signal(KEEP_BITS)
        error = Signal(DcuError)
        size = Signal(signed(SIZE_BITS), init=-2**(SIZE_BITS - 1))
        held = Signal()          # a job is out: its entries and weights are in use
        bank = Signal()
        beat = self.route.payload
        taken = self.route.valid & self.route.ready
        last_word = Mux(header.matrix == Matrix.DOWN, g.words(Matrix.DOWN) - 1,
                        g.words(Matrix.GATE_UP) - 1)
        last_lanes = Mux(header.matrix == Matrix.DOWN, g.last_lanes(Matrix.DOWN),
                         g.last_lanes(Matrix.GATE_UP))
        lanes = Mux(word == last_word, last_lanes, Const(2**LANES - 1, LANES))
        # the bits of a beat above its field: zero in a good job
        spare = beat.as_value()
        prune_spare = spare[LANES:].any()
        entry_spare = spare[dcu_entry_layout.size:].any()
        entry = beat.entry
        live = (entry.m != 0) & (entry.g != 0)
        entry_size = Signal(signed(SIZE_BITS))
        m.d.comb += entry_size.eq(bit_length(entry.m) + bit_length(entry.g) - entry.e)

        header_error = self._header_error(m, beat.header)

        def first_error(code):
            # a job keeps the first bad field found, in beat order
            with m.If(error == DcuError.NONE):
                m.d.sync += error.eq(code)

        with m.If(self.passed):
            m.d.sync += held.eq(0)
        with m.FSM():
            with m.State("Header"):
                m.d.comb += self.route.ready.eq(~held)
                with m.If(taken):
                    m.d.sync += [header.eq(beat.header), word.eq(0), cand.eq(0), kept.eq(0),
                                 size.eq(size.init), error.eq(header_error)]
                    m.next = "Prune"
            with m.State("Prune"):
                m.d.comb += [self.route.ready.eq(1),
                             self.prune_wr.addr.eq(g.bank_address(word, bank)),
                             self.prune_wr.data.eq(beat.prune & lanes),
                             self.prune_wr.en.eq(taken)]
                with m.If(taken):
                    m.d.sync += [kept.eq(kept + popcount(beat.prune & lanes)), word.eq(word + 1)]
                    with m.If(prune_spare):
                        first_error(DcuError.RESERVED)
                    with m.Elif((beat.prune & ~lanes).any()):
                        first_error(DcuError.PRUNE)
                    with m.If((word == last_word) & (header.count == 0)):
                        m.next = "Offer"
                    with m.Elif(word == last_word):
                        m.next = "Entry"
            with m.State("Entry"):
                m.d.comb += [self.route.ready.eq(1),
                             self.entry_wr.addr.eq(cand[:g.cand_bits]),
                             self.entry_wr.data.eq(entry),
                             # past max_group the entries are taken, not written
                             self.entry_wr.en.eq(taken & (cand < g.max_group))]
                with m.If(taken):
                    m.d.sync += cand.eq(cand + 1)
                    with m.If(entry_spare):
                        first_error(DcuError.RESERVED)
                    with m.Elif(entry.g > G_MAX):
                        first_error(DcuError.WEIGHT)
                    with m.If(live & (entry_size > size)):
                        m.d.sync += size.eq(entry_size)
                    with m.If(cand == header.count - 1):
                        m.next = "Offer"
            with m.State("Offer"):
                keep = Mux(header.keep < kept, header.keep, kept)
                m.d.comb += [self.job.valid.eq(1), self.job.payload.header.eq(header),
                             self.job.payload.bank.eq(bank),
                             self.job.payload.error.eq(error),
                             self.job.payload.size.eq(size),
                             self.job.payload.keep.eq(Mux(keep == 0, 1, keep))]
                with m.If(self.job.ready):
                    m.d.sync += [held.eq(1), bank.eq(~bank)]
                    m.next = "Header"
        return m
