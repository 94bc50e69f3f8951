"""cocotbext-axi's AxiRam with a pipelined read latency or a DRAM's timing, and injected read
errors.

cocotbext-axi's `AxiRamRead` serves one burst at a time, starting it as soon as its AR arrives:
a memory without latency, on which outstanding reads hide nothing. `LatencyAxiRam` keeps
cocotbext-axi's channel models, pause generators and sparse memory (an `AxiRamWrite` on the write
channels and an `AxiRamRead` subclass on the read channels, sharing one memory), and replaces
only the read side's burst loop:

- every AR is time-stamped when the AR channel accepts it; its first beat is not offered before
  `latency` cycles later; bursts are served in order, one beat per cycle when nothing pauses, so
  a stream of ARs sees the latency once, as a pipelined DRAM controller would show it;
- `errors[(burst_index, beat_index)] = resp` answers that beat with `AxiResp.SLVERR` or `AxiResp.DECERR`
  and zero data (bursts are numbered from 0 in acceptance order since the last reset);
- a reset drops every accepted burst, as the memory side of a reset bus would.

Pauses: `ar_pause(generator)` holds `arready` low, `r_pause(generator)` holds `rvalid` low, on the
cycles where the generator yields True (cocotbext-axi's pause generators).

`DramAxiRam` is the same memory with the platform's DRAM behind it (docs/performance-model.md,
"The DRAM in the loop"): each burst goes to `sim/perf/dram.py`'s `DramModel` (through
`sim.perf.ema_model.DramMemory`) when the AR channel accepts it, in acceptance order, at the
accelerator's clock (`clock_hz`: cycle n of the simulation is time n / clock_hz, whatever the
simulator's clock period); each beat is queued no earlier than the cycle the DRAM has moved its
bytes, at most one beat per cycle. `memory_for(params, ...)` builds the memory a bench's
parameters name (`params["memory"]`, `sim.perf.ema_model.bench_memory`).
"""

from __future__ import annotations

from collections import deque

import math

import cocotb
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, Event
from cocotbext.axi import AxiRamWrite
from cocotbext.axi.axi_ram import AxiRamRead
from cocotbext.axi.constants import AxiResp
from cocotbext.axi.memory import Memory

from edgexpert.sim.perf.dram import DramResult
from edgexpert.sim.perf.ema_model import DramMemory

__all__ = ["LatencyAxiRam", "DramAxiRam", "memory_for"]


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

    def schedule(self, cycle: int, address: int, beats: int) -> list[int]:
        """The earliest cycle each beat of a burst accepted at `cycle` may be queued: all at
        `latency` cycles after it (the R channel then sends one beat per cycle)."""
        return [cycle + self.latency] * beats

    async def _receive(self):
        while True:
            ar = await self.ar_channel.recv()
            address, beats = int(ar.araddr), int(ar.arlen) + 1
            due = self.schedule(self._cycle(), address, beats)
            self._accepted.append((due, self._count, ar))
            self._count += 1
            self._arrived.set()

    async def _process_read(self):
        while True:
            while not self._accepted:
                self._arrived.clear()
                await self._arrived.wait()
            due, index, ar = self._accepted.popleft()
            address, beats = int(ar.araddr), int(ar.arlen) + 1
            for n in range(beats):
                wait = due[n] - self._cycle()
                if wait > 0:
                    await ClockCycles(self.clock, wait)
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


class _DramRead(_PipelinedRead):
    def __init__(self, bus, clock, reset, *, mem, dram: DramMemory, period_ns: float,
                 accept: int):
        self.dram = dram
        # the DRAM's time 0 is the memory's creation (its refresh schedule starts there; a
        # memory made late in a simulation does not owe the refreshes before it)
        self._origin = int(get_sim_time("ns") // period_ns)
        # the cycle the first AR was accepted, the latest cycle a beat was due
        self.first_cycle = None
        self.last_cycle = None
        # a bound on one burst's wait (a bench's time-out): a refresh (all-bank precharge and
        # refresh), then a row miss (precharge, activate, read latency) and the burst itself
        d = dram.dram.device
        worst_ns = d.t_rpab_ns + d.t_rfc_ns + d.t_rp_ns + d.t_rcd_ns + d.rl_ns + dram.dram.t_burst
        super().__init__(bus, clock, reset, mem=mem,
                         latency=math.ceil(worst_ns * 1e-9 * dram.clock_hz), period_ns=period_ns,
                         accept=accept)

    def schedule(self, cycle, address, beats):
        due = [self._origin + c for c in
               self.dram.beat_cycles(cycle - self._origin, address, beats, self.byte_lanes)]
        if self.first_cycle is None:
            self.first_cycle = cycle
        self.last_cycle = max(due[-1], self.last_cycle or 0)
        return due


class LatencyAxiRam(Memory):
    """cocotbext-axi's RAM: writes as `AxiRamWrite`, reads each `latency` cycles after its AR."""

    def __init__(self, bus, clock, reset, *, size: int, latency: int, period_ns: float,
                 accept: int = 64):
        super().__init__(size)
        self.write_if = AxiRamWrite(bus.write, clock, reset, mem=self.mem)
        self.read_if = self._read_side(bus.read, clock, reset, latency=latency,
                                       period_ns=period_ns, accept=accept)

    def _read_side(self, bus, clock, reset, *, latency, period_ns, accept):
        return _PipelinedRead(bus, clock, reset, mem=self.mem, latency=latency,
                              period_ns=period_ns, accept=accept)

    @property
    def kind(self) -> str:
        return "latency"

    @property
    def errors(self) -> dict:
        return self.read_if.errors

    @property
    def bursts(self) -> int:
        """Bursts accepted since the last reset: the next one's index in `errors`."""
        return self.read_if._count

    def set_latency(self, latency: int):
        self.read_if.latency = latency

    def ar_pause(self, generator):
        self.read_if.ar_channel.set_pause_generator(generator)

    def r_pause(self, generator):
        self.read_if.r_channel.set_pause_generator(generator)

    def report(self) -> dict:
        """What the bench records about the memory."""
        return {"memory": self.kind, "latency_cycles": self.read_if.latency}


class DramAxiRam(LatencyAxiRam):
    """`LatencyAxiRam` with the DRAM of `memory` (`bench_memory`'s parameters) behind it. The
    DRAM model lives as long as the memory: a reset of the bus drops the accepted bursts, not
    the DRAM's open rows or its refresh schedule."""

    def __init__(self, bus, clock, reset, *, size: int, memory: dict, period_ns: float,
                 accept: int = 64):
        self._memory = memory
        super().__init__(bus, clock, reset, size=size, latency=0, period_ns=period_ns,
                         accept=accept)

    def _read_side(self, bus, clock, reset, *, latency, period_ns, accept):
        return _DramRead(bus, clock, reset, mem=self.mem,
                         dram=DramMemory.from_params(self._memory), period_ns=period_ns,
                         accept=accept)

    @property
    def kind(self) -> str:
        return self._memory["memory"]

    def set_latency(self, latency: int):
        raise TypeError(f"the {self.kind} memory's latency is the DRAM's: set_latency is "
                        "accepted by the latency memory only")

    def result(self) -> DramResult:
        """The DRAM's counts since the memory was made, over the time from the first AR
        accepted to the last beat's earliest cycle."""
        read = self.read_if
        cycles = 0 if read.first_cycle is None else read.last_cycle - read.first_cycle + 1
        return read.dram.dram.result(cycles / read.dram.clock_hz)

    def report(self) -> dict:
        r = self.result()
        return {"memory": self.kind, "dram": self._memory["dram"],
                "clock_hz": self._memory["clock_hz"], "row_hits": r.row_hits,
                "row_misses": r.row_misses, "refreshes": r.refreshes, "dram_bursts": r.bursts,
                "bytes": r.bytes_requested, "time_s": r.time_s,
                "bandwidth_bytes_per_s": round(r.bandwidth_bytes_per_s),
                "peak_bytes_per_s": r.peak_bytes_per_s, "share_of_peak": round(r.efficiency, 4)}


def memory_for(params: dict, bus, clock, reset, *, size: int, latency: int,
               period_ns: float) -> LatencyAxiRam:
    """The memory a bench's parameters name: `params["memory"]` (`bench_memory`'s dict; absent:
    the latency memory) at `latency` cycles, or a DRAM."""
    memory = params.get("memory", {"memory": "latency"})
    if memory["memory"] == "latency":
        return LatencyAxiRam(bus, clock, reset, size=size, latency=latency, period_ns=period_ns)
    return DramAxiRam(bus, clock, reset, size=size, memory=memory, period_ns=period_ns)
