"""Stage 3: the burst issuer. Reads in; AXI4 AR bursts out, and for every burst (and every
descriptor's marker) an entry in the in-flight queue that tells the beat writer where its beats
go."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import TAG_BITS, EmaStatus
from ..axi import AxiBurst, AxiReadAddressSignature
from .allocator import read_layout
from .geometry import AXI_ID_WIDTH, MAX_BURST_BEATS, PAGE_BYTES, EmaGeometry

__all__ = ["burst_layout", "BurstIssuer"]


def burst_layout(g: EmaGeometry) -> data.StructLayout:
    """An issued burst (its first beat's buffer line; the tag, slot and status ride along for
    markers), or (`marker`) a descriptor's end."""
    return data.StructLayout({
        "marker": 1, "line": g.line_bits, "tag": TAG_BITS, "slot": g.slot_bits,
        "status": EmaStatus,
    })


class BurstIssuer(wiring.Component):
    """Cuts the read at the head into bursts of min(beats left, 256, beats to the next 4 KB
    boundary) and loads one AR per cycle into registers (`arvalid` held until `arready`, address
    and length stable) while fewer than `outstanding` bursts are in flight. It never waits for R
    data: each burst's first line goes to the in-flight queue (`bursts`) with it. From the cycle
    of a bus error on (`bus_error`, high in the error beat's own cycle) no AR is loaded and the
    reads left are dropped, markers still pass; an AR already offered stays offered until
    `arready`, as AXI requires, and its burst drains. `burst_done` (a burst's
    last beat taken) and the issue keep the count `in_flight`."""
    def __init__(self, geometry: EmaGeometry, addr_width: int, outstanding: int):
        self._g = geometry
        self._outstanding = outstanding
        super().__init__({
            "reads": In(stream.Signature(read_layout(geometry, addr_width))),
            "ar": Out(AxiReadAddressSignature(addr_width, AXI_ID_WIDTH)),
            "bursts": Out(stream.Signature(burst_layout(geometry))),
            "bus_error": In(1),
            "burst_done": In(1),
            "in_flight": Out(range(outstanding + 1)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n, ar = self._outstanding, self.ar
        valid = Signal()
        h = Signal(self.reads.payload.shape(), reset_less=True)    # the read being issued
        in_flight = Signal(range(n + 1))
        size_shift = (self._g.beat_bytes - 1).bit_length()
        page_bits = (PAGE_BYTES - 1).bit_length()
        to_page = (PAGE_BYTES - h.addr[:page_bits]) >> size_shift
        limit = Mux(to_page < MAX_BURST_BEATS, to_page, MAX_BURST_BEATS)
        piece = Signal(range(MAX_BURST_BEATS + 1))
        ar_free = ~ar.arvalid | ar.arready
        ar_load = Signal()
        done = Signal()
        # the AR payload needs no reset: it means nothing while arvalid is low
        ar_addr = Signal(len(ar.araddr), reset_less=True)
        ar_len = Signal(8, reset_less=True)
        out = self.bursts.payload
        m.d.comb += [piece.eq(Mux(h.beats < limit, h.beats, limit)),
                     ar.araddr.eq(ar_addr), ar.arlen.eq(ar_len), ar.arid.eq(0),
                     ar.arsize.eq(size_shift), ar.arburst.eq(AxiBurst.INCR),
                     out.line.eq(h.line), out.tag.eq(h.tag), out.slot.eq(h.slot),
                     out.status.eq(h.status), out.marker.eq(h.marker),
                     self.in_flight.eq(in_flight), self.busy.eq(valid | ar.arvalid)]
        with m.If(valid):
            with m.If(h.marker):
                m.d.comb += [self.bursts.valid.eq(1), done.eq(self.bursts.ready)]
            with m.Elif(self.bus_error):
                m.d.comb += done.eq(1)          # drain: never issue after a bus error
            with m.Elif(ar_free & (in_flight != n)):
                # the in-flight entry and the AR go together: offered only when the AR is free
                m.d.comb += [self.bursts.valid.eq(1), ar_load.eq(self.bursts.ready)]
                with m.If(self.bursts.ready):
                    m.d.sync += [ar_addr.eq(h.addr), ar_len.eq(piece - 1),
                                 h.addr.eq(h.addr + (piece << size_shift)),
                                 h.line.eq(h.line + piece), h.beats.eq(h.beats - piece)]
                    m.d.comb += done.eq(h.beats == piece)
        with m.If(ar_load):
            m.d.sync += ar.arvalid.eq(1)
        with m.Elif(ar.arready):
            m.d.sync += ar.arvalid.eq(0)
        with m.If(~valid | done):
            m.d.comb += self.reads.ready.eq(1)
            m.d.sync += valid.eq(self.reads.valid)
            with m.If(self.reads.valid):
                m.d.sync += h.eq(self.reads.payload)
        with m.If(ar_load & ~self.burst_done):
            m.d.sync += in_flight.eq(in_flight + 1)
        with m.Elif(~ar_load & self.burst_done):
            m.d.sync += in_flight.eq(in_flight - 1)
        return m
