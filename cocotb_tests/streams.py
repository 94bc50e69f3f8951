"""Bench pieces shared by every block: the base of the benches' TB classes (clock, reset, streams
by port name), pause generators, and a driver and a checking monitor for `amaranth.lib.stream`
ports.

Amaranth flattens a stream port `i_stream` into `i_stream__valid`, `i_stream__ready` and
`i_stream__payload`; both classes find the three signals from the port name.

Stream rules checked here (amaranth.lib.stream): a transfer happens on a rising edge where
`valid` and `ready` are both high; once `valid` is high it stays high, with the payload unchanged,
until the transfer. Reading any X/Z on `valid`, `ready` or a transferred payload fails the test.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from collections.abc import Iterator

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

__all__ = ["BACKPRESSURE_MODES", "no_pauses", "fixed_pauses", "random_pauses", "pauses",
           "BenchTB", "StreamSource", "StreamSink", "start_clock_and_reset"]

#: none: always on; fixed: on two cycles out of three; random: on with probability 1/2 (seeded)
BACKPRESSURE_MODES = ("none", "fixed", "random")


# Pause generators in cocotbext-axi's convention (its set_pause_generator, and the AXI memory's
# ar_pause / r_pause here): an endless iterator of 0/1, one value drawn per cycle, 1 = paused
# (`valid` held low on a source, `ready` on a sink).

def no_pauses() -> Iterator[int]:
    return itertools.repeat(0)


def fixed_pauses() -> Iterator[int]:
    """Paused every third cycle."""
    return itertools.cycle([0, 0, 1])


def random_pauses(rng: random.Random) -> Iterator[int]:
    """Paused with probability 1/2, one `rng.random()` per cycle drawn only when the cycle
    comes, so the draws interleave with the bench's other uses of `rng` as they always did."""
    while True:
        yield int(rng.random() >= 0.5)


def pauses(mode: str, rng: random.Random) -> Iterator[int]:
    """The pause generator of a backpressure mode name (the benches' test dimension)."""
    if mode not in BACKPRESSURE_MODES:
        raise ValueError(f"backpressure mode {mode!r} is not known: accepted "
                         f"{', '.join(BACKPRESSURE_MODES)}")
    if mode == "none":
        return no_pauses()
    if mode == "fixed":
        return fixed_pauses()
    return random_pauses(rng)


async def start_clock_and_reset(dut, *, period_ns: int = 10, reset_cycles: int = 3):
    """Start `dut.clk` and hold `dut.rst` high for `reset_cycles` rising edges: for the
    runner's tests (tests/test_sim_runner.py), which have no TB class."""
    cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns").start())
    dut.rst.value = 1
    await ClockCycles(dut.clk, reset_cycles)
    dut.rst.value = 0


class StreamSource:
    """Drives a stream input of the DUT, holding `valid` low on the cycles `pauses` (a pause
    generator) marks. While `valid` is low the payload carries random bits, so a DUT that looks at
    the payload without `valid` is caught."""

    def __init__(self, dut, port: str, pauses: Iterator[int], rng: random.Random):
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
        while next(self._pauses):
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

    async def send_all(self, payloads):
        """`send` each of `payloads` in order (the benches start this as a task per stream)."""
        for payload in payloads:
            await self.send(payload)


class StreamSink:
    """Consumes a stream output of the DUT with `ready` held low on the cycles `pauses` (a pause
    generator) marks, checks the stream rules every cycle and keeps each transferred payload (as
    an unsigned int) in `items`."""

    def __init__(self, dut, port: str, pauses: Iterator[int]):
        self._clk = dut.clk
        self._valid = getattr(dut, f"{port}__valid")
        self._ready = getattr(dut, f"{port}__ready")
        self._payload = getattr(dut, f"{port}__payload")
        self._pauses = pauses
        self.port = port
        self.items: deque[int] = deque()
        self.cycles = 0
        self._ready.value = 1 - next(pauses)
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
            self._ready.value = 1 - next(self._pauses)

    async def wait_for(self, count: int, max_cycles: int):
        """Wait until `count` items arrived; fail after `max_cycles` cycles (a hang)."""
        for _ in range(max_cycles):
            if len(self.items) >= count:
                return
            await RisingEdge(self._clk)
        raise AssertionError(f"{self.port}: {len(self.items)} of {count} results after "
                             f"{max_cycles} cycles: the DUT hangs or lost data")


class BenchTB:
    """What every bench's TB class starts from, in cocotbext-axi's TB shape: built with the DUT,
    it starts the clock; `await reset()` holds `rst`; the bench's streams are kept by port name
    in `sources` and `sinks`, each with its own pause generator (cocotbext-axi's idle generator
    on a source, backpressure generator on a sink).

    Streams are added per run, not in the constructor: a run seeds its own rng, and a stream
    draws from it as it is built (a source's idle payload, a sink's first `ready`) and every
    cycle after, so streams built before the reset would draw other values and change every
    random run's cycles."""

    def __init__(self, dut, *, period_ns: int = 10):
        self.dut = dut
        self.clk = dut.clk
        self.sources: dict[str, StreamSource] = {}
        self.sinks: dict[str, StreamSink] = {}
        cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns").start())

    async def reset(self, cycles: int = 3):
        """Hold `rst` high for `cycles` rising edges."""
        self.dut.rst.value = 1
        await ClockCycles(self.clk, cycles)
        self.dut.rst.value = 0

    def add_source(self, port: str, idle: Iterator[int], rng: random.Random) -> StreamSource:
        """Drive input stream `port`, `valid` paused by the `idle` generator."""
        self.sources[port] = StreamSource(self.dut, port, idle, rng)
        return self.sources[port]

    def add_sink(self, port: str, backpressure: Iterator[int]) -> StreamSink:
        """Take and check output stream `port`, `ready` paused by `backpressure`."""
        self.sinks[port] = StreamSink(self.dut, port, backpressure)
        return self.sinks[port]

    def stop_sinks(self):
        for sink in self.sinks.values():
            sink.stop()
