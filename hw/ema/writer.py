"""Stage 4: the beat writer. R beats into the weight buffer, at the lines the in-flight queue
names; a descriptor's completion when its marker reaches the head of the queue."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contracts.ema import EmaError, EmaStatus, ema_completion_layout
from ..axi import AxiReadDataSignature
from .geometry import AXI_ID_WIDTH, EmaGeometry
from .issuer import burst_layout
from .ports import ErrorSignature

__all__ = ["BeatWriter"]


class BeatWriter(wiring.Component):
    """`rready` is high while a burst heads the in-flight queue (`bursts`); its beats go to
    lines `line, line + 1, ...` (`buf_wr`, one line per beat). When a marker heads the queue,
    every beat of its descriptor is written: the completion leaves through `done` (a register,
    held until `ready`), costing that cycle's beat. The first SLVERR or DECERR beat is not
    written, is reported (`error`), fails its descriptor and sets `bus_error` until reset:
    later beats (error or not) are taken and dropped unreported, later descriptors complete
    ABORTED. So a descriptor's completion is FAILED when its own data failed, else ABORTED
    after a bus error, else what the marker carries (docs/blocks/ema.md); FAILED and ABORTED
    completions carry slot 0. `bus_error` is high already in the cycle of the error beat, so
    the burst issuer loads no AR from that cycle on."""
    def __init__(self, geometry: EmaGeometry):
        self._g = geometry
        super().__init__({
            "bursts": In(stream.Signature(burst_layout(geometry))),
            "r": Out(AxiReadDataSignature(geometry.data_width, AXI_ID_WIDTH)),
            "buf_wr": In(WritePort.Signature(addr_width=geometry.line_bits,
                                             shape=geometry.data_width)),
            "done": Out(stream.Signature(ema_completion_layout)),
            "error": Out(ErrorSignature),
            "bus_error": Out(1),
            "burst_done": Out(1),
            "beat": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        r, head, done = self.r, self.bursts.payload, self.done
        first = Signal(init=1)      # the next beat starts a burst
        next_line = Signal(self._g.line_bits, reset_less=True)
        bus_error = Signal()        # an error beat was taken before this cycle
        desc_err = Signal()         # the first error beat belongs to the descriptor arriving
        beat_bad = r.rresp.as_value()[1]     # SLVERR or DECERR: the high bit (AxiResp)
        line = Mux(first, head.line, next_line)
        first_error = Signal()
        m.d.comb += first_error.eq(self.beat & beat_bad & ~bus_error)
        completion = Signal(ema_completion_layout, reset_less=True)
        status = Signal(EmaStatus)
        m.d.comb += [status.eq(Mux(desc_err, EmaStatus.FAILED,
                                   Mux(bus_error, EmaStatus.ABORTED, head.status))),
                     done.payload.eq(completion),
                     self.bus_error.eq(bus_error | (self.beat & beat_bad))]
        with m.If(done.ready):
            m.d.sync += done.valid.eq(0)
        with m.If(self.bursts.valid & head.marker):
            with m.If(~done.valid | done.ready):
                m.d.comb += self.bursts.ready.eq(1)
                m.d.sync += [
                    done.valid.eq(1), completion.tag.eq(head.tag), completion.status.eq(status),
                    # a slot means something only with the data in it
                    completion.slot.eq(Mux(status == EmaStatus.OK, head.slot, 0)),
                    desc_err.eq(0),
                ]
        with m.Elif(self.bursts.valid):
            m.d.comb += [r.rready.eq(1), self.beat.eq(r.rvalid)]
        m.d.comb += [self.buf_wr.addr.eq(line), self.buf_wr.data.eq(r.rdata),
                     self.buf_wr.en.eq(self.beat & ~beat_bad & ~bus_error)]
        with m.If(self.beat):
            m.d.sync += [next_line.eq(line + 1), first.eq(r.rlast)]
            with m.If(r.rlast):
                m.d.comb += [self.bursts.ready.eq(1), self.burst_done.eq(1)]
            with m.If(beat_bad):
                m.d.sync += bus_error.eq(1)
            with m.If(first_error):
                m.d.sync += desc_err.eq(1)
                decerr = r.rresp.as_value()[0]      # of the two error codes, DECERR's low bit
                m.d.comb += [self.error.valid.eq(1), self.error.payload.tag.eq(head.tag),
                             self.error.payload.code.eq(Mux(decerr, EmaError.DECERR,
                                                            EmaError.SLVERR))]
        return m
