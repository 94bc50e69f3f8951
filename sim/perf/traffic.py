"""Every byte a decoded token costs, from a measured decoding run (issue 11 item 3;
docs/policies.md, "Total traffic").

The golden model counts, per pass kind, how often a step runs it, its tokens, the KV-cache
entries it attends to and the routed-expert bytes its policy fetched (`golden.decoding.decode.pass_kinds`,
in `summarize`'s output). `measured_plan` turns that into the performance model's `StepPlan`
(sim/perf/passes.py), with routing "trace": each pass also reads

- the non-expert weights (attention, routers, norms, dense FFN layers, the head) but the part
  the SRAM keeps on chip (`onchip_plan`: `policies.resident_nonexpert_kib` of it, or for a
  policy that allots the SRAM by reuse what the draft head leaves; `MoEModelSpec.resident`),
  and one embedding row per token;
- the KV-cache entries it attends to that were cached before it, and writes its own tokens'
  entries, at the integer path's precision (`MoEModelSpec.kv_bytes_per_token`).

A self-draft pass (the model with top-1 routing, Specter's quantized experts) runs the target's
own layers and reads what a target pass reads. An EAGLE draft pass (golden/decoding/eagle/) does
not read the target (`reads_target` 0): it reads the head's weights (`draft_head_bytes`, int4
layers and int8 head rows as golden states them), one embedding row per token, and its own
one-layer KV cache, whose entries have one target layer's shape
(`kv_bytes_per_token / n_layers`). The target features it reads (three 192-wide rows per accepted
token) come from the verification pass just before and are taken to stay on chip. A kind that
mixes both weighs each by its share.

`traffic_columns` gives the per-token byte columns `edgexpert compare` prints; `add_traffic`
adds them to every policy of a comparison.
"""

from __future__ import annotations

from ...contracts.config import Config
from ...contracts.errors import InputError
from ...contracts.trace import PassKind
from ...contracts.weight_layout import Matrix
from .models import MoEModelSpec
from .passes import GOLDEN_KINDS, Pass, StepPlan

__all__ = ["resident_share", "onchip_plan", "staging_bytes", "measured_plan", "traffic_columns",
           "add_traffic", "TRAFFIC_COLUMNS"]

#: the columns `traffic_columns` adds, per decoded token
TRAFFIC_COLUMNS = ("total_bytes_per_token", "expert_bytes_per_token", "nonexpert_bytes_per_token",
                   "kv_bytes_per_token", "draft_head_bytes_per_token")


def resident_share(spec: MoEModelSpec, config: Config) -> dict[str, int]:
    """The non-expert weights kept on chip (bytes per tensor group), after checking that they
    and the policies' expert slots fit the platform's SRAM together."""
    p = config.policies
    sram = config.platform.sram_bytes
    if (p.onchip_expert_kib + p.resident_nonexpert_kib) * 1024 > sram:
        raise InputError(
            f"policies.onchip_expert_kib = {p.onchip_expert_kib} and "
            f"policies.resident_nonexpert_kib = {p.resident_nonexpert_kib} share platform.sram_bytes = {sram}: accepted a sum of "
            f"at most {sram // 1024} KiB")
    return spec.resident(p.resident_nonexpert_kib * 1024)


def onchip_plan(spec: MoEModelSpec, config: Config, onchip: str = "configured",
                draft_head_bytes: int = 0) -> dict:
    """What the SRAM keeps for a policy: {"draft_head": bytes of the draft head, "nonexpert":
    bytes per non-expert tensor group}. `onchip` is the policy's rule (golden/decoding/policy.py
    `Policy.onchip`): "configured", the configuration's split (`resident_share`; the expert
    slots are the policies' own and double as the landing buffer of streamed weights); "reuse",
    by reads per step, after a landing buffer for the streamed weights (`staging_bytes`): the
    draft head (`draft_head_bytes`, read by every draft pass) when it fits, then the non-expert
    weights in `RESIDENT_ORDER` (read by every target pass) in what is left; no expert slots."""
    if onchip == "configured":
        return {"draft_head": 0, "nonexpert": resident_share(spec, config)}
    if onchip != "reuse":
        raise InputError(f"on-chip rule {onchip!r} is not known: accepted configured, reuse")
    free = config.platform.sram_bytes - staging_bytes(spec, config)
    head = draft_head_bytes if draft_head_bytes <= free else 0
    return {"draft_head": head, "nonexpert": spec.resident(free - head)}


def staging_bytes(spec: MoEModelSpec, config: Config) -> int:
    """The SRAM a policy without expert slots keeps for streamed weights: a double buffer of the
    largest expert matrix (GATE_UP, scales included; the EMA fetches the next one while the MAC
    clusters compute on this one), at most half of platform.sram_bytes (a full-size model's
    matrix is larger: it is streamed in parts)."""
    return min(2 * spec.layout.block_bytes(Matrix.GATE_UP), config.platform.sram_bytes // 2)


def _draft_head_bytes(summary: dict) -> int:
    """The head bytes one EAGLE draft pass of a measured run reads (0: no EAGLE draft)."""
    draft = summary["pass_kinds"].get(PassKind.DRAFT.label, {})
    eagle_share = 1 - draft.get("reads_target", 1.0)
    return round(draft.get("draft_head_bytes", 0.0) / eagle_share) if eagle_share > 0 else 0


def measured_plan(policy: str, summary: dict, spec: MoEModelSpec, config: Config) -> StepPlan:
    """The decoding step a policy's measured run describes (`summary`: golden's `summarize`
    output: "pass_kinds", "tokens", "steps", and the policy's "onchip" rule), every pass priced
    in bytes (module doc)."""
    kept = onchip_plan(spec, config, summary.get("onchip", "configured"),
                       _draft_head_bytes(summary))
    resident = sum(kept["nonexpert"].values())
    weights = spec.nonexpert_bytes - resident
    passes = []
    for kind, stats in summary["pass_kinds"].items():
        tokens, context = stats["tokens"], stats["context"]
        # the share of this kind's runs that read the target (an EAGLE draft pass does not: it
        # reads its head's weights, its one layer of KV and the features kept on chip)
        target = stats.get("reads_target", 1.0)
        kv = spec.kv_bytes_per_token * (target + (1 - target) / spec.n_layers)
        head = stats.get("draft_head_bytes", 0.0)
        # a head kept on chip is read from SRAM by the same passes
        head_onchip = head if kept["draft_head"] else 0.0
        # MACs as plain decoding's per token (every token's top-k experts on every channel):
        # the measured run counts bytes, not the channels each candidate computed on; a draft
        # head's, two per weight byte (int4 layers; its int8 head rows take one: an upper bound)
        macs = {"expert": target * tokens * spec.moe_layers
                * (spec.top_k + spec.n_shared_experts) * spec.expert_macs,
                "projection": target * tokens * spec.nonexpert_macs,
                "attention": target * tokens * spec.attention_macs(context),
                "head": target * tokens * spec.head_macs,
                "draft_head": tokens * 2 * head}
        passes.append((Pass(GOLDEN_KINDS[kind], tokens, stats["expert_bytes"],
                            target * weights + tokens * spec.embedding_row_bytes,
                            context * kv, tokens * kv, macs,
                            draft_head_bytes=head - head_onchip,
                            resident_bytes=target * resident + head_onchip,
                            held_bytes=kept["draft_head"] + resident
                            - (target * resident + head_onchip)),
                       stats["runs_per_step"]))
    # tokens per step from the exact counts (summarize rounds its own ratio)
    tokens_per_step = summary["tokens"] / summary["steps"]
    head_note = (f"; the draft head's {kept['draft_head']} B on chip" if kept["draft_head"]
                 else "")
    return StepPlan(policy, spec.name, "trace", tokens_per_step, tuple(passes), (
        f"measured passes of {spec.name}; {resident} B of non-expert weights resident"
        f"{head_note}",))


def traffic_columns(plan: StepPlan) -> dict:
    """Bytes per decoded token, by what they are (rounded to whole bytes)."""
    kv = plan.per_token("kv_read_bytes") + plan.per_token("kv_write_bytes")
    return {"total_bytes_per_token": round(plan.per_token("fetch_bytes")),
            "expert_bytes_per_token": round(plan.per_token("expert_bytes")),
            "nonexpert_bytes_per_token": round(plan.per_token("nonexpert_bytes")),
            "kv_bytes_per_token": round(kv),
            "draft_head_bytes_per_token": round(plan.per_token("draft_head_bytes")),
            "passes_per_token": round(plan.passes_per_token, 4)}


def add_traffic(results: dict[str, dict], spec: MoEModelSpec, config: Config) -> dict:
    """Adds `traffic_columns` to every policy's metrics (each must carry "pass_kinds"), and
    where naive speculative decoding is among them each one's change in total bytes against it
    (`total_change_vs_naive_sd`: bytes / naive - 1); returns the results ordered by total bytes
    per token, fewest first."""
    for name, metrics in results.items():
        metrics.update(traffic_columns(measured_plan(name, metrics, spec, config)))
    if "naive_sd" in results:
        naive = results["naive_sd"]["total_bytes_per_token"]
        for metrics in results.values():
            change = metrics["total_bytes_per_token"] / naive - 1
            metrics["total_change_vs_naive_sd"] = round(change, 4)
    return dict(sorted(results.items(), key=lambda kv: kv[1]["total_bytes_per_token"]))
