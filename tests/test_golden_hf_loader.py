"""Hugging Face MoE checkpoints (OLMoE, Qwen3-MoE, Mixtral naming): tiny ones written here load
into the golden model, which then computes what an independent reading of those architectures
computes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from edgexpert.golden.decoding.decode import FloatEngine, decode_ar, decode_speculative
from edgexpert.golden.lm.hf_loader import HFLoadError, hf_model_config, load_hf_checkpoint
from edgexpert.golden.lm.hf_tiny import TinyShape, tiny_config, tiny_tensors, write_tiny_checkpoint
from edgexpert.golden.integer.int_model import quantize_model
from edgexpert.contracts.config import load_config

D, H, KV, HD, F, E, K, V, L = 32, 4, 2, 8, 16, 8, 2, 64, 2


#: the tests' checkpoints: smaller than `edgexpert hf tiny`'s, so the reference below runs fast
SHAPE = TinyShape(d_model=D, heads=H, kv_heads=KV, head_dim=HD, expert_ffn=F, experts=E,
                  top_k=K, vocab=V, layers=L, max_seq_len=128)


def hf_config(kind: str) -> dict:
    return tiny_config(kind, SHAPE)


def hf_tensors(kind: str, gen: torch.Generator) -> dict:
    return tiny_tensors(kind, gen, SHAPE)


def reference_logits(kind: str, t: dict, hf: dict, tokens: torch.Tensor) -> torch.Tensor:
    """The architectures as their papers / reference code describe them, written independently
    of golden/lm/model.py."""
    eps = hf["rms_norm_eps"]
    rms = lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
    s = len(tokens)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, HD, 2, dtype=torch.float64) / HD))
    freqs = torch.outer(torch.arange(s, dtype=torch.float64), inv_freq)
    cos, sin = torch.cat([freqs, freqs], -1).cos().float(), torch.cat([freqs, freqs], -1).sin().float()
    rot = lambda x: torch.cat([-x[..., HD // 2:], x[..., :HD // 2]], -1)
    x = t["model.embed_tokens.weight"][tokens]
    for i in range(L):
        a = f"model.layers.{i}."
        h = rms(x, t[a + "input_layernorm.weight"])
        q, k, v = (h @ t[a + f"self_attn.{n}_proj.weight"].T for n in "qkv")
        if kind == "olmoe":
            q, k = rms(q, t[a + "self_attn.q_norm.weight"]), rms(k, t[a + "self_attn.k_norm.weight"])
        q, k, v = q.view(s, H, HD), k.view(s, KV, HD), v.view(s, KV, HD)
        if kind == "qwen3_moe":
            q, k = rms(q, t[a + "self_attn.q_norm.weight"]), rms(k, t[a + "self_attn.k_norm.weight"])
        q = q * cos[:, None] + rot(q) * sin[:, None]
        k = k * cos[:, None] + rot(k) * sin[:, None]
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / HD ** 0.5
        scores = scores.masked_fill(~torch.tril(torch.ones(s, s, dtype=torch.bool)), float("-inf"))
        att = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(s, H * HD)
        x = x + att @ t[a + "self_attn.o_proj.weight"].T
        h = rms(x, t[a + "post_attention_layernorm.weight"])
        moe = a + ("block_sparse_moe." if kind == "mixtral" else "mlp.")
        probs = (h @ t[moe + "gate.weight"].T).softmax(-1)
        top_w, top_i = probs.topk(K, dim=-1)
        if kind == "mixtral" or hf.get("norm_topk_prob"):
            top_w = top_w / top_w.sum(-1, keepdim=True)
        out = torch.zeros_like(x)
        names = ("w1", "w3", "w2") if kind == "mixtral" else ("gate_proj", "up_proj", "down_proj")
        for n in range(s):
            for w, j in zip(top_w[n], top_i[n].tolist()):
                e = f"{moe}experts.{j}."
                g = h[n] @ t[e + names[0] + ".weight"].T
                u = h[n] @ t[e + names[1] + ".weight"].T
                out[n] += w * ((torch.nn.functional.silu(g) * u) @ t[e + names[2] + ".weight"].T)
        x = x + out
    return rms(x, t["model.norm.weight"]) @ t["lm_head.weight"].T


def write_checkpoint(folder, kind: str, tensors: dict, hf: dict):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(hf))
    names = sorted(tensors)
    # two shards, as real checkpoints come
    save_file({n: tensors[n].contiguous() for n in names[::2]}, str(folder / "model-00001-of-00002.safetensors"))
    save_file({n: tensors[n].contiguous() for n in names[1::2]}, str(folder / "model-00002-of-00002.safetensors"))


@pytest.mark.parametrize("kind", ["olmoe", "qwen3_moe", "mixtral"])
def test_loads_and_matches_reference(tmp_path, kind):
    gen = torch.Generator().manual_seed({"olmoe": 1, "qwen3_moe": 2, "mixtral": 3}[kind])
    hf, tensors = hf_config(kind), hf_tensors(kind, gen)
    write_checkpoint(tmp_path / kind, kind, tensors, hf)
    model = load_hf_checkpoint(tmp_path / kind)
    tokens = torch.randint(0, V, (12,), generator=gen)
    ours = model(tokens[None])[0][0]
    ref = reference_logits(kind, tensors, hf, tokens)
    assert torch.allclose(ours, ref, atol=1e-4), (ours - ref).abs().max()


@pytest.mark.parametrize("kind", ["olmoe", "qwen3_moe"])
def test_hf_model_decodes_losslessly_on_both_paths(tmp_path, kind):
    gen = torch.Generator().manual_seed(3)
    write_checkpoint(tmp_path, kind, hf_tensors(kind, gen), hf_config(kind))
    model = load_hf_checkpoint(tmp_path)
    cfg = load_config(overrides=["decode.max_new_tokens=10", "decode.max_depth=3",
                                 "decode.max_candidates=12"]).decode
    for engine in (FloatEngine(model), quantize_model(model)):
        assert decode_ar(engine, [1, 2, 3, 4], cfg).tokens == decode_speculative(engine, [1, 2, 3, 4], cfg).tokens


def test_bad_checkpoints(tmp_path):
    with pytest.raises(HFLoadError, match="has no readable config.json"):
        load_hf_checkpoint(tmp_path)
    with pytest.raises(HFLoadError, match="model_type 'llama' is not supported: accepted olmoe, qwen3_moe, mixtral"):
        hf_model_config({"model_type": "llama"})
    hf = hf_config("qwen3_moe")
    with pytest.raises(HFLoadError, match="dense layers"):
        hf_model_config({**hf, "mlp_only_layers": [0]})
    with pytest.raises(HFLoadError, match="does not fit the golden model: model.top_k = 9"):
        hf_model_config({**hf, "num_experts_per_tok": 9})
    gen = torch.Generator().manual_seed(0)
    tensors = hf_tensors("mixtral", gen)
    del tensors["model.layers.1.block_sparse_moe.experts.3.w2.weight"]
    write_checkpoint(tmp_path / "a", "mixtral", tensors, hf_config("mixtral"))
    with pytest.raises(HFLoadError, match="tensor model.layers.1.block_sparse_moe.experts.3.w2.weight is missing"):
        load_hf_checkpoint(tmp_path / "a")
    tensors = hf_tensors("mixtral", gen)
    tensors["model.layers.0.block_sparse_moe.gate.weight"] = torch.zeros(E + 1, D)
    write_checkpoint(tmp_path / "b", "mixtral", tensors, hf_config("mixtral"))
    with pytest.raises(HFLoadError, match=r"gate.weight has shape \(9, 32\), the config needs \(8, 32\)"):
        load_hf_checkpoint(tmp_path / "b")
    tensors = hf_tensors("mixtral", gen)
    tensors["model.layers.0.extra.weight"] = torch.zeros(2)
    write_checkpoint(tmp_path / "c", "mixtral", tensors, hf_config("mixtral"))
    with pytest.raises(HFLoadError, match="1 tensors are not used by the mixtral mapping, e.g. model.layers.0.extra.weight"):
        load_hf_checkpoint(tmp_path / "c")


# `edgexpert trace --hf`: a checkpoint decodes text; its measured passes then price that
# model in `edgexpert estimate` with routing "trace"

EDGEXPERT = Path(sys.executable).parent / "edgexpert"


def run(*args, build):
    return subprocess.run([str(EDGEXPERT), *args], capture_output=True, text=True,
                          env={**os.environ, "EDGEXPERT_BUILD_DIR": str(build)})


def tiny_checkpoint(folder: Path) -> Path:
    return write_tiny_checkpoint(folder, "qwen3_moe", 3, SHAPE)


def test_a_checkpoint_is_traced_and_estimated_from_its_passes(tmp_path):
    folder = tiny_checkpoint(tmp_path / "tiny-qwen3")
    proc = run("trace", "--hf", str(folder), "--prompt", "w1 w2 w3 w4", "--prompt", "w7 w7",
               "--policy", "ar", "--set", "decode.max_new_tokens=6", "--set", "decode.max_depth=3",
               "--set", "decode.max_candidates=8", "--json", build=tmp_path / "build")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["model"] == "tiny-qwen3" and data["prompts"] == 2 and data["lossless"]
    assert set(data["policies"]) == {"ar", "naive_sd"}
    assert data["policies"]["ar"]["pass_kinds"]["ar"]["runs_per_step"] == 1.0
    measured = tmp_path / "build" / "trace" / "tiny-qwen3" / "measured.json"
    proc = run("estimate", "--measured", str(measured), "--model", "tiny-qwen3",
               "--model", "olmoe-1b-7b", "--policy", "ar", "--policy", "naive_sd", "--json",
               build=tmp_path / "build")
    assert proc.returncode == 0, proc.stderr
    rows = {(r["model"], r["policy"]): r for r in json.loads(proc.stdout)}
    assert rows["tiny-qwen3", "ar"]["routing"] == "trace"
    assert rows["tiny-qwen3", "naive_sd"]["routing"] == "trace"
    assert rows["olmoe-1b-7b", "ar"]["routing"] == "synthetic"
    # the estimate prices exactly the expert bytes the traced run fetched
    assert rows["tiny-qwen3", "ar"]["bytes_per_token"]["expert"] == pytest.approx(
        data["policies"]["ar"]["ema_bytes_per_token"])


def test_trace_needs_text_and_a_tokenizer(tmp_path):
    folder = tiny_checkpoint(tmp_path / "tiny")
    proc = run("trace", "--hf", str(folder), build=tmp_path / "build")
    assert proc.returncode == 2 and "accepted --prompt TEXT" in proc.stderr
    (folder / "tokenizer.json").unlink()
    proc = run("trace", "--hf", str(folder), "--prompt", "w1", build=tmp_path / "build")
    assert proc.returncode == 2 and "tokenizer.json is not a readable tokenizer.json" in \
        proc.stderr


def test_the_tiny_checkpoint_gets_every_policy_measured_and_priced(tmp_path):
    """`hf tiny` writes a checkpoint every policy runs on at the default settings; `trace --hf`
    measures all eight, and `estimate --measured` prices each from those passes, labelled with
    the checkpoint's name."""
    folder = tmp_path / "tiny"
    proc = run("hf", "tiny", str(folder), "--seed", "7", build=tmp_path / "build")
    assert proc.returncode == 0, proc.stderr
    assert "top-4" in proc.stdout and (folder / "model.safetensors").is_file()
    again = run("hf", "tiny", str(folder), build=tmp_path / "build")
    assert again.returncode == 2 and "holds a checkpoint already" in again.stderr
    proc = run("trace", "--hf", str(folder), "--prompt", "w1 w2 w3 w4 w9", "--json",
               "--set", "decode.max_new_tokens=6", build=tmp_path / "build")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    policies = ("ar", "naive_sd", "edgexpert", "moe_spec", "s2moe", "specmoe", "specter",
                "combined")
    assert set(data["policies"]) == set(policies) and data["lossless"]
    # EdgeXpert's coalescing fetches fewer expert bytes than naive speculative decoding
    assert data["policies"]["edgexpert"]["ema_bytes_per_token"] < \
        data["policies"]["naive_sd"]["ema_bytes_per_token"]
    measured = tmp_path / "build" / "trace" / "tiny" / "measured.json"
    proc = run("estimate", "--measured", str(measured), "--model", "tiny", "--json",
               build=tmp_path / "build")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert sorted(r["policy"] for r in rows) == sorted(policies)
    assert all(r["routing"] == "trace" and r["model"] == "tiny" for r in rows)
    assert all("measured passes of tiny" in " ".join(r["notes"]) for r in rows)
