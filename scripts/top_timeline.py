"""Where a layer's cycles go inside the top: the handshakes of its internal streams (the DCU's
jobs, the EMA's commands and ARs, the R beats, the feeder's walks, the engine's MACs, drains and
quantizer), cycle by cycle, on the bundled prompt's first draft pass (one token: one group a
layer; Icarus, about two minutes for two layers) or, with `--kind verify`, its first
verification pass (17 tokens, 31-42 groups a layer; several minutes a layer). docs/blocks/top.md,
"Cycles" (2026-12-04, evening) reads one.

    python scripts/top_timeline.py [--masks dcu] [--layers 2] [--kind draft] [--json]

Per layer, each stream's runs of handshakes: first and last cycle from the layer's first
command beat, and how many (a run ends at a gap of more than 3 cycles).
"""

from __future__ import annotations

import argparse
import json
import sys

from edgexpert.cocotb_tests.top import run_timeline
from edgexpert.contracts.cycles import TOP_MASKS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--masks", default="dcu", help=f"one of {', '.join(TOP_MASKS)}")
    parser.add_argument("--layers", type=int, default=2,
                        help="layers of the pass, 1..64 (at most the model's)")
    parser.add_argument("--kind", default="draft", help="the pass: draft or verify")
    parser.add_argument("--json", action="store_true", help="print the report entry as JSON")
    args = parser.parse_args(argv)
    try:
        entry = run_timeline(args.masks, args.layers, kind=args.kind)
    except ValueError as exc:
        print(f"top_timeline: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(entry, indent=1))
        return 0
    for layer in entry["layers"]:
        print(f"layer {layer['layer']}: {layer['end'] - layer['start']} cycles")
        rows = sorted((run[0], name, run) for name, runs in layer["probes"].items()
                      for run in runs)
        for _, name, (first, last, count) in rows:
            print(f"  {name:<16} {first:>6} .. {last:<6} {count:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
