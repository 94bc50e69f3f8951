"""The engine's MAC array scaled to EdgeXpert's 8K MACs (synth/mac_scaling.py): the arithmetic on
a made-up cost table whose fits come out round by hand."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgexpert.synth.costs import SCHEMA, CostTableError, load_table_data
from edgexpert.synth.mac_scaling import EDGEXPERT, scale_to_edgexpert, scaling_table
from edgexpert.synth.scaling import scale_to_node

F = scale_to_node(28, 1.0).energy   # the logic's 180 nm -> 28 nm energy factor at the table's 1.0 V


def _cost(value, unit="J", source="made up"):
    return {"value": value, "unit": unit, "source": source}


def _engine(block, lanes, logic, srams, per_mac_180, macs_per_cycle, reads, writes, fmax):
    """A made-up engine point: logic area and per-memory SRAM areas (m2), logic energy per MAC
    at 180 nm, its stimulus's MACs per cycle, SRAM read and write energy per MAC at 28 nm."""
    costs = {f"{block}.area": _cost(logic + sum(srams.values()), "m2"),
             f"{block}.area_180nm": _cost(logic / 0.02, "m2", f"synth {block} (lanes={lanes})"),
             f"{block}.fmax": _cost(fmax, "Hz"),
             f"{block}.energy_per_mac_180nm": _cost(per_mac_180),
             f"{block}.energy_per_cycle_180nm": _cost(per_mac_180 * macs_per_cycle),
             f"{block}.sram_read_energy_per_mac": _cost(reads),
             f"{block}.sram_write_energy_per_mac": _cost(writes)}
    costs.update({f"{block}.{name}.sram_area": _cost(area, "m2") for name, area in srams.items()})
    return costs


def made_up_table(with_large=True) -> dict:
    # logic 0.3 / 0.5 mm2 at 128 / 256 peak MACs: 0.1 mm2 fixed + 1562.5 um2 per MAC;
    # memories: `x` the same at both (fixed, 0.2 mm2), `acc` grows (not linearly): 0.6 mm2 over
    # the smaller point's 128 MACs, 4687.5 um2 per MAC;
    # logic 40 pJ x 32 MACs / 30 pJ x 64 MACs per cycle at 180 nm: 1.28 / 1.92 nJ per cycle,
    # 0.64 nJ + 5 pJ per MAC of the array (x F); SRAM at the smaller point: reads 6 pJ x 32 MACs
    # per cycle over 128 MACs of the array, 1.5 pJ each per cycle; writes 4 pJ per MAC done
    costs = _engine("engine", 64, 0.3e-6, {"acc": 0.6e-6, "x": 0.2e-6}, 40e-12, 32, 6e-12, 4e-12,
                    4.7e8)
    if with_large:
        costs.update(_engine("engine_l128", 128, 0.5e-6, {"acc": 1.5e-6, "x": 0.2e-6}, 30e-12,
                             64, 20e-12, 9e-12, 4.5e8))
    costs["sram.area.512KiB"] = _cost(0.9e-6, "m2")
    costs["sram.leakage.512KiB"] = _cost(5e-5, "W")
    return {"schema": SCHEMA, "node": "28 nm, 1.0 V",
            "scaling": {"area": 0.02, "delay": 0.1375, "energy": F}, "costs": costs}


def test_the_fits_and_the_8k_point_come_out_as_computed_by_hand():
    result = scale_to_edgexpert(load_table_data(made_up_table(), "made up"), utilization=0.5)
    small = result["points"]["engine"]
    assert small["peak_macs"] == 128 and small["macs_per_cycle"] == pytest.approx(32)
    assert small["logic_area_m2"] == pytest.approx(0.3e-6)
    assert result["fixed_memories"] == ["x"]
    fits = result["fits"]
    assert fits["logic_area_m2"] == pytest.approx({"fixed": 0.1e-6, "per_mac": 1562.5e-12})
    assert fits["engine_sram_area_m2"] == pytest.approx({"fixed": 0.2e-6, "per_mac": 4687.5e-12})
    assert fits["logic_energy_j"] == pytest.approx({"fixed": 0.64e-9 * F, "per_mac": 5e-12 * F})
    assert fits["sram_read_energy_j"] == pytest.approx({"fixed": 0, "per_mac": 1.5e-12})
    assert fits["sram_write_energy_j"] == pytest.approx({"fixed": 0, "per_mac": 4e-12})
    ours = result["ours"]
    # 8192 MACs: 0.1 + 12.8 mm2 logic; 0.2 + 38.4 mm2 engine memories + the 0.9 mm2 shared SRAM
    assert ours["logic_area_m2"] == pytest.approx(12.9e-6)
    assert ours["sram_area_m2"] == pytest.approx(39.5e-6)
    assert ours["area_m2"] == pytest.approx(52.4e-6)
    # at 800 MHz: logic (0.64 nJ + 8192 x 5 pJ) x F per cycle; SRAM reads 8192 x 1.5 pJ, writes
    # 4096 MACs busy x 4 pJ, the shared SRAM's leakage
    assert ours["logic_power_w"] == pytest.approx(41.6e-9 * F * 800e6)
    assert ours["sram_power_w"] == pytest.approx((12.288e-9 + 16.384e-9) * 800e6 + 5e-5)
    assert ours["power_without_engine_sram_w"] == pytest.approx(41.6e-9 * F * 800e6 + 5e-5)
    # an idle lane free: (1.92 - 1.28) nJ over 32 more MACs done = 20 pJ per MAC done, 0.64 nJ
    # fixed; 4096 MACs done per cycle
    assert fits["logic_energy_per_mac_done_j"] == pytest.approx({"fixed": 0.64e-9 * F,
                                                                 "per_mac": 20e-12 * F})
    assert ours["logic_power_idle_free_w"] == pytest.approx(82.56e-9 * F * 800e6)
    assert ours["energy_per_mac_j"] == pytest.approx(ours["power_w"] / (4096 * 800e6))
    assert ours["fmax_hz"] == 4.5e8
    assert result["ratio"]["area_m2"] == pytest.approx(52.4 / 9.3)
    assert result["edgexpert"]["energy_per_mac_j"] == pytest.approx(1.52 / (8192 * 800e6))
    assert EDGEXPERT["macs"] == 8192 and EDGEXPERT["power_w"] == 1.52
    table = scaling_table(result)
    assert "| at 8,192 MACs, 800 MHz, utilization 0.5 |" in table
    assert "| total area | 52.40 mm2 | 9.3 mm2 | 5.63 |" in table


def test_missing_point_or_bad_utilization_is_one_clear_line():
    missing = r"^the cost table has no 'engine_l128': run `edgexpert synth --all` \(or `--all "
    with pytest.raises(CostTableError, match=missing + "--blocks engine,engine_l128`"):
        scale_to_edgexpert(load_table_data(made_up_table(with_large=False), "t"))
    with pytest.raises(CostTableError, match=r"utilization 0 is out of range: accepted 0 < u <= 1"):
        scale_to_edgexpert(load_table_data(made_up_table(), "t"), utilization=0)


def test_the_command_prints_the_table_and_names_what_to_run(tmp_path):
    edgexpert = Path(sys.executable).parent / "edgexpert"
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(made_up_table()))
    proc = subprocess.run([str(edgexpert), "synth", "--scale", "--costs", str(path), "--json"],
                          capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ours"]["area_m2"] == pytest.approx(52.4e-6)
    path.write_text(json.dumps(made_up_table(with_large=False)))
    proc = subprocess.run([str(edgexpert), "synth", "--scale", "--costs", str(path)],
                          capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "run `edgexpert synth --all` (or `--all --blocks engine,engine_l128`, these two only) " \
        "first" in proc.stderr


def test_the_report_page_gets_the_scaling_or_says_what_to_run(tmp_path):
    from edgexpert.cli.report import _scaling
    (tmp_path / "synth").mkdir()
    (tmp_path / "synth" / "costs.json").write_text(json.dumps(made_up_table(with_large=False)))
    lines = _scaling(tmp_path)
    assert lines[0] == "## Against EdgeXpert at 8K MACs (`edgexpert synth --scale`)"
    assert lines[2].startswith("Not measured yet: the cost table has no 'engine_l128': run ")
    (tmp_path / "synth" / "costs.json").write_text(json.dumps(made_up_table()))
    assert "| total area | 52.40 mm2 | 9.3 mm2 | 5.63 |" in "\n".join(_scaling(tmp_path))


def test_points_synthesized_with_and_without_clock_gates_are_not_fitted_together():
    table = made_up_table()
    assert scale_to_edgexpert(load_table_data(table, "made up"))["clock_gated"] is False
    area = table["costs"]["engine_l128.area_180nm"]
    area["source"] = "synth engine_l128 (lanes=128; 1564 clock gates)"
    with pytest.raises(CostTableError, match="differ in clock gating"):
        scale_to_edgexpert(load_table_data(table, "made up"))
    table["costs"]["engine.area_180nm"]["source"] = "synth engine (lanes=64; 1309 clock gates)"
    gated = scale_to_edgexpert(load_table_data(table, "made up"))
    assert gated["clock_gated"] is True
    assert scaling_table(gated).endswith("with clock gates (synth.clock_gating).")
