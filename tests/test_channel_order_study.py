"""scripts/channel_order_study.py (docs/blocks/dcu.md, "Channel order in DRAM"): the order puts
the most often selected channels first, and the measurement counts bursts at the new slots."""

import importlib.util
from pathlib import Path

from edgexpert.contracts.weight_layout import Matrix, WeightLayout

_spec = importlib.util.spec_from_file_location(
    "channel_order_study", Path(__file__).resolve().parents[1] / "scripts" / "channel_order_study.py")
study = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(study)

#: GATE_UP columns of 64 bytes, whole 32-byte beats as at the bundled size
LAYOUT = WeightLayout(n_layers=1, n_experts=1, d_model=8, expert_ffn=64)


def test_order_puts_the_often_selected_first_and_ties_to_the_lower_channel():
    steps = [[(0, 0, Matrix.GATE_UP, [1, 5, 7])], [(0, 0, Matrix.GATE_UP, [1, 5, 6])]]
    rank = study.channel_order(steps, LAYOUT)[(0, 0, Matrix.GATE_UP)]
    # 1 and 5 twice (lower channel first), then 6 and 7 once, then the rest in channel order
    assert rank.tolist() == [4, 0, 5, 6, 7, 1, 2, 3]


def test_the_order_joins_scattered_selections_into_one_burst():
    steps = [[(0, 0, Matrix.GATE_UP, [1, 3, 5]), (0, 0, Matrix.GATE_UP, [1, 3])]]
    ranks = study.channel_order(steps, LAYOUT)
    before, after = study.measure(steps, LAYOUT, None), study.measure(steps, LAYOUT, ranks)
    # three runs and two, against one each; the second job adds nothing to its step
    assert (before["all"]["bursts"], after["all"]["bursts"]) == (5, 2)
    assert before["dedup"]["fetches"] == after["dedup"]["fetches"] == 1
    # whole-beat columns: bytes and beats do not change with the order
    assert before["all"]["bytes"] == after["all"]["bytes"] == 5 * 64
    assert before["all"]["beats"] == after["all"]["beats"] == 5 * 2
    # 4-byte columns padded to 32: a longer burst also moves the padding it bridges
    narrow = WeightLayout(n_layers=1, n_experts=1, d_model=8, expert_ffn=4)
    assert study.measure(steps, narrow, ranks)["all"]["bytes"] > \
        study.measure(steps, narrow, None)["all"]["bytes"]
