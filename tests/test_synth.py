# amaranth: UnusedElaboratable=no
# (a part the configuration refuses leaves its component unused)
"""Synthesis runner: report parsers on fixed text, and real Yosys + OpenSTA runs on the lane."""

import json

import pytest

from edgexpert.contracts.config import SynthConfig
from edgexpert.hw.mac_lane import MacLane
from edgexpert.synth.flow import name_registers, parse_sta_report, parse_stat, synthesize
from edgexpert.support.tools import ToolError

STAT_JSON = """log banner that tee writes first
{
   "creator": "Yosys 0.23",
   "modules": {
      "\\\\lane": {"num_cells": 3, "num_cells_by_type": {"DFFPOSX1": 1, "NAND2X1": 2}}
   }
}
"""
STAT_TXT = "=== lane ===\n   Number of cells: 3\n   Chip area for module '\\lane': 144.000000\n"
STA_OUT = """Startpoint: _12_ (rising edge-triggered flip-flop clocked by clk)
Endpoint: o_stream__payload[3] (output port clocked by clk)
Path Group: clk
edgexpert-worst-slack-ns 7.25
"""


def test_parse_stat():
    assert parse_stat(STAT_JSON, STAT_TXT, "lane") == (3, 144.0, {"DFFPOSX1": 1, "NAND2X1": 2})
    with pytest.raises(ToolError, match="no module 'other'"):
        parse_stat(STAT_JSON, STAT_TXT, "other")
    with pytest.raises(ToolError, match="no chip area"):
        parse_stat(STAT_JSON, "=== lane ===\n", "lane")


#: two path groups, the clock gates' first (OpenSTA's order) but not the worst
STA_GROUPS = """Startpoint: cg0_latch (positive level-sensitive latch clocked by clk')
Endpoint: cg0_gate (rising clock gating-check end-point clocked by clk)
Path Group: **clock_gating_default**
             2.9632   slack (MET)


Startpoint: _486028_ (rising edge-triggered flip-flop clocked by clk)
Endpoint: _487870_ (rising edge-triggered flip-flop clocked by clk)
Path Group: clk
            -7.4616   slack (VIOLATED)

edgexpert-worst-slack-ns -7.4615506996126095
"""


#: a gated netlist's report (sta.tcl with GATED_STA_REPORTS): the worst of group clk is a path
#: into a gate's latch that borrows time (slack 0); the flip-flop path reported after it is the
#: critical one (engine_l16 with clock gates, 2026-12-04, abridged)
STA_BORROW = """Startpoint: cg5129_latch (positive level-sensitive latch clocked by clk')
Endpoint: cg5129_gate (rising clock gating-check end-point clocked by clk)
Path Group: **clock_gating_default**
             2.3154   slack (MET)

Startpoint: _701374_ (rising edge-triggered flip-flop clocked by clk)
Endpoint: cg5129_latch (positive level-sensitive latch clocked by clk')
Path Group: clk
   2.5072    7.5072   time borrowed from endpoint
             0.0000   slack (MET)

Startpoint: _701371_ (rising edge-triggered flip-flop clocked by clk)
Endpoint: _702440_ (rising edge-triggered flip-flop clocked by clk)
Path Group: clk
             1.0633   slack (MET)

Startpoint: _684862_ (rising edge-triggered flip-flop clocked by clk)
Endpoint: mem0__WR_DATA[127] (output port clocked by clk)
Path Group: clk
             3.5560   slack (MET)

edgexpert-worst-slack-ns 0.0
"""


def test_parse_sta_report():
    assert parse_sta_report(STA_OUT) == (7.25, "_12_", "o_stream__payload[3]")
    assert parse_sta_report(STA_GROUPS) == (-7.4615506996126095, "_486028_", "_487870_")
    # a latch that borrows is not the critical path; one that cannot borrow enough is
    assert parse_sta_report(STA_BORROW) == (1.0633, "_701371_", "_702440_")
    late = STA_BORROW.replace("0.0000   slack (MET)", "-0.4000   slack (VIOLATED)")
    assert parse_sta_report(late.replace("worst-slack-ns 0.0", "worst-slack-ns -0.4")) == (
        -0.4, "_701374_", "cg5129_latch")
    with pytest.raises(ToolError, match="no worst slack"):
        parse_sta_report("Error: cannot read netlist\n")


def test_name_registers():
    netlist = "  DFFPOSX1 _12_ (\n    .CLK(clk),\n    .D(_03_),\n    .Q(acc[7])\n  );\n"
    assert name_registers("_12_", netlist) == "_12_ (acc[7])"
    assert name_registers("i_stream__valid", netlist) == "i_stream__valid"


@pytest.fixture
def build_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(tmp_path))
    return tmp_path


def test_real_run_and_cache(build_dir):
    first = synthesize(MacLane(2), "mac_lane")
    assert not first.cached
    assert first.cells == sum(first.cell_counts.values()) > 100
    # 32-bit accumulator + 32-bit output register + beat-sum register + valid flags
    assert first.flip_flops >= 64
    assert 1e4 < first.area_um2 < 1e6
    assert 0 < first.critical_path_ns < first.clock_period_ns
    assert first.fmax_hz == round(1e9 / first.critical_path_ns)
    stored = json.loads((build_dir / "synth" / "mac_lane" / first.key / "result.json").read_text())
    assert stored["area_um2"] == first.area_um2

    again = synthesize(MacLane(2), "mac_lane")
    assert again.cached and again == first

    # a different design or a different constraint is a different cache entry
    wider = synthesize(MacLane(8), "mac_lane")
    assert wider.key != first.key and wider.area_um2 > first.area_um2
    tighter = synthesize(MacLane(2), "mac_lane", SynthConfig(clock_period_ns=3.0))
    assert tighter.key != first.key and not tighter.cached


def test_missing_liberty_is_a_clear_error(build_dir, monkeypatch, tmp_path):
    from edgexpert.support import tools
    monkeypatch.setenv("EDGEXPERT_LIBERTY", str(tmp_path / "none.lib"))
    tools.check_tools.cache_clear()
    try:
        with pytest.raises(ToolError, match="osu018-liberty is missing: run bash scripts/setup.sh"):
            synthesize(MacLane(1), "mac_lane")
    finally:
        tools.check_tools.cache_clear()



def test_engine_parts_are_blocks_of_the_configured_engine():
    """Each arithmetic part of the engine is a block of its own (timed alone, docs/blocks/
    engine.md "Timing"), built at the configured engine's parameters; a configuration the
    engine refuses is refused in one line by its parts too."""
    from amaranth.back import rtlil

    from edgexpert.blocks import BLOCKS, ENGINE_PARTS
    from edgexpert.contracts.config import ConfigError, load_config
    config = load_config()
    assert set(ENGINE_PARTS) <= set(BLOCKS)
    assert "module \\swiglu" in rtlil.convert(BLOCKS["engine_swiglu"].build(config), name="swiglu")
    combine = BLOCKS["engine_combine"].build(config)
    # a word of MoE sums per flush beat (256 bits: 8), four expert outputs per combine item
    assert len(combine.moe_out.payload.values) == 8 and len(combine.y.payload.value) == 4
    rtlil.convert(combine, name="combine")
    bad = load_config(overrides=["hardware.ema.axi_data_width=64", "hardware.engine.lanes=64"])
    with pytest.raises(ConfigError, match="hardware.engine: lanes must be an integer in 1..16"):
        BLOCKS["engine_down_mac"].build(bad)
