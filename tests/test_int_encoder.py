"""The prefill encoder on the A8W4 integer path (golden/integer/int_encoder.py): its integer LayerNorm
and GELU against torch's, determinism and shapes, the bundled encoder's integer scores against
its float ones, and the `policies.prefill.encoder` setting."""

import pytest
import torch
import torch.nn.functional as F

from edgexpert.contracts.config import ConfigError, load_config
from edgexpert.golden.lm.checkpoint import load_checkpoint
from edgexpert.golden.lm.corpus import load_corpus
from edgexpert.golden.integer.int_encoder import IntTokenEncoder, gelu_q16, layernorm_q8
from edgexpert.golden.integer.intops import I64
from edgexpert.golden.policies.prefill import (EncoderSettings, TokenEncoder, load_encoder, prefill_routing,
                                      scoring_encoder, spearman, token_classes)
from edgexpert.golden.lm.prompts import load_prompts


def _q16(x: torch.Tensor) -> torch.Tensor:
    return torch.round(x.double() * 65536).to(I64)


def test_layernorm_q8_tracks_torch():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 64, generator=gen, dtype=torch.float64) * 3 + 1.5
    gain = torch.rand(64, generator=gen, dtype=torch.float64) + 0.5
    bias = torch.randn(64, generator=gen, dtype=torch.float64) * 0.1
    q, s = layernorm_q8(_q16(x), torch.round(gain * 4096).to(I64), _q16(bias), 1e-5)
    assert q.dtype == I64 and int(q.abs().max()) <= 127
    got = q.double() * s.value()[:, None]
    want = F.layer_norm(x, (64,), gain, bias, 1e-5)
    # int8 output: within a step of 1/127 of the row maximum, plus the Q.8 variance
    assert float((got - want).abs().max()) < 2.5 * float(want.abs().max()) / 127


def test_gelu_q16_tracks_torch():
    x = torch.linspace(-10, 10, 4001, dtype=torch.float64)
    got = gelu_q16(_q16(x)).double() / 65536
    # x sigmoid(1.702 x) is within 0.021 of the erf GELU; the table's 1/64 steps add < 0.01 x
    assert float((got - F.gelu(x)).abs().max()) < 0.03
    # past the table's end (1.702 x >= 8) the factor is its last entry, sigmoid(511/64): x less
    # 0.034%; below -8 / 1.702 its first, so about 0
    big, small = x[x > 5], x[x < -5]
    assert float(((gelu_q16(_q16(big)).double() / 65536) / big - 1).abs().max()) < 5e-4
    assert float((gelu_q16(_q16(small)).double() / 65536).abs().max()) < 0.01


@pytest.fixture(scope="module")
def bundled():
    ckpt = load_checkpoint()
    encoder, _ = load_encoder(ckpt.model)
    return encoder, IntTokenEncoder(encoder), load_prompts(load_corpus(), ckpt.tokenizer)


def test_integer_scores_are_deterministic_q16_of_the_right_shape(bundled):
    encoder, twin, prompts = bundled
    tokens = torch.tensor([prompts[0][:40], prompts[1][:40]])
    scores = twin(tokens)
    assert scores.shape == (2, 40) and scores.dtype == torch.float64
    assert torch.equal(scores, IntTokenEncoder(encoder)(tokens))
    q = twin.scores_q16(tokens[0])
    assert q.dtype == I64 and torch.equal(q.double() / 65536, scores[0])
    assert 0 <= int(q.min()) and int(q.max()) <= 65536
    # each head's softmax sums to 65536 within half a unit per token; their mean likewise
    assert abs(int(q.sum()) - 65536) <= 40
    assert int(twin.scores_q16(tokens[0, :1])) in range(65535, 65537)   # one token: all of it
    with pytest.raises(ValueError, match="accepted 1..128 tokens"):
        twin.scores_q16(torch.zeros(129, dtype=torch.long))


def test_integer_scores_track_the_float_encoder(bundled):
    encoder, twin, prompts = bundled
    changed = total = 0
    for prompt in prompts[:4]:
        body = torch.tensor(prompt[:-1])
        with torch.no_grad():
            f = encoder(body[None])[0].double()
        i = twin(body[None])[0]
        assert spearman(f, i) > 0.9
        assert float((f - i).abs().max()) < 0.05
        changed += int((token_classes(f, 1.0, 0.75) != token_classes(i, 1.0, 0.75)).sum())
        total += len(body)
    # docs/blocks/pru.md: about one token in ten changes class on the bundled prompts
    assert changed / total < 0.2


def test_prefill_encoder_setting_picks_the_path(bundled):
    encoder = bundled[0]
    config = load_config()
    assert config.policies.prefill.encoder == "float"
    top_k = load_checkpoint().model.cfg.top_k
    assert prefill_routing(config.policies, encoder, top_k).encoder is encoder
    config = load_config(overrides=["policies.prefill.encoder=int"])
    assert isinstance(prefill_routing(config.policies, encoder, top_k).encoder, IntTokenEncoder)
    with pytest.raises(ConfigError, match="accepted float, int"):
        load_config(overrides=["policies.prefill.encoder=fp8"])
    with pytest.raises(ValueError, match="accepted float, int"):
        scoring_encoder(encoder, "fp8")


def test_integer_twin_of_a_small_encoder():
    """Any encoder shape (2 heads, 3 layers, a window of 16) quantizes and scores."""
    torch.manual_seed(0)
    settings = EncoderSettings(width=16, heads=2, layers=3, window=16)
    encoder = TokenEncoder(torch.randn(50, 24), settings).eval()
    twin = IntTokenEncoder(encoder)
    tokens = torch.randint(50, (3, 16))
    scores = twin(tokens)
    assert scores.shape == (3, 16)
    assert torch.allclose(scores.sum(1), torch.ones(3, dtype=torch.float64), atol=1e-3)


def test_compare_encoders_counts_the_moves(bundled):
    """`edgexpert prefill encoders`' measurement on two short windows."""
    from edgexpert.golden.decoding.decode import FloatEngine
    from edgexpert.golden.studies.prefill_calibration import compare_encoders

    encoder, twin, prompts = bundled
    model = load_checkpoint().model
    config = load_config()
    windows = [p[:33] for p in prompts[:2]]
    result = compare_encoders(FloatEngine(model), model, encoder, windows, config.policies,
                              config.decode, progress=False)
    assert result["prompt_tokens"] == 64
    assert set(result["paths"]) == {"float", "int"}
    assert sum(result["class_moves"].values()) == result["class_changes"]
    moved = sum(int((token_classes(encoder(torch.tensor([w[:-1]]))[0], 1.0, 0.75)
                     != token_classes(twin(torch.tensor([w[:-1]]))[0], 1.0, 0.75)).sum())
                for w in windows)
    assert result["class_changes"] == moved
    for row in result["paths"].values():
        assert row["prompt_tokens"] == 64 and 0 < row["prefill_bytes_reduction"] < 1
