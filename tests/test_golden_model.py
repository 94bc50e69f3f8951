"""The float model and its integer twin on small random weights: decoding passes agree with the
training forward, the integer path does not depend on how tokens are batched, and the two paths
agree closely."""

import pytest
import torch

from edgexpert.contracts.config import load_config
from edgexpert.golden.integer.int_model import IntModel, quantize_weight
from edgexpert.golden.lm.model import KVCache, MoEModel



@pytest.fixture(scope="module")
def model(small_model):
    torch.manual_seed(0)
    return MoEModel(load_config(overrides=small_model).model).eval()


def _causal(n):
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


def test_step_matches_training_forward(model):
    tokens = torch.randint(0, 300, (20,))
    ref = model(tokens[None])[0][0]
    logits, traces = model.step(tokens, torch.arange(20), KVCache(), _causal(20))
    assert torch.allclose(logits, ref, atol=1e-5)
    assert len(traces) == 2 and traces[0].experts.shape == (20, 2)


def test_integer_path_is_batch_invariant_and_close_to_float(model):
    im = IntModel(model)
    tokens = torch.randint(0, 300, (24,))
    batch, _ = im.step(tokens, torch.arange(24), KVCache(), _causal(24))
    cache, rows = KVCache(), []
    for i in range(24):
        rows.append(im.step(tokens[i:i + 1], torch.tensor([i]), cache,
                            torch.ones(1, i + 1, dtype=torch.bool))[0])
    assert torch.equal(torch.cat(rows), batch)
    ref = model(tokens[None])[0][0].double()
    assert (batch.argmax(-1) == ref.argmax(-1)).float().mean() >= 0.9
    assert torch.nn.functional.cosine_similarity(batch, ref, dim=-1).min() > 0.98


def test_weight_quantization():
    w = torch.randn(16, 40, dtype=torch.float64)
    qw = quantize_weight(w, 7)
    assert int(qw.q.abs().max()) <= 7
    err = (qw.q * qw.scale.value()[:, None] - w).pow(2).mean() / w.pow(2).mean()
    assert err < 0.02
    # clipping search: never worse than the plain max-scaled rounding
    plain = torch.clamp(torch.round(w / (w.abs().amax(1, keepdim=True) / 7)), -7, 7) * (w.abs().amax(1, keepdim=True) / 7)
    assert err <= (plain - w).pow(2).mean() / w.pow(2).mean() + 1e-4


def test_overflowing_residual_is_reported(model):
    big = MoEModel(model.cfg)
    big.load_state_dict(model.state_dict())
    with torch.no_grad():
        big.tok_emb.weight.mul_(1e6)
    with pytest.raises(OverflowError, match="residual stream left int32"):
        IntModel(big).step(torch.tensor([1, 2]), torch.arange(2), KVCache(), _causal(2))


def test_grouped_dispatch_equals_the_per_expert_loop(model):
    moe = model.layers[0].moe
    x = torch.randn(40, model.cfg.d_model, requires_grad=True)
    logits = moe.router(x)
    idx = torch.sort(-logits, dim=-1, stable=True).indices[:, :2]
    weights = torch.softmax(torch.gather(logits, -1, idx), -1)
    grouped = moe.dispatch_grouped(x, idx, weights)
    loop = moe.dispatch_loop(x, idx, weights)
    assert torch.allclose(grouped, loop, atol=1e-6)
    g1 = torch.autograd.grad(grouped.sum(), moe.w_gate, retain_graph=True)[0]
    g2 = torch.autograd.grad(loop.sum(), moe.w_gate)[0]
    assert torch.allclose(g1, g2, atol=1e-6)
