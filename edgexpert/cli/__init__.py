"""The `edgexpert` command line.

Every subcommand takes `--config FILE` (YAML, any subset of the bundled defaults),
`--set KEY=VALUE` overrides and `--quiet` (no progress bars; long loops show one on stderr when
it is a terminal, so `--json` output on stdout stays clean). Bad input exits non-zero with one
line on stderr, no traceback: 2 for bad input (a configuration value, an argument, a checkpoint,
a prompt or trace file), 1 when a tool, simulation or synthesis run fails.

One module per command group: doctor, rtl, synth, bench (bench ema, pru, dcu, fuzz), bench_top
(bench top), prove (SymbiYosys), golden (train, prune, decode, analyze, bench dispatch),
policies (compare, ablate), prefill (prefill train / ablate, calibrate), draft (draft train: the
EAGLE head), estimate (the performance model: estimate, sweep), routing (the full-size routing
model fitted on a bundled model), report, trace (a Hugging Face checkpoint's measured passes
under every policy; `hf tiny`, a small checkpoint to try it on), demo. Each command imports
torch, the golden model, the simulators and the synthesis flow inside its own function, so that
`edgexpert --help` and `edgexpert doctor` start in well under a second.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from ..contracts.errors import InputError
from . import (bench, bench_top, demo, doctor, draft, estimate, golden, policies, prefill, prove,
               report, routing, rtl, synth, trace)
from .common import quiet_requested, settings_options

__all__ = ["main"]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="edgexpert", description=__doc__.splitlines()[0])
    top.add_argument("--quiet", dest="quiet_top", action="store_true",
                     help="no progress bars (every command also takes --quiet)")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    doctor.register(sub)
    rtl.register(sub)
    synth.register(sub)
    prove.register(sub)
    golden.register(sub)
    policies.register(sub)
    prefill.register(sub)
    draft.register(sub)
    estimate.register(sub)
    routing.register(sub)
    report.register(sub)
    trace.register(sub)
    p = sub.add_parser("bench", parents=[settings_options(0)],
                       help="benchmarks (minutes, not tests): `bench ema` the EMA's bus "
                            "utilization, `bench pru` and `bench dcu` those blocks' cycles, "
                            "`bench top` a decode step through the accelerator top, `bench "
                            "fuzz` random valid and bad commands through it (or, with --block, "
                            "through the DCU or the PRU alone), `bench dispatch` "
                            "the golden model's expert dispatch")
    benches = p.add_subparsers(dest="bench", required=True, metavar="BENCH")
    bench.register(benches)
    bench_top.register(benches)
    golden.register_bench(benches)
    demo.register(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    from ..support.tools import ToolError
    from ..cocotb_tests.runner import SimError

    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    from ..support.progress import set_quiet
    set_quiet(quiet_requested(args))
    # what train, prune and prefill train record in their metadata
    args.command_line = "edgexpert " + shlex.join(argv)
    from ..support import provenance
    # --quick is `quick` on the studies and `no_pauses` on `bench top` (cli/bench_top.py)
    provenance.begin(args.command_line,
                     quick=getattr(args, "quick", False) or getattr(args, "no_pauses", False))
    try:
        return args.func(args)
    except InputError as exc:
        print(f"edgexpert: error: {exc}", file=sys.stderr)
        return 2
    except (ToolError, SimError) as exc:
        print(f"edgexpert: error: {exc}", file=sys.stderr)
        return 1
