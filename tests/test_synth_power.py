"""Power from simulated switching activity: the liberty functions, the VCD sampling, the per-net
evaluation and OpenSTA's power all checked against things that must hold."""

import itertools
import json
import random
from pathlib import Path

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from edgexpert.contracts.config import SynthConfig
from edgexpert.hw.mac_lane import MacLane
from edgexpert.sim.stimuli.common import Stimulus, mac_lane_stimulus, simulate
from edgexpert.synth.activity import Trace, activity_tcl, evaluate, read_vcd
from edgexpert.synth.flow import parse_power_report, synthesize
from edgexpert.synth.liberty import compile_function, read_liberty
from edgexpert.synth.netlist import read_netlist
from edgexpert.support.tools import ToolError, liberty_path

CYCLES = 300
SEED = 7


@pytest.fixture
def build_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(tmp_path))
    return tmp_path


def _truth(expr: str, names: list[str]):
    """Evaluate `expr` on every input combination at once: input i is the bitset whose bit k is
    bit i of k."""
    n = len(names)
    mask = (1 << 2**n) - 1
    env = {name: sum(1 << k for k in range(2**n) if k >> i & 1) for i, name in enumerate(names)}
    return compile_function(expr)[0](env, mask), n


@pytest.mark.parametrize("expr, names, python", [
    ("(!((A B)+C))", "ABC", lambda a, b, c: not ((a and b) or c)),
    ("(!((S A) + (!S B)))", "ABS", lambda a, b, s: not ((s and a) or (not s and b))),
    ("((A^B)^C)", "ABC", lambda a, b, c: a ^ b ^ c),
    ("A' B + C", "ABC", lambda a, b, c: ((not a) and b) or c),
    ("A | B & C", "ABC", lambda a, b, c: a or (b and c)),
    ("A * B ^ C", "ABC", lambda a, b, c: a and (b ^ c)),
    ("!(A+B)", "AB", lambda a, b: not (a or b)),
    ("1", "A", lambda a: True),
])
def test_liberty_functions_match_their_truth_tables(expr, names, python):
    value, n = _truth(expr, list(names))
    for k, bits in enumerate(itertools.product([0, 1], repeat=n)):
        args = [k >> i & 1 for i in range(n)]
        assert (value >> k) & 1 == int(bool(python(*args))), (expr, args)


def test_liberty_cells_of_osu018():
    lib = read_liberty(liberty_path())
    assert lib.cell("NAND2X1").area == 24.0 and lib.cell("DFFPOSX1").area == 96.0
    assert lib.cell("AOI21X1").pins["Y"].function == "(!((A B)+C))"
    dff = lib.cell("DFFSR").state
    assert (dff.kind, dff.next_state, dff.clocked_on, dff.clear) == ("ff", "D", "CLK", "(!R)")
    assert lib.cell("DFFPOSX1").pins["Q"].function == lib.cell("DFFPOSX1").state.state
    with pytest.raises(ToolError, match="cell 'NAND9' is not in liberty library"):
        lib.cell("NAND9")
    with pytest.raises(ToolError, match="ends early: unbalanced parentheses"):
        compile_function("(A B")
    with pytest.raises(ToolError, match="unexpected '\\)'"):
        compile_function("A)")


class Counter(wiring.Component):
    count: Out(3)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.count.eq(self.count + 1)
        return m


async def _run_counter(ctx, dut, rng, cycles):
    for _ in range(cycles):
        await ctx.tick()
    return cycles


def test_vcd_is_sampled_once_per_cycle(tmp_path):
    vcd = tmp_path / "counter.vcd"
    assert simulate(Counter(), Stimulus("tick", _run_counter), 64, 1, 1e-8, vcd) == 64
    trace = read_vcd(vcd)
    assert trace.cycles == 64
    # the counter holds k in cycle k: bit 0 toggles every cycle, bit 2 every fourth
    for bit in range(3):
        assert trace.bits[("count", bit)] == sum(((k >> bit) & 1) << k for k in range(64))
    with pytest.raises(ToolError, match="has no 1-bit signal 'clock'"):
        read_vcd(vcd, clock="clock")


async def drive_lane_hold(ctx, dut, rng, cycles, change_probability):
    """The lane at full throughput; each cycle the operands change with `change_probability`,
    else the previous beat repeats: input activity proportional to the probability."""
    pairs = dut.pairs_per_beat
    ctx.set(dut.dot.ready, 1)
    ctx.set(dut.pairs.valid, 1)
    payload = {"act": [0] * pairs, "wgt": [0] * pairs, "last": 0}
    macs = 0
    for _ in range(cycles):
        if rng.random() < change_probability:
            payload = {"act": [rng.randint(-128, 127) for _ in range(pairs)],
                       "wgt": [rng.randint(-8, 7) for _ in range(pairs)], "last": 0}
        ctx.set(dut.pairs.payload, payload)
        _, _, ready = await ctx.tick().sample(dut.pairs.ready)
        macs += pairs * ready
    return macs


def _lane_power(probability: float) -> dict:
    print(f"lane power: {CYCLES} cycles, seed {SEED}, change probability {probability}")
    options = SynthConfig(activity_cycles=CYCLES, activity_seed=SEED)
    stimulus = Stimulus("MAC", drive_lane_hold, {"change_probability": probability})
    return synthesize(MacLane(2), "mac_lane", options, stimulus).power


def test_power_moves_with_switching_activity(build_dir):
    idle, sparse, busy = (_lane_power(p) for p in (0.0, 0.25, 1.0))
    # same netlist, same clock: leakage and the clock's share stay, data-driven power grows
    assert idle["leakage_w"] == pytest.approx(busy["leakage_w"])
    assert idle["dynamic_w"] < sparse["dynamic_w"] < busy["dynamic_w"]
    # roughly proportional: four times the input activity gives several times the data power
    # (not exactly four: the accumulator changes whenever the operands are not zero)
    ratio = (busy["dynamic_w"] - idle["dynamic_w"]) / (sparse["dynamic_w"] - idle["dynamic_w"])
    assert 2.0 < ratio < 5.0
    for power in (idle, sparse, busy):
        assert power["activity"]["nets_default_activity"] == 0
        assert power["operations"] == 2 * CYCLES


def test_lane_activity_comes_from_the_trace_and_checks_out(build_dir):
    from edgexpert.contracts.config import load_config
    config = load_config(overrides=["hardware.mac_lane.pairs_per_beat=2",
                                    f"synth.activity_cycles={CYCLES}"])
    result = synthesize(MacLane(2), "mac_lane", config.synth, mac_lane_stimulus(config))
    power, stats = result.power, result.power["activity"]
    # every flip-flop was found by name and follows the netlist's own next state: the netlist
    # and the RTL agree on every one of the simulated cycles
    assert stats["state_from_trace"] == stats["state_elements"] == result.flip_flops
    assert stats["state_names_disagreeing"] == 0
    assert stats["input_bits_from_trace"] == stats["input_bits"] == 2 * 12 + 1 + 2 + 1
    assert stats["nets_evaluated"] == stats["nets"]
    assert power["operations"] == 2 * CYCLES and power["operation"] == "MAC"
    assert power["energy_per_op_j"] == pytest.approx(
        power["total_w"] / power["clock_hz"] * CYCLES / power["operations"])
    assert power["dynamic_w"] > 1000 * power["leakage_w"] > 0

    # a trace whose register values are wrong (after cycle 0) is caught, and the values come
    # from the netlist
    work = Path(result.work_dir)
    netlist = read_netlist((work / "mac_lane_netlist.json").read_text(), "mac_lane")
    library = read_liberty(liberty_path())
    trace = read_vcd(work / "activity.vcd")
    clean = evaluate(netlist, library, trace)
    rng = random.Random(SEED)
    corrupt = Trace(trace.cycles, {
        k: v ^ (rng.getrandbits(trace.cycles) & ~1) if k[0] == "acc" else v
        for k, v in trace.bits.items()})
    fixed = evaluate(netlist, library, corrupt)
    assert fixed.stats["state_names_disagreeing"] == 32
    assert fixed.stats["state_from_trace"] == stats["state_elements"] - 32
    assert fixed.activity == clean.activity

    # an input missing from the trace: the logic it feeds (up to the registers) gets the default
    partial = Trace(trace.cycles, {k: v for k, v in trace.bits.items()
                                   if k != ("pairs__payload", 0)})
    missing = evaluate(netlist, library, partial)
    assert missing.stats["input_bits_from_trace"] == stats["input_bits"] - 1
    assert 0 < missing.stats["nets_default_activity"] < missing.stats["nets"] / 4
    assert missing.stats["state_from_trace"] == stats["state_elements"]
    tcl = activity_tcl(netlist, {c.name: c.name for c in netlist.cells}, missing, 0.125,
                       config.synth.clock_period_ns)
    assert tcl.count("edgexpert_annotate 0.125 0.5 {") == missing.stats["nets_default_activity"]


def test_smaller_operands_switch_less(build_dir):
    from edgexpert.contracts.config import load_config
    energy = {}
    for operands in ("uniform", "gaussian"):
        config = load_config(overrides=["hardware.mac_lane.pairs_per_beat=2",
                                        f"synth.activity_cycles={CYCLES}",
                                        f"synth.activity_operands={operands}"])
        power = synthesize(MacLane(2), "mac_lane", config.synth, mac_lane_stimulus(config)).power
        assert power["stimulus"]["params"]["operands"] == operands
        energy[operands] = power["energy_per_op_j"]
    # operands concentrated near zero flip fewer partial-product bits than uniform ones, but in
    # two's complement every sign change still flips the upper bits: a few percent, not more
    print(f"energy per MAC: {energy}")
    assert 0.8 * energy["uniform"] < energy["gaussian"] < energy["uniform"]


def test_parse_power_report():
    text = ("edgexpert-power-design 3.0 1.0 0.5 4.5 " + "0 " * 16 + "\n"
            "edgexpert-power-pads 1.0 0.25 0.125 1.375\nedgexpert-instances 12\n")
    assert parse_power_report(text) == {
        "internal_w": 2.0, "switching_w": 0.75, "leakage_w": 0.375, "dynamic_w": 2.75,
        "total_w": 3.125, "instances": 12}
    with pytest.raises(ToolError, match="no power figures"):
        parse_power_report("Error: cannot read netlist\n")


def test_power_is_cached_with_its_stimulus(build_dir):
    options = SynthConfig(activity_cycles=64, activity_seed=SEED)
    stimulus = Stimulus("MAC", drive_lane_hold, {"change_probability": 0.5})
    first = synthesize(MacLane(1), "mac_lane", options, stimulus)
    again = synthesize(MacLane(1), "mac_lane", options, stimulus)
    assert again.cached and again.power == first.power
    stored = json.loads((Path(first.work_dir) / "result.json").read_text())
    assert stored["power"]["energy_per_op_j"] == first.power["energy_per_op_j"]
    # the seed, the length and the stimulus's parameters are part of the key
    for other_options, other_stimulus in (
            (SynthConfig(activity_cycles=64, activity_seed=SEED + 1), stimulus),
            (SynthConfig(activity_cycles=65, activity_seed=SEED), stimulus),
            (options, Stimulus("MAC", drive_lane_hold, {"change_probability": 0.25}))):
        other = synthesize(MacLane(1), "mac_lane", other_options, other_stimulus)
        assert other.key != first.key and not other.cached
    # without a stimulus: no power, and a key of its own
    plain = synthesize(MacLane(1), "mac_lane", options)
    assert plain.power is None and plain.key != first.key
    assert (plain.cells, plain.area_um2) == (first.cells, first.area_um2)
