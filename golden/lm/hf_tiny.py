"""A tiny Hugging Face MoE checkpoint (`edgexpert hf tiny DIR`): config.json, safetensors and a
tokenizer.json in OLMoE, Qwen3-MoE or Mixtral naming, with random weights from a fixed seed, so
that `trace --hf` and `estimate --measured` can be tried without downloading a model, and the
tests load the same files (tests/test_golden_hf_loader.py).

The weights are N(0, 0.2^2) (norm weights 1 + that), small enough that the residual stream stays
in range over a few layers; the tokenizer is word-level, `w0` .. `w{V-2}` and `[UNK]`, split on
whitespace, so a prompt is text such as "w1 w2 w3".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TinyShape", "TINY", "KINDS", "tiny_config", "tiny_tensors", "write_tiny_checkpoint"]

#: the architectures golden/lm/hf_loader.py reads, by their config.json `model_type`
KINDS = ("qwen3_moe", "olmoe", "mixtral")

#: the standard deviation of the random weights (module doc)
WEIGHT_STD = 0.2


@dataclass(frozen=True)
class TinyShape:
    """A checkpoint's shape: model width, heads, key/value heads, head width, expert FFN width,
    experts, experts per token, vocabulary, layers, context."""
    d_model: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    expert_ffn: int = 32
    experts: int = 32
    top_k: int = 4
    vocab: int = 256
    layers: int = 2
    max_seq_len: int = 256


#: `edgexpert hf tiny`'s shape: OLMoE's and Qwen3-30B-A3B's regime (many narrow experts, top-k
#: > 1, expert FFN narrower than d_model) at a size that decodes in seconds; top-k 4 is the
#: smallest the default prefill budgets (policies.prefill.budget_minor = 4) and MoE-Spec's
#: budget (12 of at most `experts`) accept, so every policy runs at the default settings
TINY = TinyShape()


def tiny_config(kind: str, shape: TinyShape = TINY) -> dict:
    """The config.json of a `kind` checkpoint of `shape`."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not known: accepted {', '.join(KINDS)}")
    s = shape
    cfg = {"model_type": kind, "vocab_size": s.vocab, "hidden_size": s.d_model,
           "num_hidden_layers": s.layers, "num_attention_heads": s.heads,
           "num_key_value_heads": s.kv_heads, "num_experts_per_tok": s.top_k,
           "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": s.max_seq_len,
           "tie_word_embeddings": False}
    if kind == "mixtral":
        cfg.update(num_local_experts=s.experts, intermediate_size=s.expert_ffn)
    elif kind == "olmoe":
        cfg.update(num_experts=s.experts, intermediate_size=s.expert_ffn, norm_topk_prob=False)
    else:
        cfg.update(num_experts=s.experts, moe_intermediate_size=s.expert_ffn,
                   norm_topk_prob=True, head_dim=s.head_dim)
    return cfg


def tiny_tensors(kind: str, gen, shape: TinyShape = TINY) -> dict:
    """Random weights of a `kind` checkpoint of `shape` from the torch.Generator `gen`, by
    their checkpoint names."""
    import torch     # here, so that the command line's --help does not load torch
    s = shape
    d, hd, f = s.d_model, s.head_dim, s.expert_ffn

    def r(*dims: int) -> torch.Tensor:
        return torch.randn(*dims, generator=gen) * WEIGHT_STD

    t = {"model.embed_tokens.weight": r(s.vocab, d), "model.norm.weight": 1 + r(d),
         "lm_head.weight": r(s.vocab, d)}
    for i in range(s.layers):
        a = f"model.layers.{i}."
        t.update({a + "input_layernorm.weight": 1 + r(d),
                  a + "post_attention_layernorm.weight": 1 + r(d),
                  a + "self_attn.q_proj.weight": r(s.heads * hd, d),
                  a + "self_attn.k_proj.weight": r(s.kv_heads * hd, d),
                  a + "self_attn.v_proj.weight": r(s.kv_heads * hd, d),
                  a + "self_attn.o_proj.weight": r(d, s.heads * hd)})
        # OLMoE normalizes the whole q and k projections, Qwen3 each head (hf_loader.py)
        if kind == "olmoe":
            t[a + "self_attn.q_norm.weight"] = 1 + r(s.heads * hd)
            t[a + "self_attn.k_norm.weight"] = 1 + r(s.kv_heads * hd)
        if kind == "qwen3_moe":
            t[a + "self_attn.q_norm.weight"] = 1 + r(hd)
            t[a + "self_attn.k_norm.weight"] = 1 + r(hd)
        moe = a + ("block_sparse_moe." if kind == "mixtral" else "mlp.")
        t[moe + "gate.weight"] = r(s.experts, d)
        names = ("w1", "w3", "w2") if kind == "mixtral" else ("gate_proj", "up_proj", "down_proj")
        for j in range(s.experts):
            t[f"{moe}experts.{j}.{names[0]}.weight"] = r(f, d)
            t[f"{moe}experts.{j}.{names[1]}.weight"] = r(f, d)
            t[f"{moe}experts.{j}.{names[2]}.weight"] = r(d, f)
    return t


def write_tiny_checkpoint(folder: Path, kind: str = "qwen3_moe", seed: int = 3,
                          shape: TinyShape = TINY) -> Path:
    """config.json, model.safetensors and tokenizer.json of a tiny `kind` checkpoint in
    `folder` (created; refused when it holds a config.json already)."""
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = Path(folder)
    if (folder / "config.json").exists():
        raise FileExistsError(f"{folder} holds a checkpoint already (config.json)")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(tiny_config(kind, shape), indent=2))
    tensors = tiny_tensors(kind, torch.Generator().manual_seed(seed), shape)
    save_file({n: v.contiguous() for n, v in tensors.items()}, str(folder / "model.safetensors"))
    vocab = {f"w{i}": i for i in range(shape.vocab - 1)} | {"[UNK]": shape.vocab - 1}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder
