"""The hardware blocks: `rtl`, `synth`, `bench ema`, `bench pru`, `bench dcu` and `bench top`."""

from __future__ import annotations

from pathlib import Path

from ..contracts.config import Config
from ..contracts.errors import InputError
from .common import (DEMO_SEED, load, print_json, publish, settings_options, waves_option,
                     write_result)

__all__ = ["register", "register_bench", "synth_block"]


def cmd_rtl(args) -> int:
    from ..blocks import get_block
    from ..hw.emit import emit_rtl
    config = load(args)
    block = get_block(args.block)
    files = emit_rtl(block.build(config), block.name, Path(args.out))
    for kind, path in [("rtlil", files.rtlil), ("verilog", files.verilog),
                       ("simulation verilog", files.sim_verilog)]:
        print(f"{kind:<19} {path}")
    return 0


def synth_block(config: Config, name: str):
    """(synthesis result, summary with the 28 nm figures) of one block; `demo` shares it."""
    from ..blocks import get_block
    from ..synth.report import run_block, summarize
    block = get_block(name)
    result = run_block(block, config)
    return result, summarize(block, config, result)


def _row(label: str, text: str) -> None:
    print(f"{label:<18} {text}")


def cmd_synth(args) -> int:
    from ..blocks import BLOCKS
    from ..synth.report import format_si
    config = load(args)
    if args.scale:
        if args.all or args.block is not None or args.blocks is not None:
            raise InputError("synth --scale reads the cost table: accepted alone (with --json, "
                             "--utilization, --costs)")
        return _synth_scale(args)
    if args.utilization is not None or args.costs is not None:
        raise InputError("--utilization and --costs belong to --scale: accepted with --scale")
    if args.all and args.block is not None:
        raise InputError(f"synth takes a BLOCK or --all, not both (BLOCK {args.block!r})")
    if not args.all and args.block is None:
        raise InputError(f"synth needs a BLOCK or --all: accepted blocks {', '.join(sorted(BLOCKS))}")
    if args.blocks is not None and not args.all:
        raise InputError("--blocks chooses the blocks of --all: accepted with --all")
    if args.all:
        return _synth_all(config, args.json, args.blocks)
    result, summary = synth_block(config, args.block)
    scaled = summary["scaled_28nm"]
    if args.json:
        print_json({**result.to_json(), "scaled_28nm": scaled})
        return 0
    _row("block", f"{result.top}  ({result.node})")
    _row("cells", f"{result.cells}  ({result.flip_flops} flip-flops)")
    _row("area_um2", f"{result.area_um2:.0f}")
    _row("critical_path_ns", f"{result.critical_path_ns:.3f}  {result.startpoint} -> "
         f"{result.endpoint}")
    _row("fmax_hz", f"{result.fmax_hz:.4g}  ({result.fmax_hz / 1e6:.1f} MHz)")
    for memory in result.memories:
        _row("memory", f"{memory['name']}: {memory['depth']} x {memory['width']} bits, cut out "
             "of the netlist (SRAM model)")
    if result.power:
        p = result.power
        _row("power_w", f"{p['dynamic_w']:.4g} dynamic + {p['leakage_w']:.3g} leakage at "
             f"{p['clock_hz'] / 1e6:.0f} MHz ({p['cycles']} cycles, seed {p['seed']})")
        _row("energy_per_op_j", f"{p['energy_per_op_j']:.4g} per {p['operation']}")
    energy = (f", {format_si(scaled['energy_per_op_j'], 'J')} per {scaled['operation']}"
              if result.power else "")
    _row(f"28 nm, {scaled['vdd_v']} V", f"area {scaled['area_mm2']:.4g} mm2, fmax "
         f"{scaled['fmax_hz'] / 1e6:.0f} MHz{energy}  (scaled: docs/synthesis.md)")
    _row("cache", f"{'hit' if result.cached else 'miss'}  {result.work_dir}")
    return 0


def _synth_all(config: Config, as_json: bool, only: str | None) -> int:
    from ..blocks import BLOCKS, get_block
    from ..synth.report import report_paths, write_reports
    names = sorted(BLOCKS) if only is None else sorted({n.strip() for n in only.split(",")})
    report = write_reports([get_block(name) for name in names], config)
    paths = report_paths()
    if as_json:
        print(paths["json"].read_text())
        return 0
    text = paths["markdown"].read_text()
    print("\n".join(line for line in text.splitlines() if line.startswith("|")))
    cached = sum(b["cached"] for b in report["blocks"].values())
    print(f"\n{len(report['blocks'])} blocks ({cached} from the cache); report {paths['markdown']}"
          f" and {paths['json'].name}, cost table {paths['costs']}")
    return 0


def _synth_scale(args) -> int:
    from ..synth.costs import load_cost_table
    from ..synth.mac_scaling import scale_to_edgexpert, scaling_table
    result = scale_to_edgexpert(load_cost_table(args.costs),
                                1.0 if args.utilization is None else args.utilization)
    if args.json:
        print_json(result)
        return 0
    print(scaling_table(result))
    return 0


def _memory(args, config: Config) -> dict:
    """The bench memory `--memory` names (`sim.perf.ema_model.bench_memory`)."""
    from ..sim.perf.ema_model import bench_memory
    try:
        return bench_memory(args.memory, config.platform)
    except ValueError as exc:
        raise InputError(f"--memory {args.memory}: {exc}") from None


def _result_name(stem: str, memory: dict) -> str:
    """summary.json for the latency memory (what `report` and `estimate --calibrate` read
    first), summary-lpddr4x.json for a DRAM."""
    kind = memory["memory"]
    return f"{stem}.json" if kind == "latency" else f"{stem}-{kind}.json"


def _dram_line(name: str, dram: dict) -> str:
    return (f"{name}: {dram['row_hits']} row hits, {dram['row_misses']} row misses, "
            f"{dram['refreshes']} refreshes, {dram['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s = "
            f"{dram['share_of_peak']:.3f} of the {dram['peak_bytes_per_s'] / 1e9:.1f} GB/s peak")


def cmd_bench_ema(args) -> int:
    """The EMA controller's AXI bus utilization on Verilator (cocotb_tests/ema)."""
    from ..blocks import ema_parameters
    from ..cocotb_tests.ema import (UTILIZATION_CASES, UTILIZATION_LATENCIES, golden_mask_trace,
                                    run_utilization)
    from ..contracts.mask_trace import read_mask_trace
    from ..support.tools import build_root
    from ..contracts.weight_layout import WeightLayout

    config = load(args)
    memory = _memory(args, config)
    layout = WeightLayout.for_model(config.model)
    hw = ema_parameters(config)
    if args.trace:
        trace_file = Path(args.trace).resolve()  # the simulator runs in its own folder
    else:
        trace_file = build_root() / "bench" / "ema" / "golden_masks.json"
        golden_mask_trace(layout, hw, trace_file)
    trace = read_mask_trace(trace_file, layout)
    on_dram = memory["memory"] != "latency"
    if not args.json:
        where = (f"{memory['memory']} ({memory['dram']}) at {memory['clock_hz'] / 1e6:.0f} MHz"
                 if on_dram else "latency memory")
        print(f"edgexpert bench ema: {hw['data_width']}-bit AXI, {hw['outstanding']} outstanding, "
              f"{where}, masks from {trace_file} (source: {trace.source}), verilator, seed "
              f"{DEMO_SEED}")
    result = run_utilization(layout, hw, trace_file, seed=DEMO_SEED, waves=args.waves,
                             memory=memory)
    runs = result.report["runs"]
    columns = [memory["memory"]] if on_dram else [str(lat) for lat in UTILIZATION_LATENCIES]
    utilization = {case: {col: runs[f"{case}/{col}"]["utilization"] for col in columns}
                   for case in UTILIZATION_CASES}
    sources = {case: runs[f"{case}/{columns[0]}"]["mask_source"] for case in UTILIZATION_CASES}
    summary = {"block": "ema", "simulator": "verilator", "seed": DEMO_SEED, "hardware": hw,
               "memory": memory,
               "model": {k: getattr(layout, k) for k in ("n_layers", "n_experts", "d_model",
                                                          "expert_ffn", "n_shared_experts")},
               "peak_beats_per_cycle": 1.0, "utilization": utilization, "mask_source": sources,
               "trace_file": str(trace_file), "runs": runs}

    def table(path: Path) -> None:
        print("utilization = R beats / busy cycles (AXI peak 1.0)")
        print(utilization_table(utilization, sources, columns))
        for case in UTILIZATION_CASES if on_dram else ():
            print(_dram_line(case, runs[f"{case}/{columns[0]}"]["dram"]))
        print(f"summary {path}")

    publish(args, summary, ("bench", "ema", _result_name("summary", memory)), table)
    return 0


def cmd_bench_pru(args) -> int:
    """The PRU's throughput on Verilator (cocotb_tests/pru, no backpressure) against the MAC
    clusters' time for the same tokens."""
    from ..blocks import PRU_LARGE_MODEL
    from ..cocotb_tests.pru import run_bench
    from ..sim.perf.models import BUNDLED, model_spec

    config = load(args)
    if not 1 <= args.prompts <= 8:
        raise InputError(f"--prompts {args.prompts} is out of range: accepted 1..8 (the bundled "
                         "prompts)")
    macs = config.platform.macs
    cases = {"e32": (BUNDLED, args.prompts), "e128": (PRU_LARGE_MODEL, 0)}
    rows = {}
    for case, (model, prompts) in cases.items():
        if not args.json:
            print(f"edgexpert bench pru: {case} ({model}), verilator, seed {DEMO_SEED} ...")
        report = run_bench(case, "verilator", seed=DEMO_SEED, bundled_prompts=prompts,
                           modes=("none",)).report["tests"]
        spec = model_spec(model)
        for test, r in report.items():
            token_layers = r["tokens"] * r["layers"]
            experts = r["route_beats"] / token_layers
            # the MAC clusters' time for one token in one layer: its routed experts and its
            # share of the projections and router; attention over the prompt only adds to it
            mac_cycles = (experts * spec.expert_macs + spec.nonexpert_macs / spec.n_layers) / macs
            pru_cycles = r["cycles"] / token_layers
            rows[f"{case}/{test.split('/')[0]}"] = {
                "model": model, "prompts": r["prompts"], "tokens": r["tokens"],
                "cycles": r["cycles"], "tokens_per_cycle": round(1 / pru_cycles, 5),
                "pru_cycles_per_token_layer": round(pru_cycles, 2),
                "experts_per_token_layer": round(experts, 3),
                "mac_cycles_per_token_layer": round(mac_cycles, 2),
                "pru_over_mac": round(pru_cycles / mac_cycles, 4)}
    summary = {"block": "pru", "simulator": "verilator", "seed": DEMO_SEED,
               "platform_macs": macs, "runs": rows}

    def table(path: Path) -> None:
        print(f"{'run':<16}{'tokens':>8}{'cycles/token-layer':>20}{'MAC cycles':>12}{'PRU/MAC':>9}")
        for name, r in rows.items():
            print(f"{name:<16}{r['tokens']:>8}{r['pru_cycles_per_token_layer']:>20.2f}"
                  f"{r['mac_cycles_per_token_layer']:>12.2f}{r['pru_over_mac']:>9.3f}")
        print(f"MAC cycles at platform.macs = {macs}; summary {path}")

    publish(args, summary, ("bench", "pru", "summary.json"), table)


def cmd_bench_dcu(args) -> int:
    """The DCU's cycles per depth group on Verilator (cocotb_tests/dcu, every group of the
    bundled prompts' golden traces) against the EMA's fetch cycles for the same groups."""
    from ..blocks import dcu_parameters
    from ..cocotb_tests.dcu import BENCH_CASES, fetch_comparison, run_bench
    from ..contracts.weight_layout import WeightLayout

    config = load(args)
    hw = dcu_parameters(config)
    bundled = BENCH_CASES["bundled"]
    if hw != bundled:
        raise InputError(f"bench dcu replays the bundled model's traces: it needs the default "
                         f"model and decode.max_candidates (accepted {bundled}, not {hw})")
    layout = WeightLayout.for_model(config.model)
    if not args.json:
        print(f"edgexpert bench dcu: {hw}, every depth group of the bundled prompts' golden "
              f"traces (4 new tokens), verilator, seed {DEMO_SEED}")
    result = run_bench("bundled", "verilator", seed=DEMO_SEED, full=True)
    report = result.report
    timed = report["tests"]["trace_groups/none"]
    groups = Path(report["groups_file"])
    beat_bytes = config.hardware.ema.axi_data_width // 8
    comparison = fetch_comparison(groups, timed["job_cycles"], layout, beat_bytes)
    by_group = comparison["by_group"]
    summary = {"block": "dcu", "simulator": "verilator", "seed": DEMO_SEED, "hardware": hw,
               "coverage": report["coverage"], "ema_beat_bytes": beat_bytes,
               "jobs": timed["jobs"], "cycles": timed["cycles"], **comparison}

    def table(path: Path) -> None:
        print(f"{'matrix/n':<12}{'jobs':>6}{'DCU mean':>10}{'worst':>7}{'EMA beats':>11}"
              f"{'dedup':>8}{'DCU/EMA':>9}{'DCU/dedup':>11}")
        for key, row in by_group.items():
            print(f"{key:<12}{row['jobs']:>6}{row['dcu_cycles_mean']:>10.1f}"
                  f"{row['dcu_cycles_worst']:>7}{row['ema_beats_mean']:>11.1f}"
                  f"{row['ema_beats_dedup_mean']:>8.1f}{row['dcu_over_ema']:>9.2f}"
                  + (f"{row['dcu_over_ema_dedup']:>11.2f}" if row['dcu_over_ema_dedup'] else
                     f"{'-':>11}"))
        print(f"all groups: DCU {comparison['total_dcu_cycles']} cycles, EMA "
              f"{comparison['total_ema_beats']} beats ({comparison['total_ema_beats_dedup']} "
              f"after de-duplication)\nsummary {path}")

    publish(args, summary, ("bench", "dcu", "summary.json"), table)
    return 0


#: runs of each simulator for the wall-time ratio: the median of three, taken in turn, so a
#: passing load on the shared machine moves one run of each, not one simulator's whole figure
SIMULATOR_RUNS = 3


def _time_simulators(run_bench) -> dict:
    """Wall time of the bench's simulation (its `wall_s`: the command beats, the outputs' checks
    and the simulator, without the build) of the same rows on Icarus and Verilator: the first
    decoding step's draft passes with whole experts, `SIMULATOR_RUNS` times each in turn; the
    ratio of the medians. Both must give the same cycle count."""
    import statistics

    walls = {"icarus": [], "verilator": []}
    cycles = set()
    for _ in range(SIMULATOR_RUNS):
        for simulator in walls:
            run = run_bench("bundled", simulator, seed=DEMO_SEED, selection="drafts",
                            test_filter="masks=naive_sd/mode=none")
            entry = run.report["tests"]["trace_step/naive_sd/none"]
            walls[simulator].append(entry["wall_s"])
            cycles.add(entry["cycles"])
    if len(cycles) != 1:
        raise RuntimeError(f"Icarus and Verilator disagree on the cycle count: {sorted(cycles)}")
    count = cycles.pop()
    median = {sim: statistics.median(w) for sim, w in walls.items()}
    return {"selection": "drafts", "cycles": count, "runs": SIMULATOR_RUNS,
            **{sim: {"simulation_s": w, "median_s": median[sim],
                     "cycles_per_s": round(count / median[sim])} for sim, w in walls.items()},
            "icarus_over_verilator": round(median["icarus"] / median["verilator"], 2)}


def cmd_bench_top(args) -> int:
    """The accelerator top on Verilator over the whole decode step of the engine bench's trace
    (all layers, draft and verification passes), whole experts and EdgeXpert's masks from the
    host and from the DCU in the top (both job orders): cycles per pass by kind with the
    memory-wait / descriptor-wait / compute split, MACs per cycle, and the cycle file; the top
    with its PRU on a prefill chunk (the first bundled prompt's 16 tokens, all layers): cycles
    per chunk-layer, the cycle file's `prefill` entry; then, on the latency memory, the first
    step's draft passes on Icarus and Verilator, three runs each, for their wall times. All on
    the memory `--memory` names (a DRAM's files are cycles-<memory>.json, summary-<memory>.json)."""
    import sys

    from ..blocks import top_parameters
    from ..contracts.config import load_config
    from ..cocotb_tests.top import cycle_file, hardware, prefill_cycles, run_bench, run_prefill

    config = load(args)
    memory = _memory(args, config)
    hw = hardware("bundled")
    if top_parameters(config) != hw or config.model != load_config().model:
        raise InputError("bench top replays the bundled model's trace on the bundled "
                         f"hardware: it needs the default model and hardware (accepted {hw})")
    if not args.json:
        print(f"edgexpert bench top: {hw}, the whole decode step, {memory['memory']} memory, "
              f"verilator, seed {DEMO_SEED}", file=sys.stderr)
    step = run_bench("bundled", "verilator", seed=DEMO_SEED, selection="step",
                     test_filter="trace_step/.*mode=none" if args.quick else "trace_step",
                     memory=memory)
    cycles = cycle_file(step.report, hw, hw["lanes"])
    prefill = run_prefill("bundled", "verilator", seed=DEMO_SEED,
                          test_filter="mode=none" if args.quick else None, memory=memory)
    cycles["prefill"] = prefill_cycles(prefill.report)
    # the simulators' wall times do not depend on the memory: measured on the latency memory's
    # run only
    on_dram = memory["memory"] != "latency"
    simulators = None if on_dram else _time_simulators(run_bench)
    ratio = None if on_dram else simulators["icarus_over_verilator"]
    path = write_result(cycles, "bench", "top", _result_name("cycles", memory))
    summary = {"block": "top", "seed": DEMO_SEED, "hardware": hw, "memory": memory,
               "latency_cycles": cycles["latency_cycles"], "cycle_file": str(path),
               "runs": {k: {key: v for key, v in run.items() if key != "passes"}
                        for k, run in cycles["runs"].items()},
               "prefill": {mode: {k: v for k, v in run.items() if k != "per_layer"}
                           for mode, run in cycles["prefill"].items()},
               "simulators": simulators, "icarus_over_verilator": ratio}

    def table(summary_path: Path) -> None:
        print(f"{'masks/pauses':<22}{'kind':<8}{'passes':>7}{'cycles/pass':>13}{'mem wait':>10}"
              f"{'desc wait':>10}{'compute':>9}{'MACs/cycle':>12}")
        for name, run in summary["runs"].items():
            for kind, row in run["by_kind"].items():
                print(f"{name:<22}{kind:<8}{row['passes']:>7}{row['busy_per_pass']:>13.0f}"
                      f"{row['memory_wait_per_pass']:>10.0f}"
                      f"{row['descriptor_wait_per_pass']:>10.0f}{row['compute_per_pass']:>9.0f}"
                      f"{row['macs_per_cycle']:>12.2f}")
            print(f"{name:<22}{'all':<8}{'':>7}{run['cycles']:>13}{run['memory_wait']:>10}"
                  f"{run['descriptor_wait']:>10}{run['compute']:>9}{run['macs_per_cycle']:>12.2f}")
        for mode, run in summary["prefill"].items():
            print(f"prefill chunk ({run['tokens']} tokens, pauses {mode}): "
                  f"{run['cycles_per_layer']:.0f} cycles per chunk-layer (busy "
                  f"{run['busy_per_layer']:.0f}, memory wait {run['memory_wait_per_layer']:.0f}, "
                  f"compute {run['compute_per_layer']:.0f}), {run['macs_per_cycle']:.1f} MACs "
                  f"per busy cycle, {run['experts_per_layer']:.1f} "
                  f"experts fetched, {run['groups_per_layer']:.1f} groups, "
                  f"{run['replays']} replays over {run['layers']} layers")
        if on_dram:
            for name, run in cycles["runs"].items():
                print(_dram_line(name, run["memory"]))
            for mode, run in cycles["prefill"].items():
                print(_dram_line(f"prefill/{mode}", run["memory"]))
        else:
            walls = {sim: simulators[sim]["simulation_s"] for sim in ("icarus", "verilator")}
            print(f"the first step's draft passes ({simulators['cycles']:,} cycles), simulation "
                  f"wall per run: icarus {walls['icarus']} s, verilator {walls['verilator']} s; "
                  f"medians {ratio}x")
        print(f"cycle file {path}\nsummary {summary_path}")

    publish(args, summary, ("bench", "top", _result_name("summary", memory)), table)
    return 0


def utilization_table(utilization: dict, sources: dict, columns) -> str:
    """Case, mask source and one column per latency (or the DRAM memory's name); the source
    column as wide as its longest entry (a trace's source is a sentence)."""
    case_w = max(len("case"), *map(len, utilization)) + 2
    source_w = max(len("masks"), *map(len, sources.values())) + 2
    titles = [f"latency {c}" if str(c).isdigit() else str(c) for c in columns]
    lines = [f"{'case':<{case_w}}{'masks':<{source_w}}" + "".join(f"{t:>14}" for t in titles)]
    for case, row in utilization.items():
        lines.append(f"{case:<{case_w}}{sources[case]:<{source_w}}"
                     + "".join(f"{row[str(c)]:>14.4f}" for c in columns))
    return "\n".join(lines)


def register(sub) -> None:
    from ..blocks import BLOCKS
    blocks = ", ".join(sorted(BLOCKS))
    p = sub.add_parser("rtl", parents=[settings_options()], help="write a block's RTLIL and Verilog")
    p.add_argument("block", metavar="BLOCK", help=f"one of: {blocks}")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.set_defaults(func=cmd_rtl)

    p = sub.add_parser("synth", parents=[settings_options()],
                       help="synthesize a block on osu018 (Yosys), time it and measure its power "
                            "(OpenSTA); --all: every block, with report and cost table")
    p.add_argument("block", metavar="BLOCK", nargs="?", help=f"one of: {blocks}")
    p.add_argument("--all", action="store_true",
                   help="every block: build/synth/report.md, report.json and costs.json")
    p.add_argument("--blocks", metavar="A,B,...",
                   help="with --all: the report and cost table over these blocks only (the "
                        "full-size points take minutes each)")
    p.add_argument("--scale", action="store_true",
                   help="the engine's two points in the cost table fitted and scaled to "
                        "EdgeXpert's 8K MACs, against its area and power (after `synth --all "
                        "--blocks engine,engine_l128`)")
    p.add_argument("--utilization", type=float, metavar="U",
                   help="with --scale: share of the MACs busy each cycle, 0 < U <= 1 (default 1)")
    p.add_argument("--costs", metavar="FILE",
                   help="with --scale: the cost table (default build/synth/costs.json)")
    p.add_argument("--json", action="store_true",
                   help="print cells, area_um2, critical_path_ns, fmax_hz, power and more as JSON")
    p.set_defaults(func=cmd_synth)


def memory_option(p) -> None:
    from ..sim.perf.ema_model import BENCH_MEMORIES
    p.add_argument("--memory", default="latency", metavar="MEMORY",
                   help=f"the AXI memory behind the RTL: {', '.join(BENCH_MEMORIES)} (default "
                        "latency: fixed latency, one beat per cycle; lpddr4x / lpddr5: the DRAM "
                        "model's timing at platform.clock_hz, docs/performance-model.md)")


def register_bench(benches) -> None:
    p = benches.add_parser("ema", parents=[settings_options(1)],
                           help="the EMA controller's AXI bus utilization on Verilator by mask "
                                "case and memory latency (about a minute; build/bench/ema/)")
    p.add_argument("--trace", metavar="FILE",
                   help="mask trace (JSON, docs/blocks/ema.md) for the trace case; default: the "
                        "golden model's depth-coalesced masks on two bundled prompts")
    memory_option(p)
    p.add_argument("--json", action="store_true",
                   help="print the summary (utilization by case and latency) as JSON")
    waves_option(p)
    p.set_defaults(func=cmd_bench_ema)

    p = benches.add_parser("pru", parents=[settings_options(1)],
                           help="the prompt routing unit's tokens per cycle on Verilator against "
                                "the MAC clusters' time (minutes; build/bench/pru/)")
    p.add_argument("--prompts", type=int, default=2, metavar="N",
                   help="bundled prompts to route (1..8, default 2)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_bench_pru)

    p = benches.add_parser("dcu", parents=[settings_options(1)],
                           help="the DCU's cycles per depth group (every group of the bundled "
                                "prompts' golden traces) against the EMA's fetch cycles for the "
                                "same groups, on Verilator (build/bench/dcu/)")
    p.add_argument("--json", action="store_true",
                   help="print the summary (cycles by matrix and group size) as JSON")
    p.set_defaults(func=cmd_bench_dcu)

    p = benches.add_parser("top", parents=[settings_options(1)],
                           help="the accelerator top over a whole decode step on Verilator: "
                                "cycles per pass by kind, memory wait and compute, MACs per "
                                "cycle, Verilator vs Icarus wall time (minutes; build/bench/top/)")
    p.add_argument("--quick", action="store_true",
                   help="without the random-pause runs (half the time)")
    memory_option(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_bench_top)
