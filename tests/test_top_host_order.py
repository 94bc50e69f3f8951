"""The top bench's host order (cocotb_tests/top/host.py `fetch_order`, `batch_commands`): every
group's GATE_UP once and before its DOWN, the DOWNs in group order, at most `lead` GATE_UPs sent
ahead of the group whose DOWN is next, each group's CAND and X right behind its GATE_UP (`ahead`)
- the rules docs/blocks/top.md gives the host, checked on the order itself."""

from itertools import groupby

import numpy as np
import pytest

from edgexpert.cocotb_tests.top.host import (CROSS, DCU_LEAD, DCU_LEAD_LIMIT, HOST_LEAD, Batch,
                                            Group, _pack_steps, batch_commands, fetch_order,
                                            layer_commands)
from edgexpert.contracts.top import TopOp
from edgexpert.contracts.trace import PassKind
from edgexpert.contracts.weight_layout import Matrix, WeightLayout
from edgexpert.hw.ema import EmaGeometry
from edgexpert.hw.top import command_layout


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


class _Trace:
    """The arrays `batch_commands` reads of a batch's rows (the values do not matter here)."""

    def __init__(self, layout, rows: int):
        self.layout = layout
        self._arrays = {"x_q": np.ones((rows, layout.d_model), np.int64),
                        "x_m": np.full(rows, 1 << 14, np.int64), "x_e": np.zeros(rows, np.int64),
                        "weights_q16": np.full((rows, 1), 1 << 15, np.int64)}

    def __getitem__(self, name):
        return self._arrays[name]


def _op_runs(beats: list[int], lay) -> list[tuple[TopOp, int]]:
    """The beats' ops as runs: (op, beats in the run)."""
    ops = [TopOp(b >> lay["op"].offset & ((1 << lay["op"].width) - 1)) for b in beats]
    return [(op, len(list(run))) for op, run in groupby(ops)]


@pytest.mark.parametrize("dcu", [False, True])
def test_each_groups_inputs_follow_its_gate_up_and_stay_within_the_dcus_limit(dcu):
    """`ahead`: a group's CAND (DCU_CAND) and X beats come right behind its GATE_UP descriptor
    or job, so the engine multiplies the next groups while a DOWN waits; with the DCU, at most
    DCU_LEAD_LIMIT groups' inputs ahead of a DOWN job's group (more hang the top: the constant's
    comment), and the bundled lead within it."""
    layout = WeightLayout(1, 8, 64, 32, 0)
    groups = 7
    trace = _Trace(layout, groups)
    batch = Batch(0, 0, PassKind.DRAFT, 0, list(range(groups)),
                  [Group(e, [(e, 0)], tuple(range(48)), tuple(range(24))) for e in range(groups)],
                  [list(range(groups))])
    beats = batch_commands(trace, batch, candidates=4, tokens=groups, word_bits=256,
                           dcu=(48, 24) if dcu else None)
    lay = command_layout(groups, 4, layout.d_model, 256, expert_ffn=layout.expert_ffn)
    runs = [op for op, _ in _op_runs(beats, lay)]
    cand = TopOp.DCU_CAND if dcu else TopOp.CAND
    # the ops of a GATE_UP (EMA descriptor or ROUTE + DATA job) and of a DOWN, in order
    gate_up = [TopOp.ROUTE, TopOp.DATA] if dcu else [TopOp.EMA]
    down = [TopOp.ROUTE] if dcu else [TopOp.EMA]
    lead = DCU_LEAD if dcu else HOST_LEAD
    want = [TopOp.EMA] if not dcu else []           # the host's NEW_STEP
    for kind, _ in fetch_order(groups, lead):
        want += gate_up + [cand, TopOp.X] if kind == "gate_up" else down
    want.append(TopOp.FLUSH)
    # runs merge neighbours of one op (a DOWN's EMA beats and the next GATE_UP's)
    assert runs == [op for op, _ in groupby(want)]
    assert DCU_LEAD <= DCU_LEAD_LIMIT


def _batch(layout, first_row: int, experts: list[int]) -> Batch:
    """A batch of one group per expert (one candidate each), all in one step."""
    rows = list(range(first_row, first_row + len(experts)))
    return Batch(0, 0, PassKind.VERIFY, 0, rows,
                 [Group(e, [(r, 0)], tuple(range(48)), tuple(range(24)))
                  for r, e in zip(rows, experts)], [list(range(len(experts)))])


@pytest.mark.parametrize("dcu", [False, True])
@pytest.mark.parametrize("carried", [0, 1, CROSS])
def test_the_next_batchs_first_gate_up_goes_ahead_of_the_last_downs(dcu, carried):
    """`layer_commands`: with `Batch.carried` = c, the second batch's first GATE_UP (the DCU's
    job, or the host's NEW_STEP and descriptor) moves ahead of the first batch's last c DOWNs;
    its CAND and X stay behind the first batch's flushes; nothing else moves, nothing is lost
    (c = 0 is the two batches back to back)."""
    layout = WeightLayout(1, 8, 64, 32, 0)
    trace = _Trace(layout, 8)
    one, two = _batch(layout, 0, [0, 1, 2]), _batch(layout, 3, [3, 4])
    two.carried = carried
    kw = dict(candidates=4, tokens=3, word_bits=256, dcu=(48, 24) if dcu else None)
    segs = [batch_commands(trace, b, segments=True, **kw) for b in (one, two)]
    flat = lambda run: [beat for _, part in run for beat in part]
    assert [flat(run) for run in segs] == [batch_commands(trace, b, **kw) for b in (one, two)]
    got = layer_commands(trace, [one, two], **kw)
    first = [kind for kind, _ in segs[1]].index("gate_up") + 1
    downs = [j for j, (kind, _) in enumerate(segs[0]) if kind == "down"]
    at = downs[-carried] if carried else len(segs[0])
    want = flat(segs[0][:at] + segs[1][:first] + segs[0][at:] + segs[1][first:])
    assert got == want and sorted(got) == sorted(flat(segs[0]) + flat(segs[1]))
    # what moved ahead: ROUTE and DATA (the DCU) or EMA words (the host), no CAND, X or FLUSH
    lay = command_layout(3, 4, layout.d_model, 256, expert_ffn=layout.expert_ffn)
    moved = {op for op, _ in _op_runs(flat(segs[1][:first]), lay)}
    assert moved == ({TopOp.ROUTE, TopOp.DATA} if dcu else {TopOp.EMA})
    assert [kind for kind, _ in segs[0]][-1] == "flush"


def test_a_first_step_holds_the_carried_downs_or_nothing_moves():
    """`_pack_steps` with carried groups counts their DOWN matrices in the first step (a shared
    expert's channels once) and gives [] when they do not fit with its first group."""
    layout = WeightLayout(1, 8, 64, 32, 0)
    g = EmaGeometry(layout, 256, 1 << 12, 4)         # 128 lines, 4 slots
    grp = lambda e, dn: Group(e, [(0, 0)], tuple(range(8)), tuple(dn))
    plain = _pack_steps([grp(0, range(8)), grp(1, range(8))], g)
    assert plain == [[0, 1]]
    # two carried DOWNs of other experts take two of the four slots: the second group moves on
    assert _pack_steps([grp(0, range(8)), grp(1, range(8))], g,
                       [grp(5, range(4)), grp(6, range(4))]) == [[0], [1]]
    # a carried DOWN of the first group's expert shares its slot
    assert _pack_steps([grp(0, range(8)), grp(1, range(8))], g, [grp(0, range(4))]) == [[0, 1]]
    # four carried DOWNs leave no slot for the first group
    assert _pack_steps([grp(0, range(8))], g, [grp(e, range(4)) for e in range(4, 8)]) == []
    # nor lines: a whole group (4 + 64 GATE_UP, 4 + 32 DOWN lines) and a whole carried DOWN
    whole = Group(0, [(0, 0)], tuple(range(64)), tuple(range(32)))
    assert sum(g.scale_beats(m) for m in Matrix) + 96 == 104 and g.lines == 128
    assert _pack_steps([whole], g, [grp(5, range(20))]) == [[0]]      # 24 + 104 lines: full
    assert _pack_steps([whole], g, [grp(5, range(21))]) == []
