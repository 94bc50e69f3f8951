"""EdgeXpert's prefill: token classes, the shared-set routing, the chunked prefill cost, the
token encoder (bidirectional, deterministic, tied to its model), calibration's Pareto choice and
the configuration's checks."""

import json

import numpy as np
import pytest
import torch

from edgexpert.contracts.config import ConfigError, DecodeConfig, load_config
from edgexpert.contracts.trace import PassKind
from edgexpert.golden.lm.checkpoint import weights_sha256
from edgexpert.golden.decoding.decode import FloatEngine, run_pass
from edgexpert.golden.lm.model import KVCache, LayerTrace, MoEModel, route
from edgexpert.golden.policies.edgexpert import EdgeXpert
from edgexpert.golden.decoding.policy import Policy, chunked_expert_fetches
from edgexpert.golden.policies.prefill import (MAJOR, MINOR, MODEL_HASH_FORM, TRIVIAL, EncoderError,
                                      EncoderSettings, PrefillRouting, TokenEncoder, load_encoder,
                                      prefill_pass, prefill_quality, random_classes, save_encoder,
                                      shared_set_route, spearman, token_classes, train_encoder)
from edgexpert.golden.studies.prefill_calibration import choose, default_grid, pareto_front, sweep
from edgexpert.contracts.weight_layout import WeightLayout

TINY = EncoderSettings(width=16, heads=2, layers=2, window=16, train_windows=16, heldout_windows=4,
                       steps=4, batch=4)


@pytest.fixture(scope="module")
def small(small_model):
    config = load_config(overrides=small_model)
    torch.manual_seed(3)
    model = MoEModel(config.model).eval()
    return config, model


def _encoder(model, seed=0):
    torch.manual_seed(seed)
    return TokenEncoder(model.tok_emb.weight, TINY).eval()


def test_token_classes_thresholds_on_score_times_length():
    scores = torch.tensor([0.5, 0.25, 0.125, 0.0625, 0.0625])   # x 5: 2.5, 1.25, 0.625, 0.3125
    assert token_classes(scores, 2.5, 0.625).tolist() == [MAJOR, MINOR, MINOR, TRIVIAL, TRIVIAL]
    assert token_classes(scores, 3.0, 1.3).tolist() == [MINOR, TRIVIAL, TRIVIAL, TRIVIAL, TRIVIAL]
    assert token_classes(scores, 0.0, 0.0).tolist() == [MAJOR] * 5
    with pytest.raises(ValueError, match="tau_minor = 2 is out of range: accepted 0..tau_major"):
        token_classes(scores, 1, 2)


def test_random_classes_keep_the_class_sizes_and_the_seed():
    classes = torch.tensor([MAJOR, MAJOR, MINOR, TRIVIAL, TRIVIAL, TRIVIAL, MINOR, TRIVIAL])
    a, b = random_classes(classes, 7), random_classes(classes, 7)
    assert torch.equal(a, b)
    assert torch.equal(torch.bincount(a, minlength=3), torch.bincount(classes, minlength=3))
    assert any(not torch.equal(random_classes(classes, s), classes) for s in range(3))


def test_shared_set_route_follows_the_rules():
    top_k = 3
    logits = torch.tensor([
        [5., 4., 3., 0., 0., 0., 0., 0.],    # major: S = {0, 1, 2}
        [0., 1., 2., 0., 0., 0., 9., 8.],    # minor: top-1, then S by logit
        [3., 0., 0., 0., 0., 0., 9., 8.],    # trivial: top-1, then S's best
        [0., 0., 9., 0., 0., 5., 0., 0.],    # minor: top-1, then S by logit, ties to lower id
        [1., 2., 3., 4., 5., 6., 7., 8.],    # major again: its own top-3
    ])
    classes = torch.tensor([MAJOR, MINOR, TRIVIAL, MINOR, MAJOR])
    out = shared_set_route(logits, classes, top_k, budget_minor=3, budget_trivial=2)
    # S = {0, 1, 2} u {7, 6, 5}
    assert out.tolist() == [[0, 1, 2], [6, 7, 2], [6, 7, -1], [2, 5, 0], [7, 6, 5]]
    # S = {0, 1, 2}: expert 7 (logit 8) loses to S's experts 2 and 1 (logits 2 and 1)
    s_small = shared_set_route(logits[:4], classes[:4], top_k, 3, 2)
    assert s_small.tolist() == [[0, 1, 2], [6, 2, 1], [6, 0, -1], [2, 0, 1]]
    for row in s_small.tolist():
        used = [e for e in row if e >= 0]
        assert len(used) == len(set(used))


def test_without_major_tokens_s_is_empty_and_fills_come_by_router_score():
    torch.manual_seed(0)
    logits = torch.randn(6, 8)
    classes = torch.tensor([MINOR, TRIVIAL, MINOR, TRIVIAL, TRIVIAL, MINOR])
    out = shared_set_route(logits, classes, 4, budget_minor=3, budget_trivial=1)
    native = route(logits, 4)
    for t, c in enumerate(classes.tolist()):
        budget = 3 if c == MINOR else 1
        assert out[t, :budget].tolist() == native[t, :budget].tolist()
        assert (out[t, budget:] == -1).all()
    with pytest.raises(ValueError, match="accepted 1 <= trivial <= minor <= top_k"):
        shared_set_route(logits, classes, 4, budget_minor=2, budget_trivial=3)


def test_prefill_bytes_count_distinct_experts_per_chunk():
    layout = WeightLayout(n_layers=2, n_experts=8, d_model=64, expert_ffn=32)
    experts = torch.tensor([[0, 1], [1, 2], [3, -1], [3, 0], [5, -1]])
    assert chunked_expert_fetches(experts, 2) == 3 + 2 + 1
    assert chunked_expert_fetches(experts, 1) == 2 + 2 + 1 + 2 + 1
    assert chunked_expert_fetches(experts, 16) == 5
    trace = LayerTrace(torch.zeros(5, 64), torch.zeros(5, 8), experts, torch.ones(5, 2))
    policy = Policy(layout, DecodeConfig(), prefill_chunk=2)
    whole = layout.expert_fetch_bytes
    assert policy.pass_bytes(PassKind.PREFILL, [trace, trace], None) == 12 * whole
    # decode passes keep one fetch per distinct expert and pass
    assert policy.pass_bytes(PassKind.VERIFY, [trace, trace], None) == 10 * whole


def test_encoder_is_bidirectional_and_its_scores_sum_to_one(small):
    _, model = small
    encoder = _encoder(model)
    tokens = torch.tensor([[5, 9, 13, 2, 7, 11]])
    with torch.no_grad():
        scores = encoder(tokens)[0]
        changed = encoder(torch.tensor([[5, 9, 13, 2, 7, 200]]))[0]
    assert scores.shape == (6,) and abs(float(scores.sum()) - 1) < 1e-6 and (scores > 0).all()
    assert abs(float(scores[0] - changed[0])) > 1e-6   # a later token moves an earlier one's score
    with pytest.raises(ValueError, match="accepted 1..16 tokens"):
        encoder(torch.zeros(1, 17, dtype=torch.long))


def test_encoder_training_is_deterministic_and_round_trips(small, tmp_path):
    _, model = small
    stream = np.random.default_rng(1).integers(0, 300, 4000).astype(np.int32)
    a, meta = train_encoder(model, stream, stream[::-1].copy(), TINY, log=lambda *x: None)
    b, _ = train_encoder(model, stream, stream[::-1].copy(), TINY, log=lambda *x: None)
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name
    assert meta["model_sha256"] == weights_sha256(model, **MODEL_HASH_FORM) and -1 <= meta["heldout_spearman"] <= 1
    assert meta["train_seconds"] >= 0     # reported by the run, not stored
    save_encoder(a, {**meta, "checkpoint": str(tmp_path.resolve() / "ckpt")}, tmp_path)
    stored = json.loads((tmp_path / "encoder.json").read_text())
    assert "train_seconds" not in stored and stored["checkpoint"] == "ckpt"
    loaded, _ = load_encoder(model, tmp_path)
    tokens = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.equal(loaded(tokens), a(tokens))


def test_bundled_encoder_loads_and_refuses_another_model(small, tmp_path):
    from edgexpert.golden.lm.checkpoint import load_checkpoint
    ckpt = load_checkpoint()
    encoder, meta = load_encoder(ckpt.model)
    assert meta["heldout_spearman"] > 0.3 and meta["model_sha256"] == weights_sha256(ckpt.model, **MODEL_HASH_FORM)
    with torch.no_grad():
        assert abs(float(encoder(torch.tensor([[1, 2, 3]])).sum()) - 1) < 1e-6
    _, model = small
    with pytest.raises(EncoderError, match="trained for model .* not this model"):
        load_encoder(model)
    (tmp_path / "encoder.json").write_text("{not json")
    (tmp_path / "encoder.safetensors").write_bytes(b"")
    with pytest.raises(EncoderError, match="encoder.json is malformed"):
        load_encoder(model, tmp_path)
    with pytest.raises(EncoderError, match="encoder.json is missing"):
        load_encoder(model, tmp_path / "nowhere")


def test_spearman():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert spearman(a, a * 10) == pytest.approx(1.0)
    assert spearman(a, -a) == pytest.approx(-1.0)


def test_edgexpert_prefill_routes_by_class(small):
    config, model = small
    layout = WeightLayout.for_model(config.model)
    engine = FloatEngine(model)
    encoder = _encoder(model)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    native = Policy(layout, config.decode)

    def policy(tau_major, tau_minor, k, n):
        return EdgeXpert(layout, config.decode, model, 1.0, 0.0, True,
                         prefill=PrefillRouting(encoder, tau_major, tau_minor, k, n))
    # every token major: exactly the model's routing
    same = policy(0.0, 0.0, 1, 1)
    assert torch.equal(prefill_pass(engine, same, prompt)[0], prefill_pass(engine, native, prompt)[0])
    q = prefill_quality(engine, same, native, [prompt])
    assert q["ppl_ratio"] == 1.0 and q["prefill_bytes_reduction"] == 0.0
    # every token trivial with n = 1: one expert each, fewer bytes
    cut = policy(1000.0, 1000.0, 1, 1)
    n = len(prompt)
    _, traces, _ = run_pass(engine, cut, PassKind.PREFILL, torch.tensor(prompt), torch.arange(n),
                            KVCache(), torch.tril(torch.ones(n, n, dtype=torch.bool)),
                            torch.zeros(n, dtype=torch.long))
    for t in traces:
        assert (t.experts[:, 0] >= 0).all() and (t.experts[:, 1:] == -1).all()
    q = prefill_quality(engine, cut, native, [prompt])
    assert q["prefill_bytes_reduction"] > 0 and q["ppl_ratio"] != 1.0
    # decode passes are untouched by the prefill settings
    assert cut.router(PassKind.VERIFY, torch.tensor(prompt)) is None


def test_pareto_front_and_choice():
    points = [{"bytes_per_token": 100, "mse": 0.0}, {"bytes_per_token": 60, "mse": 0.02},
              {"bytes_per_token": 70, "mse": 0.03}, {"bytes_per_token": 40, "mse": 0.10},
              {"bytes_per_token": 50, "mse": 0.04}, {"bytes_per_token": 50, "mse": 0.05}]
    front = pareto_front(points)
    assert [(p["bytes_per_token"], p["mse"]) for p in front] == [(40, 0.10), (50, 0.04), (60, 0.02),
                                                                 (100, 0.0)]
    assert choose(points, 0.045) is points[4]
    assert choose(points, 0.5) is points[3]
    assert choose(points, 0.0) is points[0]
    with pytest.raises(ValueError, match="no setting has mse <= -1"):
        choose(points, -1)


def test_calibration_chooses_from_its_own_sweep(small):
    config, model = small
    encoder = _encoder(model)
    windows = torch.randint(0, 300, (2, 12), generator=torch.Generator().manual_seed(2))
    grid = default_grid(config.model.top_k)
    assert all(s.budget_trivial <= s.budget_minor <= 2 and s.tau_minor <= s.tau_major for s in grid)
    points = sweep(model, encoder, windows, 4, grid)
    assert len(points) == len(grid)
    native = [p for p in points if p["tau_major"] == 0]    # every token major
    assert native and all(p["mse"] == 0 and p["experts_per_token"] == 2 for p in native)
    assert len({p["bytes_per_token"] for p in native}) == 1
    cheapest = min(points, key=lambda p: (p["bytes_per_token"], p["mse"]))
    assert cheapest["budget_minor"] == 1 and cheapest["mse"] > 0
    for bound in (0.0, cheapest["mse"], 1.0):
        chosen = choose(points, bound)
        assert chosen in points and chosen["mse"] <= bound
        assert chosen["bytes_per_token"] == min(p["bytes_per_token"] for p in points
                                                if p["mse"] <= bound)


@pytest.mark.parametrize("override, message", [
    ("policies.prefill.chunk=0",
     "policies.prefill.chunk = 0 is out of range: accepted integers 1..4096"),
    ("policies.prefill.tau_major=-1",
     "policies.prefill.tau_major = -1 is out of range: accepted values 0.0..1000.0"),
    ("policies.prefill.tau_minor=1001",
     "policies.prefill.tau_minor = 1001 is out of range: accepted values 0.0..1000.0"),
    ("policies.prefill.budget_minor=0",
     "policies.prefill.budget_minor = 0 is out of range: accepted integers 1..64"),
    ("policies.prefill.budget_trivial=65",
     "policies.prefill.budget_trivial = 65 is out of range: accepted integers 1..64"),
    ("policies.prefill.classes=oracle",
     "policies.prefill.classes = 'oracle' is not accepted: accepted encoder, random"),
    ("policies.prefill.seed=-1",
     "policies.prefill.seed = -1 is out of range: accepted integers 0..2147483647"),
    ("policies.prefill.budget_trivial=5",
     "policies.prefill.budget_trivial = 5 is out of range: accepted "
     "1..policies.prefill.budget_minor"),
    ("policies.prefill.tau_minor=900",
     "policies.prefill.tau_minor = 900.0 is out of range: accepted "
     "0.0..policies.prefill.tau_major"),
])
def test_prefill_config_errors_are_one_line(override, message):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[override])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_prefill_budget_is_checked_against_the_routed_model(small_model):
    from edgexpert.golden.policies.prefill import prefill_routing
    # a model with a smaller top-k loads with the default budgets: only routing it checks them
    config = load_config(overrides=[o for o in small_model if "prefill.budget" not in o])
    assert config.policies.prefill.budget_minor > config.model.top_k
    with pytest.raises(ConfigError, match=r"policies.prefill.budget_minor = 4 is out of range: "
                                          r"accepted 1..model.top_k \(= 2\)"):
        prefill_routing(config.policies, None, config.model.top_k)


@pytest.mark.parametrize("args, message", [
    (["calibrate", "prefill", "--mse-bound", "2"], "--mse-bound 2.0 is out of range: accepted (0, 1)"),
    (["calibrate", "prefill", "--windows", "0"], "--windows 0 is out of range: accepted 1..10000"),
    (["prefill", "ablate", "--front", "0"], "--front 0.0 is out of range: accepted (0, 1)"),
    (["prefill", "train", "--steps", "0"], "--steps 0 is out of range: accepted 1..1000000"),
])
def test_prefill_commands_reject_bad_arguments_in_one_line(args, message, capsys):
    from edgexpert.cli import main
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
