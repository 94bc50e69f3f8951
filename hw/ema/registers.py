"""The status register (the first error), the counters and the register read port (`EmaCsr`)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import (CSR_ADDR_BITS, CSR_DATA_BITS, MASK_BITS, TAG_BITS, EmaCsr,
                              EmaError, ema_status_layout)
from .geometry import COUNTER_BITS, EmaGeometry
from ..streams import ReadSignature, answer_reads, event_counter
from .ports import ErrorSignature

__all__ = ["Registers"]


class Registers(wiring.Component):
    """Latches the first error reported (`beat_error`, the oldest in the pipeline, wins over
    `buffer_error`, which wins over `command_error` on the same cycle) and says so on `stopped`
    until reset. One exception keeps STATUS naming the descriptor that completes FAILED: a
    beat error (the beat writer reports only its first) replaces a command or buffer error
    latched before it, because its descriptor comes earlier in command order (or is the same
    one): the commands after a failed check fetch nothing. Counts the events it is shown
    (48-bit counters; the increments are registered, so the counters lag one cycle and their
    adders stay off the paths that decide a beat or a completion) and the most bursts ever in
    flight. `csr`: `EmaCsr` address in, the register one cycle later."""
    def __init__(self, geometry: EmaGeometry, outstanding: int):
        self._g = geometry
        super().__init__({
            "csr": In(ReadSignature(CSR_ADDR_BITS, CSR_DATA_BITS)),
            "beat_error": In(ErrorSignature), "buffer_error": In(ErrorSignature),
            "command_error": In(ErrorSignature),
            "stopped": Out(1),
            "busy": In(1), "beat": In(1), "written": In(1), "burst": In(1), "completion": In(1),
            "fetched": In(geometry.channel_bits), "skipped": In(range(MASK_BITS + 1)),
            "in_flight": In(range(outstanding + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        error, code, tag = Signal(), Signal(EmaError), Signal(TAG_BITS)
        def latch(source):
            m.d.sync += [error.eq(1), code.eq(source.payload.code), tag.eq(source.payload.tag)]
        with m.If(self.beat_error.valid):
            latch(self.beat_error)
        with m.Elif(~error & self.buffer_error.valid):
            latch(self.buffer_error)
        with m.Elif(~error & self.command_error.valid):
            latch(self.command_error)
        m.d.comb += self.stopped.eq(error)
        peak = Signal.like(self.in_flight)
        with m.If(self.in_flight > peak):
            m.d.sync += peak.eq(self.in_flight)

        increments = {
            "BYTES": Mux(self.written, self._g.beat_bytes, 0),
            "BEATS": self.beat,
            "BURSTS": self.burst,
            "DESCRIPTORS": self.completion,
            "BUSY_CYCLES": self.busy,
            "STALL_CYCLES": self.busy & ~self.beat,
            "FETCHED_CHANNELS": self.fetched,
            "SKIPPED_CHANNELS": self.skipped,
        }
        counters = {name: event_counter(m, name.lower(), increment, COUNTER_BITS)
                    for name, increment in increments.items()}

        status = Signal(ema_status_layout)
        m.d.comb += [status.busy.eq(self.busy), status.error.eq(error), status.code.eq(code),
                     status.tag.eq(tag)]
        answer_reads(m, self.csr, {EmaCsr.STATUS: status.as_value(),
                                   **{EmaCsr[name]: counter for name, counter in counters.items()},
                                   EmaCsr.PEAK_OUTSTANDING: peak})
        return m
