"""Full-size MoE models for the performance model (issue 12 item 5): their shapes, each with its
published source, and the bytes and MACs one token costs in each part of a forward pass.

Precision (A8W4, docs/contracts.md): every linear layer's weights are int4 with one 16-bit scale
per output channel, the weight layout's rule for experts (`WeightLayout.fetch_bytes`): in x out / 2
bytes of weights plus 2 x out bytes of scales. Routed and shared experts use `WeightLayout`'s own
arithmetic (columns padded to 32 bytes, scale blocks). Exceptions, our choices:
- the router is int8 (in x out bytes + 2 x out of scales): a routing decision flips on small
  logit differences, and the router is small;
- the output head (and the token embedding, one row per token) is int8 with per-row 16-bit
  scales: the head decides the token and is commonly kept at 8 bits in 4-bit deployments;
- RMSNorm weights are 16-bit;
- the KV cache as the integer path stores it: int8 keys with a scale word per head and token,
  Q.12 values in 32-bit words (`KEY_BYTES_PER_ELEMENT`, `VALUE_BYTES_PER_ELEMENT`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from ...contracts.config import MODEL_NAMES, checkpoint_folder
from ...contracts.weight_layout import WeightLayout

__all__ = ["MoEModelSpec", "MODELS", "BUNDLED", "RESIDENT_ORDER", "model_spec", "model_names",
           "bundled_spec", "spec_from_config", "linear_bytes"]

#: the KV cache as the A8W4 integer path stores it (docs/contracts.md, attention): keys int8
#: with one Dyadic scale per (KV head, token) (m < 2**15, e < 2**15: a 32-bit word); values
#: Q.12 in 32-bit words (Q.12 does not fit 16 bits: the bundled prompts reach |v| = 8.1,
#: 33,173 in Q.12)
KEY_BYTES_PER_ELEMENT = 1
KEY_SCALE_BYTES = 4
VALUE_BYTES_PER_ELEMENT = 4
#: DeepSeek's latent cache has no integer path here: int8, the A8 activation precision (our
#: choice)
LATENT_BYTES_PER_ELEMENT = 1
#: bytes per 16-bit scale or norm weight (docs/contracts.md: 16-bit scale words)
SCALE_BYTES = 2

#: the order in which an on-chip share keeps non-expert weights resident
#: (`platform.resident_nonexpert_kib`): small tensors every token uses first (norms, routers),
#: then attention, dense FFN layers and the head, the largest (our choice, docs/policies.md,
#: "Total traffic")
RESIDENT_ORDER = ("norms", "routers", "attention", "dense_ffn", "head")

#: name of the bundled model in `MODELS` lookups
BUNDLED = "bundled"


def linear_bytes(in_features: int, out_features: int, weight_bits: int = 4) -> int:
    """An int4 (or int8) linear layer: weights packed, one 16-bit scale per output channel."""
    return in_features * out_features * weight_bits // 8 + SCALE_BYTES * out_features


@dataclass(frozen=True)
class MoEModelSpec:
    """A decoder-only MoE transformer's shape. `attention` is "gqa" (grouped-query multi-head
    attention) or "mla" (DeepSeek's multi-head latent attention, with `kv_lora_rank`,
    `qk_rope_dim`, `qk_nope_dim`, `v_head_dim`). The first `dense_layers` layers have a dense
    SwiGLU FFN of width `dense_ffn` instead of experts."""
    name: str
    source: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    n_experts: int
    top_k: int
    expert_ffn: int
    n_shared_experts: int
    vocab_size: int
    tie_embeddings: bool
    dense_layers: int = 0
    dense_ffn: int = 0
    attention: str = "gqa"
    kv_lora_rank: int = 0
    qk_rope_dim: int = 0
    qk_nope_dim: int = 0
    v_head_dim: int = 0

    # --- structure -------------------------------------------------------------------------
    @property
    def moe_layers(self) -> int:
        return self.n_layers - self.dense_layers

    @property
    def layout(self) -> WeightLayout:
        """The experts' weight layout (routed, then shared, per MoE layer)."""
        return WeightLayout(self.moe_layers, self.n_experts, self.d_model, self.expert_ffn,
                            self.n_shared_experts)

    # --- bytes -----------------------------------------------------------------------------
    @functools.cached_property
    def expert_bytes(self) -> int:
        """One whole expert fetched: both matrices' columns and scale blocks (weight layout)."""
        return self.layout.expert_fetch_bytes

    @property
    def attention_bytes_per_layer(self) -> int:
        d = self.d_model
        if self.attention == "mla":
            # DeepSeek-V2-Lite has no query compression (q_lora_rank null): q, the joint
            # down-projection to the latent and the rotary key, its norm, the up-projection
            # to keys and values, the output projection
            q = linear_bytes(d, self.n_heads * (self.qk_nope_dim + self.qk_rope_dim))
            kv_a = linear_bytes(d, self.kv_lora_rank + self.qk_rope_dim)
            kv_b = linear_bytes(self.kv_lora_rank,
                                self.n_heads * (self.qk_nope_dim + self.v_head_dim))
            o = linear_bytes(self.n_heads * self.v_head_dim, d)
            return q + kv_a + kv_b + o + SCALE_BYTES * self.kv_lora_rank
        q = linear_bytes(d, self.n_heads * self.head_dim)
        kv = 2 * linear_bytes(d, self.n_kv_heads * self.head_dim)
        o = linear_bytes(self.n_heads * self.head_dim, d)
        return q + kv + o

    @property
    def router_bytes_per_layer(self) -> int:
        return linear_bytes(self.d_model, self.n_experts, weight_bits=8)

    @property
    def dense_ffn_bytes_per_layer(self) -> int:
        return 2 * linear_bytes(self.d_model, self.dense_ffn) + linear_bytes(self.dense_ffn,
                                                                              self.d_model)

    @property
    def head_bytes(self) -> int:
        """The output head, int8 with a 16-bit scale per vocabulary row."""
        return linear_bytes(self.d_model, self.vocab_size, weight_bits=8)

    @property
    def embedding_row_bytes(self) -> int:
        """One token's embedding row (int8 + its scale): what a processed token reads."""
        return self.d_model + SCALE_BYTES

    @property
    def norm_bytes(self) -> int:
        """Two RMSNorms per layer and the final one, 16-bit."""
        return (2 * self.n_layers + 1) * self.d_model * SCALE_BYTES

    @property
    def nonexpert_tensors(self) -> list[tuple[str, int]]:
        """Weights every pass reads whatever the routing, as (group, bytes) per tensor set in
        `RESIDENT_ORDER`'s order: the norms (each layer's two, then the final one), each MoE
        layer's router, each layer's attention projections, each dense layer's FFN, the head.
        Embedding rows are not among them (they depend on the tokens)."""
        norm = 2 * self.d_model * SCALE_BYTES
        return ([("norms", norm)] * self.n_layers + [("norms", self.d_model * SCALE_BYTES)]
                + [("routers", self.router_bytes_per_layer)] * self.moe_layers
                + [("attention", self.attention_bytes_per_layer)] * self.n_layers
                + [("dense_ffn", self.dense_ffn_bytes_per_layer)] * self.dense_layers
                + [("head", self.head_bytes)])

    @property
    def nonexpert_bytes(self) -> int:
        """Every weight a pass reads whatever the routing: attention, routers, norms, dense FFN
        layers, head."""
        return sum(b for _, b in self.nonexpert_tensors)

    def resident(self, budget_bytes: int) -> dict[str, int]:
        """The non-expert weights an on-chip share of `budget_bytes` keeps (bytes per group):
        whole tensor sets in `RESIDENT_ORDER` (cheapest and most reused first), up to the first
        that no longer fits. Every pass reads the rest from DRAM."""
        kept: dict[str, int] = {}
        left = budget_bytes
        for group, size in self.nonexpert_tensors:
            if size > left:
                break
            kept[group] = kept.get(group, 0) + size
            left -= size
        return kept

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes one token adds (and one attention read per cached token), all layers."""
        if self.attention == "mla":
            # the compressed latent cache
            per_layer = (self.kv_lora_rank + self.qk_rope_dim) * LATENT_BYTES_PER_ELEMENT
        else:
            per_layer = self.n_kv_heads * (self.head_dim * (KEY_BYTES_PER_ELEMENT
                                                            + VALUE_BYTES_PER_ELEMENT)
                                           + KEY_SCALE_BYTES)
        return self.n_layers * per_layer

    # --- MACs per token --------------------------------------------------------------------
    @property
    def expert_macs(self) -> int:
        """One expert on one token, every channel: gate, up and down."""
        return 3 * self.d_model * self.expert_ffn

    @property
    def nonexpert_macs(self) -> int:
        """Per token, outside experts and the head: projections, routers, dense FFN layers
        (weight bytes x 2 int4 values per byte, scales aside)."""
        d = self.d_model
        if self.attention == "mla":
            proj = (d * self.n_heads * (self.qk_nope_dim + self.qk_rope_dim)
                    + d * (self.kv_lora_rank + self.qk_rope_dim)
                    + self.kv_lora_rank * self.n_heads * (self.qk_nope_dim + self.v_head_dim)
                    + self.n_heads * self.v_head_dim * d)
        else:
            proj = 2 * d * self.n_heads * self.head_dim + 2 * d * self.n_kv_heads * self.head_dim
        return (self.n_layers * proj + self.moe_layers * d * self.n_experts
                + self.dense_layers * 3 * d * self.dense_ffn)

    def params(self, active: bool = False) -> int:
        """Weights (all, or what one token uses: top-k routed experts), embeddings included
        once when tied: to check a shape against the model card's parameter count."""
        routed = self.top_k if active else self.n_experts
        experts = self.moe_layers * (routed + self.n_shared_experts) * self.expert_macs
        embeddings = self.vocab_size * self.d_model * (1 if self.tie_embeddings else 2)
        return experts + self.nonexpert_macs + embeddings

    @property
    def head_macs(self) -> int:
        return self.d_model * self.vocab_size

    def attention_macs(self, context: int) -> int:
        """Scores and weighted values of one query token over `context` cached tokens."""
        if self.attention == "mla":
            per_head = self.qk_nope_dim + self.qk_rope_dim + self.v_head_dim
        else:
            per_head = 2 * self.head_dim
        return self.n_layers * self.n_heads * per_head * context

    def summary(self) -> dict:
        return {"name": self.name, "source": self.source, "layers": self.n_layers,
                "moe_layers": self.moe_layers, "d_model": self.d_model,
                "experts": self.n_experts, "top_k": self.top_k, "expert_ffn": self.expert_ffn,
                "shared_experts": self.n_shared_experts, "vocab": self.vocab_size,
                "expert_bytes": self.expert_bytes, "nonexpert_bytes": self.nonexpert_bytes,
                "kv_bytes_per_token": self.kv_bytes_per_token}


_HF = "https://huggingface.co/{}/blob/main/config.json"

#: The full-size models (config.json values; corroborated as noted)
MODELS: dict[str, MoEModelSpec] = {m.name: m for m in (
    MoEModelSpec(
        "olmoe-1b-7b", _HF.format("allenai/OLMoE-1B-7B-0924") + " (hidden_size 2048, "
        "intermediate_size 1024, 16 layers, 16 heads = 16 KV heads, 64 experts, top-8, vocab "
        "50304, untied); Muennighoff et al., arXiv 2409.02060, Table 1",
        n_layers=16, d_model=2048, n_heads=16, n_kv_heads=16, head_dim=128, n_experts=64,
        top_k=8, expert_ffn=1024, n_shared_experts=0, vocab_size=50304, tie_embeddings=False),
    MoEModelSpec(
        "qwen3-30b-a3b", _HF.format("Qwen/Qwen3-30B-A3B") + " (hidden_size 2048, 48 layers, 32 "
        "heads, 4 KV heads, head_dim 128, moe_intermediate_size 768, 128 experts, top-8, vocab "
        "151936, untied, every layer MoE); the same in THUDM/slime scripts/models/qwen3-30B-A3B.sh",
        n_layers=48, d_model=2048, n_heads=32, n_kv_heads=4, head_dim=128, n_experts=128,
        top_k=8, expert_ffn=768, n_shared_experts=0, vocab_size=151936, tie_embeddings=False),
    MoEModelSpec(
        "deepseek-v2-lite", _HF.format("deepseek-ai/DeepSeek-V2-Lite") + " (hidden_size 2048, "
        "27 layers, first_k_dense_replace 1 with intermediate_size 10944, 16 heads, MLA: "
        "q_lora_rank null, kv_lora_rank 512, qk_nope 128, qk_rope 64, v_head_dim 128; 64 routed "
        "+ 2 shared experts of moe_intermediate_size 1408, top-6, vocab 102400, untied); "
        "DeepSeek-AI, arXiv 2405.04434, appendix B",
        n_layers=27, d_model=2048, n_heads=16, n_kv_heads=16, head_dim=128, n_experts=64,
        top_k=6, expert_ffn=1408, n_shared_experts=2, vocab_size=102400, tie_embeddings=False,
        dense_layers=1, dense_ffn=10944, attention="mla", kv_lora_rank=512, qk_rope_dim=64,
        qk_nope_dim=128, v_head_dim=128),
    MoEModelSpec(
        "granite-1b-a400m", _HF.format("ibm-granite/granite-3.0-1b-a400m-base") + " (hidden_size "
        "1024, 24 layers, 16 heads, 8 KV heads (k_proj 1024 -> 512: head_dim 64), "
        "intermediate_size 512, num_local_experts 32, top-8, vocab 49152, tied embeddings; the "
        "base model's: granite-3.0-1b-a400m-instruct's config.json has vocab 49155, 3 chat "
        "tokens more)",
        n_layers=24, d_model=1024, n_heads=16, n_kv_heads=8, head_dim=64, n_experts=32,
        top_k=8, expert_ffn=512, n_shared_experts=0, vocab_size=49152, tie_embeddings=True),
    MoEModelSpec(
        "mixtral-8x7b", _HF.format("mistralai/Mixtral-8x7B-v0.1") + " (hidden_size 4096, 32 "
        "layers, 32 heads, 8 KV heads, head_dim 128, intermediate_size 14336, 8 local experts, "
        "top-2, vocab 32000, untied); Jiang et al., arXiv 2401.04088, Table 1",
        n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128, n_experts=8,
        top_k=2, expert_ffn=14336, n_shared_experts=0, vocab_size=32000, tie_embeddings=False),
)}


def _bundled_meta_path(name: str) -> Path:
    # the checkpoint's meta.json, read as a file: importing golden.lm.checkpoint would load torch
    from ... import golden
    return Path(golden.__file__).resolve().parent / checkpoint_folder(name) / "meta.json"


def bundled_spec(name: str = MODEL_NAMES[0]) -> MoEModelSpec:
    """The bundled model `name`'s checkpoint (its meta.json `model` section, the ModelConfig it
    was trained with; unset keys take ModelConfig's defaults)."""
    from ...contracts.config import ModelConfig, build_dataclass
    path = _bundled_meta_path(name)
    cfg = build_dataclass(ModelConfig, json.loads(path.read_text())["model"], "model")
    return spec_from_config(BUNDLED, f"golden/{path.parent.name}/meta.json (the bundled "
                            "checkpoint's ModelConfig)", cfg)


def spec_from_config(name: str, source: str, cfg) -> MoEModelSpec:
    """The spec of a model the golden model runs (a `ModelConfig`: the bundled checkpoint, a
    Hugging Face checkpoint loaded by golden/lm/hf_loader.py)."""
    return MoEModelSpec(
        name, source,
        n_layers=cfg.n_layers, d_model=cfg.d_model, n_heads=cfg.n_heads,
        n_kv_heads=cfg.kv_heads, head_dim=cfg.head_dim or cfg.d_model // cfg.n_heads,
        n_experts=cfg.n_experts, top_k=cfg.top_k, expert_ffn=cfg.expert_ffn,
        n_shared_experts=cfg.n_shared_experts, vocab_size=cfg.vocab_size,
        tie_embeddings=cfg.tie_embeddings)


def model_names() -> tuple[str, ...]:
    return (BUNDLED, *MODELS)


def model_spec(name: str) -> MoEModelSpec:
    """A model by name; an unknown name is one line with the accepted names."""
    if name == BUNDLED:
        return bundled_spec()
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"model {name!r} is not known: accepted "
                         f"{', '.join(model_names())}") from None
