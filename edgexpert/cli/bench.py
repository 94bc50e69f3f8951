"""The block benchmarks `bench ema`, `bench pru`, `bench dcu` and `bench fuzz` (the top, or the
DCU or the PRU alone), and what `bench top` (bench_top.py) shares with them: the `--memory`
option and the result files' names."""

from __future__ import annotations

import sys
from pathlib import Path

from ..contracts.config import Config
from ..contracts.errors import InputError
from .common import (DEMO_SEED, config_sources, load, publish, settings_options,
                     waves_option)

__all__ = ["register", "memory_option", "memory_of", "result_name", "dram_line",
           "utilization_table", "FUZZ_SEED"]


def memory_of(args, config: Config) -> dict:
    """The bench memory `--memory` names, in any case as the config's names are
    (`sim.perf.ema_model.bench_memory`)."""
    from ..sim.perf.ema_model import bench_memory
    try:
        return bench_memory(args.memory.lower(), config.platform)
    except ValueError as exc:
        raise InputError(f"--memory {args.memory}: {exc}") from None


def result_name(stem: str, memory: dict) -> str:
    """summary.json for the latency memory (what `report` and `estimate --calibrate` read
    first), summary-lpddr4x.json for a DRAM."""
    kind = memory["memory"]
    return f"{stem}.json" if kind == "latency" else f"{stem}-{kind}.json"


def dram_line(name: str, dram: dict) -> str:
    return (f"{name}: {dram['row_hits']} row hits, {dram['row_misses']} row misses, "
            f"{dram['refreshes']} refreshes, {dram['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s = "
            f"{dram['share_of_peak']:.3f} of the {dram['peak_bytes_per_s'] / 1e9:.1f} GB/s peak")


def cmd_bench_ema(args) -> int:
    """The EMA controller's AXI bus utilization on Verilator (cocotb_tests/ema)."""
    from ..blocks import ema_parameters
    from ..cocotb_tests.ema import (UTILIZATION_CASES, UTILIZATION_LATENCIES, golden_mask_trace,
                                    run_utilization)
    from ..contracts.mask_trace import read_mask_trace
    from ..support.progress import phases
    from ..support.tools import build_root
    from ..contracts.weight_layout import WeightLayout

    config = load(args)
    memory = memory_of(args, config)
    layout = WeightLayout.for_model(config.model)
    hw = ema_parameters(config)
    on_dram = memory["memory"] != "latency"
    with phases("bench ema", 2) as phase:
        phase("the mask trace (the golden model's depth-coalesced masks, or --trace)")
        if args.trace:
            trace_file = Path(args.trace).resolve()  # the simulator runs in its own folder
        else:
            trace_file = build_root() / "bench" / "ema" / "golden_masks.json"
            golden_mask_trace(layout, hw, trace_file)
        trace = read_mask_trace(trace_file, layout)
        if not args.json:
            where = (f"{memory['memory']} ({memory['dram']}) at "
                     f"{memory['clock_hz'] / 1e6:.0f} MHz" if on_dram else "latency memory")
            print(f"edgexpert bench ema: {hw['data_width']}-bit AXI, {hw['outstanding']} "
                  f"outstanding, {where}, masks from {trace_file} (source: {trace.source}), "
                  f"verilator, seed {DEMO_SEED}")
        phase("emitting the EMA system's RTL, its Verilator build and the runs")
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
            print(dram_line(case, runs[f"{case}/{columns[0]}"]["dram"]))
        print(f"summary {path}")

    publish(args, summary, ("bench", "ema", result_name("summary", memory)), table)
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
    from ..support.progress import phases

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
    with phases("bench dcu", 1) as phase:
        # the golden depth groups are written inside run_bench, before its build
        phase("the golden depth groups, the DCU's RTL, its Verilator build and the runs")
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


#: the fuzz bench's default vector seed (its sequences are drawn from it, the bench's pauses
#: from the simulator's seed, the same number)
FUZZ_SEED = 20261203


def cmd_bench_fuzz(args) -> int:
    """A fuzz bench (issue 28): `--block top` (the default) the accelerator top's
    (cocotb_tests/top/fuzz.py) on Verilator at the CI hardware set: random command sequences,
    valid and bad, under random pauses, resets and bus errors; `--block dcu` / `pru` that block
    alone in Amaranth's simulator (cocotb_tests/block_fuzz.py). Fails on a hang, a mismatch with
    golden or a bad command not reported."""
    config_file, settings = config_sources(args)
    if config_file or settings:
        raise InputError("bench fuzz runs fixed instances (the top: the bundled model on the CI "
                         "hardware set, cocotb_tests/top/__init__.py BENCH_CASES['ci']; the DCU "
                         "and the PRU: their fuzz.py's FUZZ_SHAPE): it takes no --config or --set")
    if args.sequences < 1:
        raise InputError(f"--sequences {args.sequences} is out of range: accepted 1 or more")
    if args.block != "top":
        return _bench_block_fuzz(args)
    import time

    from ..cocotb_tests.top import run_fuzz

    if not args.json:
        print(f"edgexpert bench fuzz: {args.sequences} sequences, seed {args.seed}, the CI "
              "hardware set, verilator ...", file=sys.stderr)
    wall = time.time()
    report = run_fuzz(args.sequences, seed=args.seed, waves=args.waves).report
    summary = {"bench": "fuzz", "simulator": "verilator", "hardware": "ci",
               "sequences": args.sequences, "seed": args.seed,
               "command": f"edgexpert bench fuzz --sequences {args.sequences} --seed {args.seed}",
               "counts": report["counts"], "faults": report["faults"], "modes": report["modes"],
               "wall_s": round(time.time() - wall, 1)}

    def table(path: Path) -> None:
        counts = report["counts"]
        for key in ("sequences", "valid_commands", "bad_commands", "resets", "cut_by_reset",
                    "bus_errors", "checked_groups", "checked_values", "hangs", "mismatches"):
            print(f"{key:<16}{counts.get(key, 0):>10}")
        print(f"faults {report['faults']}")
        print(f"modes {report['modes']}")
        print(f"simulated in {counts['wall_s']} s, {summary['wall_s']} s with the vectors and "
              f"the build; summary {path}")

    publish(args, summary, ("bench", "top", f"fuzz-{args.seed}-{args.sequences}.json"), table)
    return 0


def _bench_block_fuzz(args) -> int:
    """`bench fuzz --block dcu|pru`: the block alone in Amaranth's simulator, a progress bar on
    stderr; the summary under build/bench/<block>/fuzz-S-N.json."""
    if args.waves:
        raise InputError(f"--waves: bench fuzz --block {args.block} runs in Amaranth's "
                         "simulator, which writes no waveform here (accepted with --block top)")
    if args.block == "dcu":
        from ..cocotb_tests.dcu.fuzz import run_dcu_fuzz as run
    else:
        from ..cocotb_tests.pru.fuzz import run_pru_fuzz as run
    if not args.json:
        print(f"edgexpert bench fuzz --block {args.block}: {args.sequences} sequences, seed "
              f"{args.seed}, Amaranth's simulator ...", file=sys.stderr)
    report = run(args.sequences, args.seed, progress=True)
    command = (f"edgexpert bench fuzz --block {args.block} --sequences {args.sequences} "
               f"--seed {args.seed}")
    summary = {"bench": "fuzz", "block": args.block, "simulator": "amaranth",
               "hardware": report["hardware"], "sequences": args.sequences, "seed": args.seed,
               "command": command, "counts": report["counts"], "wall_s": report["wall_s"]}

    def table(path: Path) -> None:
        for key, value in sorted(report["counts"].items()):
            print(f"{key:<28}{value:>10}")
        print(f"simulated in {report['wall_s']} s; summary {path}")

    publish(args, summary, ("bench", args.block, f"fuzz-{args.seed}-{args.sequences}.json"),
            table)
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


def memory_option(p) -> None:
    from ..sim.perf.ema_model import BENCH_MEMORIES
    p.add_argument("--memory", default="latency", metavar="MEMORY",
                   help=f"the AXI memory behind the RTL: {', '.join(BENCH_MEMORIES)}, in any "
                        "case (default latency: fixed latency, one beat per cycle; lpddr4x / "
                        "lpddr5: the DRAM model's timing at platform.clock_hz, "
                        "docs/performance-model.md)")


def register(benches) -> None:
    p = benches.add_parser("ema", parents=[settings_options(1)],
                           help="the EMA controller's AXI bus utilization on Verilator by mask "
                                "case and memory latency (about 2 minutes, 4 with the first "
                                "Verilator build: docs/blocks/ema.md; build/bench/ema/)")
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

    p = benches.add_parser("fuzz", help="a fuzz bench: the accelerator top's on Verilator (random "
                           "valid and bad command sequences under pauses, resets and bus errors, "
                           "every output against golden, every bad command in the CSR; about 4 "
                           "s a sequence on the shared cores; build/bench/top/), or with --block "
                           "dcu / pru that block alone in Amaranth's simulator (bad jobs / "
                           "prompts, pauses, resets; build/bench/dcu/, build/bench/pru/)")
    p.add_argument("--block", choices=("top", "dcu", "pru"), default="top",
                   help="the design fuzzed (default top; dcu and pru: the block alone, "
                        "docs/blocks/dcu.md and pru.md, 'Fuzz bench')")
    p.add_argument("--sequences", type=int, default=1000, metavar="N",
                   help="sequences to run (default 1000, issue 28's long run)")
    p.add_argument("--seed", type=int, default=FUZZ_SEED, metavar="S",
                   help=f"the sequences' seed (default {FUZZ_SEED}); sequence i is drawn from "
                        "random.Random(f'{S}-{i}') (and a block's pauses and resets from "
                        "random.Random(f'{S}-{i}-bench'))")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    waves_option(p)
    p.set_defaults(func=cmd_bench_fuzz)
