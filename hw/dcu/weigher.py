"""Stage 2: each candidate's weight W_c = floor(m_c g_c / 2^(e_c - E + 15)), once per candidate
(not per channel), from the entry memory into the weight memory."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import G_BITS, M_BITS, dcu_entry_layout
from .collector import job_layout
from .geometry import WEIGHT_BITS, WEIGHT_SHIFT, DcuGeometry
from ..streams import ReadSignature

__all__ = ["Weigher"]


class Weigher(wiring.Component):
    """Per job: reads entry c on one cycle and writes W_c on the next (n + 1 cycles, one
    multiplier and one shifter), then offers the job to the accumulator."""

    def __init__(self, geometry: DcuGeometry):
        self._g = geometry
        entry_bits = dcu_entry_layout.size
        super().__init__({
            "job_in": In(stream.Signature(job_layout)),
            "job_out": Out(stream.Signature(job_layout)),
            "entry_rd": Out(ReadSignature(geometry.cand_bits, entry_bits)),
            "weight_wr": In(WritePort.Signature(addr_width=geometry.cand_bits, shape=WEIGHT_BITS)),
        })

    def elaborate(self, platform):
        m = Module()
        job = Signal(job_layout)
        cand = Signal(self._g.cand_bits + 1)       # the entry being read; count when done
        entry = data.View(dcu_entry_layout, self.entry_rd.data)
        product = Signal(M_BITS + G_BITS)
        m.d.comb += product.eq(entry.m * entry.g)
        # e_c - E >= 0 for every entry with a nonzero product (E is their minimum); a shift of
        # 31 or more empties the 31-bit product
        offset = Signal(range(-2**9, 2**9))
        m.d.comb += offset.eq(entry.e - job.e_min)
        shift = offset + WEIGHT_SHIFT
        weight = Mux((product != 0) & (offset >= 0) & (shift < M_BITS + G_BITS),
                     (product >> shift[:5])[:WEIGHT_BITS], 0)

        with m.FSM():
            with m.State("Idle"):
                m.d.comb += self.job_in.ready.eq(1)
                with m.If(self.job_in.valid):
                    m.d.sync += [job.eq(self.job_in.payload), cand.eq(0)]
                    m.next = "Run"
            with m.State("Run"):
                m.d.comb += self.entry_rd.addr.eq(cand)
                m.d.sync += cand.eq(cand + 1)
                with m.If(cand != 0):
                    m.d.comb += [self.weight_wr.addr.eq(cand - 1), self.weight_wr.data.eq(weight),
                                 self.weight_wr.en.eq(1)]
                with m.If(cand == job.header.count):
                    m.next = "Offer"
            with m.State("Offer"):
                m.d.comb += [self.job_out.valid.eq(1), self.job_out.payload.eq(job)]
                with m.If(self.job_out.ready):
                    m.next = "Idle"
        return m
