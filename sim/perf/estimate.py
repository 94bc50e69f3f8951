"""Latency and energy per token of decoding policies on full-size MoE models (issue 12 item 6's
function; docs/performance-model.md, "Estimate").

`estimate(config, models, policies)` builds each (model, policy)'s `StepPlan` (sim/perf/passes.py)
from a routing model and costs it on `config.platform`. Routing is "synthetic" for every model
here (labelled so in every entry): the full-size models' from cited measurements and a
statistical model of distinct experts; the bundled model's from its measured per-token
statistics (docs/policies.md). Plain decoding is exact either way (top-k experts per token).

Synthetic routing, full-size models (docs/performance-model.md, "Synthetic routing"):
- distinct experts per MoE layer of n tokens: E (1 - (1 - k/E)^(rho n)): n tokens behave as
  rho n independent uniform top-k draws. rho_tree is fitted on EdgeXpert's measurement
  (Qwen3-30B-A3B + EAGLE-3, 64 candidates: 52.1 experts per layer per step, 6.5x top-8);
  rho_prefill on the bundled model's prefill (16-token chunks: 102,311 expert bytes per prompt
  token, docs/policies.md).
- tokens per step (accepted + bonus) of the EAGLE-3 tree: 4.3 (EdgeXpert's Qwen3 figure, taken
  for every model); EdgeXpert's coalescing keeps 4.38 / 4.57 of it (the bundled model's
  measurement at coalescing ratio 0.75: a 4 % shorter acceptance).
"""

from __future__ import annotations

import dataclasses
import math

from ...contracts.config import Config
from ...contracts.errors import InputError
from .models import BUNDLED, MoEModelSpec, linear_bytes, model_names, model_spec
from .passes import Pass, PassCoster, StepPlan
from .traffic import measured_plan, onchip_plan

__all__ = ["POLICIES", "check_request", "estimate", "plan_step", "plan_prefill", "prefill_experts",
           "distinct_experts", "CONTEXT_TOKENS", "RHO_TREE", "RHO_PREFILL"]

#: policies the estimate knows: `edgexpert compare`'s, in its order (golden/policies/registry.py COMPARED)
POLICIES = ("ar", "naive_sd", "edgexpert", "moe_spec", "s2moe", "specmoe", "specter", "combined")

#: tokens already in the KV cache when a token is generated (open: EdgeXpert does not state its
#: sequence length; our choice, a 512-token context)
CONTEXT_TOKENS = 512

#: EdgeXpert (MICRO 2026, arXiv 2608.05303; /work/shared/REFERENCES.md): Qwen3-30B-A3B with
#: EAGLE-3 (64 candidates, depth 6) accepts 4.3 tokens and activates 52.1 experts per step
EAGLE3_TOKENS_PER_STEP = 4.3
EAGLE3_EXPERTS_PER_LAYER = 52.1
_QWEN3_E, _QWEN3_K, _TREE = 128, 8, 64
#: rho for the tree's candidates, fitted on the figures above: 0.1265
RHO_TREE = (math.log(1 - EAGLE3_EXPERTS_PER_LAYER / _QWEN3_E) / math.log(1 - _QWEN3_K / _QWEN3_E)
            / _TREE)

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
#: rho for a prefill chunk, fitted on the bundled model (4 MoE layers, 32 experts, top-4,
#: 19,072-byte experts, 16-token chunks): 102,311 x 16 / 19,072 / 4 = 21.46 experts per layer
_B_PER_LAYER = BUNDLED_MEASURED["ar"][3] * 16 / 19_072 / 4
RHO_PREFILL = math.log(1 - _B_PER_LAYER / 32) / math.log(1 - 4 / 32) / 16
#: EdgeXpert's coalescing shortens acceptance (bundled model, both on the EAGLE head: 3.01 vs
#: 3.18 tokens per step)
EDGEXPERT_ACCEPTANCE = BUNDLED_MEASURED["edgexpert"][0] / BUNDLED_MEASURED["naive_sd"][0]
#: EdgeXpert's prompt-wise expert reuse: prefill expert traffic -55.7 % (EdgeXpert, MICRO 2026)
EDGEXPERT_PREFILL_KEEP = 1 - 0.557
#: the combined policy's tree (policies.combined_depth x combined_candidates) accepts this share
#: of the 64-candidate, depth-6 tree's tokens per step (the bundled model, both with the EAGLE
#: head: 2.45 / 3.18 tokens per step)
COMBINED_ACCEPTANCE = BUNDLED_MEASURED["combined"][0] / BUNDLED_MEASURED["naive_sd"][0]
#: ... and its candidates activate as many experts as this share of the big tree's candidates
#: would: distinct experts per layer per step measured on the bundled model (same run; 32
#: experts, top-4): 14.375 (combined) and 22.63 (naive_sd), as effective independent tokens
#: ln(1 - x / 32) / ln(1 - 4 / 32): 4.47 against 9.20. The rho model alone, fitted at 64
#: candidates, would make 8 candidates as cheap as one token.
COMBINED_TREE_SHARE = math.log(1 - 14.375 / 32) / math.log(1 - 22.63 / 32)
#: EAGLE-3's draft vocabulary (Li et al., "EAGLE-3", arXiv 2503.01840; the reference code's
#: draft_vocab_size 32000)
EAGLE3_DRAFT_VOCAB = 32000


def distinct_experts(n_experts: int, top_k: int, tokens: float, rho: float) -> float:
    """Mean distinct experts of one MoE layer over `tokens` tokens (the synthetic model)."""
    return n_experts * (1 - (1 - top_k / n_experts) ** (rho * tokens))


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


def _measured_step(m: MoEModelSpec, policy: str, config: Config, context: int,
                   resident: int) -> StepPlan:
    """A policy from the bundled model's measured per-token statistics: tokens per step, passes
    per token, and routed-expert bytes per token (for a full-size model: its plain decoding's
    times the bundled policy's ratio to plain decoding). On the bundled model the draft passes
    of the policies that draft with the EAGLE head there (`BUNDLED_EAGLE`) are head passes and
    the step's routed bytes are the verification's; otherwise a step's routed bytes are spread
    evenly over its passes, each of which reads the non-expert weights (a self-draft is the
    target's own layers)."""
    tokens, passes_per_token, expert_per_token, _ = BUNDLED_MEASURED[policy]
    if m.name != BUNDLED:
        expert_per_token *= (m.moe_layers * m.top_k * m.expert_bytes
                             / BUNDLED_MEASURED["ar"][2])
    runs = passes_per_token * tokens
    verify_tokens = (config.policies.combined_candidates if policy == "combined"
                     else config.decode.max_candidates)
    draft_tokens = config.decode.width
    ratio = config.policies.coalescing_ratio if policy == "edgexpert" else 1.0
    source = "" if m.name == BUNDLED else ", expert bytes scaled by plain decoding's"
    if m.name == BUNDLED and policy in BUNDLED_EAGLE:
        head = BUNDLED_EAGLE_HEAD_BYTES
        onchip = _combined_onchip(m, config)["draft_head"] if policy == "combined" else 0
        experts = expert_per_token * tokens / (m.moe_layers * m.expert_bytes * ratio)
        verify = _target_pass(m, "verify", verify_tokens, experts, context, tokens, ratio,
                              resident=resident, held=onchip)
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
    per_pass = expert_per_token * tokens / runs / (m.moe_layers * m.expert_bytes * ratio)
    verify = _target_pass(m, "verify", verify_tokens, per_pass, context, tokens, ratio,
                          resident=resident)
    draft = _target_pass(m, "draft", draft_tokens, per_pass, context, draft_tokens, ratio,
                         resident=resident)
    return StepPlan(policy, m.name, "synthetic", tokens, ((verify, 1.0), (draft, runs - 1)), (
        f"the bundled model's measured tokens/step, passes/token and expert bytes/token "
        f"(docs/policies.md){source}, spread evenly over the step's passes; verify tokens = "
        f"decode.max_candidates (an upper bound where the tree stops early)",))


def _onchip_slots(m: MoEModelSpec, config: Config) -> int:
    return config.policies.onchip_expert_kib * 1024 // (m.moe_layers * m.expert_bytes)


def plan_step(m: MoEModelSpec, policy: str, config: Config, context: int = CONTEXT_TOKENS,
              resident: int = 0) -> StepPlan:
    """One decoding step of `policy` on model `m` (synthetic routing); `resident` bytes of the
    target's non-expert weights stay on chip."""
    ar = StepPlan(policy, m.name, "synthetic", 1.0, (
        (_target_pass(m, "plain", 1, m.top_k, context, 1, resident=resident), 1.0),),
        ("plain decoding: top-k experts per token, exact",))
    if policy == "ar":
        return ar
    if m.name == BUNDLED:
        return _measured_step(m, policy, config, context, resident)
    if policy == "combined":
        return _eagle3_step(m, policy, config, context, resident)
    if policy == "specmoe":
        slots = _onchip_slots(m, config)
        if slots == 0:
            # the resident draft (SpecMoE) drafts on the experts kept on chip; none fits
            return StepPlan(policy, m.name, "synthetic", 1.0, ar.passes, (
                f"no expert fits on chip ({config.policies.onchip_expert_kib} KiB over "
                f"{m.moe_layers} layers, {m.expert_bytes} B per expert): the resident draft has "
                "nothing to draft with, so the policy is plain decoding",))
        return _measured_step(m, policy, config, context, resident)
    if policy == "s2moe":
        return _measured_step(m, policy, config, context, resident)
    if policy == "specter":
        return _specter_step(m, config, context, resident)
    return _eagle3_step(m, policy, config, context, resident)


def _eagle3_step(m: MoEModelSpec, policy: str, config: Config, context: int,
                 resident: int) -> StepPlan:
    """Unoptimized MoE + EAGLE-3 (naive_sd), EdgeXpert's coalescing on it, MoE-Spec's budget,
    ours (combined: its own tree, the SRAM by reuse, `_combined_onchip`)."""
    d = config.decode
    tokens = EAGLE3_TOKENS_PER_STEP
    ratio = 1.0
    head_onchip = 0
    note = ""
    if policy == "combined":
        p = config.policies
        d = dataclasses.replace(d, max_depth=p.combined_depth,
                                max_candidates=p.combined_candidates)
        tokens *= COMBINED_ACCEPTANCE
        kept = _combined_onchip(m, config)
        head_onchip, resident = kept["draft_head"], sum(kept["nonexpert"].values())
        note = (f"; tree of depth {d.max_depth}, {d.max_candidates} candidates; "
                + ("the head on chip" if head_onchip else "the head does not fit on chip")
                + f", {resident} B of non-expert weights resident")
    candidates = (config.decode.max_candidates * COMBINED_TREE_SHARE if policy == "combined"
                  else d.max_candidates)
    experts = distinct_experts(m.n_experts, m.top_k, candidates, RHO_TREE)
    if policy == "edgexpert":
        tokens *= EDGEXPERT_ACCEPTANCE
        ratio = config.policies.coalescing_ratio
        note = f"; coalescing ratio {ratio}"
    elif policy == "moe_spec":
        tokens *= MOE_SPEC_ACCEPTANCE
        budget = max(m.top_k, round(config.policies.moe_spec_budget / BUNDLED_EXPERTS
                                    * m.n_experts))
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
        f"{experts:.1f} experts per layer (rho {RHO_TREE:.4f}){note}; {tokens:.2f} tokens "
        f"per step",))


def _combined_onchip(m: MoEModelSpec, config: Config) -> dict:
    """What the combined policy keeps on chip on model `m` (sim/perf/traffic.py `onchip_plan`, rule
    "reuse"): its draft head when it fits (the bundled head, or a full-size model's EAGLE-3
    head), then non-expert weights."""
    head = BUNDLED_EAGLE_HEAD_BYTES if m.name == BUNDLED else _eagle3_draft_bytes(m)
    return onchip_plan(m, config, "reuse", head)


def _specter_step(m: MoEModelSpec, config: Config, context: int, resident: int) -> StepPlan:
    """Specter: a chain of `specter_chain` draft tokens, each a pass of the target with its
    routed experts at `specter_draft_bits`; verification of the chain and its root. Tokens per
    step: the bundled model's measurement (chain of 1). Its LRU expert slots hold no expert of a
    full-size model in 512 KB, so nothing is prefetched."""
    p = config.policies
    chain = p.specter_chain
    tokens = BUNDLED_MEASURED["specter"][0]
    draft = _target_pass(m, "draft", 1, m.top_k, context, 1, expert_bits=p.specter_draft_bits,
                         resident=resident)
    # the chain's tokens follow each other, as a prompt's do: the prefill's rho
    experts = distinct_experts(m.n_experts, m.top_k, chain + 1, RHO_PREFILL)
    verify = _target_pass(m, "verify", chain + 1, experts, context, tokens, resident=resident)
    return StepPlan("specter", m.name, "synthetic", tokens, ((draft, chain), (verify, 1.0)), (
        f"{chain} draft pass(es) with {p.specter_draft_bits}-bit experts, verification of "
        f"{chain + 1} tokens ({experts:.1f} experts per layer); tokens per step measured on the "
        f"bundled model; {_onchip_slots(m, config)} on-chip expert slots per layer",))


def prefill_experts(m: MoEModelSpec, policy: str, config: Config) -> float:
    """Distinct routed experts one prefill chunk fetches per MoE layer: on the bundled model its
    measured prefill bytes per prompt token x the chunk (partial last chunks included in that
    mean); elsewhere the synthetic routing's, cut by EdgeXpert's prompt-wise reuse."""
    chunk = config.policies.prefill_chunk
    if m.name == BUNDLED:
        return BUNDLED_MEASURED[policy][3] * chunk / (m.moe_layers * m.expert_bytes)
    experts = distinct_experts(m.n_experts, m.top_k, chunk, RHO_PREFILL)
    if policy == "edgexpert" or (policy == "combined" and config.policies.combined_prefill_reuse):
        experts *= EDGEXPERT_PREFILL_KEEP
    return experts


def plan_prefill(m: MoEModelSpec, policy: str, config: Config, context: int = CONTEXT_TOKENS,
                 resident: int = 0) -> StepPlan:
    """One prefill chunk (`policies.prefill_chunk` prompt tokens, each expert streamed once per
    chunk); the head is read by the last chunk only and left out here."""
    chunk = config.policies.prefill_chunk
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
            else:
                plan = plan_step(m, policy, config, context, resident_nonexpert_bytes)
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
                "notes": list(plan.notes),
                "cost_sources": coster.cost_sources,
            })
    return out
