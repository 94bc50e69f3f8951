"""`edgexpert analyze`'s measurements on a small model: the integer path against the float model,
routing skew, same-depth co-activation."""

import torch

from edgexpert.contracts.config import load_config
from edgexpert.golden.studies.analysis import coactivation, compare_paths, routing_skew
from edgexpert.golden.decoding.decode import decode_speculative
from edgexpert.golden.integer.int_model import IntModel
from edgexpert.golden.lm.model import MoEModel


def test_analysis(small_model):
    config = load_config(overrides=small_model + ["decode.max_new_tokens=10", "decode.max_depth=3",
                                                  "decode.max_candidates=10"])
    torch.manual_seed(6)
    model = MoEModel(config.model).eval()
    int_model = IntModel(model)
    windows = torch.randint(0, 300, (2, 17))
    q = compare_paths(model, int_model, windows)
    assert q["tokens"] == 32 and 0.9 <= q["top1_agreement"] <= 1.0
    assert 0.95 < q["ppl_ratio"] < 1.05 and q["mean_kl"] >= 0
    skew = routing_skew(model, windows)
    # 2 of 8 experts: between a perfectly balanced router (0.25) and one that uses only them
    assert len(skew) == 2 and all(0.25 <= s <= 1.0 for s in skew)
    runs = [decode_speculative(int_model, [1, 2, 3], config.decode, keep_traces=True)]
    c = coactivation(runs, min_shared=1)
    assert c["groups"] > 0 and 0 <= c["pair_fraction"] <= c["candidate_fraction"] <= 1
    # sharing all of top-2 with someone is rarer than sharing one
    assert coactivation(runs, min_shared=2)["candidate_fraction"] <= c["candidate_fraction"]
