"""`demo`: the main job, the mac lane through every flow, the golden model it serves, what its
decoding costs per token on EdgeXpert's hardware point, and the report."""

from __future__ import annotations

from .common import DEMO_SEED, golden_inputs, load, publish, settings_options
from .hw import synth_block

__all__ = ["register"]


def cmd_demo(args) -> int:
    """The vertical path for the lane (RTL -> cocotb on both simulators -> synthesis and power),
    then the golden model it serves decoding the bundled prompts."""
    config = load(args)
    from ..blocks import get_block
    from ..cocotb_tests.mac_lane import run_bench
    from ..contracts.tools import build_root
    from ..hw.emit import emit_rtl
    from ..sim.runner import SIMULATORS
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
    summary["synthesis"]["scaled_28nm"] = costs["scaled_28nm"]
    log(f"  synth      {synth.cells} cells, {synth.area_um2:.0f} um2, critical path "
        f"{synth.critical_path_ns:.3f} ns ({synth.startpoint} -> {synth.endpoint}), "
        f"fmax {synth.fmax_hz / 1e6:.1f} MHz at {synth.node}")
    log(f"  power      {format_si(synth.power['energy_per_op_j'], 'J')} per MAC at 180 nm "
        f"({synth.power['dynamic_w'] * 1e3:.2f} mW at {synth.power['clock_hz'] / 1e6:.0f} MHz); "
        f"scaled to 28 nm: {format_si(costs['scaled_28nm']['energy_per_op_j'], 'J')} per MAC, "
        f"{costs['scaled_28nm']['area_mm2']:.4f} mm2")

    # the golden model whose integer path the lane computes: plain vs speculative decoding
    from ..golden.decode import compare_modes
    from ..golden.int_model import quantize_model
    ckpt, _, prompts, eot = golden_inputs()
    decoded = compare_modes(quantize_model(ckpt.model), prompts, config.decode, eot)
    summary["golden"] = {"prompts": len(prompts), "ar": decoded["ar"],
                         "naive_sd": decoded["naive_sd"], "lossless": decoded["lossless"]}
    ar, sd = decoded["ar"], decoded["naive_sd"]
    log(f"  golden     {len(prompts)} held-out prompts on the A8W4 integer path: speculative "
        f"decoding {sd['tokens_per_step']:.2f} tokens/step, output equal to greedy: "
        f"{decoded['lossless']}; expert EMA bytes/token {ar['ema_bytes_per_token']} plain, "
        f"{sd['ema_bytes_per_token']} speculative")

    # what those decoding runs cost per token on EdgeXpert's hardware point, next to a
    # full-size model's estimate, and the report that gathers every measured result
    from ..sim.estimate import estimate
    from ..sim.models import bundled_spec
    from ..sim.traffic import add_traffic
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
    log(f"  report     {summary['report']}")
    publish(args, summary, ("demo", "summary.json"), lambda path: print(f"  summary    {path}"))
    return 0


def register(sub) -> None:
    p = sub.add_parser("demo", parents=[settings_options()],
                       help="the lane through every flow (RTL, cocotb on Icarus and Verilator, "
                            "synthesis, power), then the golden model decoding the bundled prompts")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_demo)
