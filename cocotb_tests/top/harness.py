"""What the top's two benches (bench.py: decode steps, prefill_bench.py: a prefill chunk) share:
the clock, the CSR port's reads, the counters, the external memory holding the weight image,
the start-up, and the command and output streams. Runs inside the simulator."""

from __future__ import annotations

import logging
from pathlib import Path

from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiBus

from edgexpert.cocotb_tests.axi_memory import LatencyAxiRam, memory_for
from edgexpert.cocotb_tests.axi_monitor import AxiReadMonitor
from edgexpert.cocotb_tests.ema.harness import pause_generator
from edgexpert.contracts.top import TopCsr
from edgexpert.cocotb_tests.streams import (StreamSink, StreamSource, pauses,
                                            start_clock_and_reset)

__all__ = ["PERIOD_NS", "read_csr", "read_counters", "check_no_rejects", "weight_memory", "start_top",
           "command_streams", "memory_report", "running_memory"]

PERIOD_NS = 10
#: share of cycles the memory pauses AR and R in the random mode (as the EMA bench)
MEMORY_PAUSE = 0.3


async def read_csr(dut, address: int) -> int:
    """One register: the address is registered, the data a cycle after it."""
    dut.csr__addr.value = address
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    return dut.csr__data.value.to_unsigned()


async def read_counters(dut, registers: dict) -> dict[str, int]:
    return {name: await read_csr(dut, int(reg)) for name, reg in registers.items()}


async def check_no_rejects(dut) -> None:
    """Nothing rejected: the command path's and feeder's, the DCU's and the PRU's STATUS are 0
    (docs/contracts.md, "Rejected commands"): good commands never trip a check."""
    for reg in (TopCsr.COMMAND_STATUS, TopCsr.DCU_STATUS, TopCsr.PRU_STATUS):
        status = await read_csr(dut, int(reg))
        assert status == 0, f"{reg.name} {status:#x}: a good command was rejected"


#: the memory of the test that runs (one at a time): `memory_report` reads it
_memory: LatencyAxiRam | None = None


def weight_memory(dut, image: Path, base_address: int, params: dict, rng,
                  mode: str) -> LatencyAxiRam:
    """cocotbext-axi's RAM on the top's AXI master holding the weight image at `base_address`:
    the memory `params["memory"]` names, the latency memory answering `params["latency"]`
    cycles after each AR (cocotb_tests/axi_memory.py `memory_for`); in mode "random" it pauses
    AR and R on random cycles. Call before the reset (its AXI interface samples the reset)."""
    global _memory
    ram = memory_for(params, AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst,
                     size=2**len(dut.m_axi__araddr), latency=params["latency"],
                     period_ns=PERIOD_NS)
    logging.getLogger(f"cocotb.{dut._name}.m_axi_").setLevel(logging.WARNING)
    ram.write(base_address, Path(image).read_bytes())
    if mode == "random":
        ram.ar_pause(pause_generator(rng, MEMORY_PAUSE))
        ram.r_pause(pause_generator(rng, MEMORY_PAUSE))
    _memory = ram
    return ram


def running_memory() -> LatencyAxiRam:
    """The running test's memory (`weight_memory`): its `errors` and `bursts` for a bench that
    injects bus errors."""
    return _memory


def memory_report() -> dict:
    """The running test's memory: its kind and, for a DRAM, row hits and misses, refreshes and
    the bandwidth it achieved (`DramAxiRam.report`)."""
    return _memory.report()


async def start_top(dut, params: dict, base_address: int, rng, mode: str) -> AxiReadMonitor:
    """The CSR port at address 0, the weight memory (`weight_memory`, from the bench's `params`:
    image, memory and latency, the EMA's width and outstanding reads), the clock and the reset;
    returns the AXI protocol monitor watching the master from then on."""
    dut.csr__addr.value = 0
    weight_memory(dut, params["image"], base_address, params, rng, mode)
    await start_clock_and_reset(dut, period_ns=PERIOD_NS)
    ema = params["ema"]
    return AxiReadMonitor(dut, "m_axi", beat_bytes=ema["data_width"] // 8,
                          max_outstanding=ema["outstanding"])


def command_streams(dut, outputs, mode: str, rng) -> tuple[StreamSource, dict[str, StreamSink]]:
    """The `cmd` driver and a sink per output port, all paused by `mode`."""
    return (StreamSource(dut, "cmd", pauses(mode, rng), rng),
            {p: StreamSink(dut, p, pauses(mode, rng)) for p in outputs})
