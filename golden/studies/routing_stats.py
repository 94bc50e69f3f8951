"""Routing observations of a bundled model's decoding, for the performance model's routing model
(sim/perf/routing.py, `edgexpert routing`; docs/performance-model.md, "Routing model").

The bundled prompts are decoded on the A8W4 integer path twice, as `edgexpert compare` does:
plainly (consecutive tokens, each routed by the target) and with naive speculative decoding on
its paper's draft (the EAGLE head: EdgeXpert's baseline, the draft whose tree EdgeXpert measured
on Qwen3-30B-A3B). What is kept is the routing alone: per plain-decoding token and layer its
top-k experts; per verification pass the tree's shape (each row's parent and depth) and each
row's experts per layer.
"""

from __future__ import annotations

import torch

from ...contracts.config import Config
from ...contracts.trace import PassKind
from ...contracts.weight_layout import WeightLayout
from ...support.progress import progress_bar
from ..decoding.decode import decode_ar, decode_speculative
from ..decoding.eagle.head import EagleHead
from ..integer.int_model import quantize_model
from ..lm.checkpoint import Checkpoint
from ..policies.registry import build_policy

__all__ = ["routing_observations"]


def _experts(layers) -> list:
    """[tokens][layers][k] expert ids of one pass (its rows, each layer's top-k)."""
    return torch.stack([t.experts for t in layers], 1).tolist()


def routing_observations(ckpt: Checkpoint, config: Config, prompts: list[list[int]],
                         eot: int | None, eagle: EagleHead | None,
                         progress: bool = True) -> dict:
    """The routing of `prompts` decoded plainly and speculatively (naive_sd, its paper's draft:
    the EAGLE head `eagle`), greedy, `config.decode`'s tree and seed. Returns {"model", "experts",
    "top_k", "layers", "seed", "decode", "ar": [per prompt: [tokens][layers][k]], "verify":
    [per pass: {"parents", "depths", "experts": [rows][layers][k]}], "tokens_per_step"}."""
    cfg = ckpt.model.cfg
    engine = quantize_model(ckpt.model)
    layout = WeightLayout.for_model(cfg)
    policy = build_policy("naive_sd", config, ckpt.model, layout, eagle=eagle)
    ar, verify, tokens, steps = [], [], 0, 0
    for prompt in progress_bar(prompts, desc=f"routing {config.model.name}", unit="prompt",
                               enabled=progress):
        plain = decode_ar(engine, prompt, config.decode, eot, keep_traces=True)
        ar.append([_experts(p.layers)[0] for p in plain.traces])
        sd = decode_speculative(engine, prompt, config.decode, eot, keep_traces=True,
                                policy=policy)
        tokens, steps = tokens + len(sd.tokens), steps + sd.steps
        verify += [{"parents": p.parents, "depths": p.depths, "experts": _experts(p.layers)}
                   for p in sd.traces if p.kind == PassKind.VERIFY]
    return {"model": config.model.name, "experts": cfg.n_experts, "top_k": cfg.top_k,
            "layers": cfg.n_layers, "seed": config.decode.seed,
            "decode": {"max_depth": config.decode.max_depth,
                       "max_candidates": config.decode.max_candidates,
                       "width": config.decode.width, "branch": config.decode.branch},
            "draft": "eagle" if eagle is not None else "self",
            "prompts": len(prompts), "tokens_per_step": round(tokens / max(steps, 1), 4),
            "ar": ar, "verify": verify}
