"""Latency and energy per token of decoding policies on full-size MoE models (issue 12 item 6's
function; docs/performance-model.md, "Estimate").

`estimate(config, models, policies)` builds each (model, policy)'s `StepPlan` (sim/perf/passes.py)
from a routing model and costs it on `config.platform`. Routing is "synthetic" for every model
here (labelled so in every entry): the full-size models' from cited measurements and a
statistical model of distinct experts; the bundled model's from its measured per-token
statistics (docs/policies.md). Plain decoding is exact either way (top-k experts per token).

Synthetic routing, full-size models (docs/performance-model.md, "Routing model"):
- distinct experts per MoE layer of a pass: the routing model of sim/perf/routing.py (skewed
  popularity, a context share, consecutive-token and sibling sharing), fitted on the two bundled
  twins and carried to the model's E through both (`routing.params_for`), evaluated on the
  pass's tree (EdgeXpert's EAGLE-3 tree: 64 candidates, depth 6) or chain of consecutive tokens (a prefill chunk, Specter's verification);
  checked against EdgeXpert's 52.1 experts for Qwen3-30B-A3B (`validation`).
- tokens per step (accepted + bonus) per model: published where a paper measured it (with its
  draft), else assumed and said so (`ACCEPTANCE`); every entry's `inputs` says for each input
  whether it is exact, measured, published, fitted or assumed, and where it comes from.
- `sensitivity`: latency per token against tokens per step and against the verification's
  distinct-expert share, and each policy's break-even tokens per step against plain decoding.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from ...contracts.config import Config
from ...contracts.errors import InputError
from .models import BUNDLED, MoEModelSpec, linear_bytes, model_names, model_spec
from . import routing
from .passes import Pass, PassCoster, StepPlan
from .traffic import measured_plan, onchip_plan

__all__ = ["POLICIES", "check_request", "estimate", "plan_step", "plan_prefill", "prefill_experts",
           "policy_inputs", "sensitivity", "validation", "CONTEXT_TOKENS", "ACCEPTANCE",
           "INPUT_KINDS", "SENSITIVITY_ACCEPTANCE", "SENSITIVITY_SHARES"]

#: policies the estimate knows: `edgexpert compare`'s, in its order (golden/policies/registry.py COMPARED)
POLICIES = ("ar", "naive_sd", "edgexpert", "moe_spec", "s2moe", "specmoe", "specter", "combined")

#: tokens already in the KV cache when a token is generated (open: EdgeXpert does not state its
#: sequence length; our choice, a 512-token context)
CONTEXT_TOKENS = 512

#: where an input of an estimate comes from, most certain first; a value made of several takes
#: the kind of its least certain part: exact (by definition: plain decoding's one token and
#: top-k experts), measured (on the model itself), published (a paper's figure for the model,
#: cited), fitted (a model fitted on measurements, sim/perf/routing.py), assumed (a figure
#: taken from another model or our choice, flagged)
INPUT_KINDS = ("exact", "measured", "published", "fitted", "assumed")

_EDGEXPERT = "EdgeXpert (MICRO 2026, arXiv 2608.05303; /work/shared/REFERENCES.md)"
#: tokens per step (accepted + bonus) of naive speculative decoding with an EAGLE-3 draft tree of
#: 64 candidates, depth 6, per model, where a paper published it
ACCEPTANCE = {
    "qwen3-30b-a3b": (4.3, "published", f"{_EDGEXPERT}, motivation: Qwen3-30B-A3B with an "
                      "EAGLE-3 head (64 candidates, depth 6) accepts 4.3 tokens per step"),
}
#: EdgeXpert's acceptance with its coalescing and computational calibration, where published
#: (read as tokens per step, as the paper's 4.3 is)
EDGEXPERT_ACCEPTANCE_PUBLISHED = {
    "olmoe-1b-7b": (4.0, f"{_EDGEXPERT}, ablation: OLMoE-1B-7B with EAGLE-3, coalescing with "
                    "calibration: acceptance 4.0 (2.7 without calibration)"),
}
#: a model without a published figure takes Qwen3-30B-A3B's (assumed, flagged in its inputs)
ASSUMED_ACCEPTANCE = ACCEPTANCE["qwen3-30b-a3b"][0]
#: the sensitivity's default axes: tokens per step, and the share of a layer's experts the
#: verification activates
SENSITIVITY_ACCEPTANCE = (1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0)
SENSITIVITY_SHARES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: the bundled model's measurements (docs/policies.md, `edgexpert compare`, 8 prompts x 64
#: tokens, each policy on its paper's draft, 2026-12-01): tokens per step, passes per token,
#: routed-expert EMA bytes per decoded token and per prompt token
BUNDLED_MEASURED = {
    "ar": (1.0, 1.0, 305_152, 102_311),
    "naive_sd": (3.1801, 2.2012, 542_844, 102_311),
    "edgexpert": (3.0118, 2.3242, 493_194, 90_918),
    "moe_spec": (3.3464, 2.0918, 272_521, 102_311),
    "s2moe": (1.3474, 2.6582, 580_355, 102_311),
    "specmoe": (2.5990, 2.6934, 493_823, 102_311),
    "specter": (1.7534, 1.1406, 327_614, 102_311),
    "combined": (2.4498, 1.6328, 447_670, 102_311),
}
#: the policies that draft with the bundled EAGLE head in `edgexpert compare` (their papers'
#: drafts, golden/policies/registry.py PAPER_DRAFT), and what one of its draft passes reads of it
#: (golden/decoding/eagle/head.py `EagleHead.weight_bytes`: its layer at int4, 1,024 int8 head rows)
BUNDLED_EAGLE = ("naive_sd", "edgexpert", "moe_spec", "combined")
BUNDLED_EAGLE_HEAD_BYTES = 498_944
#: the bundled model's experts per layer (its ModelConfig), against which policies.moe_spec_budget
#: is set; a full-size model keeps the same share of its experts
BUNDLED_EXPERTS = 32
#: MoE-Spec's budgeted verification shortens acceptance by 1.4 % (MoE-Spec, arXiv 2602.16052)
MOE_SPEC_ACCEPTANCE = 1 - 0.014
#: EdgeXpert's coalescing shortens acceptance (bundled model, both on the EAGLE head: 3.01 vs
#: 3.18 tokens per step)
EDGEXPERT_ACCEPTANCE = BUNDLED_MEASURED["edgexpert"][0] / BUNDLED_MEASURED["naive_sd"][0]
#: EdgeXpert's prompt-wise expert reuse: prefill expert traffic -55.7 % (EdgeXpert, MICRO 2026)
EDGEXPERT_PREFILL_KEEP = 1 - 0.557
#: the combined policy's tree (policies.combined.depth x .candidates) accepts this share
#: of the 64-candidate, depth-6 tree's tokens per step (the bundled model, both with the EAGLE
#: head: 2.45 / 3.18 tokens per step)
COMBINED_ACCEPTANCE = BUNDLED_MEASURED["combined"][0] / BUNDLED_MEASURED["naive_sd"][0]
#: EAGLE-3's draft vocabulary (Li et al., "EAGLE-3", arXiv 2503.01840; the reference code's
#: draft_vocab_size 32000)
EAGLE3_DRAFT_VOCAB = 32000


def _eagle3_draft_bytes(m: MoEModelSpec) -> int:
    """EAGLE-3's draft head: the feature fusion (3d -> d), one decoder layer whose attention
    reads [embedding, feature] (2d wide) with the target's head shapes, a dense SwiGLU FFN of
    width 3d (open: our choice), its int8 head over the draft vocabulary."""
    d, hd = m.d_model, m.head_dim
    attention = (linear_bytes(2 * d, m.n_heads * hd) + 2 * linear_bytes(2 * d, m.n_kv_heads * hd)
                 + linear_bytes(m.n_heads * hd, d))
    ffn = 2 * linear_bytes(d, 3 * d) + linear_bytes(3 * d, d)
    return linear_bytes(3 * d, d) + attention + ffn + linear_bytes(d, EAGLE3_DRAFT_VOCAB, 8)


def _eagle3_draft_macs(m: MoEModelSpec) -> int:
    d, hd = m.d_model, m.head_dim
    return (3 * d * d + 2 * d * (m.n_heads + 2 * m.n_kv_heads) * hd + m.n_heads * hd * d
            + 9 * d * d + d * EAGLE3_DRAFT_VOCAB)


def _target_pass(m: MoEModelSpec, kind: str, tokens: int, experts_per_layer: float,
                 context: int, kv_written: float, ratio: float = 1.0, head: bool = True,
                 expert_bits: int = 4, resident: int = 0, held: int = 0) -> Pass:
    """A pass of the target model: `experts_per_layer` distinct routed experts fetched in every
    MoE layer (their `ratio` share of channels, at `expert_bits`), shared experts always, every
    non-expert weight but the `resident` bytes kept on chip (and `held` bytes of other weights
    kept on chip meanwhile)."""
    routed = m.moe_layers * experts_per_layer * m.expert_bytes * ratio * expert_bits / 4
    shared = m.moe_layers * m.n_shared_experts * m.expert_bytes
    weights = m.nonexpert_bytes - (0 if head else m.head_bytes)
    resident = min(resident, weights)
    nonexpert = weights - resident + tokens * m.embedding_row_bytes
    macs = {"expert": tokens * m.moe_layers * (m.top_k * ratio + m.n_shared_experts)
            * m.expert_macs,
            "projection": tokens * m.nonexpert_macs,
            "attention": tokens * m.attention_macs(context),
            "head": tokens * m.head_macs if head else 0}
    return Pass(kind, tokens, routed + shared, nonexpert, context * m.kv_bytes_per_token,
                kv_written * m.kv_bytes_per_token, macs, resident_bytes=resident, held_bytes=held,
                expert_channel_ratio=ratio)


def _input(value: float, kind: str, source: str) -> dict:
    return {"value": value, "kind": kind, "source": source}


def _combine(value: float, *parts: dict, source: str = "") -> dict:
    """An input made of `parts` (and `source`): the kind of its least certain part."""
    kind = max((p["kind"] for p in parts), key=INPUT_KINDS.index)
    text = "; ".join([source] * bool(source) + [p["source"] for p in parts])
    return _input(value, kind, text)


_BUNDLED_RUN = ("the bundled model's `edgexpert compare` (docs/policies.md, 8 prompts x 64 "
                "tokens, 2026-12-01)")


def _bundled_ratio(policy: str, what: str) -> dict:
    """A bundled measurement carried to a full-size model: assumed."""
    return _input(None, "assumed", f"{what} measured on {_BUNDLED_RUN} ({policy}), carried "
                  "over to this model")


def _eagle3_acceptance(m: MoEModelSpec) -> dict:
    """naive_sd's tokens per step on model `m`'s EAGLE-3 tree: published, derived from
    EdgeXpert's published figure, or assumed."""
    if m.name in ACCEPTANCE:
        value, kind, source = ACCEPTANCE[m.name]
        return _input(value, kind, source)
    if m.name in EDGEXPERT_ACCEPTANCE_PUBLISHED:
        value, source = EDGEXPERT_ACCEPTANCE_PUBLISHED[m.name]
        return _input(value / EDGEXPERT_ACCEPTANCE, "assumed", f"{source}, divided by "
                      f"EdgeXpert's loss of acceptance measured on {_BUNDLED_RUN} "
                      f"({EDGEXPERT_ACCEPTANCE:.3f})")
    return _input(ASSUMED_ACCEPTANCE, "assumed", "no published acceptance for this model: "
                  "Qwen3-30B-A3B's 4.3 tokens per step with EAGLE-3 (EdgeXpert) taken")


def _tree(config: Config, policy: str) -> routing.TreeShape:
    """The draft tree a policy verifies on a full-size model (routing.canonical_tree)."""
    d, p = config.decode, config.policies
    if policy == "combined":
        return routing.canonical_tree(p.combined.candidates, p.combined.depth, d.width)
    return routing.canonical_tree(d.max_candidates, d.max_depth, d.width)


def _routed(m: MoEModelSpec, shape: routing.TreeShape, what: str) -> dict:
    """The routing model's distinct experts per layer for the tokens of `shape` on `m`."""
    params, s = routing.params_for(m.n_experts, m.top_k)
    experts = routing.model_experts(shape, m.n_experts, m.top_k)
    return _input(experts, "fitted", f"{what}: routing model (sim/perf/routing.py), "
                  f"{params.model} (skew {params.skew}, Zipf s {s} at {m.n_experts} experts, "
                  f"top-{m.top_k}, sigma {params.sigma}, context {params.context}, q_seq "
                  f"{params.q_seq}, q_sib {params.q_sib}; Monte Carlo seed {routing.MC_SEED}, "
                  f"{routing.SAMPLES} draws), {params.source}")


def policy_inputs(m: MoEModelSpec, policy: str, config: Config) -> dict:
    """What a synthetic plan of `policy` on `m` rests on, each input {"value", "kind",
    "source"} (`INPUT_KINDS`): `tokens_per_step`, `verify_experts_per_layer` (distinct routed
    experts of a step's target pass per layer), `prefill_experts_per_layer`, and the policy's
    own factors."""
    k = m.top_k
    plain = _input(1.0, "exact", "plain decoding: one token per step")
    if m.name == BUNDLED:
        tokens, _, expert_bytes, prefill_bytes = BUNDLED_MEASURED[policy]
        chunk = config.policies.prefill.chunk
        return {"tokens_per_step": _input(tokens, "exact" if policy == "ar" else "measured",
                                          f"{_BUNDLED_RUN} ({policy})"),
                "expert_bytes_per_token": _input(expert_bytes, "measured", _BUNDLED_RUN),
                "prefill_experts_per_layer": _input(
                    prefill_bytes * chunk / (m.moe_layers * m.expert_bytes), "measured",
                    f"{_BUNDLED_RUN}: prefill expert bytes per prompt token x the chunk")}
    prefill = _routed(m, routing.chain(config.policies.prefill.chunk),
                      f"a prefill chunk of {config.policies.prefill.chunk} consecutive tokens")
    if policy == "edgexpert" or (policy == "combined" and config.policies.combined.prefill_reuse):
        prefill = _combine(prefill["value"] * EDGEXPERT_PREFILL_KEEP, prefill, _input(
            EDGEXPERT_PREFILL_KEEP, "published", f"{_EDGEXPERT}: prompt-wise expert reuse, "
            "-55.7 % prefill expert traffic"))
    out = {"prefill_experts_per_layer": prefill}
    if policy == "ar" or (policy == "specmoe" and _onchip_slots(m, config) == 0):
        return {**out, "tokens_per_step": plain,
                "verify_experts_per_layer": _input(float(k), "exact", "top-k per token")}
    if policy in ("s2moe", "specmoe", "specter"):
        out["tokens_per_step"] = {**_bundled_ratio(policy, "tokens per step"),
                                  "value": BUNDLED_MEASURED[policy][0]}
        if policy != "specter":
            out["expert_bytes_ratio"] = {**_bundled_ratio(policy, "routed-expert bytes per "
                                                          "token against plain decoding's"),
                                         "value": BUNDLED_MEASURED[policy][2]
                                         / BUNDLED_MEASURED["ar"][2]}
            return out
        chain = config.policies.specter.chain + 1
        out["verify_experts_per_layer"] = _routed(m, routing.chain(chain),
                                                  f"a verified chain of {chain} tokens")
        return out
    naive = _eagle3_acceptance(m)
    tree = _tree(config, policy)
    experts = _routed(m, tree, f"a draft tree of {tree.tokens - 1} candidates and its root")
    if policy == "naive_sd":
        tokens = naive
    elif policy == "edgexpert":
        if m.name in EDGEXPERT_ACCEPTANCE_PUBLISHED:
            value, source = EDGEXPERT_ACCEPTANCE_PUBLISHED[m.name]
            tokens = _input(value, "published", source)
        else:
            tokens = _combine(naive["value"] * EDGEXPERT_ACCEPTANCE, naive, _bundled_ratio(
                "edgexpert / naive_sd", "EdgeXpert's loss of acceptance"))
        out["coalescing_ratio"] = _input(config.policies.coalescing_ratio, "assumed",
                                         "policies.coalescing_ratio: EdgeXpert's selection "
                                         "ratio is not published (our choice)")
    elif policy == "moe_spec":
        tokens = _combine(naive["value"] * MOE_SPEC_ACCEPTANCE, naive, _input(
            MOE_SPEC_ACCEPTANCE, "published", "MoE-Spec (arXiv 2602.16052): acceptance "
            "length -1.4 % with its budget"))
        budget = max(k, round(config.policies.moe_spec_budget / BUNDLED_EXPERTS * m.n_experts))
        out["moe_spec_budget"] = _input(budget, "assumed", f"policies.moe_spec_budget / "
                                        f"{BUNDLED_EXPERTS} of the experts (our choice)")
        if budget < experts["value"]:
            experts = _input(float(budget), "assumed", f"the budget of {budget} experts binds "
                             f"(the tree's own: {experts['value']:.1f})")
    else:   # combined
        tokens = _combine(naive["value"] * COMBINED_ACCEPTANCE, naive, _bundled_ratio(
            "combined / naive_sd", "the smaller tree's share of acceptance"))
    return {**out, "tokens_per_step": tokens, "verify_experts_per_layer": experts}


def _value(inputs: dict, key: str) -> float:
    return inputs[key]["value"]


def _measured_step(m: MoEModelSpec, policy: str, config: Config, context: int,
                   resident: int, inputs: dict, verify_experts: float | None = None) -> StepPlan:
    """A policy from the bundled model's measured per-token statistics: tokens per step, passes
    per token, and routed-expert bytes per token (for a full-size model: its plain decoding's
    times the bundled policy's ratio to plain decoding). On the bundled model the draft passes
    of the policies that draft with the EAGLE head there (`BUNDLED_EAGLE`) are head passes and
    the step's routed bytes are the verification's; otherwise a step's routed bytes are spread
    evenly over its passes, each of which reads the non-expert weights (a self-draft is the
    target's own layers). The passes per step are the measured ones whatever `inputs` says the
    tokens per step are; `verify_experts` replaces the verification's distinct experts."""
    measured_tokens, passes_per_token, expert_per_token, _ = BUNDLED_MEASURED[policy]
    tokens = _value(inputs, "tokens_per_step")
    if m.name != BUNDLED:
        expert_per_token = (m.moe_layers * m.top_k * m.expert_bytes
                            * _value(inputs, "expert_bytes_ratio"))
    runs = passes_per_token * measured_tokens
    verify_tokens = (config.policies.combined.candidates if policy == "combined"
                     else config.decode.max_candidates)
    draft_tokens = config.decode.width
    ratio = config.policies.coalescing_ratio if policy == "edgexpert" else 1.0
    source = "" if m.name == BUNDLED else ", expert bytes scaled by plain decoding's"
    if m.name == BUNDLED and policy in BUNDLED_EAGLE:
        head = BUNDLED_EAGLE_HEAD_BYTES
        onchip = _combined_onchip(m, config)["draft_head"] if policy == "combined" else 0
        experts = expert_per_token * measured_tokens / (m.moe_layers * m.expert_bytes * ratio)
        verify = _target_pass(m, "verify", verify_tokens, _or(verify_experts, experts), context,
                              tokens, ratio, resident=resident, held=onchip)
        layer_kv = m.kv_bytes_per_token / m.n_layers
        draft = Pass("draft", draft_tokens, 0.0, draft_tokens * m.embedding_row_bytes,
                     context * layer_kv, draft_tokens * layer_kv,
                     {"draft_head": draft_tokens * 2 * head}, draft_head_bytes=head - onchip,
                     resident_bytes=onchip, held_bytes=resident if onchip else 0)
        return StepPlan(policy, m.name, "synthetic", tokens, ((verify, 1.0), (draft, runs - 1)), (
            f"the bundled model's measured tokens/step, passes/token and expert bytes/token "
            f"(docs/policies.md); its draft passes are the EAGLE head's ({head} B"
            f"{', on chip' if onchip else ''}); verify tokens = the tree's candidates (an upper "
            f"bound where the tree stops early)",))
    per_pass = expert_per_token * measured_tokens / runs / (m.moe_layers * m.expert_bytes * ratio)
    verify = _target_pass(m, "verify", verify_tokens, _or(verify_experts, per_pass), context,
                          tokens, ratio, resident=resident)
    draft = _target_pass(m, "draft", draft_tokens, per_pass, context, draft_tokens, ratio,
                         resident=resident)
    return StepPlan(policy, m.name, "synthetic", tokens, ((verify, 1.0), (draft, runs - 1)), (
        f"the bundled model's measured tokens/step, passes/token and expert bytes/token "
        f"(docs/policies.md){source}, spread evenly over the step's passes; verify tokens = "
        f"decode.max_candidates (an upper bound where the tree stops early)",))


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _onchip_slots(m: MoEModelSpec, config: Config) -> int:
    return config.policies.onchip_expert_kib * 1024 // (m.moe_layers * m.expert_bytes)


def plan_step(m: MoEModelSpec, policy: str, config: Config, context: int = CONTEXT_TOKENS,
              resident: int = 0, tokens_per_step: float | None = None,
              verify_experts: float | None = None) -> StepPlan:
    """One decoding step of `policy` on model `m` (synthetic routing); `resident` bytes of the
    target's non-expert weights stay on chip. `tokens_per_step` and `verify_experts` (distinct
    routed experts per layer of the step's target pass) replace the plan's inputs
    (`policy_inputs`), as the sensitivity does."""
    inputs = policy_inputs(m, policy, config)
    if tokens_per_step is not None:
        inputs["tokens_per_step"] = _input(tokens_per_step, "assumed", "sensitivity")
    if policy == "ar" or (policy == "specmoe" and m.name != BUNDLED
                          and _onchip_slots(m, config) == 0):
        experts = _or(verify_experts, float(m.top_k))
        note = ("plain decoding: top-k experts per token, exact" if policy == "ar" else
                f"no expert fits on chip ({config.policies.onchip_expert_kib} KiB over "
                f"{m.moe_layers} layers, {m.expert_bytes} B per expert): the resident draft has "
                "nothing to draft with, so the policy is plain decoding")
        # plain decoding reads one token per pass: more tokens per step are more passes
        runs = _value(inputs, "tokens_per_step")
        return StepPlan(policy, m.name, "synthetic", runs, (
            (_target_pass(m, "plain", 1, experts, context, 1, resident=resident), runs),),
            (note,))
    if m.name == BUNDLED or policy in ("s2moe", "specmoe"):
        return _measured_step(m, policy, config, context, resident, inputs, verify_experts)
    if policy == "specter":
        return _specter_step(m, config, context, resident, inputs, verify_experts)
    return _eagle3_step(m, policy, config, context, resident, inputs, verify_experts)


def _eagle3_step(m: MoEModelSpec, policy: str, config: Config, context: int, resident: int,
                 inputs: dict, verify_experts: float | None) -> StepPlan:
    """Unoptimized MoE + EAGLE-3 (naive_sd), EdgeXpert's coalescing on it, MoE-Spec's budget,
    ours (combined: its own tree, the SRAM by reuse, `_combined_onchip`)."""
    d = config.decode
    tokens = _value(inputs, "tokens_per_step")
    experts = _or(verify_experts, _value(inputs, "verify_experts_per_layer"))
    ratio = 1.0
    head_onchip = 0
    note = ""
    if policy == "combined":
        p = config.policies
        d = dataclasses.replace(d, max_depth=p.combined.depth,
                                max_candidates=p.combined.candidates)
        kept = _combined_onchip(m, config)
        head_onchip, resident = kept["draft_head"], sum(kept["nonexpert"].values())
        note = (f"; tree of depth {d.max_depth}, {d.max_candidates} candidates; "
                + ("the head on chip" if head_onchip else "the head does not fit on chip")
                + f", {resident} B of non-expert weights resident")
    if policy == "edgexpert":
        ratio = config.policies.coalescing_ratio
        note = f"; coalescing ratio {ratio}"
    elif policy == "moe_spec":
        budget = _value(inputs, "moe_spec_budget")
        experts = min(experts, budget)
        note = f"; budget {budget} experts per layer"
    verify = _target_pass(m, "verify", d.max_candidates, experts, context, tokens, ratio,
                          resident=resident, held=head_onchip)
    draft_bytes = _eagle3_draft_bytes(m)
    layer_kv = m.kv_bytes_per_token / m.n_layers
    draft = Pass("draft", d.width, 0.0, 0.0, context * layer_kv, d.width * layer_kv,
                 {"draft_head": d.width * _eagle3_draft_macs(m)},
                 draft_head_bytes=draft_bytes - head_onchip, resident_bytes=head_onchip,
                 held_bytes=resident if policy == "combined" else 0)
    return StepPlan(policy, m.name, "synthetic", tokens, ((verify, 1.0), (draft, d.max_depth)), (
        f"EAGLE-3 draft head ({draft_bytes} B, no experts), {d.max_depth} draft passes of "
        f"{d.width} tokens; verification of {d.max_candidates} candidates activates "
        f"{experts:.1f} experts per layer (routing model){note}; {tokens:.2f} tokens per step",))


def _combined_onchip(m: MoEModelSpec, config: Config) -> dict:
    """What the combined policy keeps on chip on model `m` (sim/perf/traffic.py `onchip_plan`, rule
    "reuse"): its draft head when it fits (the bundled head, or a full-size model's EAGLE-3
    head), then non-expert weights."""
    head = BUNDLED_EAGLE_HEAD_BYTES if m.name == BUNDLED else _eagle3_draft_bytes(m)
    return onchip_plan(m, config, "reuse", head)


def _specter_step(m: MoEModelSpec, config: Config, context: int, resident: int, inputs: dict,
                  verify_experts: float | None) -> StepPlan:
    """Specter: a chain of `specter.chain` draft tokens, each a pass of the target with its
    routed experts at `specter.draft_bits`; verification of the chain and its root. Its LRU
    expert slots hold no expert of a full-size model in 512 KB, so nothing is prefetched."""
    p = config.policies
    chain = p.specter.chain
    tokens = _value(inputs, "tokens_per_step")
    draft = _target_pass(m, "draft", 1, m.top_k, context, 1, expert_bits=p.specter.draft_bits,
                         resident=resident)
    experts = _or(verify_experts, _value(inputs, "verify_experts_per_layer"))
    verify = _target_pass(m, "verify", chain + 1, experts, context, tokens, resident=resident)
    return StepPlan("specter", m.name, "synthetic", tokens, ((draft, chain), (verify, 1.0)), (
        f"{chain} draft pass(es) with {p.specter.draft_bits}-bit experts, verification of "
        f"{chain + 1} tokens ({experts:.1f} experts per layer); tokens per step measured on the "
        f"bundled model; {_onchip_slots(m, config)} on-chip expert slots per layer",))


def prefill_experts(m: MoEModelSpec, policy: str, config: Config) -> float:
    """Distinct routed experts one prefill chunk fetches per MoE layer: on the bundled model its
    measured prefill bytes per prompt token x the chunk (partial last chunks included in that
    mean); elsewhere the routing model's for a chain of the chunk's tokens, cut by EdgeXpert's
    prompt-wise reuse."""
    return _value(policy_inputs(m, policy, config), "prefill_experts_per_layer")


def plan_prefill(m: MoEModelSpec, policy: str, config: Config, context: int = CONTEXT_TOKENS,
                 resident: int = 0) -> StepPlan:
    """One prefill chunk (`policies.prefill.chunk` prompt tokens, each expert streamed once per
    chunk); the head is read by the last chunk only and left out here."""
    chunk = config.policies.prefill.chunk
    experts = prefill_experts(m, policy, config)
    # the chunk's tokens attend to the half of the prompt before them on average
    p = _target_pass(m, "prefill", chunk, experts, context // 2, chunk, head=False,
                     resident=resident)
    return StepPlan(policy, m.name, "synthetic", float(chunk), ((p, 1.0),),
                    (f"prefill chunks of {chunk} tokens, {experts:.1f} experts per layer",))


def _cost_plan(plan: StepPlan, coster: PassCoster) -> dict:
    time_s, energy = 0.0, {"dram": 0.0, "sram": 0.0, "mac": 0.0, "control": 0.0}
    for p, runs in plan.passes:
        c = coster.cost(p)
        time_s += runs * c.time_s
        for k, v in c.energy_j.items():
            energy[k] += runs * v
    n = plan.tokens_per_step
    return {"time_s": time_s / n, "energy": {k: v / n for k, v in energy.items()},
            "bytes": plan.per_token("fetch_bytes"), "macs": plan.per_token("total_macs")}


def _check(names, accepted, what: str) -> None:
    for name in names:
        if name not in accepted:
            raise InputError(f"{what} {name!r} is not known: accepted {', '.join(accepted)}")


def check_request(models: list, policies: list[str], context: int = CONTEXT_TOKENS) -> None:
    """What `estimate` is asked for, checked before anything is priced: known model names (a
    spec passes as it is), known policies, a context of at least one token."""
    _check([m for m in models if isinstance(m, str)], model_names(), "model")
    _check(policies, POLICIES, "policy")
    if not 1 <= context:
        raise InputError(f"context = {context} is out of range: accepted integers >= 1")


def estimate(config: Config, models: list, policies: list[str],
             context: int = CONTEXT_TOKENS, cost_table: dict | None = None,
             measured: dict | None = None) -> list[dict]:
    """Per model and policy: latency, throughput, energy per generated token (split), DRAM
    utilization, roofline ratio, bytes per token (split), prefill per prompt token. The
    non-expert weights the SRAM keeps (each model's own tensors, sim/perf/traffic.py `onchip_plan`:
    `policies.resident_nonexpert_kib` of it, or what the combined policy's draft head leaves)
    are read from SRAM instead of DRAM by every target pass. `models`: names, or specs of models outside the registry (a traced Hugging Face
    checkpoint). `measured`: per model name, per policy, a decoding run's summary (`edgexpert
    compare` for the bundled model, `edgexpert trace --hf` for a checkpoint); a policy found
    there is estimated from its measured passes (routing "trace", their own contexts) instead of
    the synthetic plan."""
    check_request(models, policies, context)
    measured = measured or {}
    out = []
    for name in models:
        m = model_spec(name) if isinstance(name, str) else name
        coster = PassCoster(config.platform, m.layout, cost_table)
        peak_macs_per_s = config.platform.macs * config.platform.clock_hz
        for policy in policies:
            kept = (_combined_onchip(m, config) if policy == "combined"
                    else onchip_plan(m, config))["nonexpert"]
            resident_nonexpert_bytes = sum(kept.values())
            if policy in measured.get(m.name, {}):
                plan = measured_plan(policy, measured[m.name][policy], m, config)
                inputs = {"tokens_per_step": _input(plan.tokens_per_step, "measured",
                                                    "the measured decoding run's passes")}
            else:
                plan = plan_step(m, policy, config, context, resident_nonexpert_bytes)
                inputs = policy_inputs(m, policy, config)
            decode = _cost_plan(plan, coster)
            prefill = _cost_plan(plan_prefill(m, policy, config, context,
                                              resident_nonexpert_bytes), coster)
            t = decode["time_s"]
            energy = decode["energy"]
            out.append({
                "model": m.name, "policy": policy, "routing": plan.routing,
                "tokens_per_step": round(plan.tokens_per_step, 3),
                "passes_per_token": round(plan.passes_per_token, 3),
                "latency_s_per_token": t,
                "tokens_per_s": 1.0 / t,
                "energy_j_per_token": sum(energy.values()),
                "energy_j_per_token_split": energy,
                "dram_utilization": decode["bytes"] / (coster.peak_bytes_per_s * t),
                # the roofline: the larger of the bytes at the DRAM's peak and the MACs at the
                # array's peak, over the modelled time (1: the modelled time is the bound)
                "roofline_ratio": max(decode["bytes"] / coster.peak_bytes_per_s,
                                      decode["macs"] / peak_macs_per_s) / t,
                "bytes_per_token": {
                    "expert": plan.per_token("expert_bytes"),
                    "nonexpert": plan.per_token("nonexpert_bytes"),
                    "draft": plan.per_token("draft_head_bytes"),
                    "kv": plan.per_token("kv_read_bytes") + plan.per_token("kv_write_bytes")},
                "prefill": {"latency_s_per_prompt_token": prefill["time_s"],
                            "energy_j_per_prompt_token": sum(prefill["energy"].values()),
                            "bytes_per_prompt_token": prefill["bytes"]},
                # a measured plan's passes attend to their own contexts: their mean
                "context_tokens": context if plan.routing == "synthetic" else round(
                    sum(p.kv_read_bytes * n for p, n in plan.passes)
                    / sum(n for _, n in plan.passes) / m.kv_bytes_per_token, 1),
                "resident_nonexpert_bytes": kept,
                "inputs": inputs,
                "routing_model": _routing_summary(m, config),
                "notes": list(plan.notes),
                "cost_sources": coster.cost_sources,
            })
    return out


def _routing_summary(m: MoEModelSpec, config: Config) -> dict | None:
    """The routing model behind a full-size model's experts (None for the bundled model, whose
    are measured): the parameters carried from the twins to its E (`routing_from` names them),
    the Zipf exponent at its E and top-k and the published figures it is checked against
    (`validation`)."""
    if m.name == BUNDLED:
        return None
    params, s = routing.params_for(m.n_experts, m.top_k)
    return {"routing_from": params.model, "params": dataclasses.asdict(params), "zipf_s": s,
            "seed": routing.MC_SEED, "samples": routing.SAMPLES, "validation": validation(config)}


def validation(config: Config) -> list[dict]:
    """Published figures against the estimate's inputs, each with its error (model / published
    - 1): the routing model's (sim/perf/routing.py `validations`, on EdgeXpert's tree: the
    configured decode tree) and the acceptance carried from Qwen3-30B-A3B to OLMoE-1B-7B
    against EdgeXpert's published OLMoE figure."""
    return _validation(_tree(config, "naive_sd"))


@functools.lru_cache(maxsize=8)
def _validation(tree: routing.TreeShape) -> list[dict]:
    out = routing.validations(tree)
    published, source = EDGEXPERT_ACCEPTANCE_PUBLISHED["olmoe-1b-7b"]
    carried = ASSUMED_ACCEPTANCE * EDGEXPERT_ACCEPTANCE
    out.append({"figure": "edgexpert_olmoe_acceptance", "model": "olmoe-1b-7b",
                "routing_from": None, "published": published, "modelled": round(carried, 4),
                "error": round(carried / published - 1, 4),
                "source": f"{source}; modelled: Qwen3-30B-A3B's 4.3 x EdgeXpert's loss of "
                          f"acceptance on the bundled model ({EDGEXPERT_ACCEPTANCE:.3f}), the "
                          "rule a model without a published figure follows"})
    return out


def _check_axis(values, low: float, high: float, what: str) -> None:
    for v in values:
        if not low <= v <= high:
            raise InputError(f"{what} {v:g} is out of range: accepted {low:g}..{high:g}")


def _max_tokens(m: MoEModelSpec, policy: str, config: Config) -> float:
    """The most tokens a step of `policy` can produce: its draft's depth + 1 (plain decoding:
    any, one pass per token)."""
    p, d = config.policies, config.decode
    if policy == "ar" or (policy == "specmoe" and m.name != BUNDLED
                          and _onchip_slots(m, config) == 0):
        return math.inf
    if policy == "specter":
        return p.specter.chain + 1
    if policy == "combined":
        return p.combined.depth + 1
    return d.max_depth + 1


def sensitivity(config: Config, models: list, policies: list[str],
                acceptance: tuple = SENSITIVITY_ACCEPTANCE, shares: tuple = SENSITIVITY_SHARES,
                context: int = CONTEXT_TOKENS, cost_table: dict | None = None) -> list[dict]:
    """Per model and policy (synthetic plans): latency per token against tokens per step
    (`acceptance`; points above what the policy's draft can produce, its depth + 1, are left
    out) and against the distinct-expert share of the step's target pass (`shares` x the
    layer's experts, at the policy's own tokens per step; shares below top-k / E are left out),
    the break-even tokens per step where the policy's latency equals plain decoding's (`ar`;
    None when the policy cannot reach it, 1.0 when it is never slower), and plain decoding's
    latency. Bad axes: one line naming the accepted range."""
    check_request(models, policies, context)
    _check_axis(acceptance, 1.0, config.decode.max_depth + 1,
                "tokens per step (--acceptance)")
    _check_axis(shares, 1e-9, 1.0, "distinct-expert share (--share)")
    out = []
    for name in models:
        m = model_spec(name) if isinstance(name, str) else name
        coster = PassCoster(config.platform, m.layout, cost_table)
        resident = sum(onchip_plan(m, config)["nonexpert"].values())

        def latency(policy, **overrides):
            return _cost_plan(plan_step(m, policy, config, context, resident, **overrides),
                              coster)["time_s"]
        plain = latency("ar")
        for policy in policies:
            top = _max_tokens(m, policy, config)
            # plain decoding (and a policy that falls back to it) is the reference: one token
            # and top-k experts per pass whatever the axes say
            speculative = top != math.inf
            low = m.top_k / m.n_experts
            row = {"model": m.name, "policy": policy, "ar_latency_s_per_token": plain,
                   "tokens_per_step": _value(policy_inputs(m, policy, config),
                                             "tokens_per_step"),
                   "max_tokens_per_step": top if speculative else None,
                   "latency_s_per_token": latency(policy),
                   "by_acceptance": [{"tokens_per_step": a, "latency_s_per_token":
                                      latency(policy, tokens_per_step=a)}
                                     for a in acceptance if speculative and a <= top],
                   "by_share": [{"share": x, "experts_per_layer": x * m.n_experts,
                                 "latency_s_per_token": latency(policy,
                                                                verify_experts=x * m.n_experts)}
                                for x in shares if speculative and x >= low - 1e-9],
                   "break_even_tokens_per_step": _break_even(
                       lambda a: latency(policy, tokens_per_step=a), plain, top)
                   if speculative else None}
            out.append(row)
    return out


def _break_even(latency, plain: float, top: float) -> float | None:
    """The tokens per step in [1, top] at which `latency` equals `plain` (latency falls as
    tokens per step rise): 1.0 when never slower, None when slower even at `top`."""
    if latency(1.0) <= plain:
        return 1.0
    if latency(top) > plain:
        return None
    lo, hi = 1.0, float(top)
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if latency(mid) > plain else (lo, mid)
    return round((lo + hi) / 2, 3)
