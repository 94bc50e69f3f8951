"""`prove`: bounded model checking of a block's properties with SymbiYosys (docs/formal.md)."""

from __future__ import annotations

import sys

from .common import print_json

__all__ = ["register"]


def cmd_prove(args) -> int:
    from ..formal.targets import TARGETS, cover, prove
    from ..support.progress import progress_bar

    target = TARGETS[args.target]
    if args.mutant is not None and args.mutant not in target.mutants:
        accepted = ", ".join(target.mutants) or "none"
        print(f"edgexpert: error: no mutant {args.mutant!r} for {target.name}: accepted "
              f"{accepted}", file=sys.stderr)
        return 2
    if args.cover:
        with progress_bar(total=args.depth, desc=f"prove {target.name} cover",
                          unit="step") as bar:
            result, steps, unreached = cover(
                target.name, args.depth, progress=lambda step: bar.update(step + 1 - bar.n))
        summary = {"target": target.name, "mode": "cover", "depth": args.depth,
                   "reached": steps, "unreached": unreached,
                   "seconds": round(result.seconds, 1)}
        if args.json:
            print_json(summary)
        else:
            print(f"{target.name}: {len(steps)} covers reached (steps {steps}), {unreached} not, "
                  f"within {args.depth} cycles, {result.seconds:.1f} s")
        return 0 if unreached == 0 else 1

    sets = args.sets.split(",") if args.sets else None
    results = []

    bars = {}

    def show(set_name, step):
        if set_name not in bars:
            for done in bars.values():
                done.close()
            bars[set_name] = progress_bar(total=args.depth, unit="step",
                                          desc=f"prove {target.name} {set_name}")
        bars[set_name].update(step + 1 - bars[set_name].n)

    try:
        results = prove(target.name, args.depth, sets=sets, mutant=args.mutant, progress=show,
                        timeout_s=args.timeout)
    except ValueError as exc:
        for bar in bars.values():
            bar.close()
        print(f"edgexpert: error: {exc}", file=sys.stderr)
        return 2
    for bar in bars.values():
        bar.close()
    rows = [{"set": r.name, "status": r.status, "depth": r.depth, "steps": r.steps,
             "seconds": round(r.seconds, 1), "trace": str(r.trace) if r.trace else None,
             "what": target.sets[r.name]} for r in results]
    if args.json:
        print_json({"target": target.name, "mutant": args.mutant, "instance": target.instance,
                    "sets": rows})
    else:
        name = target.name + (f" (mutant {args.mutant})" if args.mutant else "")
        print(f"{name}: {target.what}; instance {target.instance}")
        width = max(len(r["set"]) for r in rows)
        for r in rows:
            reached = (f"no failure in {r['steps']} cycles" if r["status"] == "PASS"
                       else f"fails at step {r['steps']}" if r["status"] == "FAIL"
                       else f"stopped after step {r['steps']}")
            print(f"  {r['set']:<{width}}  {r['status']:<7} depth {r['depth']}: {reached}, "
                  f"{r['seconds']:.1f} s" + (f"\n  {'':<{width}}  trace {r['trace']}"
                                             if r["trace"] else ""))
    return 0 if all(r.passed for r in results) else 1


#: `edgexpert.formal.targets.TARGETS`' names, here so that `--help` elaborates nothing
TARGET_NAMES = ("ema", "dcu", "whole_on_reject", "pru", "engine", "dispatcher", "command_merge",
                "command_fork", "feeder", "use_counter", "candidate_tap", "mask_source",
                "mask_union", "scale_tap", "hidden_packer", "down_jobs", "data_mux")


def register(sub) -> None:
    p = sub.add_parser("prove", help="bounded model checking (SymbiYosys) of a block's "
                                     "properties at a small instance, PASS/FAIL per property "
                                     "set (docs/formal.md)")
    p.add_argument("target", choices=TARGET_NAMES, metavar="TARGET",
                   help=f"one of: {', '.join(TARGET_NAMES)}")
    p.add_argument("--depth", type=int, default=16, metavar="N",
                   help="cycles to check from reset (default 16: every cover of the EMA is "
                        "reached by then)")
    p.add_argument("--sets", metavar="A,B", help="only these property sets (default: all)")
    p.add_argument("--mutant", metavar="NAME",
                   help="check a deliberately broken variant (it must FAIL its property set)")
    p.add_argument("--cover", action="store_true",
                   help="instead: reach every cover statement (the properties are not vacuous)")
    p.add_argument("--timeout", type=float, metavar="S", help="stop a set after S seconds")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--quiet", dest="quiet_0", action="store_true",
                   help="no progress bars (they go to stderr, and only on a terminal)")
    p.set_defaults(func=cmd_prove)
