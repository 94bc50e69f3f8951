"""The full-size model shapes (sim/perf/models.py) against their model cards' parameter counts, and
the weight layout's arithmetic for one expert by hand."""

import pytest

from edgexpert.sim.perf.models import MODELS, bundled_spec, model_names, model_spec

# (total, active) parameters from the model cards / papers, in billions, and our tolerance
PUBLISHED = {
    "olmoe-1b-7b": (6.9, 1.3),        # arXiv 2409.02060: 6.9B total, 1.3B active
    "qwen3-30b-a3b": (30.5, 3.3),     # Qwen3 model card: 30.5B total, 3.3B activated
    "granite-1b-a400m": (1.3, 0.4),   # granite-3.0 model card: 1.3B total, 400M active
    "mixtral-8x7b": (46.7, 12.9),     # arXiv 2401.04088: 47B total, 13B active
    # arXiv 2405.04434: 15.7B total, 2.4B active (without the 0.21B input embedding)
    "deepseek-v2-lite": (15.7, 2.4 + 0.21),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_the_model_cards(name):
    total, active = PUBLISHED[name]
    spec = model_spec(name)
    assert spec.params() / 1e9 == pytest.approx(total, rel=0.03)
    # the cards round active counts to one figure (granite: 0.43B is "400M")
    assert spec.params(active=True) / 1e9 == pytest.approx(active, rel=0.08)
    assert spec.source.startswith("https://huggingface.co/")


def test_qwen3_expert_bytes_by_hand():
    # GATE_UP: 2048 columns of 2 x 768 int4 = 768 B (32-aligned) + 2 x 1536 B of scales;
    # DOWN: 768 columns of 2048 int4 = 1024 B + 2 x 2048 B of scales
    assert model_spec("qwen3-30b-a3b").expert_bytes == 2048 * 768 + 3072 + 768 * 1024 + 4096


def test_bundled_model_is_the_checkpoints():
    spec = bundled_spec()
    assert (spec.n_layers, spec.d_model, spec.n_experts, spec.top_k, spec.expert_ffn,
            spec.vocab_size) == (4, 192, 32, 4, 64, 4096)
    assert spec.expert_bytes == 19_072     # docs/policies.md: an expert is 19,072 bytes


def test_mla_kv_cache_is_the_latent():
    # DeepSeek-V2-Lite caches kv_lora_rank + qk_rope_dim = 576 values per layer, 27 layers, int8
    assert model_spec("deepseek-v2-lite").kv_bytes_per_token == 27 * 576


def test_unknown_model_is_one_line_with_the_names():
    with pytest.raises(ValueError) as err:
        model_spec("gpt-5")
    message = str(err.value)
    assert "\n" not in message and all(n in message for n in model_names())
    assert set(MODELS) < set(model_names())
