"""`synth`: a block synthesized on osu018, timed and its power measured; `--all` every block
with the report and cost table; `--scale` the engine's points scaled to EdgeXpert's MACs;
`--equivalence` a block's netlists without and with clock gates simulated against each other."""

from __future__ import annotations

from dataclasses import asdict

from ..contracts.config import Config, load_config
from ..contracts.errors import InputError
from .common import config_sources, load, print_json, settings_options

__all__ = ["register", "synth_block"]


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
    if args.equivalence:
        if args.all or args.block is None:
            raise InputError("synth --equivalence compares one BLOCK's netlists: accepted with a "
                             "BLOCK, not --all")
        return _synth_equivalence(args)
    if args.simulator is not None or args.cycles is not None:
        raise InputError("--simulator and --cycles belong to --equivalence: accepted with "
                         "--equivalence")
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


def _synth_equivalence(args) -> int:
    """The block synthesized without and with clock gates (each from the cache where it can be),
    then both netlists simulated on the ungated run's stimulus (synth/equivalence.py)."""
    from pathlib import Path

    from ..blocks import get_block
    from ..support.progress import phases
    from ..support.tools import build_root
    from ..synth.equivalence import compare_netlists
    from ..synth.report import run_block
    from ..synth.signal_names import trace_names
    block = get_block(args.block)
    if block.stimulus is None:
        raise InputError(f"synth --equivalence needs a block with a stimulus (its inputs): "
                         f"{args.block!r} has none")
    if args.cycles is not None and args.cycles < 1:
        raise InputError(f"--cycles must be at least 1, not {args.cycles}")
    path, overrides = config_sources(args)
    simulator = args.simulator or "verilator"
    runs, configs = {}, {}
    with phases(f"synth {args.block} --equivalence", 3) as phase:
        for gated in (False, True):
            configs[gated] = load_config(path, [*overrides,
                                                f"synth.clock_gating={str(gated).lower()}"])
            phase(f"{'with' if gated else 'without'} clock gates")
            runs[gated] = run_block(block, configs[gated])
        phase(f"the two netlists in {simulator}")
        plain, gated_run = runs[False], runs[True]
        work = build_root() / "synth" / "equivalence" / \
            f"{args.block}-{Path(plain.work_dir).name}-{Path(gated_run.work_dir).name}"
        # the trace read as the flow reads it: every input the activity evaluation finds, a
        # registered memory read's data among them, is the RTL's in both netlists
        names = trace_names(block.build(configs[False]), block.name)
        result = compare_netlists(Path(plain.work_dir), Path(gated_run.work_dir), block.name,
                                  plain.memories, work / simulator, args.cycles, simulator,
                                  names)
    summary = {"block": args.block, "simulator": simulator,
               "plain": plain.work_dir, "gated": gated_run.work_dir,
               "gates": gated_run.clock_gating["gates"] if gated_run.clock_gating else 0,
               "state_names_disagreeing": [run.power["activity"]["state_names_disagreeing"]
                                           for run in (plain, gated_run)],
               **asdict(result)}
    if args.json:
        print_json(summary)
        return 0
    _row("block", f"{args.block}: {summary['gates']} clock gates, {simulator}")
    _row("cycles", f"{result.cycles}, {result.output_bits} output bits each")
    _row("disagreeing", f"{result.disagreeing_cycles} cycles (first: "
         f"{result.first_disagreement}), {result.unknown_output_bits} X or Z output samples")
    _row("against the RTL", f"{result.cycles_disagreeing_with_trace} cycles disagreeing on the "
         f"{result.output_bits_in_trace} output bits the trace names")
    _row("trace check", "state names disagreeing: "
         f"{summary['state_names_disagreeing'][0]} ungated, "
         f"{summary['state_names_disagreeing'][1]} gated")
    agree = result.disagreeing_cycles == 0 and result.unknown_output_bits == 0 \
        and result.cycles_disagreeing_with_trace == 0
    return 0 if agree else 1


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


def register(sub) -> None:
    from ..blocks import BLOCKS
    blocks = ", ".join(sorted(BLOCKS))
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
                   help="the engine's points in the cost table fitted by least squares and "
                        "scaled to EdgeXpert's 8K MACs, against its area and power (after `synth "
                        "--all --blocks engine_l16,engine_l32,engine`)")
    p.add_argument("--utilization", type=float, metavar="U",
                   help="with --scale: share of the MACs busy each cycle, 0 < U <= 1 (default 1)")
    p.add_argument("--costs", metavar="FILE",
                   help="with --scale: the cost table (default build/synth/costs.json)")
    p.add_argument("--equivalence", action="store_true",
                   help="BLOCK synthesized without and with clock gates (from the cache where "
                        "it can be) and the two netlists simulated on its stimulus, every output "
                        "compared every cycle; exit 1 on any disagreement")
    p.add_argument("--simulator", choices=("icarus", "verilator"),
                   help="with --equivalence: the event-driven simulator (default verilator: "
                        "Icarus does not compile an engine's netlist)")
    p.add_argument("--cycles", type=int, metavar="N",
                   help="with --equivalence: the stimulus's first N cycles only (default all)")
    p.add_argument("--json", action="store_true",
                   help="print cells, area_um2, critical_path_ns, fmax_hz, power and more as JSON")
    p.set_defaults(func=cmd_synth)
