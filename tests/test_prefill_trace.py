"""Prefill traces: the golden writer on the bundled model's integer path, the validating reader."""

import numpy as np
import pytest
import torch

from edgexpert.contracts.config import load_config
from edgexpert.contracts.prefill_trace import (PrefillTraceError, read_prefill_trace,
                                               write_prefill_trace)
from edgexpert.golden.blocks import pru
from edgexpert.golden.traces.prefill_trace import build_prefill_trace, prefill_settings, synthetic_prefill_trace


@pytest.fixture(scope="module")
def bundled_trace(tmp_path_factory):
    from edgexpert.golden.lm.checkpoint import load_checkpoint
    from edgexpert.golden.lm.corpus import load_corpus
    from edgexpert.golden.integer.int_model import quantize_model
    from edgexpert.golden.policies.prefill import load_encoder
    from edgexpert.golden.lm.prompts import load_prompts

    torch.set_num_threads(1)
    ckpt = load_checkpoint()
    encoder, _ = load_encoder(ckpt.model)
    prompts = [p[:40] for p in load_prompts(load_corpus(), ckpt.tokenizer)[:2]]
    trace = build_prefill_trace(quantize_model(ckpt.model), encoder, load_config().policies,
                                prompts, {"prompts": "bundled[:2][:40]"})
    return write_prefill_trace(trace, tmp_path_factory.mktemp("pt") / "prefill.npz")


def test_bundled_trace_reads_back_and_routes_by_the_contract(bundled_trace):
    trace = read_prefill_trace(bundled_trace)
    s = trace.prefill
    assert s == {"tau_major_q16": 65536, "tau_minor_q16": 49152, "budget_minor": 4,
                 "budget_trivial": 3, "chunk": 16}
    for p in range(2):
        rows = trace.prompt(p)
        assert len(rows["token"]) == 39
        classes = pru.token_classes(torch.from_numpy(rows["score_q16"]).long(), 65536, 49152)
        assert classes.tolist() == rows["token_class"].tolist()
        for layer in range(trace.model.n_layers):
            z = torch.from_numpy(rows["logits_q16"][:, layer]).long()
            experts = pru.route_layer(z, classes, 4, 4, 3)
            assert experts.tolist() == rows["experts"][:, layer].tolist()
            assert pru.routing_weights(z, experts).tolist() == rows["weights_q16"][:, layer].tolist()
    # three chunks of 16 (39 tokens) per layer and prompt; trivial tokens use 3 experts
    assert len(trace["fetch_chunk"]) == 2 * 4 * 3
    assert (trace["experts"][trace["token_class"] == 2][..., 3] == -1).all()
    first = np.unpackbits(trace["fetch_experts"][0])
    rows = trace.prompt(0)["experts"][:16, 0]
    assert np.flatnonzero(first).tolist() == sorted(set(rows[rows >= 0].tolist()))


def test_bundled_trace_moe_layer_matches_an_independent_reference(bundled_trace):
    """The MoE arrays (version 2) equal whole experts recomputed by the integer model's expert
    on the trace's own inputs and routes (golden/traces/expert_outputs.py), not through the
    model's step and the trace's assembly; a changed input changes the reference, so the
    comparison can fail."""
    from edgexpert.golden.traces.expert_outputs import prefill_outputs

    trace = read_prefill_trace(bundled_trace)
    assert trace.header["version"] == 2
    want = prefill_outputs(trace)
    for name, values in want.items():
        assert np.array_equal(values, trace[name]), name
    # routed experts only: an unused slot (-1, trivial tokens' 4th) has zero outputs
    unused = trace["experts"] < 0
    assert unused.any() and not trace["expert_out_q16"][unused].any()
    assert trace["moe_out_q16"].any() and (np.abs(trace["x_q"]).max() == 127)
    bad = dict(trace.arrays, x_q=trace["x_q"].copy())
    bad["x_q"][0, 0, :8] = -bad["x_q"][0, 0, :8]
    moved = prefill_outputs(type(trace)(trace.header, bad))["moe_out_q16"]
    assert not np.array_equal(moved[0, 0], trace["moe_out_q16"][0, 0])


def test_trace_with_the_integer_encoder_takes_its_scores(tmp_path):
    """policies.prefill.encoder=int: the scores are the integer encoder's, the source says so."""
    from edgexpert.golden.lm.checkpoint import load_checkpoint
    from edgexpert.golden.lm.corpus import load_corpus
    from edgexpert.golden.integer.int_encoder import IntTokenEncoder
    from edgexpert.golden.integer.int_model import quantize_model
    from edgexpert.golden.policies.prefill import load_encoder
    from edgexpert.golden.lm.prompts import load_prompts

    torch.set_num_threads(1)
    ckpt = load_checkpoint()
    encoder, _ = load_encoder(ckpt.model)
    prompt = load_prompts(load_corpus(), ckpt.tokenizer)[0][:25]
    policies = load_config(overrides=["policies.prefill.encoder=int"]).policies
    trace = read_prefill_trace(write_prefill_trace(
        build_prefill_trace(quantize_model(ckpt.model), encoder, policies, [prompt], {}),
        tmp_path / "int.npz"))
    assert trace.header["source"] == {"encoder": "int"}
    want = IntTokenEncoder(encoder).scores_q16(torch.tensor(prompt[:-1]))
    assert trace.prompt(0)["score_q16"].tolist() == want.tolist()


def test_reader_names_what_is_wrong(bundled_trace, tmp_path):
    trace = read_prefill_trace(bundled_trace)
    bad = dict(trace.arrays, token_class=trace["token_class"] + 3)
    path = write_prefill_trace(type(trace)(trace.header, bad), tmp_path / "a.npz")
    with pytest.raises(PrefillTraceError, match="'token_class' holds 3..5: accepted 0..2"):
        read_prefill_trace(path)
    bad = dict(trace.arrays, experts=trace["experts"].astype(np.int32))
    path = write_prefill_trace(type(trace)(trace.header, bad), tmp_path / "b.npz")
    with pytest.raises(PrefillTraceError, match="'experts' is int32.*accepted int16"):
        read_prefill_trace(path)
    path = write_prefill_trace(type(trace)({**trace.header, "version": 1}, trace.arrays),
                               tmp_path / "c.npz")
    with pytest.raises(PrefillTraceError, match="accepted 'edgexpert-prefill-trace' version 2"):
        read_prefill_trace(path)
    bad = dict(trace.arrays, x_q=np.full_like(trace["x_q"], -128))
    path = write_prefill_trace(type(trace)(trace.header, bad), tmp_path / "d.npz")
    with pytest.raises(PrefillTraceError, match="'x_q' holds -128..-128: accepted -127..127"):
        read_prefill_trace(path)
    bad = dict(trace.arrays, moe_out_q16=trace["moe_out_q16"][:, :1])
    path = write_prefill_trace(type(trace)(trace.header, bad), tmp_path / "e.npz")
    with pytest.raises(PrefillTraceError, match=r"'moe_out_q16' is int32\[78, 1, 192\]"):
        read_prefill_trace(path)


def test_synthetic_trace_routes_all_major_prompts_natively(tmp_path):
    config = load_config()
    model = config.model
    z = torch.randint(-5 * 65536, 5 * 65536, (5, model.n_layers, model.n_experts))
    scores = torch.full((5,), 65536 // 5 + 1)     # 13107 x 5 = 65535 would be minor: exact integers
    trace = synthetic_prefill_trace(model, prefill_settings(config.policies), [(scores, z)], {})
    read = read_prefill_trace(write_prefill_trace(trace, tmp_path / "s.npz"))
    assert (read["token_class"] == 0).all()
    assert read["experts"][:, 1].tolist() == pru.native_top_k(z[:, 1], model.top_k).tolist()
    assert read["moe_out_q16"].shape == (5, model.n_layers, model.d_model)
    assert not read["moe_out_q16"].any() and not read["x_q"].any()
