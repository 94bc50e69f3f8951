"""Prefill traces (edgexpert.contracts.prefill_trace, docs/traces.md): EdgeXpert's prefill on the
integer path, per prompt token and layer, in the PRU's integer contract (golden.blocks.pru).

`build_prefill_trace` runs the integer model's prefill pass over each prompt with the encoder's
classes and `golden.blocks.pru.route_layer`, and checks that the model's own routing weights are
`golden.blocks.pru.routing_weights` of its logits (the contract the PRU RTL is checked against).
It also keeps the MoE layer the routes give on the integer path (the MoE input x_q with its
scale, each chosen expert's hidden vector and output, the weighted sum): what the top's prefill
bench feeds the engine and checks its outputs against.
`synthetic_prefill_trace` routes given scores and logits without a model: the bench's corner
cases (one token, all major, all trivial, tied logits); its MoE arrays are zeros.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import torch
from tqdm import tqdm

from ...contracts.config import ModelConfig, PolicyConfig
from ...contracts.prefill_trace import (FETCH_ARRAYS, PREFILL_SCHEMA, PREFILL_VERSION, TOKEN_ARRAYS,
                                       PrefillTrace, PrefillTraceError)
from ...contracts.weight_layout import WeightLayout
from ..blocks import pru
from ..lm.model import KVCache
from ..policies.prefill import scoring_encoder

__all__ = ["prefill_settings", "build_prefill_trace", "synthetic_prefill_trace"]


def prefill_settings(policies: PolicyConfig) -> dict:
    """The trace header's `prefill` entry: the PRU's settings as integers."""
    return {"tau_major_q16": pru.tau_q16(policies.prefill.tau_major),
            "tau_minor_q16": pru.tau_q16(policies.prefill.tau_minor),
            "budget_minor": policies.prefill.budget_minor,
            "budget_trivial": policies.prefill.budget_trivial, "chunk": policies.prefill.chunk}


#: the token arrays of the MoE layer on the integer path (zeros without a model)
MOE_ARRAYS = ("x_q", "x_m", "x_e", "hidden_q", "hidden_m", "hidden_e", "expert_out_q16",
              "moe_out_q16")


def _assemble(model: ModelConfig, settings: dict, prompts: list[dict], source: dict) -> PrefillTrace:
    """prompts: per prompt `token`, `score_q16` [T], `logits_q16` [T, L, E], `experts` and
    `weights_q16` [T, L, K] and the `MOE_ARRAYS` (integer tensors, [T, L, ...])."""
    tokens: dict[str, list] = {name: [] for name in TOKEN_ARRAYS}
    fetches: dict[str, list] = {name: [] for name in FETCH_ARRAYS}
    for p, rec in enumerate(prompts):
        t = len(rec["score_q16"])
        classes = pru.token_classes(rec["score_q16"], settings["tau_major_q16"],
                                    settings["tau_minor_q16"])
        tokens["tok_prompt"].append(np.full(t, p))
        tokens["tok_index"].append(np.arange(t))
        tokens["token_class"].append(classes.numpy())
        for name in ("token", "score_q16", "logits_q16", "experts", "weights_q16") + MOE_ARRAYS:
            tokens[name].append(np.asarray(rec[name]))
        for layer in range(model.n_layers):
            chunks = pru.chunk_fetches(rec["experts"][:, layer], settings["chunk"])
            for c, experts in enumerate(chunks):
                mask = np.zeros(model.n_experts, bool)
                mask[experts] = True
                fetches["fetch_prompt"].append([p])
                fetches["fetch_layer"].append([layer])
                fetches["fetch_chunk"].append([c])
                fetches["fetch_experts"].append(np.packbits(mask)[None])
    arrays = {}
    for spec, lists in ((TOKEN_ARRAYS, tokens), (FETCH_ARRAYS, fetches)):
        for name, (dtype, _) in spec.items():
            arrays[name] = np.concatenate(lists[name]).astype(dtype)
    header = {"schema": PREFILL_SCHEMA, "version": PREFILL_VERSION,
              "model": dataclasses.asdict(model),
              "layout": dataclasses.asdict(WeightLayout.for_model(model)), "path": "int",
              "prefill": settings, "source": source}
    return PrefillTrace(header, arrays)


@torch.no_grad()
def build_prefill_trace(engine, encoder, policies: PolicyConfig, prompts: list[list[int]],
                        source: dict, progress: bool = False) -> PrefillTrace:
    """The integer model `engine` (golden.integer.int_model.IntModel) prefilling each prompt (all but
    its last token, as golden.decoding.decode.prefill does) with EdgeXpert's routing from the encoder's
    Q.16 scores (the float encoder or its integer twin, as `policies.prefill.encoder` says; the
    trace's `source` records which)."""
    cfg = engine.cfg
    if not cfg.norm_topk_prob:
        raise PrefillTraceError("the PRU renormalizes over the chosen experts: accepted models "
                                "with norm_topk_prob (not OLMoE's softmax over all experts)")
    settings = prefill_settings(policies)
    encoder = scoring_encoder(encoder, policies.prefill.encoder)
    source = {**source, "encoder": policies.prefill.encoder}
    pru.check_budgets(cfg.top_k, settings["budget_minor"], settings["budget_trivial"])
    records = []
    for prompt in tqdm(prompts, desc="prefill traces", file=sys.stderr, disable=not progress):
        body = torch.tensor(prompt[:-1], dtype=torch.long)
        n = len(body)
        if n == 0:
            raise PrefillTraceError("a prompt of 1 token has no prefill pass: accepted prompts "
                                    "of 2 tokens or more")
        scores = pru.score_q16(encoder(body[None])[0])
        classes = pru.token_classes(scores, settings["tau_major_q16"], settings["tau_minor_q16"])

        def router(layer, logits, h):
            return pru.route_layer(pru.logit_q16(logits), classes, cfg.top_k,
                                   settings["budget_minor"], settings["budget_trivial"])
        _, traces = engine.step(body, torch.arange(n), KVCache(),
                                torch.tril(torch.ones(n, n, dtype=torch.bool)), router)
        z = torch.stack([t.int_data["router_q16"] for t in traces], 1)
        experts = torch.stack([t.experts for t in traces], 1)
        weights = torch.stack([t.int_data["weights_q16"] for t in traces], 1)
        for layer in range(cfg.n_layers):
            if not torch.equal(weights[:, layer], pru.routing_weights(z[:, layer], experts[:, layer])):
                raise PrefillTraceError(f"layer {layer}: the integer model's routing weights are "
                                        "not golden.blocks.pru.routing_weights of its logits")
        moe = {name: torch.stack([key(t.int_data) for t in traces], 1)
               for name, key in _MOE_KEYS.items()}
        records.append({"token": body, "score_q16": scores, "logits_q16": z, "experts": experts,
                        "weights_q16": weights, **moe})
    return _assemble(cfg, settings, records, source)


#: each MOE_ARRAYS entry from a layer trace's `int_data` (golden.integer.int_model.IntModel.step)
_MOE_KEYS = {"x_q": lambda d: d["x8"], "x_m": lambda d: d["x_scale"].m,
             "x_e": lambda d: d["x_scale"].e, "hidden_q": lambda d: d["hidden_q"],
             "hidden_m": lambda d: d["hidden_scale"].m, "hidden_e": lambda d: d["hidden_scale"].e,
             "expert_out_q16": lambda d: d["expert_out_q16"],
             "moe_out_q16": lambda d: d["moe_out_q16"]}


def synthetic_prefill_trace(model: ModelConfig, settings: dict, prompts: list[tuple],
                            source: dict) -> PrefillTrace:
    """A prefill trace of given prompts (score_q16 [T], logits_q16 [T, L, E]) routed by the
    contract alone: the routing of layer l does not feed layer l + 1's logits here."""
    records = []
    for scores, z in prompts:
        scores, z = torch.as_tensor(scores, dtype=torch.long), torch.as_tensor(z, dtype=torch.long)
        classes = pru.token_classes(scores, settings["tau_major_q16"], settings["tau_minor_q16"])
        experts = torch.stack([pru.route_layer(z[:, layer], classes, model.top_k,
                                               settings["budget_minor"], settings["budget_trivial"])
                               for layer in range(model.n_layers)], 1)
        weights = torch.stack([pru.routing_weights(z[:, layer], experts[:, layer])
                               for layer in range(model.n_layers)], 1)
        t, l_n, k, d, f = len(scores), model.n_layers, model.top_k, model.d_model, model.expert_ffn
        shapes = {"x_q": (t, l_n, d), "x_m": (t, l_n), "x_e": (t, l_n), "hidden_q": (t, l_n, k, f),
                  "hidden_m": (t, l_n, k), "hidden_e": (t, l_n, k),
                  "expert_out_q16": (t, l_n, k, d), "moe_out_q16": (t, l_n, d)}
        records.append({"token": torch.zeros(t, dtype=torch.long), "score_q16": scores,
                        "logits_q16": z, "experts": experts, "weights_q16": weights,
                        **{name: torch.zeros(shape, dtype=torch.long)
                           for name, shape in shapes.items()}})
    return _assemble(model, settings, records, source)
