"""The PRU's integer contract (golden.blocks.pru): classes in Q.16, the shared set, budgeted routing,
the renormalized weights, the tie rule and the per-chunk fetch commands."""

import pytest
import torch

from edgexpert.contracts.ema import EmaOp, ema_command_layout
from edgexpert.contracts.weight_layout import WeightLayout
from edgexpert.golden.blocks import pru
from edgexpert.golden.blocks.pru import MAJOR, MINOR, TRIVIAL


def test_classes_compare_score_times_length_in_q16():
    # T = 4: r = 4 s; tau_major 1.0 = 65536, tau_minor 0.75 = 49152
    scores = torch.tensor([16384, 16383, 12288, 12287])
    assert pru.token_classes(scores, 65536, 49152).tolist() == [MAJOR, MINOR, MINOR, TRIVIAL]
    assert pru.tau_q16(0.75) == 49152 and pru.tau_q16(2.5) == 163840
    # round half up onto 2**-16
    assert pru.score_q16(torch.tensor([0.5 / 65536, 0.49 / 65536, 1.0])).tolist() == [1, 0, 65536]
    with pytest.raises(ValueError, match="tau_minor = 2 is out of range: accepted 0..tau_major"):
        pru.token_classes(scores, 65536, 131072)


def test_routing_keeps_top1_then_fills_from_s_ties_to_lower_index():
    z = torch.tensor([
        [5, 4, 3, 0, 0, 0, 0, 0],      # major: S = {0, 1, 2}
        [0, 1, 1, 0, 0, 0, 9, 8],      # minor: top-1 6, then S by logit: 1 and 2 tie -> 1 first
        [3, 0, 0, 0, 0, 0, 9, 8],      # trivial: top-1, then S's best
        [7, 7, 7, 7, 7, 7, 7, 7],      # minor, all equal: 0 (top-1), then S = 1, 2
    ]) * 65536
    classes = torch.tensor([MAJOR, MINOR, TRIVIAL, MINOR])
    out = pru.route_layer(z, classes, 3, budget_minor=3, budget_trivial=2)
    assert out.tolist() == [[0, 1, 2], [6, 1, 2], [6, 0, -1], [0, 1, 2]]
    assert pru.shared_set(z, classes, 3).nonzero().flatten().tolist() == [0, 1, 2]
    # without major tokens S is empty: the fill comes by logit from outside
    none = pru.route_layer(z, torch.tensor([MINOR] * 4), 3, 3, 1)
    assert none.tolist() == [[0, 1, 2], [6, 7, 1], [6, 7, 0], [0, 1, 2]]
    with pytest.raises(ValueError, match="accepted 1 <= trivial <= minor <= top_k"):
        pru.route_layer(z, classes, 3, budget_minor=2, budget_trivial=3)


def test_weights_are_softmax_q16_over_the_chosen_logits():
    z = torch.tensor([[0, 65536, -65536, 0]])
    w = pru.routing_weights(z, torch.tensor([[1, 0, -1]]))
    # exp(1) : exp(0) over {1, 0}; the pad weighs 0
    assert w[0, 2] == 0 and abs(int(w[0, 0]) - round(65536 * 2.718281828 / 3.718281828)) < 40
    assert abs(int(w.sum()) - 65536) <= 2
    # equal logits: equal weights
    assert pru.routing_weights(torch.zeros(1, 4, dtype=torch.long),
                               torch.tensor([[0, 1, 2, 3]])).tolist() == [[16384] * 4]


def test_chunk_fetches_and_their_ema_words():
    experts = torch.tensor([[0, 1], [1, 2], [3, -1], [3, 0], [5, -1]])
    assert pru.chunk_fetches(experts, 2) == [[0, 1, 2], [0, 3], [5]]
    layout = WeightLayout(n_layers=2, n_experts=8, d_model=64, expert_ffn=40)
    words = pru.fetch_commands(layout, 1, [2, 5], experts_per_step=2)
    ops = [ema_command_layout.from_bits(w).op for w in words]
    # NEW_STEP; per expert GATE_UP (64 channels: 2 mask words) and DOWN (40: 2 words)
    assert ops[0] == EmaOp.NEW_STEP and len(words) == 1 + 2 * (3 + 3)
    heads = [ema_command_layout.from_bits(w).arg.descriptor for w, op in zip(words, ops)
             if op == EmaOp.DESCRIPTOR]
    assert [(int(h.tag), int(h.layer), int(h.expert), int(h.matrix), int(h.scales)) for h in heads] \
        == [(0, 1, 2, 0, 1), (1, 1, 2, 1, 1), (2, 1, 5, 0, 1), (3, 1, 5, 1, 1)]
    masks = [int(ema_command_layout.from_bits(w).arg.mask) for w, op in zip(words, ops) if op == EmaOp.MASK]
    assert masks[:4] == [2**32 - 1, 2**32 - 1, 2**32 - 1, 2**8 - 1]
    with pytest.raises(ValueError, match="accepted integers >= 1"):
        pru.chunk_fetches(experts, 0)
    # one expert per step: two steps, tags restart
    split = pru.fetch_commands(layout, 1, [2, 5], experts_per_step=1)
    assert len(split) == 2 * (1 + 3 + 3)
    assert [ema_command_layout.from_bits(w).op for w in split].count(EmaOp.NEW_STEP) == 2


def test_experts_per_step_is_what_the_ema_reference_accepts():
    layout = WeightLayout(n_layers=2, n_experts=8, d_model=64, expert_ffn=40)
    # slots: two matrices per expert
    assert pru.experts_per_step(layout, 32, 1 << 20, slots=6) == 3
    # buffer: an expert moves 5,640 bytes; 16 KB hold fewer whole experts than 64 slots allow
    assert layout.expert_fetch_bytes == 5640
    assert 0 < pru.experts_per_step(layout, 32, 16384, slots=64) <= 16384 // 5640
    assert pru.experts_per_step(layout, 32, 4096, slots=64) == 0
