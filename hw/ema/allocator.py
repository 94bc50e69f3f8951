"""Stage 2: each item becomes a read (address, beats, buffer line from the bump allocator) for
the burst issuer and, for columns and scale blocks, a location record for the location writer,
which fills the location table one entry per cycle."""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contracts.ema import TAG_BITS, EmaError, EmaStatus, ema_completion_layout
from ...contracts.weight_layout import Matrix
from .decoder import ItemKind, item_layout
from .geometry import EmaGeometry
from .ports import ErrorSignature

__all__ = ["read_layout", "location_layout", "Allocator", "LocationWriter", "issued_signature"]


def read_layout(g: EmaGeometry, addr_width: int) -> data.StructLayout:
    """One read for the burst issuer: `beats` from `addr` into buffer lines from `line` on; or
    (`marker`) a descriptor's end with the status known so far."""
    return data.StructLayout({
        "marker": 1, "addr": addr_width, "beats": g.read_beats_bits, "line": g.line_bits,
        "tag": TAG_BITS, "slot": g.slot_bits, "status": EmaStatus,
    })


def location_layout(g: EmaGeometry) -> data.StructLayout:
    """Where the columns first .. first + count - 1 of a slot (or, `scale`, its scale block)
    start: at `line`, `stride` lines apart; or (`marker`) a descriptor's end, with its tag and
    the status known so far."""
    return data.StructLayout({
        "marker": 1, "scale": 1, "slot": g.slot_bits, "first": g.channel_bits,
        "count": g.channel_bits, "line": g.line_bits, "stride": g.stride_bits,
        "tag": TAG_BITS, "status": EmaStatus,
    })


class Allocator(wiring.Component):
    """Takes one item per cycle when both queues have room (a read with its location record goes
    to both or to neither). Buffer lines are bump-allocated from line 0 of the step (`new_step`
    resets the allocator). A read that does not fit fails its descriptor (`error`,
    BUFFER_FULL); once `stopped`, reads are dropped and only markers pass. A marker carries
    FAILED if its descriptor failed here, else the decoder's status (the beat writer has the
    last word: a bus error decides there). `fetched` counts the columns sent."""
    def __init__(self, geometry: EmaGeometry, addr_width: int):
        self._g = geometry
        super().__init__({
            "items": In(stream.Signature(item_layout(geometry, addr_width))),
            "reads": Out(stream.Signature(read_layout(geometry, addr_width))),
            "locations": Out(stream.Signature(location_layout(geometry))),
            "stopped": In(1),
            "new_step": In(1),
            "error": Out(ErrorSignature),
            "fetched": Out(geometry.channel_bits),
        })

    def elaborate(self, platform):
        m = Module()
        g, lay = self._g, self._g.layout
        item, read, loc = self.items.payload, self.reads.payload, self.locations.payload
        alloc = Signal(range(g.lines + 1))
        desc_err = Signal()     # this descriptor ran out of buffer
        scale = item.kind == ItemKind.SCALE

        def per_matrix(f):
            return Mux(item.matrix, f(Matrix.DOWN), f(Matrix.GATE_UP))
        run_addr = item.base + per_matrix(lambda mx: item.first * lay.column_stride(mx))
        run_beats = per_matrix(lambda mx: (item.count - 1) * g.stride_beats(mx)
                               + g.column_beats(mx))
        beats = Signal(g.read_beats_bits)
        m.d.comb += beats.eq(Mux(scale, per_matrix(g.scale_beats), run_beats))
        fits = (alloc + beats) <= g.lines
        m.d.comb += [
            read.addr.eq(Mux(scale, item.base, run_addr)), read.beats.eq(beats),
            read.line.eq(alloc), read.tag.eq(item.tag), read.slot.eq(item.slot),
            loc.scale.eq(scale), loc.slot.eq(item.slot), loc.first.eq(item.first),
            loc.count.eq(item.count), loc.line.eq(alloc), loc.stride.eq(per_matrix(g.stride_beats)),
            loc.tag.eq(item.tag),
        ]
        both = self.reads.ready & self.locations.ready
        with m.If(self.items.valid):
            with m.If(item.kind == ItemKind.MARKER):
                # not `stopped`: an error of a later descriptor may stop the engine while this
                # marker waits here, after every read of this descriptor went out. To both
                # queues: the location writer's copy says when the entries are written
                status = Mux(desc_err, EmaStatus.FAILED, item.status)
                m.d.comb += [read.marker.eq(1), read.status.eq(status),
                             loc.marker.eq(1), loc.status.eq(status),
                             self.reads.valid.eq(self.locations.ready),
                             self.locations.valid.eq(self.reads.ready),
                             self.items.ready.eq(both)]
                with m.If(both):
                    m.d.sync += desc_err.eq(0)
            with m.Elif(self.stopped):
                m.d.comb += self.items.ready.eq(1)      # the engine stopped: fetch nothing more
            with m.Elif(~fits):
                m.d.comb += [self.items.ready.eq(1), self.error.valid.eq(1),
                             self.error.payload.code.eq(EmaError.BUFFER_FULL),
                             self.error.payload.tag.eq(item.tag)]
                m.d.sync += desc_err.eq(1)
            with m.Else():
                # to both queues or to neither: each is offered only when the other has room
                m.d.comb += [self.reads.valid.eq(self.locations.ready),
                             self.locations.valid.eq(self.reads.ready),
                             self.items.ready.eq(self.reads.ready & self.locations.ready)]
                with m.If(self.reads.ready & self.locations.ready):
                    m.d.sync += alloc.eq(alloc + beats)
                    with m.If(item.kind == ItemKind.RUN):
                        m.d.comb += self.fetched.eq(item.count)
        with m.If(self.new_step):
            # the decoder takes NEW_STEP only in Idle: the allocator holds at most the previous
            # descriptor's marker then, so no line is in use
            m.d.sync += alloc.eq(0)
        return m


class LocationWriter(wiring.Component):
    """Writes one location-table entry per cycle: channel first + i of the record's slot at
    `line + i * stride`, or the scale block at the slot's `scale_entry`. Takes the next record
    on the cycle of its last entry, so records follow each other without a gap. A descriptor's
    marker writes nothing: `issued` pulses (valid, no ready) the cycle after it is taken, when
    every entry of that descriptor is in the table, with its tag, slot and status so far."""
    def __init__(self, geometry: EmaGeometry):
        self._g = geometry
        super().__init__({
            "locations": In(stream.Signature(location_layout(geometry))),
            "loc_wr": In(WritePort.Signature(addr_width=geometry.loc_addr_bits,
                                             shape=geometry.line_bits)),
            "issued": Out(issued_signature()),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        g = self._g
        loc = self.locations.payload
        left = Signal(g.channel_bits)
        entry = Signal(g.loc_addr_bits, reset_less=True)
        line = Signal(g.line_bits, reset_less=True)
        stride = Signal(g.stride_bits, reset_less=True)
        writing = left != 0
        m.d.comb += [self.loc_wr.addr.eq(entry), self.loc_wr.data.eq(line),
                     self.loc_wr.en.eq(writing), self.busy.eq(writing)]
        chan_bits = (g.chan_stride - 1).bit_length()
        channel = Mux(loc.scale, g.scale_entry, loc.first)
        first_entry = Cat(channel[:chan_bits], loc.slot) if chan_bits else loc.slot
        with m.If(writing):
            m.d.sync += [left.eq(left - 1), entry.eq(entry + 1), line.eq(line + stride)]
        issued = self.issued.payload
        m.d.sync += self.issued.valid.eq(0)
        with m.If(~writing | (left == 1)):
            m.d.comb += self.locations.ready.eq(1)
            with m.If(self.locations.valid & loc.marker):
                # the record before it writes its last entry in this cycle
                m.d.sync += [self.issued.valid.eq(1), issued.tag.eq(loc.tag),
                             issued.slot.eq(Mux(loc.status == EmaStatus.OK, loc.slot, 0)),
                             issued.status.eq(loc.status), left.eq(0)]
            with m.Elif(self.locations.valid):
                m.d.sync += [left.eq(Mux(loc.scale, 1, loc.count)), entry.eq(first_entry),
                             line.eq(loc.line), stride.eq(loc.stride)]
        return m


def issued_signature() -> wiring.Signature:
    """A pulse per descriptor, in command order, once its location entries are written (its
    slot's columns may then be looked up; their lines fill as `filled` says): an
    `ema_completion_layout` payload (slot 0 unless the status so far is OK), valid for one
    cycle, no ready (a consumer queues it: docs/blocks/ema.md, "Early starts")."""
    return wiring.Signature({"valid": Out(1), "payload": Out(ema_completion_layout)})
