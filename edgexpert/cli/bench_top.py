"""`bench top`: the accelerator top over the bundled decode step and a prefill chunk, or over a
user's decode step (--prompt, --trace), and its cycle file."""

from __future__ import annotations

import sys
from pathlib import Path

from ..contracts.config import MODEL_NAMES, Config
from ..contracts.cycles import TOP_MASKS
from ..contracts.errors import InputError
from .bench import dram_line, memory_of, memory_option, result_name
from .common import DEMO_SEED, load, publish, settings_options, write_result

__all__ = ["register", "user_top_case"]


#: runs of each simulator for the wall-time ratio: the median of three, taken in turn, so a
#: passing load on the shared machine moves one run of each, not one simulator's whole figure
SIMULATOR_RUNS = 3


#: settings that change the top bench's vectors (the trace, the EdgeXpert masks) or its RTL:
#: the built-in step runs at the bundled ones; a user's prompt honours them
VECTOR_SETTINGS = ("decode.", "model.", "hardware.ema.", "hardware.engine.",
                   "policies.coalescing_ratio")


def _changed(config: Config, prefixes, named_model: bool = False) -> list[str]:
    from .common import changed_settings
    return [s for s in changed_settings(config, named_model) if s.startswith(prefixes)]


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
    from ..cocotb_tests.top import (hardware, run_bench, run_prefill, step_filter,
                                    time_simulators)
    from ..contracts.cycles import cycle_file, prefill_cycles, runs_summary
    from ..support.progress import phases

    config = load(args)
    memory = memory_of(args, config)
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
                         test_filter=step_filter(list(TOP_MASKS), args.no_pauses), memory=memory,
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
        simulators = time_simulators(SIMULATOR_RUNS, DEMO_SEED) if args.time_simulators else None
        phase("writing the cycle file")
    ratio = simulators and simulators["icarus_over_verilator"]
    path = write_result(cycles, "bench", "top", result_name("cycles", memory))
    summary = {"block": "top", "seed": DEMO_SEED, "hardware": hw, "memory": memory,
               "latency_cycles": cycles["latency_cycles"], "cycle_file": str(path),
               "runs": runs_summary(cycles),
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
                print(dram_line(name, run["memory"]))
            for mode, run in cycles["prefill"].items():
                print(dram_line(f"prefill/{mode}", run["memory"]))
        if simulators:
            walls = {sim: simulators[sim]["simulation_s"] for sim in ("icarus", "verilator")}
            print(f"the first step's draft passes ({simulators['cycles']:,} cycles), simulation "
                  f"wall per run: icarus {walls['icarus']} s, verilator {walls['verilator']} s; "
                  f"medians {ratio}x")
        print(f"cycle file {path}\nsummary {summary_path}")

    publish(args, summary, ("bench", "top", result_name("summary", memory)), table)
    return 0


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
    from ..cocotb_tests.top import (check_hardware, prepare_masked, prompt_vectors, step_filter,
                                    step_rows, trace_vectors)
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
                       Path(vectors["folder"]), config.policies.coalescing_ratio, trace=trace)
    return {"vectors": vectors, "trace": trace, "rows": len(rows), "hardware": hw, "top": top,
            "selection": "step" if step is None else f"step={step}", "step": step,
            "ratio": config.policies.coalescing_ratio, "masks": masks,
            "filter": step_filter(masks, args.no_pauses),
            "runs": len(masks) * (1 if args.no_pauses else 2)}


def _bench_top_user(args, config: Config, memory: dict) -> int:
    """A user's decode step through the top (--prompt: the bundled checkpoint decodes it with
    the bench's settings, `bench_decode`; --trace: a step of a `decode --traces` file): every
    output compared with golden's bit for bit, on the config's hardware; its cycle file and
    summary in build/bench/top/<prompt|trace>-<digest>/<rows>-hw<digest>-r<ratio>/."""
    from ..cocotb_tests.top import run_bench, run_name
    from ..contracts.cycles import cycle_file, runs_summary
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
    path = write_result(cycles, *parts, result_name("cycles", memory))
    summary = {"block": "top", "seed": DEMO_SEED, "hardware": hw, "memory": memory,
               "vectors": cycles["vectors"], "latency_cycles": cycles["latency_cycles"],
               "cycle_file": str(path), "items_checked": checked, "mismatches": mismatches,
               "bit_exact": mismatches == 0, "runs": runs_summary(cycles),
               "against_whole_experts": cycles["against_whole_experts"]}

    def table(summary_path: Path) -> None:
        _runs_table(summary["runs"], summary["against_whole_experts"])
        items = {name: sum(c.values()) for name, c in checked.items()}
        print(f"bit-exact: {', '.join(f'{n} {v:,}' for n, v in items.items())} output values "
              f"({case['rows']} rows) equal to golden's (the trace's for naive_sd, the integer "
              f"contract's on EdgeXpert's masks for the others); mismatches {mismatches}")
        if memory["memory"] != "latency":
            for name, run in cycles["runs"].items():
                print(dram_line(name, run["memory"]))
        print(f"cycle file {path}\nsummary {summary_path}")

    publish(args, summary, (*parts, result_name("summary", memory)), table)
    return 0


def register(benches) -> None:
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
