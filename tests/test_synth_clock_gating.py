"""Clock gating (synth/clock_gating.py, `synth.clock_gating`): clock gates inserted for groups of
enable flip-flops, timed by OpenSTA, and their gated clocks evaluated and powered at the rate
each is enabled. A small register file stands in for the engine's accumulator rows."""

import json
import subprocess
from pathlib import Path

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from edgexpert.contracts.config import load_config
from edgexpert.support.tools import liberty_path, require
from edgexpert.sim.stimuli.common import Stimulus
from edgexpert.synth.clock_gating import gate_clocks
from edgexpert.synth.flow import synthesize

CYCLES = 400
ROWS, WIDTH = 8, 32


class RowFile(wiring.Component):
    """Eight 32-bit rows, one written per cycle when `we` (its own enable: row == addr), with a
    reset (a sync reset over the enable: $_SDFFE_); a reset-less 32-bit register loaded when
    `hold` is low (an active-low enable: $_DFFE_PN_); a 2-bit counter with an enable (below
    the smallest gated group: it keeps its multiplexer)."""
    we: In(1)
    addr: In(3)
    data: In(WIDTH)
    hold: In(1)
    step: In(1)
    out: Out(WIDTH)
    kept: Out(WIDTH)
    count: Out(2)

    def elaborate(self, platform):
        m = Module()
        rows = [Signal(WIDTH, name=f"row_{r}") for r in range(ROWS)]
        for r, row in enumerate(rows):
            with m.If(self.we & (self.addr == r)):
                m.d.sync += row.eq(self.data + row)
        kept = Signal(WIDTH, reset_less=True)
        with m.If(~self.hold):
            m.d.sync += kept.eq(self.data ^ kept)
        with m.If(self.step):
            m.d.sync += self.count.eq(self.count + 1)
        with m.Switch(self.addr):
            for r, row in enumerate(rows):
                with m.Case(r):
                    m.d.comb += self.out.eq(row)
        m.d.comb += self.kept.eq(kept)
        return m


async def drive_rows(ctx, dut, rng, cycles):
    """A write in a quarter of the cycles (each row in 1/32 of them), `hold` low in a tenth;
    returns the writes."""
    writes = 0
    for _ in range(cycles):
        we = rng.random() < 0.25
        ctx.set(dut.we, we)
        ctx.set(dut.addr, rng.randrange(ROWS))
        ctx.set(dut.data, rng.getrandbits(WIDTH))
        ctx.set(dut.hold, rng.random() >= 0.1)
        ctx.set(dut.step, rng.random() < 0.5)
        await ctx.tick()
        writes += we
    return writes


@pytest.fixture
def build_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(tmp_path))
    return tmp_path


def _generic(tmp_path: Path) -> dict:
    """RowFile through Yosys's `synth -flatten`: the netlist the gates are inserted into."""
    il, js = tmp_path / "rows.il", tmp_path / "rows.json"
    il.write_text(rtlil.convert(RowFile(), name="rows", emit_src=False))
    subprocess.run([require("yosys").location, "-q", "-p",
                    f"read_liberty -lib {liberty_path()}; read_rtlil {il}; "
                    f"synth -flatten -top rows; write_json {js}"], check=True)
    return json.loads(js.read_text())


def test_groups_sharing_an_enable_get_one_gate_each(tmp_path):
    netlist = _generic(tmp_path)
    cells = netlist["modules"]["rows"]["cells"].values()
    before = sorted({c["type"] for c in cells if "DFF" in c["type"]})
    assert before == ["$_DFFE_PN_", "$_SDFFE_PP0P_"]
    stats = gate_clocks(netlist, "rows", min_bits=4, max_bits=32)
    # a gate per row and one for `kept`; the counter's 2 bits stay as they were
    assert stats == {"gates": ROWS + 1, "gated_flip_flops": ROWS * WIDTH + WIDTH,
                     "ungated_enable_flip_flops": 2}
    cells = netlist["modules"]["rows"]["cells"]
    by_type = {}
    for c in cells.values():
        by_type[c["type"]] = by_type.get(c["type"], 0) + 1
    assert by_type["LATCH"] == by_type["AND2X2"] == ROWS + 1
    assert by_type["$_SDFF_PP0_"] == ROWS * WIDTH and by_type["$_DFF_P_"] == WIDTH
    # the sync reset acts without the enable: each row's gate opens for enable or reset
    assert by_type["$_OR_"] >= ROWS and by_type["$_NOT_"] >= 1
    gated = [c for c in cells.values() if c["type"] == "$_SDFF_PP0_"]
    assert len({c["connections"]["C"][0] for c in gated}) == ROWS
    with pytest.raises(ValueError, match="min_bits = 0 is out of range"):
        gate_clocks(netlist, "rows", min_bits=0, max_bits=32)
    with pytest.raises(ValueError, match=r"max_bits = 2 is out of range: accepted >= min_bits"):
        gate_clocks(netlist, "rows", min_bits=4, max_bits=2)


def test_a_group_larger_than_max_bits_gets_a_gate_per_max_bits(tmp_path):
    """A gate drives at most max_bits clock pins: each 32-bit row on its own enable gets
    ceil(32 / 12) = 3 gates (12, 12 and 8 flip-flops), `kept` too."""
    netlist = _generic(tmp_path)
    stats = gate_clocks(netlist, "rows", min_bits=4, max_bits=12)
    assert stats == {"gates": 3 * (ROWS + 1), "gated_flip_flops": ROWS * WIDTH + WIDTH,
                     "ungated_enable_flip_flops": 2}
    cells = netlist["modules"]["rows"]["cells"].values()
    loads = {}
    for c in cells:
        if c["type"] in ("$_SDFF_PP0_", "$_DFF_P_"):
            loads[c["connections"]["C"][0]] = loads.get(c["connections"]["C"][0], 0) + 1
    assert sorted(set(loads.values())) == [8, 12] and len(loads) == 3 * (ROWS + 1)


def test_a_gated_register_file_is_timed_evaluated_and_powered_at_its_enable_rate(build_dir):
    base = load_config(overrides=[f"synth.activity_cycles={CYCLES}",
                                  "synth.clock_gating=false"]).synth
    # a gate per row (32 bits): the gated clocks' rates below are the rows'
    gated_options = load_config(overrides=[f"synth.activity_cycles={CYCLES}",
                                           "synth.clock_gating=true",
                                           f"synth.clock_gating_max_bits={WIDTH}"]).synth
    stimulus = Stimulus("write", drive_rows)
    plain = synthesize(RowFile(), "rows", base, stimulus)
    gated = synthesize(RowFile(), "rows", gated_options, stimulus)
    assert plain.clock_gating is None and plain.key != gated.key
    assert gated.clock_gating == {"gates": ROWS + 1, "gated_flip_flops": ROWS * WIDTH + WIDTH,
                                  "ungated_enable_flip_flops": 2}
    # a latch per gate (ABC maps other logic to AND2X2 too)
    assert gated.cell_counts["LATCH"] == ROWS + 1 and "LATCH" not in plain.cell_counts
    assert gated.flip_flops == plain.flip_flops
    # the enable has the whole cycle: the design still meets the 10 ns constraint
    assert 0 < gated.critical_path_ns < gated.clock_period_ns
    for result in (plain, gated):
        stats = result.power["activity"]
        # every row's traced values follow the netlist: behind its gate it loads only when
        # enabled (a gated row taken as loading every cycle would disagree with the trace)
        assert stats["state_names_disagreeing"] == 0 and stats["nets_default_activity"] == 0
        assert stats["state_unknown"] == 0
    assert gated.power["activity"]["clock_gates"] == ROWS + 1
    assert gated.power["activity"]["gated_flip_flops"] == ROWS * WIDTH + WIDTH
    # each gated clock at the rate its enable is on: rows in about 1/32 of the cycles (a write
    # in a quarter of them, to one of 8 rows), `kept` in a tenth
    tcl = (Path(gated.work_dir) / "activity.tcl").read_text()
    periods = [float(line.split()[4]) for line in tcl.splitlines()
               if line.startswith("create_clock -name edgexpert_gated")]
    pins = sum(line.count("/Y") for line in tcl.splitlines() if line.startswith("create_clock"))
    assert pins == ROWS + 1 and min(periods) > 5 * gated.clock_period_ns
    # the flip-flops' clock energy mostly goes; the gates (a latch, an AND and an inverter on
    # the clock each) cost some of it back: 18 % less in all, measured
    assert gated.power["total_w"] < 0.9 * plain.power["total_w"]
    assert gated.power["operations"] == plain.power["operations"]
