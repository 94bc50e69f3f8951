"""Scaling to the target node and the cost table the performance model reads (its SRAM entries are CACTI runs:
tests/test_cacti.py tests the runs themselves)."""

import json
import math

import pytest

from edgexpert.contracts.config import ConfigError, load_config
from edgexpert.blocks import BLOCKS
from edgexpert.synth.costs import (CITED_COSTS, SCHEMA, CostTableError, build_cost_table,
                                   load_cost_table, write_cost_table)
from edgexpert.synth.report import (REFERENCE_SRAM_KIB, block_report, plural, reference_srams,
                                    write_reports)
from edgexpert.synth.scaling import node_scaling, scale_to_node


def test_28nm_factors_lie_between_the_32nm_and_20nm_rows():
    s = scale_to_node(28, 1.0)
    for quantity in ("area", "delay", "energy"):
        lo, hi = sorted((s.rows["32nm"][quantity], s.rows["20nm"][quantity]))
        assert lo < getattr(s, quantity) < hi
        # geometric interpolation: log-linear in feature size
        assert math.log(getattr(s, quantity)) == pytest.approx(
            (1 - s.weight) * math.log(s.rows["32nm"][quantity])
            + s.weight * math.log(s.rows["20nm"][quantity]))
    assert s.weight == pytest.approx(math.log(32 / 28) / math.log(32 / 20))
    # the values docs/synthesis.md quotes
    assert (round(s.area, 4), round(s.delay, 3), round(s.energy, 4)) == (0.02, 0.137, 0.0173)
    # energy per operation falls with the supply voltage, roughly as V^2
    low = scale_to_node(28, 0.9)
    assert 0.7 < low.energy / s.energy < 0.85 and low.area == s.area


def test_the_target_node_is_a_setting_between_the_papers_rows():
    # a row's node is that row alone: 45 nm's area is the paper's 180 -> 45 nm table entry, 1/19
    at45 = scale_to_node(45, 1.0)
    assert list(at45.rows) == ["45nm"] and at45.weight == 0 and at45.area == 1 / 19
    # between rows, log-linear: 40 nm between 45 and 32; every factor shrinks with the node
    at40 = scale_to_node(40, 1.0)
    assert list(at40.rows) == ["45nm", "32nm"]
    assert at40.weight == pytest.approx(math.log(45 / 40) / math.log(45 / 32))
    at28, at65 = scale_to_node(28, 1.0), scale_to_node(65, 1.0)
    for q in ("area", "delay", "energy"):
        assert getattr(at28, q) < getattr(at40, q) < getattr(at45, q) < getattr(at65, q) < 1
    # the setting chooses the node; outside the range, one line with the range
    config = load_config(overrides=["synth.target_node_nm=45"])
    assert node_scaling(config.synth) == at45 and at45.node == "45 nm, 1.0 V"
    with pytest.raises(ConfigError, match="synth.target_node_nm = 7 is out of range.*22..65"):
        load_config(overrides=["synth.target_node_nm=7"])
    with pytest.raises(ValueError, match="target node 90 nm is out of range: accepted 22..65 nm"):
        scale_to_node(90, 1.0)


def test_operations_read_as_plurals():
    assert plural("byte fetched") == "bytes fetched"
    assert plural("MAC") == "MACs" and plural("write") == "writes"


@pytest.fixture(scope="module")
def cost_table(tmp_path_factory):
    """The real flow on a small lane: report, cost table, loaded back."""
    build = tmp_path_factory.mktemp("build")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EDGEXPERT_BUILD_DIR", str(build))
        config = load_config(overrides=["hardware.mac_lane.pairs_per_beat=2",
                                        "synth.activity_cycles=200"])
        # the lane and the EMA: every kind of entry, without the full-size points' minutes
        report = write_reports([BLOCKS["mac_lane"], BLOCKS["ema"]], config)
    return report, build / "synth" / "costs.json"


def test_cost_table_loads_and_the_performance_model_can_use_it(cost_table):
    report, path = cost_table
    table = load_cost_table(path)
    lane = report["blocks"]["mac_lane"]
    assert table.node == "28 nm, 1.0 V"
    mac = table.cost("mac_lane.energy_per_mac")
    assert mac.unit == "J" and mac.value == lane["scaled"]["energy_per_op_j"]
    # every synthesized value names the run it comes from, every other one a citation
    assert lane["key"] in mac.source and "Stillmaker" in mac.source
    for name, value, unit, source in CITED_COSTS:
        assert table.cost(name).value == value and table.cost(name).source == source
    assert table.cost("mac_lane.area").unit == "m2"
    # a cycle's energy over a MAC's is the stimulus's MACs per cycle (what mac_scaling.py fits)
    per_cycle = table.cost("mac_lane.energy_per_cycle_180nm").value
    assert per_cycle / table.cost("mac_lane.energy_per_mac_180nm").value == pytest.approx(
        lane["measured_180nm"]["operations_per_cycle"])
    # the SRAM's reads and writes apart (the scaling to EdgeXpert scales them differently)
    ema = report["blocks"]["ema"]["scaled"]
    read, write = (table.cost(f"ema.sram_{part}_energy_per_byte_fetched").value
                   for part in ("read", "write"))
    assert read + write == pytest.approx(ema["sram_energy_per_op_j"])
    assert read > 0 and write > 0
    assert table.cost("mac_lane.fmax").value == pytest.approx(lane["scaled"]["fmax_hz"])
    # a performance model keeps counts apart from costs: energy = sum(count x cost)
    counts = {"mac_lane.energy_per_mac": 1e6, "dram.energy_per_bit.accelergy_lpddr4": 8e3}
    assert table.energy_j(counts) == pytest.approx(1e6 * mac.value + 8e3 * 8e-12)
    with pytest.raises(CostTableError, match="'mac_lane.area' is in m2, not an energy per action"):
        table.energy_j({"mac_lane.area": 1})
    with pytest.raises(CostTableError, match="cost 'nope' is not in the table: accepted "):
        table.cost("nope")


def test_scaling_factors_are_settings_that_scale_the_28nm_figures(cost_table, monkeypatch):
    report, path = cost_table
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(path.parent.parent))  # the fixture's cache
    lane = ["hardware.mac_lane.pairs_per_beat=2", "synth.activity_cycles=200"]
    default = report["blocks"]["mac_lane"]
    measured, scaled = default["measured_180nm"], default["scaled"]
    # the defaults are the derived factors: the numbers are those before they were settings
    s = scale_to_node(28, 1.0)
    assert scaled["fmax_hz"] == measured["fmax_hz"] / s.delay
    assert scaled["area_mm2"] == measured["area_um2"] * s.area * 1e-6
    assert scaled["energy_per_op_j"] == measured["energy_per_op_j"] * s.energy
    assert not report["scaling"]["set_in_config"]
    # a factor given as a setting scales its figure alone, in proportion
    config = load_config(overrides=lane + ["synth.scaling.delay=0.275",
                                           "synth.scaling.energy=0.0173"])
    changed = block_report(BLOCKS["mac_lane"], config)["scaled"]
    assert changed["fmax_hz"] == pytest.approx(scaled["fmax_hz"] * s.delay / 0.275)
    assert changed["energy_per_op_j"] == pytest.approx(scaled["energy_per_op_j"] * 0.0173 / s.energy)
    assert changed["area_mm2"] == scaled["area_mm2"]
    config = load_config(overrides=lane + ["synth.scaling.area=0.04"])
    assert block_report(BLOCKS["mac_lane"], config)["scaled"]["area_mm2"] == pytest.approx(
        scaled["area_mm2"] * 0.04 / s.area)
    # the cost table names a set factor as the setting, and records the factors it applied
    given = node_scaling(config.synth)
    assert given.set_in_config == ("area",) and given.delay == s.delay
    table = build_cost_table({"scaling": given.to_json(), "blocks": {"mac_lane": default}})
    assert "area x0.0400 (synth.scaling.area setting)" in table["costs"]["mac_lane.area"]["source"]
    assert "Stillmaker" in table["costs"]["mac_lane.fmax"]["source"]
    assert table["scaling"] == {"area": 0.04, "delay": s.delay, "energy": s.energy}


@pytest.mark.parametrize("value, message", [
    ("1.5", "synth.scaling.delay = 1.5 is out of range: accepted values 0.0001..1.0, or null "
            "(derived)"),
    ("0", "synth.scaling.delay = 0 is out of range: accepted values 0.0001..1.0, or null "
          "(derived)"),
    ("fast", "synth.scaling.delay = 'fast' is not a number: accepted values 0.0001..1.0, or "
             "null (derived)")])
def test_a_scaling_factor_out_of_range_is_one_clear_line(value, message):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[f"synth.scaling.delay={value}"])
    assert str(info.value) == message


def test_cost_table_prices_every_sram_with_a_cacti_run(cost_table):
    report, path = cost_table
    table = load_cost_table(path)
    # the reference sizes keep the names the table always had, and the configured weight buffer
    config = load_config(overrides=["hardware.mac_lane.pairs_per_beat=2"])
    kinds = list(reference_srams(config))
    assert kinds == ["64KiB", "512KiB", "1MiB", "weight_buffer"] and len(REFERENCE_SRAM_KIB) == 3
    for kind in kinds:
        sram = report["sram"][kind]
        for part, unit in (("read_energy_per_bit", "J/bit"), ("write_energy_per_bit", "J/bit"),
                           ("area", "m2"), ("leakage", "W")):
            cost = table.cost(f"sram.{part}.{kind}")
            # the source is the run: its cache key, inputs and outputs
            assert cost.unit == unit and cost.value > 0 and sram["key"] in cost.source
            assert "0.028 um itrs-lstp 300 K" in cost.source and "bytes" in cost.source
    sizes = [table.cost(f"sram.area.{k}").value for k in ("64KiB", "512KiB", "1MiB")]
    assert sizes == sorted(sizes)
    buffer = report["sram"]["weight_buffer"]["spec"]
    assert (buffer["banks"], buffer["width_bits"], buffer["bits"]) == (4, 256, 262144 * 8)
    # every memory the blocks cut out has its run's figures in the table
    memories = [(name, m) for name, b in report["blocks"].items() for m in b["memories"]]
    assert memories, "the EMA's queues are memories"
    for name, m in memories:
        prefix = f"{name}.{m['name'].replace('.', '_')}"
        read = table.cost(f"{prefix}.sram_energy_per_bit")
        assert read.value == m["sram"]["read_energy_per_bit_j"]
        assert m["sram"]["key"] in read.source
        assert table.cost(f"{prefix}.sram_area").value == m["sram"]["area_m2"]
        assert table.cost(f"{prefix}.sram_write_energy_per_bit").unit == "J/bit"
        assert table.cost(f"{prefix}.sram_leakage").unit == "W"


def _table(**entry):
    return {"schema": SCHEMA, "node": "28 nm",
            "costs": {"x.energy": {"value": 1e-12, "unit": "J", "source": "a run", **entry}}}


@pytest.mark.parametrize("data, message", [
    ([1, 2], "must hold a JSON object, not list"),
    ({**_table(), "schema": "v0"}, "schema 'v0' is not supported: accepted 'edgexpert-costs/2'"),
    ({**_table(), "costs": {}}, "costs must be a non-empty object"),
    (_table(value=-1.0),
     "costs.x.energy.value = -1.0 is out of range: accepted finite numbers >= 0"),
    (_table(value=True), "costs.x.energy.value = True is out of range"),
    (_table(value="1e-12"), "costs.x.energy.value = '1e-12' is out of range"),
    (_table(unit="kWh"), "costs.x.energy.unit = 'kWh' is not known: accepted J, J/bit, m2, Hz, W"),
    (_table(source=" "), "costs.x.energy.source is empty: accepted a synthesis run or a citation"),
    (_table(extra=1), "costs.x.energy has ['extra', 'source', 'unit', 'value']: accepted exactly "
                      "value, unit, source"),
])
def test_malformed_cost_tables_are_one_clear_line(tmp_path, data, message):
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CostTableError) as info:
        load_cost_table(path)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert isinstance(info.value, ConfigError)  # the CLI reports it as a bad input (exit 2)


def test_unreadable_cost_tables(tmp_path):
    with pytest.raises(CostTableError, match="cannot read cost table .*`edgexpert synth --all`"):
        load_cost_table(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CostTableError, match="bad.json is not valid JSON"):
        load_cost_table(bad)
    # the writer refuses what the loader would refuse
    with pytest.raises(CostTableError, match="unit = 'kWh'"):
        write_cost_table(tmp_path / "out.json", _table(unit="kWh"))
    assert not (tmp_path / "out.json").exists()


def test_cost_table_of_a_report_without_power():
    report = {"scaling": scale_to_node(28, 1.0).to_json(), "blocks": {"b": {
        "key": "k1", "parameters": {}, "memories": [], "power_measured": False,
        "measured_180nm": {"node": "osu018", "area_um2": 100.0},
        "scaled": {"area_mm2": 2e-6, "fmax_hz": 1e9}}}}
    costs = build_cost_table(report)["costs"]
    assert costs["b.area"]["value"] == pytest.approx(2e-12)
    assert not any(name.startswith("b.energy") for name in costs)
