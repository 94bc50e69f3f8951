"""The compute model against the accelerator top's cycle file (sim.perf.passes.calibrate_compute,
calibrate_prefill and `edgexpert estimate --calibrate`), on a small hand-written cycle file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgexpert.contracts.config import load_config
from edgexpert.sim.perf.passes import calibrate_compute, calibrate_prefill, compute_cycles

#: the platform's default compute utilization (platform.compute_utilization)
U = load_config().platform.compute_utilization

EDGEXPERT = Path(sys.executable).parent / "edgexpert"


def _pass(index, kind, tokens, macs, busy, wait, compute):
    return {"prompt": 0, "pass": index, "kind": kind, "layers": 2, "tokens": tokens,
            "groups": 3, "macs": macs, "busy": busy, "memory_wait": wait, "compute": compute,
            "beats": 100, "words": 90, "ema_busy": busy // 2}


def cycle_file() -> dict:
    """Two passes on an 8-lane array: a draft of 1,600 MACs in 1,000 cycles (0.2 of the peak)
    and a verification of 12,000 MACs in 3,000 cycles (0.5): 13,600 MACs in 4,000 cycles."""
    passes = [_pass(0, "draft", 1, 1600, 1000, 200, 700),
              _pass(1, "verify", 5, 12000, 3000, 100, 2800)]
    run = {"masks": "naive_sd", "pauses": "none", "cycles": 4000, "memory_wait": 300,
           "compute": 3500, "macs": 13600, "macs_per_cycle": 3.4, "peak_macs_per_cycle": 8,
           "groups": 6, "candidates": 10, "steps": 2, "by_kind": {}, "passes": passes}
    return {"format": "edgexpert-top-cycles", "version": 1, "hardware": {"lanes": 8},
            "latency_cycles": 100, "seed": 1, "runs": {"naive_sd/none": run}}


def test_the_compute_model_against_hand_computed_cycles():
    assert compute_cycles(1600, 8, 0.5) == 400
    result = calibrate_compute(cycle_file(), U)
    assert result["model_utilization"] == U == 0.8
    run = result["runs"]["naive_sd/none"]
    # 13,600 MACs / (4,000 cycles x 8 lanes) = 0.425 of the peak
    assert run["utilization"] == 0.425 and run["macs_per_cycle"] == 3.4
    assert run["by_kind"]["draft"]["utilization"] == 0.2
    assert run["by_kind"]["verify"]["utilization"] == 0.5
    assert run["memory_wait_share"] == 0.075
    # at 0.8 the model wants 13,600 / 6.4 = 2,125 cycles: 46.9 % fewer than measured
    assert run["model_cycles"] == 2125 and run["model_error"] == pytest.approx(-0.4688, abs=1e-4)
    draft, verify = run["passes"]
    assert draft["model_cycles"] == 250 and draft["model_error"] == -0.75
    # with the run's measured 0.425: 1,600 / 3.4 = 471 cycles for the draft (-52.9 %) and
    # 12,000 / 3.4 = 3,529 for the verification (+17.6 %)
    assert draft["measured_u_cycles"] == 471 and verify["measured_u_cycles"] == 3529
    assert run["measured_u_max_abs_error"] == pytest.approx(0.5294, abs=1e-4)


def test_a_pass_without_cycles_is_refused():
    bad = cycle_file()
    bad["runs"]["naive_sd/none"]["passes"][1]["busy"] = 0
    with pytest.raises(ValueError, match="pass 1: no busy cycles"):
        calibrate_compute(bad, U)


def with_prefill() -> dict:
    """The cycle file with a prefill chunk of 4 tokens in 2 layers: 3,400 MACs and 2.5 experts
    fetched per chunk-layer in 1,000 busy cycles (50 waiting on memory)."""
    chunk = {"tokens": 4, "layers": 2, "cycles_per_layer": 1100, "busy_per_layer": 1000,
             "memory_wait_per_layer": 50, "compute_per_layer": 900, "macs_per_layer": 3400,
             "experts_per_layer": 2.5, "groups_per_layer": 3, "replays": 1, "per_layer": []}
    return {**cycle_file(), "prefill": {"none": chunk}}


def test_the_prefill_model_against_hand_computed_cycles():
    result = calibrate_prefill(with_prefill(), model_experts=3.0, utilization=U)
    # the decode run's whole experts: 13,600 MACs / (4,000 cycles x 8 lanes) = 0.425
    assert result["decode_utilization"] == 0.425 and result["peak_macs_per_cycle"] == 8
    chunk = result["modes"]["none"]
    assert chunk["macs_per_cycle"] == 3.4 and chunk["utilization"] == 0.425
    assert chunk["memory_wait_share"] == 0.05
    # at 0.8: 3,400 / 6.4 = 531 cycles, 46.9 % short; at the decode's 0.425: 1,000, exact
    assert chunk["model_cycles"] == 531
    assert chunk["model_error"] == pytest.approx(-0.4688, abs=1e-4)
    assert chunk["decode_u_cycles"] == 1000 and chunk["decode_u_error"] == 0
    # 3 experts in the model against 2.5 fetched: +20 %
    assert chunk["experts_error"] == pytest.approx(0.2)


def test_a_cycle_file_without_a_usable_prefill_entry_is_refused():
    with pytest.raises(ValueError, match="no prefill entry"):
        calibrate_prefill(cycle_file(), model_experts=3.0, utilization=U)
    bad = with_prefill()
    bad["prefill"]["none"]["busy_per_layer"] = 0
    with pytest.raises(ValueError, match="prefill none: no busy cycles"):
        calibrate_prefill(bad, model_experts=3.0, utilization=U)


def _estimate(build: Path, *args):
    return subprocess.run([str(EDGEXPERT), "estimate", "--calibrate", *args],
                          capture_output=True, text=True,
                          env={**os.environ, "EDGEXPERT_BUILD_DIR": str(build)})


def test_estimate_calibrate_reads_the_cycle_file_and_names_the_missing_ema_bench(tmp_path):
    path = tmp_path / "bench" / "top" / "cycles.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(cycle_file()))
    proc = _estimate(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no EMA benchmark at" in proc.stdout
    assert "3.4 MACs per cycle of 8 = utilization 0.425" in proc.stdout
    data = json.loads(_estimate(tmp_path, "--json").stdout)
    assert "ema" not in data and data["top"]["runs"]["naive_sd/none"]["model_cycles"] == 2125
    assert any("no EMA benchmark" in note for note in data["notes"])
    path.write_text(json.dumps(with_prefill()))
    proc = _estimate(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "prefill model vs the top with its PRU" in proc.stdout
    prefill = json.loads(_estimate(tmp_path, "--json").stdout)["top"]["prefill"]
    assert prefill["modes"]["none"]["decode_u_cycles"] == 1000
    assert prefill["modes"]["none"]["model_experts_per_layer"] > 0
    path.write_text(json.dumps({**cycle_file(), "format": "something-else"}))
    proc = _estimate(tmp_path)
    assert proc.returncode == 2
    assert "is not a top cycle file" in proc.stderr and "accepted edgexpert-top-cycles" in proc.stderr


def dram_cycle_file() -> dict:
    """The hand-written cycle file on the LPDDR4X memory at 800 MHz, the bundled hardware's EMA
    (256-bit bus, 256 KiB buffer): the draft memory-bound (100 beats, 1,600 MACs), the
    verification compute-bound (100 beats, 12,000 MACs on 8 lanes)."""
    from edgexpert.contracts.config import load_config
    from edgexpert.sim.perf.ema_model import bench_memory
    out = cycle_file()
    out["memory"] = bench_memory("lpddr4x", load_config().platform)
    out["hardware"] = {"lanes": 4, "ema": {"data_width": 256, "outstanding": 48,
                                           "buffer_bytes": 262144, "buffer_banks": 4}}
    return out


def test_the_pass_model_against_the_top_on_dram():
    from edgexpert.contracts.config import load_config
    from edgexpert.contracts.weight_layout import WeightLayout
    from edgexpert.sim.perf.passes import calibrate_dram_passes
    layout = WeightLayout.for_model(load_config().model)
    result = calibrate_dram_passes(dram_cycle_file(), layout, 0.75, U)
    draft, verify = result["runs"]["naive_sd/none"]["passes"]
    # the draft's 3,200 bytes take at least 3,200 / 20 = 160 cycles of 16 GB/s at 800 MHz, a
    # little more at the DRAM's efficiency; its 1,600 MACs only 1,600 / 6.4 = 250 at 0.8 of 8
    # lanes: one tile, so the model's time is the longer plus the shorter
    assert 160 < draft["fetch_cycles"] < 160 / 0.85
    assert draft["compute_cycles"] == 250
    assert draft["model_cycles"] == draft["fetch_cycles"] + 250
    assert draft["error"] == pytest.approx(draft["model_cycles"] / 1000 - 1, abs=1e-3)
    assert verify["compute_cycles"] == 12000 / 6.4
    by_kind = result["runs"]["naive_sd/none"]["by_kind"]
    assert by_kind["verify"]["memory_wait_share"] == pytest.approx(100 / 3000, abs=1e-4)
    with pytest.raises(ValueError, match="accepted a cycle file of a DRAM memory"):
        calibrate_dram_passes(cycle_file(), layout, 0.75, U)


def test_the_prefill_chunk_against_the_top_on_dram():
    """Two chunk-layers of 4 tokens, each 100 beats and 12,800 MACs: compute-bound in the model
    (12,800 / (8 x 0.8) = 2,000 cycles against at most 188 of fetch), one tile."""
    from edgexpert.contracts.config import load_config
    from edgexpert.contracts.weight_layout import WeightLayout
    from edgexpert.sim.perf.passes import calibrate_dram_passes
    layer = {"beats": 100, "macs": 12800, "memory_wait": 25, "compute": 2300}
    chunk = {**with_prefill()["prefill"]["none"], "per_layer": [
        {**layer, "layer": 0, "busy": 2500}, {**layer, "layer": 1, "busy": 2000}]}
    layout = WeightLayout.for_model(load_config().model)
    result = calibrate_dram_passes({**dram_cycle_file(), "prefill": {"none": chunk}}, layout,
                                   0.75, U)
    out = result["prefill"]["none"]
    first, second = out["per_layer"]
    assert first["compute_cycles"] == 2000 and 160 < first["fetch_cycles"] < 160 / 0.85
    assert first["model_cycles"] == 2000 + first["fetch_cycles"] == second["model_cycles"]
    # (the error from the unrounded model: within half a cycle of the rounded one)
    assert first["error"] == pytest.approx(first["model_cycles"] / 2500 - 1, abs=5e-4)
    assert second["error"] == pytest.approx(second["model_cycles"] / 2000 - 1, abs=5e-4)
    # the chunk: the layers' sums, 4,500 busy cycles, 50 of them waiting on memory; 25,600
    # MACs in 4,500 cycles of 8 lanes = 0.7111 of the peak
    assert out["busy"] == 4500 and out["model_cycles"] == 2 * first["model_cycles"]
    assert out["error"] == pytest.approx(out["model_cycles"] / 4500 - 1, abs=1e-4)
    assert out["memory_wait_share"] == pytest.approx(50 / 4500, abs=1e-4)
    assert out["utilization"] == pytest.approx(0.7111, abs=1e-4)
    assert out["max_abs_layer_error"] == max(abs(first["error"]), abs(second["error"]))


def test_the_cycle_file_gives_the_roofline_ratio_and_the_savings_against_whole_experts():
    """cycles per AXI beat (1 at the bus's roofline), MACs per cycle against both arrays'
    lanes x candidates, and per masked run the cycles saved per beat saved against the whole
    experts' run of the same pauses; by hand."""
    from edgexpert.contracts.cycles import cycle_file as make_cycle_file

    def run(cycles, beats, macs):
        return {"cycles": cycles, "beats": beats, "words": beats + 200, "macs": macs,
                "macs_per_cycle": round(macs / cycles, 3), "memory_wait": 10, "compute": 90,
                "descriptor_wait": 0, "feedback_wait": 0, "dcu_jobs": 0, "groups": 2,
                "candidates": 3, "steps": 1, "memory": {"memory": "latency"}, "passes": []}
    report = {"memory": {"memory": "latency"}, "latency": 100, "seed": 1, "tests": {
        "trace_step/naive_sd/none": run(1200, 1000, 25600),
        "trace_step/edgexpert/none": run(1000, 800, 19200),
        "trace_step/dcu/random": run(1500, 800, 19200)}}
    out = make_cycle_file(report, {"lanes": 8, "candidates": 4, "tokens": 8, "ema": {}})
    whole = out["runs"]["naive_sd/none"]
    assert whole["cycles_per_beat"] == 1.2 and whole["peak_macs_per_cycle"] == 64
    assert whole["words"] == 1200 and whole["words_per_beat"] == 1.2
    assert out["runs"]["edgexpert/none"]["cycles_per_word"] == 1.0
    assert whole["peak_share"] == round(25600 / 1200 / 64, 4)
    # 200 beats and 200 cycles saved: every saved beat a saved cycle; the paused DCU run has
    # no whole-expert run of its pauses to compare with
    assert out["against_whole_experts"] == {"edgexpert/none": {
        "beats_saved": 200, "cycles_saved": 200, "cycles_saved_per_beat_saved": 1.0}}
