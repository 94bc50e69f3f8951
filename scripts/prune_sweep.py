"""EdgeXpert's decode coalescing on a pruned-and-recovered checkpoint against coalescing on the
unpruned (bundled) model: decode EMA bytes per token vs naive speculative decoding on the bundled
model, and quality against the bundled (exact) model, for a few coalescing ratios
(docs/policies.md, "Pruning mask with recovery").

    python scripts/prune_sweep.py build/prune/s0.25_n300 --ratios 1,0.9,0.75 \
        --unpruned-ratios 0.9,0.75 [--set decode.max_new_tokens=32 --set policies.eval_windows=4]

Ratios are shares of all input channels; on the pruned model a pruned channel is never fetched,
so ratio 1 there fetches exactly the kept channels. Writes build/prune/sweep_<name>.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from edgexpert.config import load_config
from edgexpert.golden.checkpoint import load_checkpoint
from edgexpert.golden.corpus import load_corpus
from edgexpert.golden.decode import FloatEngine, decode_ar
from edgexpert.golden.evaluate import quality, run_policy
from edgexpert.golden.policies import EdgeXpert
from edgexpert.golden.policy import Policy
from edgexpert.golden.prompts import load_prompts
from edgexpert.golden.prune import load_pruned_checkpoint
from edgexpert.golden.tokenizer import EOT
from edgexpert.golden.train import eval_windows, token_streams
from edgexpert.tools import build_root
from edgexpert.weight_layout import WeightLayout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pruned", help="pruned checkpoint folder (edgexpert prune)")
    parser.add_argument("--ratios", default="1,0.9,0.75", help="coalescing ratios on the pruned model")
    parser.add_argument("--unpruned-ratios", default="", help="coalescing ratios on the bundled model")
    parser.add_argument("--prompts", type=int, default=8, help="bundled prompts decoded (default 8)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = load_config(overrides=args.set)
    d, p = config.decode, config.policies

    exact = load_checkpoint()
    pruned = load_pruned_checkpoint(Path(args.pruned), exact.model)
    sparsity = pruned.meta["prune"]["sparsity"]
    corpus = load_corpus()
    prompts = load_prompts(corpus, exact.tokenizer, None)[:args.prompts]
    eot = exact.tokenizer.token_to_id(EOT)
    _, heldout = token_streams(corpus, exact.tokenizer)
    windows = [w.tolist() for w in
               eval_windows(heldout, p.eval_prompt_tokens + p.eval_continuation - 1, p.eval_windows)]
    print(f"prune_sweep: {args.pruned} (sparsity {sparsity}), {len(prompts)} prompts x "
          f"{d.max_new_tokens} tokens, {len(windows)} windows; decode seed {d.seed}", flush=True)

    layout = WeightLayout.for_model(exact.model.cfg)
    engine, engine_pruned = FloatEngine(exact.model), FloatEngine(pruned.model)
    reference = [decode_ar(engine, q, d, eot) for q in prompts]
    runs = [("naive_sd", "bundled", None, engine, Policy(layout, d))]
    runs += [("edgexpert", "bundled", r, engine, EdgeXpert(layout, d, exact.model, r, 0.0, p.calibration))
             for r in map(float, filter(None, args.unpruned_ratios.split(",")))]
    runs += [("edgexpert", f"pruned {sparsity}", r, engine_pruned,
              EdgeXpert(layout, d, pruned.model, r, sparsity, p.calibration))
             for r in map(float, filter(None, args.ratios.split(",")))]
    rows = []
    for name, model, ratio, own, policy in runs:
        traffic = run_policy(own, policy, prompts, reference, d, eot)
        q = quality(own, policy, windows, p.eval_prompt_tokens, d, reference=engine)
        row = {"policy": name, "model": model, "ratio": ratio, **traffic, **q}
        rows.append(row)
        naive = rows[0]["ema_bytes_per_token"]
        print(f"{name:<10} {model:<13} ratio {ratio!s:<6} tok/step {row['tokens_per_step']:<6} "
              f"EMA B/tok {row['ema_bytes_per_token']:<9} vs naive_sd "
              f"{row['ema_bytes_per_token'] / naive - 1:+.1%}  top-1 {row['top1_agreement']}  "
              f"KL {row['mean_kl']}  ppl ratio {row['ppl_ratio']}", flush=True)
    out = build_root() / "prune" / f"sweep_{Path(args.pruned).name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"pruned": str(args.pruned), "sparsity": sparsity,
                               "args": vars(args), "decode": dataclasses.asdict(d),
                               "policies": dataclasses.asdict(p),
                               "rows": rows}, indent=2, sort_keys=True, default=str))
    print(f"table: {out}")


if __name__ == "__main__":
    main()
