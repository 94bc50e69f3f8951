"""The hardware blocks: `rtl`, `synth`, `bench ema`, `bench pru`, `bench dcu`, `bench top` and
`bench fuzz`."""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path

from ..contracts.config import MODEL_NAMES, Config
from ..contracts.errors import InputError
from .common import (DEMO_SEED, config_sources, load, print_json, publish, settings_options,
                     waves_option, write_result)

__all__ = ["register", "register_bench", "synth_block"]


def cmd_rtl(args) -> int:
    from ..blocks import get_block
    from ..hw.emit import emit_rtl
    from ..support.progress import phases
    config = load(args)
    block = get_block(args.block)
    with phases(f"rtl {block.name}", 2) as phase:
        phase("constructing the block at the configuration's parameters")
        component = block.build(config)
        phase("elaborating; RTLIL and Verilog (Amaranth), the simulation Verilog (Yosys)")
        files = emit_rtl(component, block.name, Path(args.out))
    for kind, path in [("rtlil", files.rtlil), ("verilog", files.verilog),
                       ("simulation verilog", files.sim_verilog)]:
        print(f"{kind:<19} {path}")
    return 0


def synth_block(config: Config, name: str, phase=lambda text: None):
    """(synthesis result, summary with the target node's figures) of one block; `demo` shares it.
    `phase`: told as each part starts (`run_block`)."""
    from ..blocks import get_block
    from ..synth.report import run_block, summarize
    block = get_block(name)
    result = run_block(block, config, phase)
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
    from ..blocks import get_block
    from ..support.progress import phases
    with phases(f"synth {args.block}", 2 if get_block(args.block).stimulus else 1) as phase:
        result, summary = synth_block(config, args.block, phase)
    scaled = summary["scaled"]
    if args.json:
        print_json({**result.to_json(), "scaled": scaled})
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
    given = [f"{q} x{v:g}" for q, v in asdict(config.synth.scaling).items() if v is not None]
    how = f"scaled; set in synth.scaling: {', '.join(given)}" if given else \
        "scaled: docs/synthesis.md"
    _row(f"{scaled['node_nm']} nm, {scaled['vdd_v']} V", f"area {scaled['area_mm2']:.4g} mm2, fmax "
         f"{scaled['fmax_hz'] / 1e6:.0f} MHz{energy}  ({how})")
    _row("cache", f"{'hit' if result.cached else 'miss'}  {result.work_dir}")
    return 0


def _synth_all(config: Config, as_json: bool, only: str | None) -> int:
    from ..blocks import BLOCKS, ENGINE_PARTS, get_block
    from ..synth.report import report_paths, write_reports
    # the engine's parts are timed one by one on request: the whole engine holds them
    names = sorted(set(BLOCKS) - set(ENGINE_PARTS)) if only is None \
        else sorted({n.strip() for n in only.split(",")})
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
    """The bench memory `--memory` names, in any case as the config's names are
    (`sim.perf.ema_model.bench_memory`)."""
    from ..sim.perf.ema_model import bench_memory
    try:
        return bench_memory(args.memory.lower(), config.platform)
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
    from ..support.progress import phases
    from ..support.tools import build_root
    from ..contracts.weight_layout import WeightLayout

    config = load(args)
    memory = _memory(args, config)
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
    """The accelerator top's fuzz bench (cocotb_tests/top/fuzz.py, issue 28) on Verilator at the
    CI hardware set: random command sequences, valid and bad, under random pauses, resets and
    bus errors; fails on a hang, a mismatch with golden or a bad command not reported."""
    import time

    from ..cocotb_tests.top import run_fuzz

    config_file, settings = config_sources(args)
    if config_file or settings:
        raise InputError("bench fuzz runs the bundled model on the CI hardware set "
                         "(cocotb_tests/top/__init__.py BENCH_CASES['ci']): it takes no --config "
                         "or --set")
    if args.sequences < 1:
        raise InputError(f"--sequences {args.sequences} is out of range: accepted 1 or more")
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


#: settings that change the top bench's vectors (the trace, the EdgeXpert masks) or its RTL:
#: the built-in step runs at the bundled ones; a user's prompt honours them
VECTOR_SETTINGS = ("decode.", "model.", "hardware.ema.", "hardware.engine.",
                   "policies.coalescing_ratio")
#: the top bench's runs: every channel, and EdgeXpert's masks from the host and from the DCU
TOP_MASKS = ("naive_sd", "edgexpert", "dcu", "dcu_inline")


def _changed(config: Config, prefixes, named_model: bool = False) -> list[str]:
    from .common import changed_settings
    return [s for s in changed_settings(config, named_model) if s.startswith(prefixes)]


def _top_filter(masks: list[str], quick: bool) -> str:
    """cocotb's test filter of `trace_step` runs: these masks, without pauses under --quick."""
    return (f"trace_step/masks=({'|'.join(masks)})/"
            + ("mode=none" if quick else "mode=(none|random)"))


def cmd_bench_top(args) -> int:
    """The accelerator top on Verilator over the whole decode step of the engine bench's trace
    (all layers, draft and verification passes), whole experts and EdgeXpert's masks from the
    host and from the DCU in the top (both job orders): cycles per pass by kind with the
    memory-wait / descriptor-wait / compute split, MACs per cycle, and the cycle file; the top
    with its PRU on a prefill chunk (the first bundled prompt's 16 tokens, all layers): cycles
    per chunk-layer, the cycle file's `prefill` entry; then, with --time-simulators (the latency
    memory only), the first step's draft passes on Icarus and Verilator, three runs each, for
    their wall times. All on
    the memory `--memory` names (a DRAM's files are cycles-<memory>.json, summary-<memory>.json).
    With --prompt or --trace: the user's decode step instead (`_bench_top_user`)."""
    from ..cocotb_tests.engine import TRACE_PROMPT
    from ..cocotb_tests.top import hardware, run_bench, run_prefill
    from ..contracts.cycles import cycle_file, prefill_cycles
    from ..support.progress import phases

    config = load(args)
    memory = _memory(args, config)
    if args.prompt is not None and args.trace is not None:
        raise InputError("--prompt and --trace both name the step to run: accepted one of the two")
    on_dram = memory["memory"] != "latency"
    if args.time_simulators and (on_dram or args.prompt is not None or args.trace is not None
                                 or args.masks is not None):
        raise InputError("--time-simulators times the bundled step's draft passes on the latency "
                         "memory: accepted without --memory (or --memory latency), --prompt, "
                         "--trace and --masks")
    if args.prompt is not None or args.trace is not None:
        return _bench_top_user(args, config, memory)
    if args.step is not None:
        raise InputError("--step chooses what runs of a user's step: accepted with --prompt "
                         "TEXT or --trace FILE")
    # a bundled model's own shape (configs/<name>.yaml) is not a change: the step's prompt then
    # runs on that model; anything else would change the bundled step's vectors or hardware
    changed = _changed(config, VECTOR_SETTINGS, named_model=True)
    if changed:
        raise InputError(f"bench top replays the bundled step at the bundled settings, and "
                         f"{changed[0]} changes its vectors or hardware: accepted with --prompt "
                         f"TEXT (the bundled step's is {TRACE_PROMPT!r}) or --trace FILE")
    if args.masks is not None or config.model.name != MODEL_NAMES[0]:
        # the bundled step's prompt decoded by `model.name`'s checkpoint (the same vectors as
        # the bundled step's for the first model), these runs of it, the decode step alone: the
        # prefill chunk and the simulators' timing stay the first model's full run
        args.prompt = TRACE_PROMPT
        return _bench_top_user(args, config, memory)
    hw = hardware("bundled")
    if not args.json:
        print(f"edgexpert bench top: {hw}, the whole decode step, {memory['memory']} memory, "
              f"verilator, seed {DEMO_SEED}", file=sys.stderr)
    runs = len(TOP_MASKS) * (1 if args.no_pauses else 2)
    with phases("bench top", 4 if args.time_simulators else 3) as phase:
        phase(f"the decode step: vectors, the top's Verilator build (minutes), {runs} runs")
        step = run_bench("bundled", "verilator", seed=DEMO_SEED, selection="step",
                         test_filter=_top_filter(list(TOP_MASKS), args.no_pauses), memory=memory,
                         progress_total=runs)
        cycles = cycle_file(step.report, hw)
        phase("the prefill chunk: the top with its PRU, its Verilator build and runs")
        prefill = run_prefill("bundled", "verilator", seed=DEMO_SEED,
                              test_filter="mode=none" if args.no_pauses else None, memory=memory)
        cycles["prefill"] = prefill_cycles(prefill.report)
        # on request only: about five minutes of Icarus (docs/blocks/top.md, "Simulators")
        if args.time_simulators:
            phase(f"the first step's draft passes on Icarus and Verilator, {SIMULATOR_RUNS} "
                  "runs each, for their wall times")
        simulators = _time_simulators(run_bench) if args.time_simulators else None
        phase("writing the cycle file")
    ratio = simulators and simulators["icarus_over_verilator"]
    path = write_result(cycles, "bench", "top", _result_name("cycles", memory))
    summary = {"block": "top", "seed": DEMO_SEED, "hardware": hw, "memory": memory,
               "latency_cycles": cycles["latency_cycles"], "cycle_file": str(path),
               "runs": _runs_summary(cycles),
               "against_whole_experts": cycles["against_whole_experts"],
               "prefill": {mode: {k: v for k, v in run.items() if k != "per_layer"}
                           for mode, run in cycles["prefill"].items()},
               "simulators": simulators, "icarus_over_verilator": ratio}

    def table(summary_path: Path) -> None:
        _runs_table(summary["runs"], summary["against_whole_experts"])
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
        if simulators:
            walls = {sim: simulators[sim]["simulation_s"] for sim in ("icarus", "verilator")}
            print(f"the first step's draft passes ({simulators['cycles']:,} cycles), simulation "
                  f"wall per run: icarus {walls['icarus']} s, verilator {walls['verilator']} s; "
                  f"medians {ratio}x")
        print(f"cycle file {path}\nsummary {summary_path}")

    publish(args, summary, ("bench", "top", _result_name("summary", memory)), table)
    return 0


def _runs_summary(cycles: dict) -> dict:
    """A cycle file's runs without their pass-by-pass, layer-by-layer and binned entries
    (what the summary shows)."""
    return {k: {key: v for key, v in run.items()
                if key not in ("passes", "layers", "beats_per_bin")}
            for k, run in cycles["runs"].items()}


def _runs_table(runs: dict, savings: dict | None = None) -> None:
    """Per run (masks/pauses) and pass kind: passes, cycles, the wait / compute split, MACs;
    per run its AXI beats, cycles per beat and MACs per cycle against the engine's peak; per
    masked run the share of its beat saving that became a cycle saving (`savings`)."""
    print(f"{'masks/pauses':<22}{'kind':<8}{'passes':>7}{'cycles/pass':>13}{'mem wait':>10}"
          f"{'desc wait':>10}{'compute':>9}{'MACs/cycle':>12}")
    for name, run in runs.items():
        for kind, row in run["by_kind"].items():
            print(f"{name:<22}{kind:<8}{row['passes']:>7}{row['busy_per_pass']:>13.0f}"
                  f"{row['memory_wait_per_pass']:>10.0f}"
                  f"{row['descriptor_wait_per_pass']:>10.0f}{row['compute_per_pass']:>9.0f}"
                  f"{row['macs_per_cycle']:>12.2f}")
        print(f"{name:<22}{'all':<8}{'':>7}{run['cycles']:>13}{run['memory_wait']:>10}"
              f"{run['descriptor_wait']:>10}{run['compute']:>9}{run['macs_per_cycle']:>12.2f}")
    for name, run in runs.items():
        print(f"{name}: {run['beats']:,} AXI beats, {run['cycles_per_beat']:.3f} cycles per "
              f"beat (1 at the bus's roofline), {run['macs_per_cycle']:.1f} MACs per cycle = "
              f"{run['peak_share']:.1%} of the engine's peak {run['peak_macs_per_cycle']}")
        if "words" in run:
            print(f"{name}: {run['words']:,} words fed to the engine ({run['words_per_beat']:.2f} "
                  f"per AXI beat), {run['cycles_per_word']:.3f} cycles per word (1 at the "
                  "feeder's one word a cycle)")
        if "split" in run:
            split = run["split"]
            print(f"{name}: of its layers' {split['span']:,} cycles, "
                  + ", ".join(f"{k} {split[k]:,} ({split['shares'][k]:.1%})"
                              for k in ("head", "bus", "gaps", "tail"))
                  + " (before the first AXI beat, with one, between beats, after the last)")
    for name, saved in (savings or {}).items():
        share = saved["cycles_saved_per_beat_saved"]
        print(f"{name} against whole experts: {saved['beats_saved']:,} beats and "
              f"{saved['cycles_saved']:,} cycles saved"
              + ("" if share is None else f", {share:.2f} cycles per beat saved"))


def _top_masks(text: str | None) -> list[str]:
    """--masks: a comma-separated subset of TOP_MASKS (default all)."""
    if text is None:
        return list(TOP_MASKS)
    masks = [m.strip() for m in text.split(",")]
    unknown = [m for m in masks if m not in TOP_MASKS]
    if unknown or not masks:
        raise InputError(f"--masks {text}: {unknown[0] if unknown else 'none'!r} is not known: "
                         f"accepted a comma-separated list of {', '.join(TOP_MASKS)}")
    return [m for m in TOP_MASKS if m in masks]


def user_top_case(args, config: Config) -> dict:
    """What `bench top --prompt | --trace` runs, checked before any build: the vectors
    (`prompt_vectors` or `trace_vectors`), the rows' selection, the hardware (the config's,
    refused in one line when the top cannot be built at it or its EMA cannot hold a group) and
    the top built at it,
    the coalescing ratio, the masks and the cocotb filter."""
    from ..blocks import top_parameters
    from ..cocotb_tests.top import (check_hardware, prepare_masked, prompt_vectors, step_rows,
                                    trace_vectors)
    from ..contracts.trace import read_trace

    masks = _top_masks(args.masks)
    if args.trace is not None:
        # the trace was decoded already, by the model and settings its header records
        changed = _changed(config, ("decode.", "model."))
        if changed:
            raise InputError(f"{changed[0]}: a --trace file was decoded already (its header "
                             "holds its model and decode settings): accepted with --prompt TEXT")
        vectors = trace_vectors(Path(args.trace))
    else:
        vectors = prompt_vectors(args.prompt, config)
    trace = read_trace(Path(vectors["trace"]))
    # a --trace file holds whole runs (hours through the top): its first step unless chosen
    step = 0 if args.trace is not None and args.step is None else args.step
    try:
        rows = step_rows(trace, step)
    except ValueError as exc:
        raise InputError(f"--step {args.step}: {exc}") from None
    hw = top_parameters(config)
    try:
        top = check_hardware(trace.layout, hw, trace, rows)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if masks != ["naive_sd"]:
        # written once here, so the phase that builds and simulates only reads it
        prepare_masked(Path(vectors["trace"]), hw["tokens"], hw["candidates"],
                       Path(vectors["folder"]), config.policies.coalescing_ratio)
    return {"vectors": vectors, "trace": trace, "rows": len(rows), "hardware": hw, "top": top,
            "selection": "step" if step is None else f"step={step}", "step": step,
            "ratio": config.policies.coalescing_ratio, "masks": masks,
            "filter": _top_filter(masks, args.no_pauses),
            "runs": len(masks) * (1 if args.no_pauses else 2)}


def _bench_top_user(args, config: Config, memory: dict) -> int:
    """A user's decode step through the top (--prompt: the bundled checkpoint decodes it with
    the bench's settings, `bench_decode`; --trace: a step of a `decode --traces` file): every
    output compared with golden's bit for bit, on the config's hardware; its cycle file and
    summary in build/bench/top/<prompt|trace>-<digest>/<rows>-hw<digest>-r<ratio>/."""
    from ..cocotb_tests.top import run_bench, run_name
    from ..contracts.cycles import cycle_file
    from ..support.progress import phases

    with phases("bench top", 3) as phase:
        phase("preparing the vectors (golden decode, weight image, EdgeXpert masks)")
        case = user_top_case(args, config)
        hw, vectors, trace = case["hardware"], case["vectors"], case["trace"]
        source = ({"prompt": args.prompt} if args.prompt is not None else
                  {"trace": str(Path(args.trace).resolve()), "step": case["step"]})
        if not args.json:
            print(f"edgexpert bench top: {source}, {case['rows']} trace rows, {hw}, "
                  f"{memory['memory']} memory, verilator, seed {DEMO_SEED}", file=sys.stderr)
        phase(f"emitting the top's RTL, its Verilator build (minutes) and {case['runs']} runs")
        step = run_bench("user", "verilator", seed=DEMO_SEED,
                         selection=case["selection"], test_filter=case["filter"], memory=memory,
                         progress_total=case["runs"], vectors=vectors, hw=hw,
                         ratio=case["ratio"], top=case["top"])
        phase("writing the cycle file")
    cycles = cycle_file(step.report, hw)
    tests = step.report["tests"]
    checked = {name: t["items_checked"] for name, t in tests.items()}
    # the bench fails on the first mismatch: a run that returns compared every item equal
    mismatches = sum(n for t in tests.values() for n in t["mismatches"].values())
    cycles["vectors"] = {**source, "decode": trace.header["decode"],
                         "model": trace.header["model"], "coalescing_ratio": case["ratio"],
                         "trace_file": vectors["trace"], "rows": case["rows"]}
    # one folder per hardware point, rows and ratio beside the vectors they share
    parts = ("bench", "top", vectors["name"], run_name(hw, case["selection"], case["ratio"]))
    path = write_result(cycles, *parts, _result_name("cycles", memory))
    summary = {"block": "top", "seed": DEMO_SEED, "hardware": hw, "memory": memory,
               "vectors": cycles["vectors"], "latency_cycles": cycles["latency_cycles"],
               "cycle_file": str(path), "items_checked": checked, "mismatches": mismatches,
               "bit_exact": mismatches == 0, "runs": _runs_summary(cycles),
               "against_whole_experts": cycles["against_whole_experts"]}

    def table(summary_path: Path) -> None:
        _runs_table(summary["runs"], summary["against_whole_experts"])
        items = {name: sum(c.values()) for name, c in checked.items()}
        print(f"bit-exact: {', '.join(f'{n} {v:,}' for n, v in items.items())} output values "
              f"({case['rows']} rows) equal to golden's (the trace's for naive_sd, the integer "
              f"contract's on EdgeXpert's masks for the others); mismatches {mismatches}")
        if memory["memory"] != "latency":
            for name, run in cycles["runs"].items():
                print(_dram_line(name, run["memory"]))
        print(f"cycle file {path}\nsummary {summary_path}")

    publish(args, summary, (*parts, _result_name("summary", memory)), table)
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
                   help="every block but the engine's parts (engine_*: timed alone on request): "
                        "build/synth/report.md, report.json and costs.json")
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
                   help=f"the AXI memory behind the RTL: {', '.join(BENCH_MEMORIES)}, in any "
                        "case (default latency: fixed latency, one beat per cycle; lpddr4x / "
                        "lpddr5: the DRAM model's timing at platform.clock_hz, "
                        "docs/performance-model.md)")


def register_bench(benches) -> None:
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

    p = benches.add_parser("fuzz", help="the accelerator top's fuzz bench on Verilator: random "
                           "valid and bad command sequences under pauses, resets and bus errors, "
                           "every output against golden, every bad command in the CSR (about 4 "
                           "s a sequence on the shared cores; build/bench/top/)")
    p.add_argument("--sequences", type=int, default=1000, metavar="N",
                   help="sequences to run (default 1000, issue 28's long run)")
    p.add_argument("--seed", type=int, default=FUZZ_SEED, metavar="S",
                   help=f"the sequences' seed (default {FUZZ_SEED}); sequence i is drawn from "
                        "random.Random(f'{S}-{i}')")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    waves_option(p)
    p.set_defaults(func=cmd_bench_fuzz)

    p = benches.add_parser("top", parents=[settings_options(1)],
                           help="the accelerator top over a whole decode step on Verilator: "
                                "cycles per pass by kind, memory wait and compute, MACs per "
                                "cycle (--quick --memory lpddr4x: 9 to 21 minutes on 2 cores, "
                                "as other work shares them; build/bench/top/)")
    # its own destination: `quick` would bring the studies' --quick settings (common.QUICK),
    # and decode.max_new_tokens changes the step's vectors
    p.add_argument("--quick", dest="no_pauses", action="store_true",
                   help="without the random-pause runs (half the time)")
    own = p.add_argument_group("your own decode step (instead of the bundled one; the cycle file "
                               "and summary in build/bench/top/<prompt|trace>-<digest>/<rows>-"
                               "hw<digest>-r<ratio>/)")
    own.add_argument("--prompt", metavar="TEXT",
                     help="the bundled checkpoint (model.name) decodes TEXT on its integer path "
                          "with 2 new tokens, depth 3, 16 candidates unless decode.* says "
                          "otherwise; the top runs every row of it on the config's hardware "
                          "(hardware.ema.*, hardware.engine.*) and policies.coalescing_ratio")
    own.add_argument("--trace", metavar="FILE",
                     help="a trace `edgexpert decode --traces FILE` wrote: the top runs one "
                          "decoding step of its first prompt (--step)")
    own.add_argument("--step", type=int, metavar="N",
                     help="the decoding step to run (default: with --trace the first, with "
                          "--prompt all)")
    own.add_argument("--masks", metavar="M[,M]",
                     help=f"the runs: a comma-separated subset of {', '.join(TOP_MASKS)} "
                          "(default all); without --prompt or --trace, these runs of the "
                          "bundled step's decode alone, as with --set model.name=fine (the "
                          "bundled step's prompt decoded by that model, the top at its shape)")
    memory_option(p)
    p.add_argument("--time-simulators", action="store_true",
                   help="also time the first step's draft passes on Icarus and Verilator, "
                        f"{SIMULATOR_RUNS} runs each (about 5 more minutes; the latency "
                        "memory's bundled step only)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_bench_top)
