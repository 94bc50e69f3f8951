"""Stage 2: each candidate's weight W_c = floor(m_c g_c 2^(16 - S - e_c)), once per candidate
(not per channel), from the entry memory into the weight memory."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import COUNT_BITS, G_BITS, M_BITS, DcuError, dcu_entry_layout
from .collector import SIZE_BITS, job_layout
from .geometry import LEFT_SHIFT, WEIGHT_BITS, DcuGeometry
from ..streams import ReadSignature

__all__ = ["Weigher"]


class Weigher(wiring.Component):
    """Per job: reads entry c on one cycle and writes W_c on the next (n + 1 cycles, one
    multiplier and one shifter), then offers the job to the accumulator. A rejected job
    (`error` set) is passed on without weighing: its entries may be more than the memory holds."""

    def __init__(self, geometry: DcuGeometry):
        self._g = geometry
        entry_bits = dcu_entry_layout.size
        super().__init__({
            "i_job": In(stream.Signature(job_layout)),
            "o_job": Out(stream.Signature(job_layout)),
            "entry_rd": Out(ReadSignature(geometry.cand_bits, entry_bits)),
            "weight_wr": In(WritePort.Signature(addr_width=geometry.cand_bits, shape=WEIGHT_BITS)),
        })

    def elaborate(self, platform):
        m = Module()
        job = Signal(job_layout)
        cand = Signal(COUNT_BITS)       # the entry being read; count when done
        entry = data.View(dcu_entry_layout, self.entry_rd.data)
        product = Signal(M_BITS + G_BITS)
        m.d.comb += product.eq(entry.m * entry.g)
        # the right shift e_c + S - 16 is at least -LEFT_SHIFT for a live candidate (its size
        # is at most S), so the product shifted left by LEFT_SHIFT is shifted right by 0 or more
        offset = Signal(signed(SIZE_BITS + 2))
        m.d.comb += offset.eq(entry.e + job.size - WEIGHT_BITS + LEFT_SHIFT)
        wide = Cat(Const(0, LEFT_SHIFT), product)
        weight = Signal(WEIGHT_BITS)
        # a live candidate's product is below 2^31: a right shift past the wide product's
        # bits leaves 0; a zero product weighs 0 whatever S is
        with m.If((product != 0) & (offset < len(wide))):
            m.d.comb += weight.eq((wide >> offset[:len(wide).bit_length()])[:WEIGHT_BITS])

        with m.FSM():
            with m.State("Idle"):
                m.d.comb += self.i_job.ready.eq(1)
                with m.If(self.i_job.valid):
                    m.d.sync += [job.eq(self.i_job.payload), cand.eq(0)]
                    with m.If(self.i_job.payload.error == DcuError.NONE):
                        m.next = "Run"
                    with m.Else():
                        m.next = "Offer"
            with m.State("Run"):
                m.d.comb += self.entry_rd.addr.eq(cand)
                m.d.sync += cand.eq(cand + 1)
                with m.If(cand != 0):
                    m.d.comb += [self.weight_wr.addr.eq(cand - 1), self.weight_wr.data.eq(weight),
                                 self.weight_wr.en.eq(1)]
                with m.If(cand == job.header.count):
                    m.next = "Offer"
            with m.State("Offer"):
                m.d.comb += [self.o_job.valid.eq(1), self.o_job.payload.eq(job)]
                with m.If(self.o_job.ready):
                    m.next = "Idle"
        return m
