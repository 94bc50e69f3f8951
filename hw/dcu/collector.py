"""Stage 1: the route port. A job's header, its pruning words and its candidates' scales and
routing weights in; the prune and entry memories written; the job out once all are in."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import (E_BITS, KEEP_BITS, LANES, dcu_entry_layout, dcu_header_layout,
                              dcu_route_layout)
from ...contracts.weight_layout import Matrix
from .arith import popcount
from .geometry import IMPORTANCE_BITS, DcuGeometry

__all__ = ["job_layout", "Collector"]

#: a job between the stages: its header, the bank of the prune and importance memories it uses,
#: the group's smallest live exponent E, the number of channels it selects,
#: keep = max(1, min(k, unpruned channels)), and (from the accumulator) the OR of every channel's
#: importance, whose top bit is where the threshold search starts
job_layout = data.StructLayout({
    "header": dcu_header_layout,
    "bank": 1,
    "e_min": signed(E_BITS),
    "keep": unsigned(KEEP_BITS),
    "top": unsigned(IMPORTANCE_BITS),
})


class Collector(wiring.Component):
    """Takes one route beat per cycle: the header, then ceil(C / 32) prune words (written to
    the prune memory, lanes past the last channel cleared, kept channels counted), then n
    entries (written to the entry memory; E = the smallest exponent of an entry with m > 0 and
    g > 0). Then offers the job; after it is taken, no new header is accepted until `passed`
    (the accumulator handed it to the selector: the weigher and the accumulator are done with
    the entry and weight memories). Jobs alternate between the two banks of the prune memory:
    the selector takes a job only once it is done with the previous one, so when a job is
    passed on, the bank the next one writes is free."""

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

    def elaborate(self, platform):
        m = Module()
        g = self._g
        header = Signal(dcu_header_layout)
        word = Signal(g.word_bits)
        cand = Signal(g.cand_bits)
        kept = Signal(KEEP_BITS)
        e_min = Signal(signed(E_BITS), init=2**(E_BITS - 1) - 1)
        held = Signal()          # a job is out: its entries and weights are in use
        bank = Signal()
        beat = self.route.payload
        taken = self.route.valid & self.route.ready
        last_word = Mux(header.matrix == Matrix.DOWN, g.words(Matrix.DOWN) - 1,
                        g.words(Matrix.GATE_UP) - 1)
        last_lanes = Mux(header.matrix == Matrix.DOWN, g.last_lanes(Matrix.DOWN),
                         g.last_lanes(Matrix.GATE_UP))
        lanes = Mux(word == last_word, last_lanes, Const(2**LANES - 1, LANES))
        prune = Signal(LANES)
        m.d.comb += prune.eq(beat.prune & lanes)
        entry = beat.entry

        with m.If(self.passed):
            m.d.sync += held.eq(0)
        with m.FSM():
            with m.State("Header"):
                m.d.comb += self.route.ready.eq(~held)
                with m.If(taken):
                    m.d.sync += [header.eq(beat.header), word.eq(0), cand.eq(0), kept.eq(0),
                                 e_min.eq(2**(E_BITS - 1) - 1)]
                    m.next = "Prune"
            with m.State("Prune"):
                m.d.comb += [self.route.ready.eq(1),
                             self.prune_wr.addr.eq(g.bank_address(word, bank)),
                             self.prune_wr.data.eq(prune),
                             self.prune_wr.en.eq(taken)]
                with m.If(taken):
                    m.d.sync += [kept.eq(kept + popcount(prune)), word.eq(word + 1)]
                    with m.If(word == last_word):
                        m.next = "Entry"
            with m.State("Entry"):
                m.d.comb += [self.route.ready.eq(1),
                             self.entry_wr.addr.eq(cand), self.entry_wr.data.eq(entry),
                             self.entry_wr.en.eq(taken)]
                with m.If(taken):
                    m.d.sync += cand.eq(cand + 1)
                    with m.If((entry.m != 0) & (entry.g != 0) & (entry.e < e_min)):
                        m.d.sync += e_min.eq(entry.e)
                    with m.If(cand == header.count - 1):
                        m.next = "Offer"
            with m.State("Offer"):
                keep = Mux(header.keep < kept, header.keep, kept)
                m.d.comb += [self.job.valid.eq(1), self.job.payload.header.eq(header),
                             self.job.payload.bank.eq(bank),
                             self.job.payload.e_min.eq(e_min),
                             self.job.payload.keep.eq(Mux(keep == 0, 1, keep))]
                with m.If(self.job.ready):
                    m.d.sync += [held.eq(1), bank.eq(~bank)]
                    m.next = "Header"
        return m
