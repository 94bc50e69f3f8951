"""Calibration and ablation of EdgeXpert's prefill (docs/policies.md, "Prefill").

Calibration (`sweep`, `pareto_front`, `choose`), on training-split windows only: for every
setting of (tau_major, tau_minor, k, n), each MoE layer is fed the exact model's own input h
(top-K routing upstream, so every setting sees the same inputs) and its output under the
shared-set routing is compared with the native top-K output:

- `mse`: sum over layers and tokens of ||MoE(h) policy - MoE(h) top-K||^2 over the same sum of
  ||MoE(h) top-K||^2 (relative, pooled);
- `experts_per_token`: routed experts per token and layer;
- `bytes_per_token`: prefill EMA bytes per prompt token under the chunked cost model
  (golden.decoding.policy.chunked_expert_fetches).

The operating point is the setting with the fewest bytes per token whose `mse` is at most the
bound, taken from the Pareto front of (bytes, mse); the bound is stated in docs/policies.md
with the held-out measurement that fixed it.

Ablation (`ablate`), on held-out windows through the real prefill pass: the k/n budgets at the
configured thresholds, encoder-scored against random token classes, and the chunk size; and,
on request, the calibration's Pareto front (how its mse maps to the held-out perplexity ratio,
which is what fixes the mse bound).

Encoder paths (`compare_encoders`), on held-out windows through the real prefill pass: the
configured point scored by the float encoder and by its A8W4 integer twin (golden.integer.int_encoder):
how many tokens change class, and each one's prefill bytes and perplexity ratio.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, replace

import torch

from ...contracts.config import DecodeConfig
from ...support.progress import progress_bar
from ...contracts.weight_layout import WeightLayout
from ..lm.model import MoEModel, routing_weights
from ..policies.edgexpert import EdgeXpert
from ..decoding.policy import Policy, chunked_expert_fetches
from ..policies.prefill import (ENCODER_PATHS, MAJOR, MINOR, TRIVIAL, PrefillRouting, TokenEncoder,
                      moe_inputs, prefill_quality, prefill_routing, shared_set_route,
                      token_classes)

__all__ = ["Setting", "TAU_MAJOR", "TAU_MINOR", "default_grid", "sweep", "pareto_front", "choose",
           "ablate", "CHUNKS"]

#: the thresholds the calibration sweeps (on score x prompt length; 1.0 = uniform); with
#: tau_major 0 every token is major: the model's own routing, the sweep's reference
TAU_MAJOR = (0.0, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
TAU_MINOR = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
#: the chunk sizes the ablation measures the cost model at (96: the whole bundled prompt)
CHUNKS = (8, 16, 32, 96)


@dataclass(frozen=True)
class Setting:
    tau_major: float
    tau_minor: float
    budget_minor: int      # k: experts of a minor token, its top-1 included
    budget_trivial: int    # n: experts of a trivial token, its top-1 included


def default_grid(top_k: int) -> list[Setting]:
    """Every threshold pair with tau_minor <= tau_major and every budget 1 <= n <= k <= top_k."""
    return [Setting(major, minor, k, n)
            for major, minor in itertools.product(TAU_MAJOR, TAU_MINOR) if minor <= major
            for k in range(1, top_k + 1) for n in range(1, k + 1)]


@torch.no_grad()
def sweep(model: MoEModel, encoder: TokenEncoder, windows: torch.Tensor, chunk: int,
          grid: list[Setting], progress: bool = True) -> list[dict]:
    """Every setting of `grid` on prompt windows [B, T] (the module doc says what is measured);
    `progress`: a bar over the windows."""
    layout = WeightLayout.for_model(model.cfg)
    top_k = model.cfg.top_k
    err = torch.zeros(len(grid), dtype=torch.float64)
    experts = torch.zeros(len(grid), dtype=torch.float64)
    fetches = torch.zeros(len(grid), dtype=torch.float64)
    ref = 0.0
    for tokens in progress_bar(windows, desc="calibrate", unit="window", enabled=progress):
        scores = encoder(tokens[None])[0]
        inputs, outputs = moe_inputs(model, tokens[None])
        classes = {}
        for block, h, native in zip(model.layers, inputs, outputs):
            moe = block.moe
            logits = moe.router(h)
            # every expert's output for every token [T, E, D]: each setting only gathers from it
            every = moe.expert_ffn(h[None], moe.w_gate, moe.w_up, moe.w_down).transpose(0, 1)
            shared = moe.shared(h)
            ref += float(native.double().pow(2).sum())
            for i, s in enumerate(grid):
                key = (s.tau_major, s.tau_minor)
                if key not in classes:
                    classes[key] = token_classes(scores, s.tau_major, s.tau_minor)
                idx = shared_set_route(logits, classes[key], top_k, s.budget_minor, s.budget_trivial)
                weights = routing_weights(logits, idx, moe.norm_topk_prob)
                picked = torch.gather(every, 1, idx.clamp_min(0)[..., None].expand(-1, -1, h.shape[1]))
                y = (picked * weights[..., None]).sum(1) + shared
                err[i] += float((y - native).double().pow(2).sum())
                experts[i] += int((idx >= 0).sum())
                fetches[i] += chunked_expert_fetches(idx, chunk)
    tokens = windows.numel()
    layers = model.cfg.n_layers
    return [{**asdict(s), "mse": round(float(err[i]) / ref, 6),
             "experts_per_token": round(float(experts[i]) / (tokens * layers), 4),
             "bytes_per_token": round(float(fetches[i]) * layout.expert_fetch_bytes / tokens)}
            for i, s in enumerate(grid)]


def pareto_front(points: list[dict]) -> list[dict]:
    """The points no other point beats on both bytes_per_token and mse (lower is better), by
    bytes; of equal points the first is kept."""
    front, best = [], float("inf")
    for p in sorted(points, key=lambda p: (p["bytes_per_token"], p["mse"])):
        if p["mse"] < best:
            front.append(p)
            best = p["mse"]
    return front


def choose(points: list[dict], mse_bound: float) -> dict:
    """The operating point: the fewest bytes per token with mse <= mse_bound (on the front)."""
    feasible = [p for p in pareto_front(points) if p["mse"] <= mse_bound]
    if not feasible:
        least = min(p["mse"] for p in points)
        raise ValueError(f"no setting has mse <= {mse_bound}: accepted bounds >= {least} "
                         "(the sweep's least mse)")
    return feasible[0]


def ablate(engine, model: MoEModel, encoder: TokenEncoder, windows: list[list[int]], policies,
           decode: DecodeConfig, front: list[dict] = (), log=print, progress: bool = True) -> dict:
    """On held-out windows, through the prefill pass: (1) every k/n budget at the configured
    thresholds, encoder-scored and random classes; (2) the configured point at every chunk of
    CHUNKS, native top-K alongside; (3) each calibration point of `front`, encoder classes.
    `progress`: a bar over the settings measured."""
    layout = WeightLayout.for_model(model.cfg)
    base = prefill_routing(policies, encoder, model.cfg.top_k)
    top_k = model.cfg.top_k
    bar = progress_bar(total=top_k * (top_k + 1) + len(CHUNKS) + len(front), desc="prefill ablate",
                       unit="setting", enabled=progress)

    def measure(routing: PrefillRouting, chunk: int) -> dict:
        policy = EdgeXpert(layout, decode, model, policies.coalescing_ratio,
                           policies.pruning_sparsity, policies.calibration, prefill=routing,
                           prefill_chunk=chunk)
        native = Policy(layout, decode, prefill_chunk=chunk)
        quality = prefill_quality(engine, policy, native, windows)
        bar.update(1)
        return quality

    start = time.time()
    budgets = []
    for k in range(1, model.cfg.top_k + 1):
        for n in range(1, k + 1):
            for classes in ("encoder", "random"):
                row = {"budget_minor": k, "budget_trivial": n, "classes": classes,
                       **measure(replace(base, budget_minor=k, budget_trivial=n, classes=classes),
                                 policies.prefill.chunk)}
                budgets.append(row)
                log(f"  k {k} n {n} {classes:<8} bytes/token {row['prefill_bytes_per_token']:>7} "
                    f"({-100 * row['prefill_bytes_reduction']:+.1f}%)  ppl ratio {row['ppl_ratio']}")
    chunks = []
    for chunk in CHUNKS:
        row = {"chunk": chunk, **measure(base, chunk)}
        chunks.append(row)
        log(f"  chunk {chunk:>3}  native {row['native_prefill_bytes_per_token']:>7} B/token, "
            f"edgexpert {row['prefill_bytes_per_token']:>7} ({-100 * row['prefill_bytes_reduction']:+.1f}%)")
    measured_front = []
    for point in front:
        routing = replace(base, tau_major=point["tau_major"], tau_minor=point["tau_minor"],
                          budget_minor=point["budget_minor"], budget_trivial=point["budget_trivial"],
                          classes="encoder")
        row = {**point, "heldout": measure(routing, policies.prefill.chunk)}
        measured_front.append(row)
        log(f"  front tau {point['tau_major']}/{point['tau_minor']} k {point['budget_minor']} n "
            f"{point['budget_trivial']}  train mse {point['mse']:.5f}  held-out ppl ratio "
            f"{row['heldout']['ppl_ratio']}  bytes {-100 * row['heldout']['prefill_bytes_reduction']:+.1f}%")
    bar.close()
    return {"budgets": budgets, "chunks": chunks, "front": measured_front,
            "seconds": round(time.time() - start, 1)}


CLASS_NAMES = {MAJOR: "major", MINOR: "minor", TRIVIAL: "trivial"}


def compare_encoders(engine, model: MoEModel, encoder: TokenEncoder, windows: list[list[int]],
                     policies, decode: DecodeConfig, progress: bool = True) -> dict:
    """The configured prefill point on held-out windows with each encoder path
    (ENCODER_PATHS): per path its prefill_quality (bytes against native top-K, perplexity
    ratio against the exact model); and the classes of every prefill token (each window but its
    last token, as the prefill pass scores it) under the integer encoder against the float one,
    as counts of each (float class -> integer class) move. `progress`: a bar over the paths."""
    layout = WeightLayout.for_model(model.cfg)
    routings = {path: prefill_routing(
                    replace(policies, prefill=replace(policies.prefill, encoder=path)), encoder,
                    model.cfg.top_k) for path in ENCODER_PATHS}
    moves: dict[str, int] = {}
    tokens = 0
    for window in windows:
        body = torch.tensor(window[:-1])
        before, after = (routings[path].token_classes(body) for path in ("float", "int"))
        tokens += len(body)
        for a, b in zip(before.tolist(), after.tolist()):
            if a != b:
                key = f"{CLASS_NAMES[a]}->{CLASS_NAMES[b]}"
                moves[key] = moves.get(key, 0) + 1
    paths = {}
    for path in progress_bar(ENCODER_PATHS, desc="encoder paths", unit="path", enabled=progress):
        policy = EdgeXpert(layout, decode, model, policies.coalescing_ratio,
                           policies.pruning_sparsity, policies.calibration, prefill=routings[path],
                           prefill_chunk=policies.prefill.chunk)
        native = Policy(layout, decode, prefill_chunk=policies.prefill.chunk)
        paths[path] = prefill_quality(engine, policy, native, windows)
    return {"prompt_tokens": tokens, "class_changes": sum(moves.values()),
            "class_moves": dict(sorted(moves.items())), "paths": paths}
