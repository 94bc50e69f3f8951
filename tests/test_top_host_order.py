"""The top bench's host order (cocotb_tests/top/host.py `fetch_order`): every group's GATE_UP
once and before its DOWN, the DOWNs (with each group's CAND and X after) in group order, and at
most `lead` GATE_UPs sent ahead of the group whose DOWN is next - the rules docs/blocks/top.md
gives the host, checked on the order itself."""

import pytest

from edgexpert.cocotb_tests.top.host import fetch_order


@pytest.mark.parametrize("groups", [1, 2, 3, 7])
@pytest.mark.parametrize("lead", [0, 1, 2, 3])
def test_each_gate_up_before_its_down_and_lead_ahead_at_most(groups, lead):
    order = fetch_order(groups, lead)
    ups = [g for kind, g in order if kind == "gate_up"]
    downs = [g for kind, g in order if kind == "down"]
    assert ups == list(range(groups)) and downs == list(range(groups))
    for i, (kind, g) in enumerate(order):
        sent_up = sum(1 for k, _ in order[:i + 1] if k == "gate_up")
        sent_down = sum(1 for k, _ in order[:i] if k == "down")
        if kind == "down":
            assert ("gate_up", g) in order[:i]
        # the GATE_UPs sent and their DOWNs not yet: the next DOWN's group and `lead` more
        assert sent_up - sent_down <= lead + 1
    # and as many as that wherever the groups allow
    first_down = order.index(("down", 0))
    assert first_down == min(lead + 1, groups)


def test_lead_one_and_zero_are_the_ahead_and_inline_orders():
    assert fetch_order(3, 1) == [("gate_up", 0), ("gate_up", 1), ("down", 0), ("gate_up", 2),
                                 ("down", 1), ("down", 2)]
    assert fetch_order(3, 0) == [("gate_up", 0), ("down", 0), ("gate_up", 1), ("down", 1),
                                 ("gate_up", 2), ("down", 2)]
