"""A gated and an ungated netlist of one block agree on function (synth/equivalence.py): both
simulated in Icarus and in Verilator from the liberty's cell functions on the same stimulus, every output
compared every cycle; the activity trace check holds on both. The condition for clock gating to
be the synthesis default (docs/synthesis.md, "Clock gating")."""

import json
from pathlib import Path

import pytest

from edgexpert.blocks import get_block
from edgexpert.contracts.config import load_config
from edgexpert.synth.equivalence import SIMULATORS, compare_netlists
from edgexpert.synth.report import run_block

CYCLES = 300


@pytest.fixture(scope="module")
def lane_runs(tmp_path_factory):
    """mac_lane synthesized with and without clock gates, each with its power (the trace check)."""
    build = tmp_path_factory.mktemp("build")
    patch = pytest.MonkeyPatch()
    patch.setenv("EDGEXPERT_BUILD_DIR", str(build))
    block = get_block("mac_lane")
    runs = {gated: run_block(block, load_config(overrides=[
        f"synth.activity_cycles={CYCLES}", f"synth.clock_gating={str(gated).lower()}"]))
        for gated in (False, True)}
    patch.undo()
    return runs, build


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_gated_and_ungated_lane_agree_every_cycle_and_with_the_trace(lane_runs, simulator):
    runs, build = lane_runs
    plain, gated = runs[False], runs[True]
    assert gated.clock_gating["gates"] > 0 and plain.clock_gating is None
    for run in (plain, gated):
        assert run.power["activity"]["state_names_disagreeing"] == 0
    result = compare_netlists(Path(plain.work_dir), Path(gated.work_dir), "mac_lane",
                              plain.memories, build / f"compare-{simulator}", simulator=simulator)
    assert result.cycles == CYCLES and result.output_bits > 0
    assert result.input_bits_from_trace == result.input_bits
    assert result.disagreeing_cycles == 0 and result.unknown_output_bits == 0
    # and both with the RTL: every output the trace names, every cycle
    assert result.output_bits_in_trace == result.output_bits
    assert result.cycles_disagreeing_with_trace == 0


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_a_gate_held_open_is_caught(lane_runs, tmp_path, simulator):
    """The check can fail: a gated netlist whose gates' latches hold 1 (every gated flip-flop
    loads every cycle, its hold multiplexer gone) disagrees with the ungated one."""
    runs, build = lane_runs
    plain, gated = runs[False], runs[True]
    broken = tmp_path / "broken"
    broken.mkdir()
    netlist = json.loads((Path(gated.work_dir) / "mac_lane_netlist.json").read_text())
    latches = [c for c in netlist["modules"]["mac_lane"]["cells"].values() if c["type"] == "LATCH"]
    assert latches
    for latch in latches:
        latch["connections"]["D"] = ["1"]
    (broken / "mac_lane_netlist.json").write_text(json.dumps(netlist))
    result = compare_netlists(Path(plain.work_dir), broken, "mac_lane", plain.memories,
                              tmp_path / "compare", simulator=simulator)
    assert result.disagreeing_cycles > 0 and result.first_disagreement is not None
