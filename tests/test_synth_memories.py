"""Memories are cut out of the gate netlist and costed by CACTI runs; the logic around them is
synthesized, timed and powered as usual. The EMA's buffer is not on this branch, so a small
block with two memories (a synchronous-read buffer and an asynchronous-read register file) and a
state machine in a submodule stands in for it."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from edgexpert.contracts.config import load_config
from edgexpert.blocks import Block
from edgexpert.sim.stimuli.common import Stimulus
from edgexpert.synth.costs import build_cost_table, load_cost_table
from edgexpert.synth.flow import SynthResult, synthesize
from edgexpert.synth.memories import has_memories
from edgexpert.synth.report import markdown_report, summarize, write_reports
from edgexpert.synth.cacti import SramCost, SramSpec, cacti_settings, sram_cost
from edgexpert.synth.scaling import SOURCE_NODE, node_scaling

CYCLES = 400
#: the default target node (synth.target_node_nm, 28 nm)
NODE = load_config().synth.target_node_nm


class Pacer(wiring.Component):
    """Enables accumulation for six cycles after each start (a state machine to synthesize)."""
    start: In(1)
    busy: Out(1)

    def elaborate(self, platform):
        m = Module()
        count = Signal(3)
        with m.FSM():
            with m.State("Idle"):
                with m.If(self.start):
                    m.d.sync += count.eq(5)
                    m.next = "Run"
            with m.State("Run"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += count.eq(count - 1)
                with m.If(count == 0):
                    m.next = "Drain"
            with m.State("Drain"):
                m.next = "Idle"
        return m


class BufferedSum(wiring.Component):
    """Writes bytes into a 16 x 8 buffer and sums what it reads back while the pacer is busy; a
    4 x 4 register file (read asynchronously) offsets the sum."""
    w_en: In(1)
    w_addr: In(4)
    w_data: In(8)
    r_addr: In(4)
    start: In(1)
    total: Out(12)

    def elaborate(self, platform):
        m = Module()
        m.submodules.buf = buf = Memory(shape=unsigned(8), depth=16, init=[])
        m.submodules.regs = regs = Memory(shape=unsigned(4), depth=4, init=[])
        m.submodules.pacer = pacer = Pacer()
        write, read = buf.write_port(), buf.read_port()
        reg_write, reg_read = regs.write_port(), regs.read_port(domain="comb")
        m.d.comb += [write.addr.eq(self.w_addr), write.data.eq(self.w_data),
                     write.en.eq(self.w_en), read.addr.eq(self.r_addr),
                     reg_write.addr.eq(self.w_addr[:2]), reg_write.data.eq(self.w_data[:4]),
                     reg_write.en.eq(self.w_en & self.start), reg_read.addr.eq(self.r_addr[2:]),
                     pacer.start.eq(self.start)]
        with m.If(pacer.busy):
            m.d.sync += self.total.eq(self.total + read.data + reg_read.data)
        return m


async def drive_buffer(ctx, dut, rng, cycles):
    """Random writes (half the cycles) and reads; returns the number of writes."""
    writes = 0
    for _ in range(cycles):
        enable = rng.random() < 0.5
        ctx.set(dut.w_en, enable)
        ctx.set(dut.w_addr, rng.randrange(16))
        ctx.set(dut.w_data, rng.randrange(256))
        ctx.set(dut.r_addr, rng.randrange(16))
        ctx.set(dut.start, rng.random() < 0.2)
        await ctx.tick()
        writes += enable
    return writes


BLOCK = Block("buffered_sum", "test block with two memories and a state machine",
              lambda hw: BufferedSum(), lambda hw: {},
              lambda config: Stimulus("write", drive_buffer))


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(tmp_path))
    return load_config(overrides=[f"synth.activity_cycles={CYCLES}"])


def test_memories_are_cut_out_and_costed(config):
    result = synthesize(BufferedSum(), "buffered_sum", config.synth, BLOCK.stimulus(config))
    by_name = {m["name"]: m for m in result.memories}
    assert set(by_name) == {"buf", "regs"}
    buf, regs = by_name["buf"], by_name["regs"]
    assert (buf["width"], buf["depth"], buf["read_ports"], buf["write_ports"]) == (8, 16, 1, 1)
    assert buf["sync_read_ports"] == 1 and regs["sync_read_ports"] == 0
    assert (regs["width"], regs["depth"]) == (4, 4)
    # no memory bit became a flip-flop: 12 for the total, 3 for the count, the state register
    assert result.flip_flops < 20 < 16 * 8
    netlist = (Path(result.work_dir) / "buffered_sum_netlist.v").read_text()
    for port in ("input [7:0] edgexpert_mem0__RD_DATA", "output [3:0] edgexpert_mem0__WR_ADDR",
                 "input [3:0] edgexpert_mem1__RD_DATA"):
        assert port in netlist
    assert "RD_EN" not in netlist  # tied high: not a port
    # timing and power of the logic around them
    assert 0 < result.critical_path_ns < result.clock_period_ns

    power = result.power
    stats = power["activity"]
    assert stats["input_bits_from_trace"] == stats["input_bits"]  # memory read data by alias
    assert stats["state_names_disagreeing"] == 0 and stats["nets_default_activity"] == 0
    # the state machine's register is text in the VCD (`Idle/0`), read back through its decoder
    assert stats["state_from_trace"] == stats["state_elements"]
    assert stats["state_from_netlist"] == 0
    accesses = {a["name"]: a for a in power["memory_accesses"]}
    writes = power["operations"]
    assert CYCLES / 4 < writes < CYCLES * 3 / 4
    # the enables are netlist outputs: their counts are exact (the buffer writes when w_en is
    # high, the register file when w_en and start are; reads happen every cycle)
    assert accesses["buf"] == {"name": "buf", "read_bits": 8 * CYCLES, "write_bits": 8 * writes,
                               "enables_evaluated": True}
    assert accesses["regs"]["read_bits"] == 4 * CYCLES and accesses["regs"]["enables_evaluated"]
    assert 0 < accesses["regs"]["write_bits"] < 4 * writes / 2

    # the report adds a CACTI run per memory: area and energy at 28 nm include the memories
    summary = summarize(BLOCK, config, result)
    scaled = summary["scaled"]
    buf, regs = (sram_cost(SramSpec(8, 16, read_ports=1, write_ports=1), NODE),
                 sram_cost(SramSpec(4, 4, read_ports=1, write_ports=1), NODE))
    assert buf.cached and regs.cached  # summarize ran them; the same inputs hit the cache
    # both are below CACTI's smallest bank: costed as one, and the entry says so
    rules = {m["name"]: m["sram"]["rule"] for m in summary["memories"]}
    assert rules["buf"] == ("16 rows per bank is below CACTI's minimum bank (32 rows, 64 bytes): "
                            "costed as 64 rows, an overestimate")
    assert rules["regs"].startswith("4 rows per bank is below") and rules["regs"].endswith(
        "costed as 64 rows, an overestimate; 4-bit words stored as 1 byte; its 4-bit port "
        "costed as 8 bits")
    sram_area = buf.area_m2 + regs.area_m2
    assert scaled["sram_area_mm2"] == pytest.approx(sram_area * 1e6)
    assert scaled["area_mm2"] == pytest.approx(scaled["logic_area_mm2"] + sram_area * 1e6)
    # reads and writes each at CACTI's energy for them
    sram_energy = (8 * CYCLES * buf.read_energy_per_bit_j + 8 * writes * buf.write_energy_per_bit_j
                   + 4 * CYCLES * regs.read_energy_per_bit_j
                   + accesses["regs"]["write_bits"] * regs.write_energy_per_bit_j) / writes
    assert scaled["sram_energy_per_op_j"] == pytest.approx(sram_energy)
    assert scaled["energy_per_op_j"] == pytest.approx(
        scaled["logic_energy_per_op_j"] + sram_energy)


def test_report_and_cost_table_of_a_block_with_memories(config, tmp_path):
    report = write_reports([BLOCK], config)
    entry = report["blocks"]["buffered_sum"]
    assert entry["power_measured"] and len(entry["memories"]) == 2
    text = (tmp_path / "synth" / "report.md").read_text()
    assert "| buffered_sum |" in text and "Memory `buf`: 16 x 8 bits" in text
    stored = json.loads((tmp_path / "synth" / "report.json").read_text())
    assert stored["blocks"]["buffered_sum"]["key"] == entry["key"]
    table = load_cost_table(tmp_path / "synth" / "costs.json")
    energy = table.cost("buffered_sum.energy_per_write")
    assert energy.unit == "J" and entry["key"] in energy.source and "CACTI" in energy.source
    assert table.cost("buffered_sum.buf.sram_energy_per_bit").unit == "J/bit"
    assert table.cost("buffered_sum.area").value == pytest.approx(
        entry["scaled"]["area_mm2"] * 1e-6)


def test_memory_free_rtlil_needs_no_scan():
    assert not has_memories("module \\lane\n  wire width 8 \\memory_bus\nend\n")
    assert has_memories("module \\buf\n  memory width 8 size 16 \\mem\nend\n")


def test_memories_charged_as_upper_bounds_are_named(config, monkeypatch):
    """A memory whose enables the activity evaluation could not compute is charged as accessed
    every cycle: the summary, the report and the cost table say which, and how much of the
    SRAM energy that is. CACTI is replaced by a fixed cost: no tool runs."""
    inputs, rule = SramSpec(8, 16, read_ports=1, write_ports=1).modelled()
    fixed = SramCost(spec={}, cacti_inputs={**inputs, "technology_um": NODE / 1000}, rule=rule,
                     area_m2=1e-9, access_time_s=1e-9, cycle_time_s=1e-9, read_energy_j=8e-15,
                     write_energy_j=16e-15, read_energy_per_bit_j=1e-15,
                     write_energy_per_bit_j=2e-15, leakage_w=0.0, key="fixed", source="fixed")
    monkeypatch.setattr("edgexpert.synth.report.sram_cost", lambda spec, node: fixed)
    shape = {"width": 8, "depth": 16, "read_ports": 1, "write_ports": 1, "sync_read_ports": 1}
    accesses = [{"name": "buf", "read_bits": 8 * CYCLES, "write_bits": 80,
                 "enables_evaluated": True},
                {"name": "regs", "read_bits": 8 * CYCLES, "write_bits": 8 * CYCLES,
                 "enables_evaluated": False}]
    power = {"operations": 100, "energy_per_op_j": 1e-12, "operation": "write",
             "clock_hz": 1e8, "internal_w": 0.0, "switching_w": 0.0, "dynamic_w": 0.0,
             "leakage_w": 0.0, "total_w": 0.0, "operations_per_cycle": 0.25, "cycles": CYCLES,
             "seed": 1, "stimulus": {"drive": "drive_buffer", "params": {}},
             "activity": dict.fromkeys(("nets", "nets_evaluated", "nets_default_activity",
                                        "state_elements", "state_from_trace",
                                        "state_from_netlist", "input_bits",
                                        "input_bits_from_trace"), 0),
             "memory_accesses": accesses}
    result = SynthResult(top="buffered_sum", cells=1, area_um2=1.0, critical_path_ns=1.0,
                         fmax_hz=1e9, startpoint="a", endpoint="b", clock_period_ns=10.0,
                         worst_slack_ns=9.0, cell_counts={}, flip_flops=0, node="osu018",
                         key="k", tools={}, power=power,
                         memories=[{"name": "buf", **shape}, {"name": "regs", **shape}])
    summary = summarize(BLOCK, config, result)
    scaled = summary["scaled"]
    assert scaled["sram_upper_bound_memories"] == ["regs"]
    assert scaled["sram_upper_bound_energy_per_op_j"] == pytest.approx(
        (8 * CYCLES * 1e-15 + 8 * CYCLES * 2e-15) / 100)
    assert scaled["sram_upper_bound_energy_per_op_j"] < scaled["sram_energy_per_op_j"]

    scaling = node_scaling(config.synth)
    full = {"source_node": SOURCE_NODE, "scaling": scaling.to_json(),
            "sram_model": cacti_settings(scaling.node_nm), "blocks": {"buffered_sum": summary}}
    text = markdown_report(full)
    assert "Memory `regs`" in text and "an upper bound: its enables could not be evaluated" in text
    assert "upper bounds: regs)" in text
    assert text.count("an upper bound") == 1  # `buf` is exact
    table = build_cost_table(full)["costs"]
    assert "upper bounds for regs" in table["buffered_sum.energy_per_write"]["source"]
    assert "upper bounds for regs" in table["buffered_sum.sram_write_energy_per_write"]["source"]

    exact = summarize(BLOCK, config, replace(result, power={**power, "memory_accesses": [
        {**a, "enables_evaluated": True} for a in accesses]}))
    assert exact["scaled"]["sram_upper_bound_memories"] == []
    table = build_cost_table({**full, "blocks": {"buffered_sum": exact}})["costs"]
    assert "upper bounds" not in table["buffered_sum.energy_per_write"]["source"]
