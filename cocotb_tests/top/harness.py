"""What the top's two benches (bench.py: decode steps, prefill_bench.py: a prefill chunk) share:
the clock, the CSR port's reads, the counters, feeding a list of command beats, and the
external memory holding the weight image. Runs inside the simulator."""

from __future__ import annotations

import logging
from pathlib import Path

from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiBus

from edgexpert.cocotb_tests.axi_memory import LatencyAxiRam
from edgexpert.cocotb_tests.ema.harness import pause_generator
from edgexpert.cocotb_tests.streams import StreamSource

__all__ = ["PERIOD_NS", "read_csr", "read_counters", "feed", "weight_memory"]

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


async def feed(source: StreamSource, values: list[int]):
    for value in values:
        await source.send(value)


def weight_memory(dut, image: Path, base_address: int, latency: int, rng,
                  mode: str) -> LatencyAxiRam:
    """cocotbext-axi's RAM on the top's AXI master holding the weight image at `base_address`,
    answering `latency` cycles after each AR; in mode "random" it pauses AR and R on random
    cycles. Call before the reset (its AXI interface samples the reset)."""
    ram = LatencyAxiRam(AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst,
                        size=2**len(dut.m_axi__araddr), latency=latency, period_ns=PERIOD_NS)
    logging.getLogger(f"cocotb.{dut._name}.m_axi_").setLevel(logging.WARNING)
    ram.write(base_address, Path(image).read_bytes())
    if mode == "random":
        ram.ar_pause(pause_generator(rng, MEMORY_PAUSE))
        ram.r_pause(pause_generator(rng, MEMORY_PAUSE))
    return ram
