"""cocotbext-axi's AxiRam with a pipelined read latency and injected read errors.

cocotbext-axi's `AxiRamRead` serves one burst at a time, starting it as soon as its AR arrives:
a memory without latency, on which outstanding reads hide nothing. `LatencyAxiRam` keeps
cocotbext-axi's channel models, pause generators and sparse memory (an `AxiRamWrite` on the write
channels and an `AxiRamRead` subclass on the read channels, sharing one memory), and replaces
only the read side's burst loop:

- every AR is time-stamped when the AR channel accepts it; its first beat is not offered before
  `latency` cycles later; bursts are served in order, one beat per cycle when nothing pauses, so
  a stream of ARs sees the latency once, as a pipelined DRAM controller would show it;
- `errors[(burst_index, beat_index)] = resp` answers that beat with SLVERR (2) or DECERR (3)
  and zero data (bursts are numbered from 0 in acceptance order since the last reset);
- a reset drops every accepted burst, as the memory side of a reset bus would.

Pauses: `ar_pause(generator)` holds `arready` low, `r_pause(generator)` holds `rvalid` low, on the
cycles where the generator yields True (cocotbext-axi's pause generators).
"""

from __future__ import annotations

from collections import deque

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, Event
from cocotbext.axi import AxiRamWrite
from cocotbext.axi.axi_ram import AxiRamRead
from cocotbext.axi.constants import AxiResp
from cocotbext.axi.memory import Memory

__all__ = ["LatencyAxiRam"]


class _PipelinedRead(AxiRamRead):
    def __init__(self, bus, clock, reset, *, mem, latency: int, period_ns: float, accept: int):
        # set before the base class runs: it starts the burst loop from its constructor
        self.latency = latency
        self.errors: dict[tuple[int, int], int] = {}
        self._period_ns = period_ns
        self._accepted: deque = deque()
        self._arrived = Event()
        self._receiver = None
        self._count = 0
        super().__init__(bus, clock, reset, mem=mem)
        # the memory controller queues this many requests (the master's limit is what is tested)
        self.ar_channel.queue_occupancy_limit = accept

    def _cycle(self) -> int:
        return int(get_sim_time("ns") // self._period_ns)

    def _handle_reset(self, state):
        super()._handle_reset(state)
        if state:
            if self._receiver is not None:
                self._receiver.cancel()
                self._receiver = None
            self._accepted.clear()
            self._count = 0
        elif self._receiver is None:
            self._receiver = cocotb.start_soon(self._receive())

    async def _receive(self):
        while True:
            ar = await self.ar_channel.recv()
            self._accepted.append((self._cycle() + self.latency, self._count, ar))
            self._count += 1
            self._arrived.set()

    async def _process_read(self):
        while True:
            while not self._accepted:
                self._arrived.clear()
                await self._arrived.wait()
            due, index, ar = self._accepted.popleft()
            wait = due - self._cycle()
            if wait > 0:
                await ClockCycles(self.clock, wait)
            address, beats = int(ar.araddr), int(ar.arlen) + 1
            for n in range(beats):
                r = self.r_channel._transaction_obj()
                r.rid = int(getattr(ar, "arid", 0))
                r.rlast = n == beats - 1
                r.rresp = self.errors.get((index, n), AxiResp.OKAY)
                if r.rresp == AxiResp.OKAY:
                    r.rdata = int.from_bytes(self.mem[address + n * self.byte_lanes:
                                                      address + (n + 1) * self.byte_lanes],
                                             "little")
                else:
                    r.rdata = 0
                await self.r_channel.send(r)


class LatencyAxiRam(Memory):
    def __init__(self, bus, clock, reset, *, size: int, latency: int, period_ns: float,
                 accept: int = 64):
        super().__init__(size)
        self.write_if = AxiRamWrite(bus.write, clock, reset, mem=self.mem)
        self.read_if = _PipelinedRead(bus.read, clock, reset, mem=self.mem, latency=latency,
                                      period_ns=period_ns, accept=accept)

    @property
    def errors(self) -> dict:
        return self.read_if.errors

    def set_latency(self, latency: int):
        self.read_if.latency = latency

    def ar_pause(self, generator):
        self.read_if.ar_channel.set_pause_generator(generator)

    def r_pause(self, generator):
        self.read_if.r_channel.set_pause_generator(generator)
