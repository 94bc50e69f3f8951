"""Bench pieces shared by every block: clock/reset, backpressure patterns, and a driver and a
checking monitor for `amaranth.lib.stream` ports.

Amaranth flattens a stream port `i_stream` into `i_stream__valid`, `i_stream__ready` and
`i_stream__payload`; both classes find the three signals from the port name.

Stream rules checked here (amaranth.lib.stream): a transfer happens on a rising edge where
`valid` and `ready` are both high; once `valid` is high it stays high, with the payload unchanged,
until the transfer. Reading any X/Z on `valid`, `ready` or a transferred payload fails the test.
"""

from __future__ import annotations

import random
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

__all__ = ["BACKPRESSURE_MODES", "Pauses", "StreamSource", "StreamSink", "start_clock_and_reset"]

#: none: always on; fixed: on two cycles out of three; random: on with probability 1/2 (seeded)
BACKPRESSURE_MODES = ("none", "fixed", "random")


class Pauses:
    """Cycle-by-cycle on/off pattern for a `valid` (source) or `ready` (sink) signal."""

    def __init__(self, mode: str, rng: random.Random):
        if mode not in BACKPRESSURE_MODES:
            raise ValueError(f"backpressure mode {mode!r} is not known: accepted "
                             f"{', '.join(BACKPRESSURE_MODES)}")
        self.mode = mode
        self._rng = rng
        self._cycle = 0

    def __call__(self) -> bool:
        self._cycle += 1
        if self.mode == "none":
            return True
        if self.mode == "fixed":
            return self._cycle % 3 != 0
        return self._rng.random() < 0.5


async def start_clock_and_reset(dut, *, period_ns: int = 10, reset_cycles: int = 3):
    """Start `dut.clk` and hold `dut.rst` high for `reset_cycles` rising edges."""
    cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns").start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, reset_cycles)
    dut.rst.value = 0


class StreamSource:
    """Drives a stream input of the DUT, pausing `valid` by `pauses`. While `valid` is low the
    payload carries random bits, so a DUT that looks at the payload without `valid` is caught."""

    def __init__(self, dut, port: str, pauses: Pauses, rng: random.Random):
        self._clk = dut.clk
        self._valid = getattr(dut, f"{port}__valid")
        self._ready = getattr(dut, f"{port}__ready")
        self._payload = getattr(dut, f"{port}__payload")
        self._width = len(self._payload)
        self._pauses = pauses
        self._rng = rng
        self.sent = 0
        self.idle()

    def idle(self):
        self._valid.value = 0
        self._payload.value = self._rng.getrandbits(self._width)

    async def send(self, payload: int):
        """Offer `payload` and return after the rising edge that transfers it."""
        while not self._pauses():
            self.idle()
            await RisingEdge(self._clk)
        self._valid.value = 1
        self._payload.value = payload
        while True:
            await RisingEdge(self._clk)
            if bool(self._ready.value):
                break
        self.sent += 1
        self.idle()


class StreamSink:
    """Consumes a stream output of the DUT with `ready` paused by `pauses`, checks the stream
    rules every cycle and keeps each transferred payload (as an unsigned int) in `items`."""

    def __init__(self, dut, port: str, pauses: Pauses):
        self._clk = dut.clk
        self._valid = getattr(dut, f"{port}__valid")
        self._ready = getattr(dut, f"{port}__ready")
        self._payload = getattr(dut, f"{port}__payload")
        self._pauses = pauses
        self.port = port
        self.items: deque[int] = deque()
        self.cycles = 0
        self._ready.value = int(pauses())
        self._task = cocotb.start_soon(self._run())

    def stop(self):
        self._task.cancel()

    async def _run(self):
        stalled = None  # payload offered but not taken on the previous edge
        while True:
            await RisingEdge(self._clk)
            self.cycles += 1
            valid = bool(self._valid.value)  # raises on X/Z
            ready = bool(self._ready.value)
            payload = self._payload.value.to_unsigned() if valid else None  # raises on X/Z
            if stalled is not None:
                assert valid, f"{self.port}: valid dropped before its payload was taken"
                assert payload == stalled, (f"{self.port}: payload changed from {stalled:#x} to "
                                            f"{payload:#x} while waiting for ready")
            if valid and ready:
                self.items.append(payload)
                stalled = None
            else:
                stalled = payload
            self._ready.value = int(self._pauses())

    async def wait_for(self, count: int, max_cycles: int):
        """Wait until `count` items arrived; fail after `max_cycles` cycles (a hang)."""
        for _ in range(max_cycles):
            if len(self.items) >= count:
                return
            await RisingEdge(self._clk)
        raise AssertionError(f"{self.port}: {len(self.items)} of {count} results after "
                             f"{max_cycles} cycles: the DUT hangs or lost data")
