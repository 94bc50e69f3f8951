"""28 nm scaling, the SRAM model and the cost table the performance model reads."""

import json
import math

import pytest

from edgexpert.contracts.config import ConfigError, load_config
from edgexpert.blocks import BLOCKS
from edgexpert.synth.costs import (CITED_COSTS, SCHEMA, CostTableError, build_cost_table,
                                   load_cost_table, write_cost_table)
from edgexpert.synth.report import write_reports
from edgexpert.synth.scaling import scale_to_28nm, sram_cost


def test_28nm_factors_lie_between_the_32nm_and_20nm_rows():
    s = scale_to_28nm(1.0)
    for quantity in ("area", "delay", "energy"):
        lo, hi = sorted((s.rows["32nm"][quantity], s.rows["20nm"][quantity]))
        assert lo < getattr(s, quantity) < hi
        # geometric interpolation: log-linear in feature size
        assert math.log(getattr(s, quantity)) == pytest.approx(
            (1 - s.weight_20nm) * math.log(s.rows["32nm"][quantity])
            + s.weight_20nm * math.log(s.rows["20nm"][quantity]))
    assert s.weight_20nm == pytest.approx(math.log(32 / 28) / math.log(32 / 20))
    # the values docs/synthesis.md quotes
    assert (round(s.area, 4), round(s.delay, 3), round(s.energy, 4)) == (0.02, 0.137, 0.0173)
    # energy per operation falls with the supply voltage, roughly as V^2
    low = scale_to_28nm(0.9)
    assert 0.7 < low.energy / s.energy < 0.85 and low.area == s.area


def test_sram_model_reproduces_cacti_and_interpolates():
    kib = 8 * 1024
    for kbytes, energy, area in ((64, 0.063e-12, 0.086e-6), (512, 0.236e-12, 0.87e-6),
                                 (1024, 0.379e-12, 1.81e-6)):
        cost = sram_cost(kbytes * kib)
        assert cost.read_energy_per_bit_j == pytest.approx(energy)
        assert cost.area_m2 == pytest.approx(area)
    sizes = [16, 1024, 64 * kib, 100 * kib, 512 * kib, 700 * kib, 1024 * kib, 4096 * kib]
    costs = [sram_cost(bits) for bits in sizes]
    assert all(a.area_m2 < b.area_m2 for a, b in zip(costs, costs[1:]))
    assert all(a.read_energy_per_bit_j <= b.read_energy_per_bit_j for a, b in zip(costs, costs[1:]))
    assert "below 64 KiB" in costs[0].rule and "above 1 MiB" in costs[-1].rule
    assert "between the 64 KiB and 512 KiB" in costs[3].rule
    with pytest.raises(ValueError, match="at least one bit"):
        sram_cost(0)


@pytest.fixture(scope="module")
def cost_table(tmp_path_factory):
    """The real flow on a small lane: report, cost table, loaded back."""
    build = tmp_path_factory.mktemp("build")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EDGEXPERT_BUILD_DIR", str(build))
        config = load_config(overrides=["hardware.mac_lane.pairs_per_beat=2",
                                        "synth.activity_cycles=200"])
        report = write_reports(BLOCKS.values(), config)
    return report, build / "synth" / "costs.json"


def test_cost_table_loads_and_the_performance_model_can_use_it(cost_table):
    report, path = cost_table
    table = load_cost_table(path)
    lane = report["blocks"]["mac_lane"]
    assert table.node == "28 nm, 1.0 V"
    mac = table.cost("mac_lane.energy_per_mac")
    assert mac.unit == "J" and mac.value == lane["scaled_28nm"]["energy_per_op_j"]
    # every synthesized value names the run it comes from, every other one a citation
    assert lane["key"] in mac.source and "Stillmaker" in mac.source
    for name, value, unit, source in CITED_COSTS:
        assert table.cost(name).value == value and table.cost(name).source == source
    assert table.cost("mac_lane.area").unit == "m2"
    assert table.cost("mac_lane.fmax").value == pytest.approx(lane["scaled_28nm"]["fmax_hz"])
    # a performance model keeps counts apart from costs: energy = sum(count x cost)
    counts = {"mac_lane.energy_per_mac": 1e6, "dram.energy_per_bit.accelergy_lpddr4": 8e3}
    assert table.energy_j(counts) == pytest.approx(1e6 * mac.value + 8e3 * 8e-12)
    with pytest.raises(CostTableError, match="'mac_lane.area' is in m2, not an energy per action"):
        table.energy_j({"mac_lane.area": 1})
    with pytest.raises(CostTableError, match="cost 'nope' is not in the table: accepted "):
        table.cost("nope")


def _table(**entry):
    return {"schema": SCHEMA, "node": "28 nm",
            "costs": {"x.energy": {"value": 1e-12, "unit": "J", "source": "a run", **entry}}}


@pytest.mark.parametrize("data, message", [
    ([1, 2], "must hold a JSON object, not list"),
    ({**_table(), "schema": "v0"}, "schema 'v0' is not supported: accepted 'edgexpert-costs/1'"),
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
    report = {"scaling": scale_to_28nm(1.0).to_json(), "blocks": {"b": {
        "key": "k1", "parameters": {}, "memories": [], "power_measured": False,
        "measured_180nm": {"node": "osu018", "area_um2": 100.0},
        "scaled_28nm": {"area_mm2": 2e-6, "fmax_hz": 1e9}}}}
    costs = build_cost_table(report)["costs"]
    assert costs["b.area"]["value"] == pytest.approx(2e-12)
    assert not any(name.startswith("b.energy") for name in costs)
