"""`edgexpert report`: the page gathers what build/ holds and names the command for what it
does not."""

import json
import os
import subprocess
import sys
from pathlib import Path

EDGEXPERT = Path(sys.executable).parent / "edgexpert"


def report(build: Path) -> str:
    proc = subprocess.run([str(EDGEXPERT), "report"], capture_output=True, text=True,
                          env={**os.environ, "EDGEXPERT_BUILD_DIR": str(build)})
    assert proc.returncode == 0, proc.stderr
    return (build / "report" / "report.md").read_text()


def test_an_empty_build_names_the_commands_and_still_estimates(tmp_path):
    page = report(tmp_path)
    for command in ("edgexpert synth --all", "edgexpert bench ema", "edgexpert compare",
                    "edgexpert sweep --grid"):
        assert f"Not measured yet: run `{command}" in page
    # the estimate runs whatever build/ holds: every report model, synthetic routing
    assert "| qwen3-30b-a3b | edgexpert | synthetic |" in page
    assert "| bundled | ar | synthetic |" in page
    assert (tmp_path / "report" / "estimate.png").read_bytes().startswith(b"\x89PNG")
    # the sensitivity: break-even per model and policy, the validation, its plot
    assert "| qwen3-30b-a3b | naive_sd | 4.30 |" in page and "edgexpert_qwen3_experts" in page
    assert (tmp_path / "report" / "sensitivity.png").read_bytes().startswith(b"\x89PNG")


def test_measured_policies_are_tabled_and_priced_as_traces(tmp_path):
    ar = {"tokens": 10, "steps": 10, "tokens_per_step": 1.0, "passes_per_token": 1.0,
          "total_bytes_per_token": 1_900_000, "expert_bytes_per_token": 305_152,
          "nonexpert_bytes_per_token": 1_095_874, "kv_bytes_per_token": 500_000,
          "top1_agreement": 1.0, "ppl_ratio": 1.0,
          "pass_kinds": {"ar": {"runs_per_step": 1.0, "tokens": 1.0, "context": 100.0,
                                "expert_bytes": 305_152.0}}}
    (tmp_path / "compare").mkdir()
    (tmp_path / "compare" / "compare.json").write_text(json.dumps(
        {"policies": {"ar": ar}, "prompts": 8, "windows": 8}))
    page = report(tmp_path)
    assert "| ar | 1.00 | 1.00 | 1,900,000 | 305,152 | 1,095,874 | 500,000 | 1.000 | 1.000 |" in page
    assert "| bundled | ar | trace |" in page and "| bundled | naive_sd | synthetic |" in page


def _top_summary() -> dict:
    """A `bench top` summary of one run (the keys the report reads)."""
    run = {"cycles": 4000, "beats": 2000, "cycles_per_beat": 2.0, "macs_per_cycle": 3.4,
           "peak_share": 0.425, "memory_wait": 300}
    return {"block": "top", "seed": 20261129, "hardware": {"lanes": 8},
            "memory": {"memory": "latency"}, "runs": {"naive_sd/none": run},
            "prefill": {"none": {"tokens": 16, "cycles_per_layer": 23054.0,
                                 "macs_per_cycle": 107.8, "experts_per_layer": 12.5}}}


def _cycle_file() -> dict:
    """One verification pass of 13,600 MACs in 4,000 cycles on an 8-lane array."""
    p = {"prompt": 0, "pass": 0, "kind": "verify", "tokens": 5, "macs": 13600, "busy": 4000,
         "memory_wait": 300, "compute": 3500}
    run = {"cycles": 4000, "macs": 13600, "memory_wait": 300, "compute": 3500,
           "peak_macs_per_cycle": 8, "passes": [p]}
    return {"format": "edgexpert-top-cycles", "version": 1, "runs": {"naive_sd/none": run}}


def _dcu_summary() -> dict:
    row = {"jobs": 4, "dcu_cycles_mean": 150.0, "dcu_cycles_worst": 160, "ema_beats_mean": 300.0,
           "ema_beats_dedup_mean": 250.0, "dcu_over_ema": 0.5, "dcu_over_ema_dedup": 0.6}
    return {"block": "dcu", "simulator": "verilator", "seed": 20261129,
            "hardware": {"candidates": 64}, "by_group": {"gate_up/2": row},
            "total_dcu_cycles": 600, "total_ema_beats": 1200, "total_ema_beats_dedup": 1000}


def test_the_top_dcu_and_calibration_sections_say_which_run_they_show(tmp_path):
    from edgexpert.support import provenance
    top, dcu = tmp_path / "bench" / "top", tmp_path / "bench" / "dcu"
    top.mkdir(parents=True)
    dcu.mkdir(parents=True)
    (top / "summary.json").write_text(json.dumps(_top_summary()))
    (top / "cycles.json").write_text(json.dumps(_cycle_file()))
    (dcu / "summary.json").write_text(json.dumps(_dcu_summary()))
    # the top's run recorded as the command line records it; the DCU's not recorded
    provenance.begin("edgexpert bench top --quick", quick=True)
    provenance.note_settings(["platform.dram.channels=4"])
    provenance.record(top / "summary.json")
    page = report(tmp_path)
    assert "| naive_sd/none | 4,000 | 2,000 | 2.000 | 3.4 | 42.5% | 7.5% |" in page
    assert "Prefill chunk (16 tokens, pauses none): 23,054 cycles per chunk-layer" in page
    assert "Run: `edgexpert bench top --quick` (--quick), written " in page
    assert "settings: `platform.dram.channels=4`" in page
    assert "| gate_up/2 | 4 | 150.0 | 160 | 300.0 | 250.0 | 0.50 |" in page
    assert "Provenance of summary.json: not recorded" in page
    # the calibration run by the report on the cycle file: 13,600 MACs / (8 x 0.8) = 2,125
    assert "| compute model vs `bench top` | naive_sd/none | 4,000 | 2,125 | -46.9% |" in page
    assert "Not compared: no EMA benchmark at" in page
    # a cycle file from before the layer timeline: one line instead of the plot
    assert "No timeline: build/bench/top/cycles.json has no layer timeline" in page
    assert not list((tmp_path / "report").glob("timeline*.png"))


def test_the_top_section_plots_each_runs_timeline_and_tables_the_split_by_kind(tmp_path,
                                                                                timed_run):
    top = tmp_path / "bench" / "top"
    top.mkdir(parents=True)
    summary = _top_summary()
    summary["runs"]["edgexpert/none"] = summary["runs"]["naive_sd/none"]
    (top / "summary.json").write_text(json.dumps(summary))
    cycles = _cycle_file()
    cycles["runs"] = {name: {**cycles["runs"]["naive_sd/none"], **timed_run(origin, bus)}
                      for name, origin, bus in (("naive_sd/none", 0, 900),
                                                ("edgexpert/none", 5000, 600))}
    (top / "cycles.json").write_text(json.dumps(cycles))
    page = report(tmp_path)
    # draft: head 100 + 80, bus 2 x 900, gaps 50 + 20, tail 30 + 40 of 2,120 cycles
    assert "| naive_sd/none | draft | 2 | 180 | 1,800 | 70 | 70 | 8.5% | 84.9% | 3.3% | 3.3% |" \
        in page
    # verify: head 220, bus 4 x 900, gaps 500, tail 160 of 4,480 cycles
    assert "| naive_sd/none | verify | 2 | 220 | 3,600 | 500 | 160 | 4.9% | 80.4% | 11.2% | " \
           "3.6% |" in page
    assert "| edgexpert/none | draft | 2 | 180 | 1,200 | 70 | 70 |" in page
    # the run's line: head 400, bus 5,400, gaps 570, tail 230 of 6,600 cycles
    # the engine computing in bus and gaps (5,970), waiting on memory in the heads (400)
    assert ("- naive_sd/none: head 6.1%, bus 81.8%, gaps 8.6%, tail 3.5% of 6,600 cycles; "
            "engine computing 90.5%; memory wait 6.1%; 2.000 cycles per beat") in page
    assert "![the step's timeline, cycles.json](timeline.png)" in page
    assert (tmp_path / "report" / "timeline.png").read_bytes().startswith(b"\x89PNG")


def test_a_result_written_by_a_command_carries_its_run_beside_it(tmp_path):
    """`estimate` writes estimate.json and estimate.run.json; the result bytes do not depend on
    the time, the record names the command, its settings and --quick."""
    env = {**os.environ, "EDGEXPERT_BUILD_DIR": str(tmp_path)}
    args = [str(EDGEXPERT), "estimate", "--model", "bundled", "--policy", "ar", "--json",
            "--set", "platform.dram.channels=4"]
    subprocess.run(args, check=True, capture_output=True, env=env)
    first = (tmp_path / "estimate" / "estimate.json").read_bytes()
    run = json.loads((tmp_path / "estimate" / "estimate.run.json").read_text())
    assert run["command"].startswith("edgexpert estimate --model bundled")
    assert run["settings"] == ["platform.dram.channels=4"] and run["quick"] is False
    assert run["started_utc"] <= run["written_utc"]
    subprocess.run(args, check=True, capture_output=True, env=env)
    assert (tmp_path / "estimate" / "estimate.json").read_bytes() == first
