"""`demo`: the main job. One real decode step's MoE layers through the accelerator top on
Verilator, bit-exact against the golden model, with its cycles (in a second process, while the
mac lane goes through every flow and the golden model decodes the bundled prompts); then what that
decoding costs per token on EdgeXpert's hardware point, and the report."""

from __future__ import annotations

import sys
import time

from .common import DEMO_SEED, golden_inputs, load, publish, settings_options
from .synth import synth_block

__all__ = ["register", "top_summary"]

#: the demo's parts, for the progress lines on stderr
PARTS = ("the mac lane (the accelerator top's step runs meanwhile in a second process)",
         "the golden model", "the accelerator top's step (waiting for its Verilator run)",
         "traffic, estimate, report")


def top_summary(test: dict, hardware: dict, latency: int) -> dict:
    """The demo's `top` entry from the top bench's report of one run (`trace_step/...` of
    build/sim/accelerator_top/*/report.json): what was checked, the mismatches, the cycles with
    their memory-wait / compute split, per pass kind, and MACs per cycle against the peak (both
    arrays' lanes: the engine's GATE_UP and DOWN arrays run at once on consecutive groups,
    docs/blocks/engine.md)."""
    from ..contracts.cycles import by_kind, peak_macs_per_cycle
    mismatches = sum(test["mismatches"].values())
    peak = peak_macs_per_cycle(hardware)
    return {
        "simulator": "verilator", "masks": "naive_sd", "hardware": hardware,
        "latency_cycles": latency, "rows_checked": test["rows"],
        "items_checked": test["items_checked"], "mismatches": mismatches,
        "bit_exact": mismatches == 0 and all(n > 0 for n in test["items_checked"].values()),
        "passes": len(test["passes"]), "layers": max(p["layers"] for p in test["passes"]),
        "groups": test["groups"], "candidates": test["candidates"], "ema_steps": test["steps"],
        "cycles": test["cycles"], "memory_wait": test["memory_wait"], "compute": test["compute"],
        "macs": test["macs"], "macs_per_cycle": test["macs_per_cycle"],
        "peak_macs_per_cycle": peak, "peak_share": round(test["macs_per_cycle"] / peak, 4),
        "by_kind": by_kind(test["passes"]), "simulation_s": test["wall_s"]}


def _run_top_step() -> dict:
    """The first decoding step of the engine bench's trace (the bundled checkpoint's integer
    path on one prompt: its draft passes and its verification pass, every layer) through the
    top on Verilator at the bundled hardware, whole experts; raises SimError on any mismatch.
    Runs in a worker process: returns the bench report's entry and the wall time."""
    from ..cocotb_tests.top import run_bench
    start = time.time()
    result = run_bench("bundled", "verilator", seed=DEMO_SEED, selection="first_step",
                       test_filter="masks=naive_sd/mode=none")
    return {"test": result.report["tests"]["trace_step/naive_sd/none"],
            "wall_s": round(time.time() - start, 1)}


def _report_top(run: dict, log) -> dict:
    """The summary's `top` entry of the worker's run, and its lines."""
    from ..cocotb_tests.engine import TRACE_PROMPT
    from ..cocotb_tests.top import LATENCY, hardware

    hw = hardware("bundled")
    top = top_summary(run["test"], hw, LATENCY)
    top["prompt"] = TRACE_PROMPT
    top["wall_s"] = run["wall_s"]
    ema = hw["ema"]
    log(f"  top        one decode step of {TRACE_PROMPT!r} (the bundled checkpoint's integer "
        f"path: {top['passes']} passes, {top['layers']} layers) through the accelerator top on "
        f"Verilator: {hw['candidates']} candidates x {hw['lanes']} lanes, {ema['data_width']}-bit"
        f" EMA, {ema['buffer_bytes'] >> 10} KiB buffer, memory latency {LATENCY} cycles, whole "
        "experts")
    items = top["items_checked"]
    log(f"             {'bit-exact' if top['bit_exact'] else 'NOT bit-exact'}: "
        f"{top['rows_checked']} rows, {items['hidden']:,} hidden, {items['expert_out']:,} "
        f"expert_out, {items['moe_out']:,} moe_out values compared with the golden trace; "
        f"mismatches {top['mismatches']}")
    log(f"             {'kind':<8}{'passes':>7}{'cycles/pass':>13}{'mem wait':>10}{'compute':>10}"
        f"{'MACs/cycle':>12}")
    for kind, row in top["by_kind"].items():
        log(f"             {kind:<8}{row['passes']:>7}{row['busy_per_pass']:>13,.0f}"
            f"{row['memory_wait_per_pass']:>10,.0f}{row['compute_per_pass']:>10,.0f}"
            f"{row['macs_per_cycle']:>12.1f}")
    log(f"             the step: {top['cycles']:,} cycles, memory wait {top['memory_wait']:,} "
        f"({top['memory_wait'] / top['cycles']:.1%}), compute {top['compute']:,} "
        f"({top['compute'] / top['cycles']:.1%}); {top['macs']:,} MACs, "
        f"{top['macs_per_cycle']:.1f} per cycle = {top['peak_share']:.0%} of the array's peak "
        f"{top['peak_macs_per_cycle']}; {top['simulation_s']:.0f} s of simulation, "
        f"{top['wall_s']:.0f} s with the build")
    return top


def _lane(config, args):
    """The lane's vertical path: RTL, cocotb on both simulators, synthesis and power. Returns the
    summary so far and the stdout logger (silent under --json)."""
    from ..blocks import get_block
    from ..cocotb_tests.mac_lane import run_bench
    from ..support.tools import build_root
    from ..hw.emit import emit_rtl
    from ..cocotb_tests.runner import SIMULATORS
    from ..synth.report import format_si

    pairs = config.hardware.mac_lane.pairs_per_beat
    block = get_block("mac_lane")
    out = build_root() / "demo"
    log = (lambda *a: None) if args.json else print
    log(f"edgexpert demo: {block.description}, pairs_per_beat={pairs}, seed {DEMO_SEED}")

    files = emit_rtl(block.build(config), block.name, out / "rtl")
    log(f"  rtl        {files.rtlil.parent}/ ({files.rtlil.name}, {files.verilog.name}, "
        f"{files.sim_verilog.name})")
    summary = {"block": block.name, "pairs_per_beat": pairs, "seed": DEMO_SEED,
               "rtl_dir": str(files.rtlil.parent), "simulation": {}}
    for simulator in SIMULATORS:
        result = run_bench(pairs, simulator, seed=DEMO_SEED)
        tests = result.report["tests"]
        checked = sum(t["dot_products"] for t in tests.values())
        rate = tests["random_vectors/none/none"]["beats_per_cycle"]
        summary["simulation"][simulator] = {"cocotb_tests_passed": result.passed,
                                            "cocotb_tests_skipped": result.skipped,
                                            "dot_products_checked": checked,
                                            "beats_per_cycle_no_backpressure": rate,
                                            "build_dir": str(result.build_dir)}
        skipped = f" ({result.skipped} skipped: the int32 wrap needs wide beats)" \
            if result.skipped else ""
        log(f"  {simulator:<10} {result.passed} cocotb tests passed{skipped}; {checked} dot "
            f"products equal to golden bit for bit; {rate:.3f} beats/cycle without backpressure")
    synth, costs = synth_block(config, block.name)
    summary["synthesis"] = {k: synth.to_json()[k] for k in
                            ("cells", "area_um2", "critical_path_ns", "fmax_hz", "startpoint",
                             "endpoint", "node", "key")}
    summary["synthesis"]["energy_per_mac_j"] = synth.power["energy_per_op_j"]
    summary["synthesis"]["scaled"] = costs["scaled"]
    log(f"  synth      {synth.cells} cells, {synth.area_um2:.0f} um2, critical path "
        f"{synth.critical_path_ns:.3f} ns ({synth.startpoint} -> {synth.endpoint}), "
        f"fmax {synth.fmax_hz / 1e6:.1f} MHz at {synth.node}")
    log(f"  power      {format_si(synth.power['energy_per_op_j'], 'J')} per MAC at 180 nm "
        f"({synth.power['dynamic_w'] * 1e3:.2f} mW at {synth.power['clock_hz'] / 1e6:.0f} MHz); "
        f"scaled to {costs['scaled']['node_nm']} nm: {format_si(costs['scaled']['energy_per_op_j'], 'J')} per MAC, "
        f"{costs['scaled']['area_mm2']:.4f} mm2")
    return summary, log


def _golden(config, emit) -> tuple[dict, list]:
    """The golden model whose integer path the lane and the top compute, plain vs speculative
    on the bundled prompts; `emit` takes its line."""
    from ..golden.decoding.decode import compare_modes
    from ..golden.integer.int_model import quantize_model
    ckpt, _, prompts, eot = golden_inputs(config)
    decoded = compare_modes(quantize_model(ckpt.model), prompts, config.decode, eot)
    ar, sd = decoded["ar"], decoded["naive_sd"]
    emit(f"  golden     {len(prompts)} held-out prompts on the A8W4 integer path: speculative "
         f"decoding {sd['tokens_per_step']:.2f} tokens/step, output equal to greedy: "
         f"{decoded['lossless']}; expert EMA bytes/token {ar['ema_bytes_per_token']} plain, "
         f"{sd['ema_bytes_per_token']} speculative")
    return decoded, prompts


def cmd_demo(args) -> int:
    """The lane (RTL -> cocotb on both simulators -> synthesis and power), one real decode step
    through the accelerator top, the golden model decoding the bundled prompts. The top's step
    (Verilator, single-threaded) runs in a second process while the lane's flows and the golden
    decoding run in this one, so both cores work."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    config = load(args)
    start = time.time()

    def progress(part: int) -> None:
        print(f"edgexpert demo: [{part + 1}/{len(PARTS)}] {PARTS[part]} "
              f"({time.time() - start:.0f} s)", file=sys.stderr, flush=True)

    # spawn, not fork: the worker starts clean (no torch or simulator state of this process)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        top_run = pool.submit(_run_top_step)
        progress(0)
        summary, log = _lane(config, args)
        progress(1)
        golden_lines = []
        decoded, prompts = _golden(config, golden_lines.append)
        progress(2)
        summary["top"] = _report_top(top_run.result(), log)
    for line in golden_lines:
        log(line)
    summary["golden"] = {"prompts": len(prompts), "ar": decoded["ar"],
                         "naive_sd": decoded["naive_sd"], "lossless": decoded["lossless"]}
    ar, sd = decoded["ar"], decoded["naive_sd"]

    progress(3)
    # what those decoding runs cost per token on EdgeXpert's hardware point, next to a
    # full-size model's estimate, and the report that gathers every measured result
    from ..sim.perf.estimate import estimate
    from ..sim.perf.models import bundled_spec
    from ..sim.perf.traffic import add_traffic
    from .report import write_report
    runs = add_traffic({"ar": dict(ar), "naive_sd": dict(sd)}, bundled_spec(), config)
    # the bundled model from the runs just measured; EdgeXpert and ours on a full-size model
    rows = (estimate(config, ["bundled"], ["ar", "naive_sd"], measured={"bundled": runs})
            + estimate(config, ["qwen3-30b-a3b"], ["ar", "naive_sd", "edgexpert", "combined"]))
    summary["estimate"] = rows
    summary["golden"]["total_bytes_per_token"] = {
        k: runs[k]["total_bytes_per_token"] for k in ("ar", "naive_sd")}
    log(f"  traffic    every byte per token (experts, non-expert weights, KV cache): "
        f"{runs['ar']['total_bytes_per_token']:,} plain, "
        f"{runs['naive_sd']['total_bytes_per_token']:,} speculative (docs/policies.md)")
    log(f"  estimate   at {config.platform.macs} MACs, {config.platform.clock_hz / 1e6:.0f} MHz, "
        f"{config.platform.dram.type} {config.platform.dram.peak_bytes_per_s / 1e9:.0f} GB/s:")
    for r in rows:
        log(f"             {r['model']:<14} {r['policy']:<10} {r['routing']:<9} "
            f"{r['latency_s_per_token'] * 1e3:9.3f} ms/token {r['energy_j_per_token'] * 1e3:9.3f} "
            f"mJ/token")
    summary["report"] = str(write_report(config))
    summary["wall_s"] = round(time.time() - start, 1)
    log(f"  report     {summary['report']}")
    publish(args, summary, ("demo", "summary.json"), lambda path: print(f"  summary    {path}"))
    return 0


def register(sub) -> None:
    p = sub.add_parser("demo", parents=[settings_options()],
                       help="one real decode step's MoE layers through the accelerator top on "
                            "Verilator (bit-exactness, cycles), after the lane through every flow; "
                            "then the golden model decoding the bundled prompts, its estimate and "
                            "the report (minutes)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_demo)
