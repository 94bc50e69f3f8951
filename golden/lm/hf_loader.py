"""Load a Hugging Face MoE checkpoint (config.json + *.safetensors) into the golden model.

Supported architectures and their weight names (per layer i, expert j):

| model_type | router | expert gate / up / down | attention norms |
|---|---|---|---|
| olmoe | mlp.gate | mlp.experts.j.{gate,up,down}_proj | q_norm / k_norm over the whole projection |
| qwen3_moe | mlp.gate | mlp.experts.j.{gate,up,down}_proj | q_norm / k_norm per head |
| mixtral | block_sparse_moe.gate | block_sparse_moe.experts.j.w1 / w3 / w2 | none |

All use rotary positions (rope_theta), RMSNorm (input_layernorm, post_attention_layernorm,
model.norm), self_attn.{q,k,v,o}_proj, model.embed_tokens and lm_head (unless tied). Routing:
softmax over all experts, top-k, renormalized when `norm_topk_prob` (Qwen3 per its config,
Mixtral always, OLMoE per its config, default off). Anything else (dense layers between MoE
layers, attention biases, sliding windows) is refused with a message naming it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from ...contracts.config import ConfigError, ModelConfig, build_dataclass
from ...contracts.errors import InputError
from .model import MoEModel

__all__ = ["HFLoadError", "SUPPORTED", "hf_model_config", "load_hf_checkpoint", "load_hf_tokenizer"]

SUPPORTED = ("olmoe", "qwen3_moe", "mixtral")


class HFLoadError(InputError):
    """The folder is not a supported Hugging Face MoE checkpoint, or its weights do not match."""


def hf_model_config(hf: dict) -> ModelConfig:
    """Our ModelConfig for a Hugging Face config.json (as a dict)."""
    kind = hf.get("model_type")
    if kind not in SUPPORTED:
        raise HFLoadError(f"model_type {kind!r} is not supported: accepted {', '.join(SUPPORTED)}")
    if hf.get("attention_bias") or hf.get("mlp_bias"):
        raise HFLoadError(f"{kind}: attention or MLP biases are not supported")
    if kind == "qwen3_moe" and (hf.get("mlp_only_layers") or hf.get("decoder_sparse_step", 1) != 1):
        raise HFLoadError("qwen3_moe: dense layers between MoE layers (mlp_only_layers, "
                          "decoder_sparse_step) are not supported")
    if hf.get("sliding_window") and hf.get("use_sliding_window", kind == "mixtral"):
        raise HFLoadError(f"{kind}: sliding-window attention is not supported")
    experts = hf["num_local_experts"] if kind == "mixtral" else hf["num_experts"]
    ffn = hf["moe_intermediate_size"] if kind == "qwen3_moe" else hf["intermediate_size"]
    data = {
        "vocab_size": hf["vocab_size"], "d_model": hf["hidden_size"],
        "n_layers": hf["num_hidden_layers"], "n_heads": hf["num_attention_heads"],
        "n_kv_heads": hf.get("num_key_value_heads") or hf["num_attention_heads"],
        "head_dim": hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"],
        "n_experts": experts, "top_k": hf["num_experts_per_tok"], "expert_ffn": ffn,
        "n_shared_experts": 0, "max_seq_len": hf.get("max_position_embeddings", 4096),
        "rope_theta": float(hf.get("rope_theta", 10000.0)),
        "qk_norm": {"olmoe": "full", "qwen3_moe": "head", "mixtral": "none"}[kind],
        "tie_embeddings": bool(hf.get("tie_word_embeddings", False)),
        "norm_topk_prob": True if kind == "mixtral" else bool(hf.get("norm_topk_prob", False)),
        "rms_eps": float(hf.get("rms_norm_eps", 1e-6)),
    }
    try:
        return build_dataclass(ModelConfig, data, "model")
    except ConfigError as exc:
        raise HFLoadError(f"{kind} config does not fit the golden model: {exc}") from None


def _names(kind: str, i: int, j: int) -> tuple[str, str, str]:
    base = f"model.layers.{i}."
    if kind == "mixtral":
        e = base + f"block_sparse_moe.experts.{j}."
        return e + "w1.weight", e + "w3.weight", e + "w2.weight"
    e = base + f"mlp.experts.{j}."
    return e + "gate_proj.weight", e + "up_proj.weight", e + "down_proj.weight"


def load_hf_checkpoint(folder: Path, dtype=torch.float32) -> MoEModel:
    """The golden model with the weights of a Hugging Face MoE checkpoint folder."""
    folder = Path(folder)
    try:
        hf = json.loads((folder / "config.json").read_text())
    except OSError as exc:
        raise HFLoadError(f"{folder} has no readable config.json: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise HFLoadError(f"{folder / 'config.json'} is not valid JSON: {exc}") from None
    cfg = hf_model_config(hf)
    kind = hf["model_type"]
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise HFLoadError(f"{folder} holds no .safetensors files")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        try:
            tensors.update(load_file(str(f)))
        except (SafetensorError, OSError) as exc:
            raise HFLoadError(f"{f} is not a safetensors file: {exc}") from None

    def take(name: str, shape: tuple) -> torch.Tensor:
        if name not in tensors:
            raise HFLoadError(f"{folder}: tensor {name} is missing")
        t = tensors[name]
        if tuple(t.shape) != shape:
            raise HFLoadError(f"{folder}: tensor {name} has shape {tuple(t.shape)}, the config "
                              f"needs {shape}")
        del tensors[name]  # the stacked copy replaces it: peak memory stays near one model
        return t.to(dtype)

    d, hd, h, kv, f, e = (cfg.d_model, cfg.dim_head, cfg.n_heads, cfg.kv_heads, cfg.expert_ffn,
                          cfg.n_experts)
    state = {"tok_emb.weight": take("model.embed_tokens.weight", (cfg.vocab_size, d)),
             "norm_f.weight": take("model.norm.weight", (d,))}
    if not cfg.tie_embeddings:
        state["lm_head.weight"] = take("lm_head.weight", (cfg.vocab_size, d))
    else:
        tensors.pop("lm_head.weight", None)  # some tied checkpoints still store the copy
    router = "block_sparse_moe.gate.weight" if kind == "mixtral" else "mlp.gate.weight"
    qk_dims = {"full": (h * hd, kv * hd), "head": (hd, hd)}.get(cfg.qk_norm)
    for i in range(cfg.n_layers):
        a, o = f"model.layers.{i}.", f"layers.{i}."
        state[o + "norm1.weight"] = take(a + "input_layernorm.weight", (d,))
        state[o + "norm2.weight"] = take(a + "post_attention_layernorm.weight", (d,))
        state[o + "qkv.weight"] = torch.cat([take(a + "self_attn.q_proj.weight", (h * hd, d)),
                                             take(a + "self_attn.k_proj.weight", (kv * hd, d)),
                                             take(a + "self_attn.v_proj.weight", (kv * hd, d))])
        state[o + "proj.weight"] = take(a + "self_attn.o_proj.weight", (d, h * hd))
        if qk_dims:
            state[o + "q_norm.weight"] = take(a + "self_attn.q_norm.weight", (qk_dims[0],))
            state[o + "k_norm.weight"] = take(a + "self_attn.k_norm.weight", (qk_dims[1],))
        state[o + "moe.router.weight"] = take(a + router, (e, d))
        gates, ups, downs = zip(*(_names(kind, i, j) for j in range(e)))
        state[o + "moe.w_gate"] = torch.stack([take(n, (f, d)) for n in gates])
        state[o + "moe.w_up"] = torch.stack([take(n, (f, d)) for n in ups])
        state[o + "moe.w_down"] = torch.stack([take(n, (d, f)) for n in downs])
        for name in ("s_gate", "s_up", "s_down"):
            state[o + "moe." + name] = torch.zeros((0, d, f) if name == "s_down" else (0, f, d), dtype=dtype)
    # rotary embeddings' inverse frequencies are recomputed, not weights
    unused = sorted(n for n in tensors if not n.endswith("rotary_emb.inv_freq"))
    if unused:
        raise HFLoadError(f"{folder}: {len(unused)} tensors are not used by the {kind} mapping, "
                          f"e.g. {unused[0]}")
    # built on the meta device and then given the loaded tensors: no second copy of a large model
    with torch.device("meta"):
        model = MoEModel(cfg)
    model.load_state_dict(state, assign=True)
    return model.eval()


def load_hf_tokenizer(folder: Path):
    """The checkpoint's own tokenizer (`tokenizer.json`, the `tokenizers` format every one of
    these checkpoints ships)."""
    from tokenizers import Tokenizer
    path = Path(folder) / "tokenizer.json"
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:   # tokenizers raises its own Exception for every kind of failure
        raise HFLoadError(f"{path} is not a readable tokenizer.json: {exc}") from None
