"""`TopTB`, what the top's benches (bench.py: decode steps, prefill_bench.py: a prefill chunk,
fuzz.py: command sequences) start from: the bench's parameters and trace, the external memory
holding the weight image and the AXI monitor on it, the clock and reset, the command and output
streams, the CSR port's reads and the report. Runs inside the simulator."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiBus

from edgexpert.cocotb_tests.axi_memory import memory_for
from edgexpert.cocotb_tests.axi_monitor import AxiReadMonitor
from edgexpert.cocotb_tests.ema.harness import pause_generator
from edgexpert.cocotb_tests.engine.host import OUTPUTS, layouts, unpack
from edgexpert.cocotb_tests.runner import bench_params, write_bench_report
from edgexpert.cocotb_tests.streams import BenchTB, pauses
from edgexpert.contracts.ema import EmaCsr
from edgexpert.contracts.top import TopCsr
from edgexpert.contracts.trace import read_trace
from edgexpert.hw.ema import EmaGeometry

__all__ = ["PERIOD_NS", "TopTB"]

PERIOD_NS = 10
#: share of cycles the memory pauses AR and R in the random mode (as the EMA bench)
MEMORY_PAUSE = 0.3
#: the entries of this simulation's tests (one bench module a simulation): each test's TB adds
#: its own and rewrites the report
_report: dict = {}


class TopTB(BenchTB):
    """One test's bench of the accelerator top: the parameters `run_cocotb` gave (`params`, and
    from them `ema`, `candidates`, `tokens`, `latency`), the trace (`trace_reader` reads it) and
    its weight layout, the output items' layouts by port (`layouts`), the EMA's geometry,
    cocotbext-axi's RAM on the AXI master holding the weight image (`ram`: the memory
    `params["memory"]` names, cocotb_tests/axi_memory.py `memory_for`) and, from the first reset
    on, the AXI read protocol monitor (`monitor`); the `cmd` source and the output sinks once
    `add_streams` adds them.

    `mode` pauses every stream and, in mode "random", the memory's AR and R channels; all draw
    from the run's `rng`. The memory is built with the TB, before the reset, which its AXI
    interface samples, and the clock starts behind it, as the measured cycles were taken."""

    trace_reader = staticmethod(read_trace)

    def __init__(self, dut, rng: random.Random, mode: str):
        self.params = P = bench_params()
        self.ema = P["ema"]
        self.candidates, self.tokens, self.latency = P["candidates"], P["tokens"], P["latency"]
        self.trace = self.trace_reader(Path(P["trace"]))
        self.layout = self.trace.layout
        self.layouts = layouts(self.layout.d_model, self.layout.expert_ffn, self.candidates,
                               self.ema["data_width"], self.tokens)
        self.geometry = EmaGeometry(self.layout, self.ema["data_width"], self.ema["buffer_bytes"],
                                    self.ema["slots"])
        self.rng, self.mode = rng, mode
        dut.csr__addr.value = 0
        self.ram = memory_for(P, AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst,
                              size=2**len(dut.m_axi__araddr), latency=self.latency,
                              period_ns=PERIOD_NS)
        # cocotbext-axi logs every reset of every channel at INFO
        logging.getLogger(f"cocotb.{dut._name}.m_axi_").setLevel(logging.WARNING)
        self.ram.write(self.layout.base_address, Path(P["image"]).read_bytes())
        if mode == "random":
            self.ram.ar_pause(pause_generator(rng, MEMORY_PAUSE))
            self.ram.r_pause(pause_generator(rng, MEMORY_PAUSE))
        self.monitor: AxiReadMonitor | None = None
        super().__init__(dut, period_ns=PERIOD_NS)

    async def reset(self, cycles: int = 3):
        """Hold `rst` for `cycles` (the memory drops its bursts with it); a reset while the
        bench runs idles the source and stops the sinks first (`add_streams` then adds fresh
        ones). The monitor watches the master from the first reset on."""
        for source in self.sources.values():
            source.idle()
        self.stop_sinks()
        await super().reset(cycles)
        if self.monitor is None:
            self.monitor = AxiReadMonitor(self.dut, "m_axi", beat_bytes=self.ema["data_width"] // 8,
                                          max_outstanding=self.ema["outstanding"])

    def add_streams(self, outputs=OUTPUTS):
        """The `cmd` source (`self.cmd`) and a sink per port of `outputs`, all paused by the
        run's mode."""
        self.cmd = self.add_source("cmd", pauses(self.mode, self.rng), self.rng)
        for port in outputs:
            self.add_sink(port, pauses(self.mode, self.rng))

    async def csr(self, reg) -> int:
        """One register: the address is registered, the data a cycle after it."""
        self.dut.csr__addr.value = int(reg)
        await RisingEdge(self.clk)
        await RisingEdge(self.clk)
        return self.dut.csr__data.value.to_unsigned()

    async def counters(self, registers: dict) -> dict[str, int]:
        return {name: await self.csr(reg) for name, reg in registers.items()}

    async def check_no_rejects(self) -> None:
        """Nothing rejected: the command path's and feeder's, the DCU's and the PRU's STATUS are
        0 (docs/contracts.md, "Rejected commands"): good commands never trip a check."""
        for reg in (TopCsr.COMMAND_STATUS, TopCsr.DCU_STATUS, TopCsr.PRU_STATUS):
            status = await self.csr(reg)
            assert status == 0, f"{reg.name} {status:#x}: a good command was rejected"

    async def check_idle(self) -> None:
        """The top idle without an error, the EMA without a latched error, no command rejected,
        no burst left open."""
        status = await self.csr(TopCsr.STATUS)
        assert status == 0, f"STATUS {status:#x}: busy (bit 0) or a completion not OK (bit 1)"
        assert await self.csr(EmaCsr.STATUS) & 2 == 0, "the EMA latched an error"
        await self.check_no_rejects()
        self.monitor.assert_drained()

    async def drain(self, want: dict) -> None:
        """Wait for every output item `want` (per port) expects, then 50 cycles for any extra."""
        for p in OUTPUTS:
            await self.sinks[p].wait_for(len(want[p]), max_cycles=1000)
        await ClockCycles(self.clk, 50)

    def compare(self, name: str, reference: str, want: dict) -> dict:
        """Every output item against `want` (per port, from `reference`); the mismatches are
        counted (the report says how many) before the test fails on the first one. Stops the
        output sinks; returns the counts."""
        mismatches, first = {}, None
        for p in OUTPUTS:
            self.sinks[p].stop()
            got = [unpack(self.layouts[p], v) for v in self.sinks[p].items]
            assert len(got) == len(want[p]), f"{p}: {len(got)} items for {len(want[p])}"
            wrong = [i for i, (g, w) in enumerate(zip(got, want[p])) if g != w]
            mismatches[p] = len(wrong)
            if wrong and first is None:
                first = f"{p} item {wrong[0]}: RTL {got[wrong[0]]} != {reference} " \
                        f"{want[p][wrong[0]]}"
        if first is not None:
            self.dut._log.error("%s: mismatches %s", name, mismatches)
        assert first is None, first
        return mismatches

    def record(self, name: str, entry: dict, **fields):
        """Add test `name`'s `entry` to the report and write it, with the hardware, the memory,
        the seed and the bench's own `fields`."""
        _report[name] = entry
        P = self.params
        write_bench_report({"case": {k: P[k] for k in ("ema", "candidates", "lanes", "tokens")},
                            "latency": P["latency"], "memory": P["memory"], **fields,
                            "seed": int(os.environ["COCOTB_RANDOM_SEED"]), "tests": _report})
