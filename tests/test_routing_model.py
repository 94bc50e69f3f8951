"""sim/perf/routing.py: the routing model's simulation against closed forms and bounds, its fit
recovering known parameters from routing it generated itself (a small fixture, seconds), and the
fitted twins against EdgeXpert's published Qwen3-30B-A3B figure."""

import math

import numpy as np
import pytest

from edgexpert.sim.perf import routing as rt


def test_uniform_independent_tokens_match_the_closed_form():
    # no skew, no context: n independent top-k draws, E (1 - (1 - k/E)^n) expected
    for e, k, n in ((32, 4, 8), (128, 8, 16)):
        got = rt.distinct_experts(rt.chain(n), e, k, 0.0, 0.0, 1.0, 0.0, 0.0, 512)
        assert got == pytest.approx(e * (1 - (1 - k / e) ** n), rel=0.02)


def test_bounds_and_monotonicity():
    tree = rt.canonical_tree(64, 6)
    spread = [rt.distinct_experts(tree, 128, 8, 1.0, sigma, 1.0, 0.0, 0.0, 128)
              for sigma in (0.0, 1.0, 3.0)]
    assert 8 <= spread[-1] < spread[1] < spread[0] <= 128     # a narrower context, fewer experts
    copied = rt.distinct_experts(tree, 128, 8, 1.0, 1.0, 0.5, 0.8, 0.8, 64)
    fresh = rt.distinct_experts(tree, 128, 8, 1.0, 1.0, 0.5, 0.0, 0.0, 64)
    assert copied < fresh                                      # sharing saves experts
    sets = rt.simulate(rt.chain(5), 16, 3, 0.5, 1.0, 0.7, 0.5, 0.0, 32)
    assert (sets.sum(2) == 3).all()                           # every token: exactly top-k


def test_canonical_tree_shape():
    tree = rt.canonical_tree(64, 6)
    assert tree.tokens == 65 and tree.parents[0] == -1 and tree.depths[0] == 0
    assert all(tree.depths[p] == d - 1 for p, d in zip(tree.parents[1:], tree.depths[1:]))
    assert all(p < i for i, p in enumerate(tree.parents) if i)
    small = rt.canonical_tree(8, 3)
    assert small.tokens == 9 and max(small.depths) == 3
    with pytest.raises(ValueError, match="candidates >= 1"):
        rt.canonical_tree(0, 3)


def _observations(e, k, s, sigma, seed=7):
    """Routing the model itself generates, in golden/studies/routing_stats.py's form."""
    def experts(sets):
        return [[np.flatnonzero(tok).tolist()] for tok in sets]
    ar = rt.simulate(rt.chain(48), e, k, s, sigma, 1.0, 0.0, 0.0, 12, seed)
    tree = rt.canonical_tree(12, 3)
    trees = rt.simulate(tree, e, k, s, sigma, 1.0, 0.0, 0.0, 16, seed + 1)
    return {"model": "fixture", "experts": e, "top_k": k, "layers": 1,
            "ar": [experts(run) for run in ar],
            "verify": [{"parents": list(tree.parents), "depths": list(tree.depths),
                        "experts": experts(run)} for run in trees]}


def test_the_fit_recovers_the_parameters_it_generated():
    obs = _observations(16, 2, 0.8, 1.5)
    m = rt.observed_moments(obs)
    # by hand: overlaps are shares of k, a window's experts at most E
    assert 0 < m["seq_overlap"] < 1 and m["window_experts"] <= 16 and m["verify_tokens"] == 13
    fit = rt.fit_routing(obs, trees=2, samples=32, rounds=1)
    p = fit["params"]
    assert p["sigma"] == pytest.approx(1.5, abs=0.6)
    assert p["zipf_s"] == pytest.approx(0.8, abs=0.6)
    assert abs(fit["errors"]["verify_experts"]) < 0.3        # in-sample, not fitted on
    assert fit["seed"] == rt.MC_SEED


def test_routing_is_carried_to_another_expert_count_through_both_twins():
    coarse, fine = rt.FITTED["coarse"], rt.FITTED["fine"]
    assert rt.params_for(32, 4) == (coarse, coarse.zipf_s)
    assert rt.params_for(64, 8) == (fine, fine.zipf_s)
    # at a twin's E with another top-k: that twin's skew and sigma
    at64, _ = rt.params_for(64, 6)
    assert (at64.skew, at64.sigma) == (fine.skew, fine.sigma)

    # by hand: one more doubling past the fine twin adds the coarse-to-fine step to the skew's
    # logit over uniform routing (0.25) and to sigma
    def logit(skew):
        x = (skew - 0.25) / 0.75
        return math.log(x / (1 - x))
    qwen, s = rt.params_for(128, 8)
    assert logit(qwen.skew) == pytest.approx(2 * logit(fine.skew) - logit(coarse.skew), abs=1e-3)
    assert qwen.sigma == pytest.approx(2 * fine.sigma - coarse.sigma, abs=1e-3)
    assert rt.hot_share(128, 8, s, qwen.sigma, qwen.context, qwen.q_seq) == pytest.approx(
        qwen.skew, abs=0.02)
    # carried down to 8 experts the skew stays a share above uniform routing
    mixtral, _ = rt.params_for(8, 2)
    assert 0.25 < mixtral.skew < coarse.skew


def test_qwen3_within_15_percent_of_edgexpert():
    checks = {v["figure"]: v for v in rt.validations(rt.canonical_tree(64, 6))}
    qwen = checks["edgexpert_qwen3_experts"]
    assert qwen["published"] == 52.1 and abs(qwen["error"]) <= 0.15
    assert qwen["error"] == pytest.approx(qwen["modelled"] / 52.1 - 1, abs=1e-3)
    assert not math.isnan(checks["specmoe_mixtral_skew"]["error"])
