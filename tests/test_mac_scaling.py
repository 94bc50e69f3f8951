"""The engine's MAC array scaled to EdgeXpert's 8K MACs (synth/mac_scaling.py): the arithmetic on
a made-up cost table whose fits come out round by hand."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgexpert.synth.costs import SCHEMA, CostTableError, load_table_data
from edgexpert.synth.mac_scaling import EDGEXPERT, fit_line, scale_to_edgexpert, scaling_table
from edgexpert.synth.scaling import scale_to_node

F = scale_to_node(28, 1.0).energy   # the logic's 180 nm -> 28 nm energy factor at the table's 1.0 V
#: the made-up points' peak MACs per cycle (2 arrays x lanes x 4 candidates) and a residual
#: pattern orthogonal to both a constant and them ((1, 1, 1) x (128, 256, 512) / 128): least
#: squares recovers the line under it exactly, and s2 = 14 e^2 over the one degree of freedom
PEAKS, PATTERN = (128, 256, 512), (2, -3, 1)
SXX = sum((x - sum(PEAKS) / 3) ** 2 for x in PEAKS)


def _error_at(x, e):
    """The standard error at x of a line fitted to PEAKS with residuals e x PATTERN."""
    return math.sqrt(14 * e * e * (1 / 3 + (x - sum(PEAKS) / 3) ** 2 / SXX))


def _cost(value, unit="J", source="made up"):
    return {"value": value, "unit": unit, "source": source}


def _engine(block, lanes, logic, srams, per_cycle_180, macs_per_cycle, reads, writes, fmax):
    """A made-up engine point: logic area and per-memory SRAM areas (m2), logic energy per cycle
    at 180 nm, its stimulus's MACs per cycle, SRAM read and write energy per MAC at 28 nm."""
    source = f"synth {block} (candidates=4, lanes={lanes}, word_bits={4 * lanes})"
    costs = {f"{block}.area": _cost(logic + sum(srams.values()), "m2"),
             f"{block}.area_180nm": _cost(logic / 0.02, "m2", source),
             f"{block}.fmax": _cost(fmax, "Hz"),
             f"{block}.energy_per_mac": _cost(per_cycle_180 * F / macs_per_cycle + reads + writes),
             f"{block}.energy_per_mac_180nm": _cost(per_cycle_180 / macs_per_cycle),
             f"{block}.energy_per_cycle_180nm": _cost(per_cycle_180),
             f"{block}.sram_read_energy_per_mac": _cost(reads),
             f"{block}.sram_write_energy_per_mac": _cost(writes)}
    costs.update({f"{block}.{name}.sram_area": _cost(area, "m2") for name, area in srams.items()})
    return costs


def made_up_table(blocks=("engine_l16", "engine_l32", "engine")) -> dict:
    # logic area 0.1 mm2 + 1562.5 um2 per MAC (0.3 / 0.5 / 0.9 mm2) + 0.01 mm2 x PATTERN;
    # memories: `x` the same at every point (fixed, 0.2 mm2), `acc` grows (not linearly): 0.6 mm2
    # over the smallest point's 128 MACs, 4687.5 um2 per MAC;
    # logic energy per cycle at 180 nm 0.64 nJ + 5 pJ per MAC (1.28 / 1.92 / 3.2 nJ) + 0.01 nJ x
    # PATTERN, at 32 / 64 / 96 MACs done per cycle (the largest point's stimulus underuses it, so
    # "an idle lane free" fits worse); SRAM at the smallest point: reads 6 pJ x 32 MACs per cycle
    # over 128 MACs of the array, 1.5 pJ each per cycle; writes 4 pJ per MAC done
    points = {"engine_l16": (16, 0.6e-6, 32, 6e-12, 4e-12, 4.7e8),
              "engine_l32": (32, 1.5e-6, 64, 20e-12, 9e-12, 4.6e8),
              "engine": (64, 4.0e-6, 96, 30e-12, 9e-12, 4.5e8)}
    costs = {}
    for (block, (lanes, acc, done, reads, writes, fmax)), peak, bump in zip(
            points.items(), PEAKS, PATTERN):
        if block in blocks:
            costs.update(_engine(block, lanes, 0.1e-6 + peak * 1562.5e-12 + bump * 0.01e-6,
                                 {"acc": acc, "x": 0.2e-6},
                                 0.64e-9 + peak * 5e-12 + bump * 0.01e-9, done, reads, writes,
                                 fmax))
    costs["sram.area.512KiB"] = _cost(0.9e-6, "m2")
    costs["sram.leakage.512KiB"] = _cost(5e-5, "W")
    return {"schema": SCHEMA, "node": "28 nm, 1.0 V",
            "scaling": {"area": 0.02, "delay": 0.1375, "energy": F}, "costs": costs}


def test_a_known_line_is_recovered_with_its_standard_error():
    e = 0.5
    fit = fit_line(PEAKS, [3 + 0.25 * x + e * p for x, p in zip(PEAKS, PATTERN)])
    assert fit.fixed == pytest.approx(3) and fit.per_mac == pytest.approx(0.25)
    assert fit.residuals == pytest.approx([e * p for p in PATTERN])
    assert fit.per_mac_error == pytest.approx(math.sqrt(14 * e * e / SXX))
    assert fit.error_at(8192) == pytest.approx(_error_at(8192, e))
    # on the line exactly: no error; two points: a line through both, no error estimate
    assert fit_line(PEAKS, [3 + 0.25 * x for x in PEAKS]).per_mac_error == pytest.approx(0)
    two = fit_line(PEAKS[:2], [1, 2])
    assert two.per_mac == pytest.approx(1 / 128) and two.per_mac_error is None
    assert two.error_at(8192) is None
    with pytest.raises(CostTableError, match="a line needs two points at least: accepted 1"):
        fit_line([128], [1.0])
    with pytest.raises(CostTableError, match="the same MAC count"):
        fit_line([128, 128], [1.0, 2.0])


def test_the_fits_and_the_8k_point_come_out_as_computed_by_hand():
    result = scale_to_edgexpert(load_table_data(made_up_table(), "made up"), utilization=0.5)
    small = result["points"]["engine_l16"]
    assert [p["peak_macs"] for p in result["points"].values()] == list(PEAKS)
    assert small["macs_per_cycle"] == pytest.approx(32)
    assert small["logic_area_m2"] == pytest.approx(0.3e-6 + 0.02e-6)
    assert result["fixed_memories"] == ["x"]
    fits = result["fits"]
    assert fits["logic_area_m2"]["fixed"] == pytest.approx(0.1e-6)
    assert fits["logic_area_m2"]["per_mac"] == pytest.approx(1562.5e-12)
    assert fits["logic_area_m2"]["per_mac_error"] == pytest.approx(
        math.sqrt(14 * 0.01e-6 ** 2 / SXX))
    assert fits["logic_energy_j"]["fixed"] == pytest.approx(0.64e-9 * F)
    assert fits["logic_energy_j"]["per_mac"] == pytest.approx(5e-12 * F)
    # the residuals decide: energy follows the array's size, not the MACs done
    rms = result["readings_relative_rms"]
    assert rms["busy_or_idle_alike"] <= 0.5 * rms["idle_lane_free"]
    assert result["reading_supported"] == "busy_or_idle_alike"
    ours = result["ours"]
    # 8192 MACs: 0.1 + 12.8 mm2 logic; 0.2 + 38.4 mm2 engine memories + the 0.9 mm2 shared SRAM
    assert ours["logic_area_m2"] == pytest.approx(12.9e-6)
    assert ours["logic_area_error_m2"] == pytest.approx(_error_at(8192, 0.01e-6))
    assert ours["sram_area_m2"] == pytest.approx(39.5e-6)
    assert ours["area_m2"] == pytest.approx(52.4e-6)
    # at 800 MHz: logic (0.64 nJ + 8192 x 5 pJ) x F per cycle; SRAM reads 8192 x 1.5 pJ, writes
    # 4096 MACs busy x 4 pJ, the shared SRAM's leakage
    assert ours["logic_power_w"] == pytest.approx(41.6e-9 * F * 800e6)
    assert ours["power_error_w"] == pytest.approx(_error_at(8192, 0.01e-9) * F * 800e6)
    assert ours["sram_power_w"] == pytest.approx((12.288e-9 + 16.384e-9) * 800e6 + 5e-5)
    assert ours["power_without_engine_sram_w"] == pytest.approx(41.6e-9 * F * 800e6 + 5e-5)
    assert ours["energy_per_mac_j"] == pytest.approx(ours["power_w"] / (4096 * 800e6))
    # the fit's error carried to the energy per MAC done: the power's over the MACs done
    assert ours["energy_per_mac_error_j"] == pytest.approx(ours["power_error_w"] / (4096 * 800e6))
    assert ours["fmax_hz"] == 4.5e8
    assert result["ratio"]["area_m2"] == pytest.approx(52.4 / 9.3)
    assert result["edgexpert"]["energy_per_mac_j"] == pytest.approx(1.52 / (8192 * 800e6))
    assert EDGEXPERT["macs"] == 8192 and EDGEXPERT["power_w"] == 1.52
    table = scaling_table(result)
    assert "| at 8,192 MACs, 800 MHz, utilization 0.5 |" in table
    assert "| total area | 52.40 mm2 | 9.3 mm2 | 5.63 |" in table
    assert "The points support a lane busy or idle alike (its residuals' rms the smaller by 2x" \
        in table
    # the other reading at 8K, with its own line's error at the MACs done
    free = fits["logic_energy_per_mac_done_j"]
    assert ours["energy_per_mac_idle_free_j"] == pytest.approx(
        ours["power_idle_free_w"] / (4096 * 800e6))
    assert ours["energy_per_mac_idle_free_error_j"] > 0
    assert free["per_mac_error"] is not None


def test_residuals_alike_leave_both_readings_standing():
    # the MACs done proportional to the array (a quarter of it): both lines fit alike
    table = made_up_table()
    for block, peak in zip(("engine_l16", "engine_l32", "engine"), PEAKS):
        per_cycle = table["costs"][f"{block}.energy_per_cycle_180nm"]["value"]
        table["costs"][f"{block}.energy_per_mac_180nm"]["value"] = per_cycle / (peak / 4)
    result = scale_to_edgexpert(load_table_data(table, "t"))
    assert result["reading_supported"] == "both"
    assert "The residuals do not decide between the two readings" in scaling_table(result)


def test_two_points_fit_without_an_error_and_fewer_are_refused_in_one_line():
    two = scale_to_edgexpert(load_table_data(made_up_table(("engine_l16", "engine")), "t"))
    assert two["ours"]["energy_per_mac_error_j"] is None
    assert "(none with two points)" in scaling_table(two)
    missing = (r"^the cost table holds 1 of the engine's points \(engine\); a fit needs two at "
               r"least, missing engine_l16, engine_l32, engine_l128: run `edgexpert synth --all "
               r"--blocks engine_l16,engine_l32,engine` \(engine_l128 takes hours\)$")
    with pytest.raises(CostTableError, match=missing):
        scale_to_edgexpert(load_table_data(made_up_table(("engine",)), "t"))
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
    path.write_text(json.dumps(made_up_table(("engine",))))
    proc = subprocess.run([str(edgexpert), "synth", "--scale", "--costs", str(path)],
                          capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "missing engine_l16, engine_l32, engine_l128: run `edgexpert synth --all --blocks " \
        "engine_l16,engine_l32,engine`" in proc.stderr


def test_the_report_page_gets_the_scaling_or_says_what_to_run(tmp_path):
    from edgexpert.cli.report import _scaling
    (tmp_path / "synth").mkdir()
    (tmp_path / "synth" / "costs.json").write_text(json.dumps(made_up_table(("engine",))))
    lines = _scaling(tmp_path)
    assert lines[0] == "## Against EdgeXpert at 8K MACs (`edgexpert synth --scale`)"
    assert lines[2].startswith("Not measured yet: the cost table holds 1 of the engine's points")
    (tmp_path / "synth" / "costs.json").write_text(json.dumps(made_up_table()))
    assert "| total area | 52.40 mm2 | 9.3 mm2 | 5.63 |" in "\n".join(_scaling(tmp_path))


def test_points_synthesized_with_and_without_clock_gates_are_not_fitted_together():
    table = made_up_table()
    assert scale_to_edgexpert(load_table_data(table, "made up"))["clock_gated"] is False
    area = table["costs"]["engine.area_180nm"]
    area["source"] = "synth engine (candidates=4, lanes=64; 1309 clock gates)"
    with pytest.raises(CostTableError, match=r"differ in clock gating in the cost table \(engine "
                                             r"gated, the others not\)"):
        scale_to_edgexpert(load_table_data(table, "made up"))
    for block in ("engine_l16", "engine_l32"):
        source = table["costs"][f"{block}.area_180nm"]["source"]
        table["costs"][f"{block}.area_180nm"]["source"] = source[:-1] + "; 300 clock gates)"
    gated = scale_to_edgexpert(load_table_data(table, "made up"))
    assert gated["clock_gated"] is True
    assert scaling_table(gated).endswith("with clock gates (synth.clock_gating).")
