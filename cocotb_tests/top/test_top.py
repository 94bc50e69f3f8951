"""pytest entry point of the accelerator top bench: golden trace rows on both simulators; the
whole decode step on Verilator as a benchmark. The top with its PRU on a prefill chunk: in CI
the chunk's first 8 tokens in layer 0 under random pauses on Icarus (88 s with the DCU in the
top; the Verilator build of the top with its PRU alone takes 80-105 s on the shared cores), and
as a benchmark the whole 16-token chunk in every layer (Verilator, both pause modes; Icarus
without pauses)."""

from pathlib import Path

import pytest

from edgexpert.cocotb_tests.engine import prepare_vectors
from edgexpert.cocotb_tests.top import LATENCY, bench_tests, run_bench, run_prefill, run_timeline
from edgexpert.contracts.trace import read_trace
from edgexpert.cocotb_tests.runner import SIMULATORS

#: the CI's tests per simulator (CI time: Icarus simulates the top about 4x slower): whole
#: experts without pauses on both; on Verilator also EdgeXpert's masks sent by the host and
#: chosen by the DCU in the top, both under random pauses on every stream and AXI channel, and
#: a reset in the middle of a batch. The benchmark runs the eight trace_step runs on the whole
#: step
CI_TESTS = {"icarus": ("trace_step/naive_sd/none",),
            "verilator": ("trace_step/naive_sd/none", "trace_step/edgexpert/random",
                          "trace_step/dcu/random", "reset_mid_step/fetch",
                          "reset_mid_step/combine")}


#: the parameters of each parametrized test, in the order the report's names give them
_PARAMETERS = {"trace_step": ("masks", "mode"), "reset_mid_step": ("cut",)}


def _filter(names) -> str:
    """cocotb's names of the report's tests: trace_step/naive_sd/none is
    trace_step/masks=naive_sd/mode=none."""
    def cocotb_name(name: str) -> str:
        test, *values = name.split("/")
        return "/".join([test] + [f"{k}={v}" for k, v in zip(_PARAMETERS[test], values)])
    return "|".join(map(cocotb_name, names))


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_top(simulator: str):
    names = CI_TESTS[simulator]
    # Icarus's whole experts on one verification batch: whole experts do not cross (`CROSSING`)
    selection = "ci" if simulator == "verilator" else "ci_first_batch"
    result = run_bench("ci", simulator, seed=20261129, test_filter=_filter(names),
                       selection=selection)
    ran = result.report["tests"]
    # every test that should have run reported its measurements: none silently skipped
    assert sorted(ran) == sorted(names)
    if "reset_mid_step/fetch" in ran:
        # cut with bursts open before any output, and with groups in flight; the rerun whole
        fetch, combine = ran.pop("reset_mid_step/fetch"), ran.pop("reset_mid_step/combine")
        assert fetch["at_reset"]["bursts_open"] > 0 and fetch["at_reset"]["expert_out"] == 0
        assert combine["at_reset"]["expert_out"] > 0 and combine["at_reset"]["moe_out"] == 0
        for reset in (fetch, combine):
            assert reset["items_checked"] == ran["trace_step/dcu/random"]["items_checked"]
    for entry in ran.values():
        assert entry["items_checked"]["moe_out"] > 0 and entry["items_checked"]["hidden"] > 0
        assert entry["memory_wait"] + entry["compute"] <= entry["cycles"]
        assert entry["memory_wait"] > 0 and entry["compute"] > 0
    # several groups, one with several candidates, and a token combining several experts
    rows = ran["trace_step/naive_sd/none"]
    assert rows["groups"] > 1 and rows["candidates"] > rows["rows"]
    if "trace_step/edgexpert/random" in ran:
        # EdgeXpert's masks compute fewer products than whole experts
        assert ran["trace_step/edgexpert/random"]["macs"] < rows["macs"]
    if "trace_step/dcu/random" in ran:
        host, dcu = ran["trace_step/edgexpert/random"], ran["trace_step/dcu/random"]
        _same_as_host_masks(host, dcu)
        # the verification pass's second batch went ahead of the first's last DOWNs
        assert host["crossed"] == dcu["crossed"] == 1 and rows["crossed"] == 0
        assert rows["batches"] == 3


#: the fine model's CI piece: whole experts without pauses, the DCU's masks under random pauses
FINE_CI_TESTS = ("trace_step/naive_sd/none", "trace_step/dcu/random")


def test_top_fine_model():
    """The fine bundled model (model.name=fine: 64 experts, top-8, expert width 32) decoding the
    bundled step's prompt, the CI rows (layer 0 of the second draft pass, the first verification
    token: 8 experts combined), through the top built at its shape (the DCU at 64 experts, DOWN
    jobs one 32-channel word wide), hardware `fine_ci`, Verilator: every output equal to the
    trace's (whole experts) and to the masked reference's (the DCU's masks) bit for bit."""
    from edgexpert.cocotb_tests.engine import TRACE_PROMPT
    from edgexpert.cocotb_tests.top import hardware, prompt_vectors
    from edgexpert.contracts.config import load_config

    config = load_config(overrides=["model.name=fine"])
    vectors = prompt_vectors(TRACE_PROMPT, config)
    trace = read_trace(Path(vectors["trace"]))
    assert (trace.model.n_experts, trace.model.top_k, trace.model.expert_ffn) == (64, 8, 32)
    result = run_bench("fine_ci", "verilator", seed=20261129, vectors=vectors,
                       hw=hardware("fine_ci"), ratio=config.policies.coalescing_ratio,
                       test_filter=_filter(FINE_CI_TESTS))
    ran = result.report["tests"]
    assert sorted(ran) == sorted(FINE_CI_TESTS)
    whole, dcu = ran["trace_step/naive_sd/none"], ran["trace_step/dcu/random"]
    for entry in ran.values():
        assert all(n == 0 for n in entry["mismatches"].values())
        assert entry["items_checked"]["moe_out"] > 0 and entry["items_checked"]["hidden"] > 0
    # the verification token takes its 8 experts, each a group: a token in several groups
    assert whole["groups"] >= trace.model.top_k and whole["candidates"] > whole["rows"]
    # the DCU chose channels (fewer products) with a GATE_UP and a DOWN job per part
    assert dcu["macs"] < whole["macs"] and dcu["dcu_jobs"] == 2 * dcu["parts"]


def test_top_on_lpddr4x():
    """Whole experts without pauses through the top with the platform's LPDDR4X behind its AXI
    port (Verilator; the build is test_top's: the memory is the bench's, not the RTL's): every
    output equal to the trace's, the AXI monitor clean, the cycles and the DRAM's counts
    recorded."""
    from edgexpert.contracts.config import load_config
    from edgexpert.sim.perf.ema_model import bench_memory

    memory = bench_memory("lpddr4x", load_config().platform)
    result = run_bench("ci", "verilator", seed=20261129, memory=memory,
                       test_filter=_filter(["trace_step/naive_sd/none"]))
    entry = result.report["tests"]["trace_step/naive_sd/none"]
    assert result.report["memory"] == memory
    assert entry["items_checked"]["moe_out"] > 0 and entry["cycles"] > 0
    assert all(n == 0 for n in entry["mismatches"].values())
    dram = entry["memory"]
    assert dram["memory"] == "lpddr4x" and dram["row_misses"] > 0 and dram["row_hits"] > 0
    # the DRAM served every byte the EMA counted
    assert dram["bytes"] == entry["beats"] * result.report["case"]["ema"]["data_width"] // 8
    assert 0 < dram["share_of_peak"] <= 1


def _same_as_host_masks(host: dict, dcu: dict, ci_rows: bool = True) -> None:
    """The DCU in the top selects what the host's masks select: the same outputs (both equal
    the reference, item for item, in the bench); a GATE_UP and a DOWN job per part, none in the
    host's run. `ci_rows`: the CI rows, where some engine group takes several of the DCU's parts
    (experts that candidates of several depth groups chose) and both plans pack the same EMA
    steps, so both fetch the same beats. (The groups themselves may differ: the host splits an
    expert's candidates beyond `candidates` in row order, the DCU at its parts' boundaries.)"""
    assert dcu["items_checked"] == host["items_checked"]
    assert dcu["mismatches"] == host["mismatches"]
    assert dcu["dcu_jobs"] == 2 * dcu["parts"] and host["dcu_jobs"] == 0
    if ci_rows:
        assert dcu["parts"] > dcu["groups"]
        assert dcu["steps"] == host["steps"] and dcu["beats"] == host["beats"]


@pytest.mark.benchmark
def test_top_whole_step():
    """Every row of the trace's decode step (draft and verification passes, all layers), both
    masks, with and without pauses, on Verilator at the bundled hardware."""
    result = run_bench("bundled", "verilator", seed=20261129, selection="step",
                       test_filter="trace_step")
    ran = result.report["tests"]
    assert sorted(ran) == bench_tests()
    trace = read_trace(Path(prepare_vectors()["trace"]))
    rows = len(trace["row_pass"])
    for entry in ran.values():
        assert entry["rows"] == rows
        assert entry["items_checked"]["moe_out"] == rows * trace.model.d_model
    for dcu in ("dcu", "dcu_inline"):
        for mode in ("none", "random"):
            _same_as_host_masks(ran[f"trace_step/edgexpert/{mode}"],
                                ran[f"trace_step/{dcu}/{mode}"], ci_rows=False)


def _check_prefill(entry: dict, layers: int):
    """Every output checked and equal; the feeder walked some expert more than once."""
    assert len(entry["layers"]) == layers
    assert all(n == 0 for n in entry["mismatches"].values())
    assert entry["items_checked"]["moe_out"] == layers * entry["tokens"] * 192
    assert entry["items_checked"]["route"] > 0 and entry["replays"] > 0
    assert entry["groups"] == entry["experts_fetched"] + entry["replays"]


def test_top_prefill_chunk():
    """The first 8 tokens of the first bundled prompt's first chunk in layer 0 through the top
    with its PRU, random pauses on every stream and both AXI read channels, on Icarus (one
    expert has 5 of the tokens: one replay)."""
    result = run_prefill("ci", "icarus", seed=20261129, layers=1, tokens=8,
                         test_filter="prefill_chunk/mode=random")
    ran = result.report["tests"]
    assert sorted(ran) == ["prefill_chunk/random"]
    _check_prefill(ran["prefill_chunk/random"], 1)


@pytest.mark.benchmark
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_top_prefill_all_layers(simulator: str):
    """The chunk through all 4 layers at the CI hardware set: both pause modes on Verilator,
    no pauses on Icarus (slow)."""
    test_filter = None if simulator == "verilator" else "prefill_chunk/mode=none"
    result = run_prefill("ci", simulator, seed=20261129, test_filter=test_filter)
    ran = result.report["tests"]
    assert len(ran) == (2 if simulator == "verilator" else 1)
    for entry in ran.values():
        _check_prefill(entry, 4)


def test_timeline_follows_the_dcu_chain():
    """scripts/top_timeline.py's probes on one layer with the DCU's masks (Icarus, about 10 s
    after the top's build): every stream it names exists and handshakes, the outputs are golden's, and each
    stage of a DOWN decision starts after the one it waits on."""
    entry = run_timeline("dcu", 1)
    assert not any(entry["mismatches"].values())
    (layer,) = entry["layers"]
    assert all(layer["probes"].values()), [n for n, runs in layer["probes"].items() if not runs]
    first = {name: runs[0][0] for name, runs in layer["probes"].items()}
    chain = ["dcu_route", "ema_cmd", "ar", "r_beat", "gate_up_walk", "gate_up_columns",
             "gate_up_drain", "quantizer_in", "hidden_scale", "hidden", "dcu_hidden_beat",
             "down_walk", "down_columns", "down_drain", "moe_out"]
    assert [first[n] for n in chain] == sorted(first[n] for n in chain), first
    # the DOWN job's commands reach the EMA only after its group's hidden vector reached the
    # DCU, and its beats come the memory's latency after them
    hidden_in = layer["probes"]["dcu_hidden_beat"][-1][0]
    down_cmd = min(run[0] for run in layer["probes"]["ema_cmd"] if run[0] > hidden_in)
    down_beats = layer["probes"]["r_beat"][-1][0]
    assert down_beats > down_cmd + LATENCY, (hidden_in, down_cmd, down_beats)
