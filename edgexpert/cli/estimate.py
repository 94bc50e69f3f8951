"""`estimate`: latency and energy per token of decoding policies on full-size MoE models at the
configured platform (sim/estimate.py, docs/performance-model.md); `--calibrate` compares the EMA
cycle model with the RTL's cycles from the last `edgexpert bench ema`."""

from __future__ import annotations

import json
from pathlib import Path

from ..contracts.errors import InputError
from .common import load, print_json, publish, settings_options

__all__ = ["register"]


def _calibrate(args) -> int:
    from ..contracts.tools import build_root
    from ..sim.ema_model import calibrate

    load(args)
    summary_path = build_root() / "bench" / "ema" / "summary.json"
    if not summary_path.is_file():
        raise InputError(f"no EMA benchmark at {summary_path}: run `edgexpert bench ema` first")
    result = calibrate(json.loads(summary_path.read_text()))
    ok = result["max_abs_error"] <= result["tolerance"]
    if args.json:
        print_json(result)
    else:
        print(f"EMA cycle model vs RTL ({summary_path}); tolerance {result['tolerance']:.0%}")
        print(f"{'run':<16} {'RTL cycles':>11} {'model':>11} {'error':>9}")
        for name, run in sorted(result["runs"].items()):
            print(f"{name:<16} {run['rtl_cycles']:>11,} {run['model_cycles']:>11,} "
                  f"{run['error']:>+9.3%}")
        print(f"max |error| {result['max_abs_error']:.3%}: {'within' if ok else 'OUTSIDE'} "
              "the tolerance")
    return 0 if ok else 1


def cmd_estimate(args) -> int:
    if args.calibrate:
        return _calibrate(args)
    from ..sim.estimate import POLICIES, estimate
    from ..sim.models import model_names

    config = load(args)
    models = args.model or list(model_names())
    policies = args.policy or list(POLICIES)
    rows = estimate(config, models, policies,
                    **({} if args.context is None else {"context": args.context}))

    def table(path: Path) -> None:
        print(f"{'model':<18} {'policy':<10} {'routing':<9} {'ms/token':>9} {'tok/s':>8} "
              f"{'mJ/token':>9} {'DRAM util':>9} {'roofline':>8}")
        for r in rows:
            print(f"{r['model']:<18} {r['policy']:<10} {r['routing']:<9} "
                  f"{r['latency_s_per_token'] * 1e3:>9.3f} {r['tokens_per_s']:>8.1f} "
                  f"{r['energy_j_per_token'] * 1e3:>9.3f} {r['dram_utilization']:>9.3f} "
                  f"{r['roofline_ratio']:>8.3f}")
        print(f"estimates {path}")

    publish(args, {"estimates": rows}, ("estimate", "estimate.json"), table, shown=rows)
    return 0


def register(sub) -> None:
    p = sub.add_parser("estimate", parents=[settings_options()],
                       help="latency and energy per token of each policy on each model at "
                            "`platform` (synthetic routing is labelled); --calibrate checks the "
                            "EMA model against the RTL bench")
    p.add_argument("--model", action="append", metavar="NAME",
                   help="a model (repeatable; default: every one, see docs/performance-model.md)")
    p.add_argument("--policy", action="append", metavar="NAME",
                   help="a policy (repeatable; default: all eight)")
    p.add_argument("--context", type=int, metavar="TOKENS",
                   help="tokens already in the KV cache (default: sim.estimate.CONTEXT_TOKENS, 512)")
    p.add_argument("--calibrate", action="store_true",
                   help="EMA cycle model vs the RTL's cycles of the last `edgexpert bench ema`")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_estimate)
