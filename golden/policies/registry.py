"""The registry of the policies `edgexpert compare` and `edgexpert ablate` build by name
(docs/policies.md says what each does and why), one family per module:

- `Autoregressive` (golden/decoding/policy.py): plain decoding (one token per pass, whole experts).
- `Policy` (golden/decoding/policy.py): naive speculative decoding.
- `EdgeXpert` (edgexpert.py): depth-aware channel coalescing in every draft and verification
  pass; with a prefill encoder, prompt-wise expert reuse in the prefill pass (prefill.py).
- `MoESpec` (moe_spec.py): verification-time expert budgeting with substitution.
- `S2MoE` (s2moe.py): routing-aware adaptive expansion of the tree, reuse-aware gating in
  verification.
- `SpecMoE` (resident.py): a draft on resident experts only (affinity substitution),
  HotTemporal refresh.
- `Specter` (specter.py): a quantized-expert draft chain whose routing prefetches experts into
  LRU slots.
- `Combined` (combined.py): ours, lossless: the EAGLE head kept on chip, the SRAM by reuse, a
  tree chosen for the fewest total bytes (or, self-drafting, the resident draft and the
  cost-aware tree).
- `ResidentAR` (resident.py): a reference, plain decoding with the same on-chip slots.

`POLICIES` maps each name to the function that builds the policy from the configuration
(`build_policy`); `COMPARED` are the ones `edgexpert compare` runs, in its order
(`build_policies`). Each speculative policy drafts with its own layers ("self") or with the EAGLE
head (golden/decoding/eagle/), as `policies.draft` says; "paper" is the draft of each policy's
paper (`PAPER_DRAFT`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

from ...contracts.config import Config, ConfigError
from ...contracts.weight_layout import WeightLayout
from ..decoding.eagle.head import EagleHead
from ..decoding.policy import Autoregressive, Policy
from ..lm.model import MoEModel
from .combined import Combined
from .edgexpert import EdgeXpert, pruned_edgexpert
from .moe_spec import MoESpec
from .prefill import TokenEncoder, prefill_routing
from .resident import ResidentAR, SpecMoE
from .s2moe import S2MoE
from .specter import Specter

__all__ = ["PolicyInputs", "POLICIES", "COMPARED", "PAPER_DRAFT", "on_chip_slots",
           "build_policy", "build_policies"]


@dataclass(frozen=True)
class PolicyInputs:
    """What a builder reads besides the configuration."""
    model: MoEModel                # the compared model
    layout: WeightLayout           # its weights' layout in external memory
    encoder: TokenEncoder | None   # the prefill encoder (prefill.py); None: the model's routing
    eagle: EagleHead | None        # the loaded EAGLE head, if any
    draft: str | None              # the draft asked for ("self", "eagle"); None: policies.draft


def on_chip_slots(kib: int, layout: WeightLayout) -> int:
    """Whole experts per layer that `kib` KiB of on-chip buffer hold (split over the layers)."""
    slots = kib * 1024 // (layout.n_layers * layout.expert_fetch_bytes)
    if slots < 1:
        raise ConfigError(f"policies.onchip_expert_kib = {kib} holds no expert: accepted >= "
                          f"{math.ceil(layout.n_layers * layout.expert_fetch_bytes / 1024)}")
    return min(slots, layout.n_experts)


@contextmanager
def _reported_as(key: str):
    """A ValueError a policy's constructor raises on a configuration value becomes the key's
    ConfigError; a ConfigError names its key already and passes as it is."""
    try:
        yield
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(f"policies.{key}: {exc}") from None


def _draft_head(policy: type[Policy], config: Config, inputs: PolicyInputs) -> EagleHead | None:
    """The EAGLE head `policy` drafts with, None for its own layers: as `inputs.draft` says (a
    policy that cannot draft with the head refuses "eagle"), or else policies.draft: "paper"
    (`PAPER_DRAFT`), "self", or "eagle" wherever the policy can (the others keep self)."""
    if not policy.speculative:
        return None
    wanted = inputs.draft or config.policies.draft
    if wanted == "paper":
        wanted = PAPER_DRAFT[policy.name]
    elif wanted == "eagle" and inputs.draft is None and policy.EAGLE_REFUSAL is not None:
        wanted = "self"
    if wanted != "eagle":
        return None
    if inputs.eagle is None:
        raise ConfigError(f"policies.draft: {policy.name} drafts with the eagle head and none was "
                          "loaded: accepted policies.draft=self, or a head for this model "
                          "(`edgexpert draft train --install`)")
    with _reported_as("draft"):
        policy.check_eagle()
    return inputs.eagle


def _base(policy: type[Policy], config: Config, inputs: PolicyInputs) -> dict:
    """The keyword arguments every policy's constructor takes (golden/decoding/policy.py)."""
    return {"prefill_chunk": config.policies.prefill.chunk,
            "eagle": _draft_head(policy, config, inputs)}


def _construct(policy: type[Policy], config: Config, inputs: PolicyInputs, *args,
               **kwargs) -> Policy:
    """`policy` on the layout and the decode settings, with its own arguments and `_base`."""
    return policy(inputs.layout, config.decode, *args, **kwargs, **_base(policy, config, inputs))


def _build_ar(config: Config, inputs: PolicyInputs) -> Policy:
    return _construct(Autoregressive, config, inputs)


def _build_naive_sd(config: Config, inputs: PolicyInputs) -> Policy:
    return _construct(Policy, config, inputs)


def _build_edgexpert(config: Config, inputs: PolicyInputs) -> Policy:
    p = config.policies
    prefill = prefill_routing(p, inputs.encoder, inputs.model.cfg.top_k)
    if p.pruned_checkpoint == "bundled":
        return pruned_edgexpert(inputs.layout, config.decode, inputs.model, p.coalescing_ratio,
                                p.calibration, prefill, **_base(EdgeXpert, config, inputs))
    return _construct(EdgeXpert, config, inputs, inputs.model, p.coalescing_ratio,
                      p.pruning_sparsity, p.calibration, prefill=prefill)


def _build_moe_spec(config: Config, inputs: PolicyInputs) -> Policy:
    with _reported_as("moe_spec_budget"):
        return _construct(MoESpec, config, inputs, inputs.model.cfg.top_k,
                          config.policies.moe_spec_budget)


def _build_s2moe(config: Config, inputs: PolicyInputs) -> Policy:
    p = config.policies
    with _reported_as("s2moe.cap"):
        return _construct(S2MoE, config, inputs, inputs.model.cfg.top_k, p.s2moe.threshold,
                          p.s2moe.cap)


def _build_specmoe(config: Config, inputs: PolicyInputs) -> Policy:
    slots = on_chip_slots(config.policies.onchip_expert_kib, inputs.layout)
    return _construct(SpecMoE, config, inputs, inputs.model, slots)


def _build_specter(config: Config, inputs: PolicyInputs) -> Policy:
    p = config.policies
    return _construct(Specter, config, inputs, inputs.model,
                      on_chip_slots(p.onchip_expert_kib, inputs.layout), p.specter.chain,
                      p.specter.draft_bits)


def _build_combined(config: Config, inputs: PolicyInputs) -> Policy:
    p = config.policies
    prefill = (prefill_routing(p, inputs.encoder, inputs.model.cfg.top_k)
               if p.combined.prefill_reuse else None)
    return _construct(Combined, config, inputs, inputs.model,
                      on_chip_slots(p.onchip_expert_kib, inputs.layout), p.combined.threshold,
                      (p.combined.depth, p.combined.candidates), prefill=prefill)


def _build_ar_resident(config: Config, inputs: PolicyInputs) -> Policy:
    slots = on_chip_slots(config.policies.onchip_expert_kib, inputs.layout)
    return _construct(ResidentAR, config, inputs, slots)


#: name (the policy's `name`) -> its builder: the configuration's `policies` and `decode`
#: sections fix every setting
POLICIES: dict[str, Callable[[Config, PolicyInputs], Policy]] = {
    "ar": _build_ar,
    "naive_sd": _build_naive_sd,
    "edgexpert": _build_edgexpert,
    "moe_spec": _build_moe_spec,
    "s2moe": _build_s2moe,
    "specmoe": _build_specmoe,
    "specter": _build_specter,
    "combined": _build_combined,
    "ar_resident": _build_ar_resident,
}

#: what `edgexpert compare` runs, in its order (ar_resident is a reference for `edgexpert ablate`)
COMPARED = ("ar", "naive_sd", "edgexpert", "moe_spec", "s2moe", "specmoe", "specter", "combined")

#: each speculative policy's draft in its paper (docs/golden-model.md, "Drafts"): EdgeXpert and
#: MoE-Spec speculate with an EAGLE-3 head; naive speculative decoding is EdgeXpert's baseline,
#: so it drafts as EdgeXpert does (issue 11: EdgeXpert against naive speculative decoding with
#: the same draft); SpecMoE and S2-MoE self-draft, Specter with its quantized self-draft; ours
#: (combined) drafts with the head and keeps it on chip (docs/policies.md, "The combined policy")
PAPER_DRAFT = {"naive_sd": "eagle", "edgexpert": "eagle", "moe_spec": "eagle", "s2moe": "self",
               "specmoe": "self", "specter": "self", "combined": "eagle"}


def build_policy(name: str, config: Config, model: MoEModel, layout: WeightLayout,
                 encoder: TokenEncoder | None = None, eagle: EagleHead | None = None,
                 draft: str | None = None) -> Policy:
    """Policy `name` for `model` from the configuration (a value the policy rejects is reported
    as the configuration key's error); EdgeXpert's prefill, and the combined policy's with
    policies.combined.prefill_reuse, use the shared-set routing when a prefill `encoder`
    (golden/policies/prefill.py) is given. The draft is `draft` ("self" or "eagle", refused by a
    policy that cannot draft with the head) or else policies.draft: "paper" (`PAPER_DRAFT`),
    "self", or "eagle" wherever the policy can (the others keep self). `eagle`: the EAGLE head
    (golden/decoding/eagle/head.py), needed when a policy drafts with it."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}: accepted {', '.join(POLICIES)}")
    if draft not in (None, "self", "eagle"):
        raise ValueError(f"draft {draft!r} is not known: accepted self, eagle")
    return POLICIES[name](config, PolicyInputs(model, layout, encoder, eagle, draft))


def build_policies(config: Config, model: MoEModel, layout: WeightLayout,
                   encoder: TokenEncoder | None = None,
                   eagle: EagleHead | None = None) -> list[Policy]:
    """Every policy `edgexpert compare` runs (COMPARED), from the configuration."""
    return [build_policy(name, config, model, layout, encoder, eagle) for name in COMPARED]
