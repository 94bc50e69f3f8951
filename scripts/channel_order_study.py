"""Issue 13 item 7: would an offline per-expert channel order make the DCU's selections more
contiguous in DRAM? A golden-side measurement (docs/blocks/dcu.md, "Channel order").

The order: per (layer, expert, matrix), the input channels sorted by how often the golden
selection (golden/blocks/dcu.py at the configured coalescing ratio) picks them on training-split text,
most often first (ties to the lower channel). Stored that way, column j would lie at slot
rank[j], so a selection's bursts are the runs of its slots instead of its channels.

Measured on the golden masks of the bundled (held-out) prompts, every depth group of
integer-path speculative decoding: bursts per fetch, beats per burst and bytes, per job (`all`)
and for what each job adds to its step (`dedup`, what the EMA's residency leaves to fetch).

    python scripts/channel_order_study.py [--train-prompts N] [--new-tokens N] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from tqdm import tqdm

from edgexpert.contracts.config import load_config
from edgexpert.contracts.weight_layout import Matrix, WeightLayout, channel_runs
from edgexpert.golden.blocks import dcu
from edgexpert.golden.lm.checkpoint import load_checkpoint
from edgexpert.golden.lm.corpus import load_corpus
from edgexpert.golden.decoding.decode import decode_speculative
from edgexpert.golden.integer.int_model import quantize_model
from edgexpert.golden.traces.masks import depth_groups
from edgexpert.golden.policies.edgexpert import selected_count
from edgexpert.golden.lm.prompts import PROMPT_TOKENS, load_prompts
from edgexpert.golden.traces.decode_trace import build_trace

#: the bus the EMA bench uses (docs/blocks/ema.md): 256 bits
BEAT_BYTES = 32


def training_prompts(corpus, tokenizer, count: int) -> list[list[int]]:
    """`count` prompts of PROMPT_TOKENS tokens from training-split files, chosen as the bundled
    prompts are from held-out ones (golden/lm/prompts.py, select_prompts): files of at least three
    prompts' tokens in the order of their paths' SHA-256, a third into each file."""
    chosen = []
    for f in sorted((f for f in corpus.files if not f.heldout),
                    key=lambda f: hashlib.sha256(f.path.encode()).hexdigest()):
        ids = tokenizer.encode((corpus.root / f.path).read_text(encoding="utf-8")).ids
        if len(ids) >= 3 * PROMPT_TOKENS:
            start = len(ids) // 3
            chosen.append(ids[start:start + PROMPT_TOKENS])
        if len(chosen) == count:
            break
    return chosen


def selections(engine, model_cfg, decode, prompts, ratio: float, progress: bool):
    """Per step (verification pass and layer), its jobs as (layer, expert, matrix, channels)."""
    runs = [decode_speculative(engine, p, decode, keep_traces=True)
            for p in tqdm(prompts, file=sys.stderr, disable=not progress, desc="decode")]
    trace = build_trace(runs, model_cfg, decode, {})
    steps = []
    for groups in depth_groups(trace):
        steps.append([(g.layer, g.expert, g.matrix,
                       dcu.select(g.q, g.m, g.e, g.g, selected_count(g.q.shape[1], ratio)).tolist())
                      for g in groups])
    return steps


def channel_order(steps, layout: WeightLayout) -> dict:
    """rank[(layer, expert, matrix)][j]: the slot of channel j, most often selected first."""
    counts = {}
    for step in steps:
        for layer, expert, matrix, chosen in step:
            c = counts.setdefault((layer, expert, matrix),
                                  np.zeros(layout.in_channels(matrix), int))
            c[chosen] += 1
    ranks = {}
    for key, c in counts.items():
        order = np.lexsort((np.arange(len(c)), -c))     # most often first, then lower channel
        rank = np.empty_like(order)
        rank[order] = np.arange(len(c))
        ranks[key] = rank
    return ranks


def measure(steps, layout: WeightLayout, ranks: dict | None) -> dict:
    """Bursts, beats and bytes of every job's columns (`all`) and of what it adds to its step
    (`dedup`), with the channels at their slots (identity without `ranks`)."""
    out = {k: {"fetches": 0, "bursts": 0, "beats": 0, "bytes": 0} for k in ("all", "dedup")}
    for step in steps:
        held: dict = {}
        for layer, expert, matrix, chosen in step:
            slot = ranks.get((layer, expert, matrix)) if ranks else None
            where = set(chosen) if slot is None else {int(slot[j]) for j in chosen}
            seen = held.setdefault((layer, expert, matrix), set())
            for kind, slots in (("all", where), ("dedup", where - seen)):
                if not slots:
                    continue
                bursts = layout.bursts(layer, expert, matrix, slots)
                row = out[kind]
                row["fetches"] += 1
                row["bursts"] += len(bursts)
                row["beats"] += sum(-(-b.length // BEAT_BYTES) for b in bursts)
                row["bytes"] += sum(b.length for b in bursts)
            seen |= where
    for row in out.values():
        row["bursts_per_fetch"] = row["bursts"] / row["fetches"]
        row["beats_per_burst"] = row["beats"] / row["bursts"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-prompts", type=int, default=32,
                    help="training-split prompts the order is counted on (default 32)")
    ap.add_argument("--new-tokens", type=int, default=4,
                    help="tokens generated per prompt (default 4, as `edgexpert bench dcu`)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    for name in ("train_prompts", "new_tokens"):
        if not 1 <= getattr(args, name) <= 256:
            flag = "--" + name.replace("_", "-")
            ap.error(f"{flag} = {getattr(args, name)} is out of range: accepted 1..256")
    config = load_config(overrides=[f"decode.max_new_tokens={args.new_tokens}"])
    ratio = config.policies.coalescing_ratio
    ckpt = load_checkpoint()
    corpus = load_corpus()
    engine = quantize_model(ckpt.model)
    layout = WeightLayout.for_model(config.model)
    progress = not args.json
    train_prompts = training_prompts(corpus, ckpt.tokenizer, args.train_prompts)
    train = selections(engine, ckpt.model.cfg, config.decode, train_prompts, ratio, progress)
    held_out = selections(engine, ckpt.model.cfg, config.decode,
                          load_prompts(corpus, ckpt.tokenizer), ratio, progress)
    ranks = channel_order(train, layout)
    result = {"ratio": ratio, "train_prompts": args.train_prompts, "new_tokens": args.new_tokens,
              "jobs": sum(len(s) for s in held_out),
              "experts_ordered": len(ranks),
              "identity": measure(held_out, layout, None),
              "by_training_frequency": measure(held_out, layout, ranks)}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    for name in ("identity", "by_training_frequency"):
        for kind, row in result[name].items():
            print(f"{name:22s} {kind:5s} fetches {row['fetches']:6d} bursts/fetch "
                  f"{row['bursts_per_fetch']:6.2f} beats/burst {row['beats_per_burst']:6.2f} "
                  f"bytes {row['bytes']:,}")


if __name__ == "__main__":
    main()
