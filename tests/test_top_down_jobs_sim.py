"""`DownJobs` (hw/top/feedback.py) in Amaranth's simulator: a DOWN job's header goes to the DCU
with its part's count and `more` (the part record from the DCU_CAND beats: its candidates and
whether it ends its engine group), and a header that says otherwise is reported once, the
count first (docs/contracts.md, "The top's commands: accepted ranges"); a GATE_UP job's `more`
passes as the host sent it and takes no part record. Every case runs under random pauses on
every input and output."""

import random

import pytest
from amaranth.sim import Simulator

from edgexpert.contracts.top import TopError, TopOp
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.hw.top.feedback import DownJobs, group_layout
from edgexpert.hw.top.layouts import route_item_layout
from edgexpert.support.simulation import paused_source

#: (matrix, header count, header more, part count, part last) -> the part queue's `more` and
#: the rejection due (None: the header agrees)
CASES = [
    (Matrix.DOWN, 2, 1, 2, 1, 0, TopError.DOWN_MORE),      # `more` on the group's last part
    (Matrix.DOWN, 3, 0, 3, 0, 1, TopError.DOWN_MORE),      # none on a part before the last
    (Matrix.DOWN, 1, 0, 1, 1, 0, None),
    (Matrix.DOWN, 4, 1, 4, 0, 1, None),
    (Matrix.DOWN, 5, 1, 2, 1, 0, TopError.DOWN_COUNT),     # both wrong: the count is reported
    (Matrix.GATE_UP, 2, 1, None, None, 1, None),           # the host's, unchecked
    (Matrix.GATE_UP, 2, 0, None, None, 0, None),
]


def _route(matrix, count, more, last, kind="header"):
    beat = {"header": {"tag": 7, "matrix": int(matrix), "count": count, "keep": 1}} \
        if kind == "header" else {"prune": 0xFFFF_FFFF}
    return route_item_layout.const({"beat": beat, "last": last, "more": more}).as_value().value


@pytest.mark.parametrize("pause", [0.0, 0.4])
def test_down_headers_take_their_parts_count_and_more(pause):
    rng = random.Random(20261204)
    dut = DownJobs()
    route, groups, entries = [], [], []
    for matrix, count, more, part_count, part_last, _, _ in CASES:
        route += [_route(matrix, count, more, 0), _route(matrix, count, more, 1, "prune")]
        if matrix == Matrix.DOWN:
            groups.append(group_layout.const({"count": part_count, "last": part_last})
                          .as_value().value)
            entries += [0] * part_count
    got = {"parts": [], "mismatch": [], "dcu": 0}

    async def sinks(ctx):
        want_dcu = len(route) + len(entries)
        for _ in range(2000):
            for port in (dut.dcu, dut.order, dut.jobs, dut.parts):
                ctx.set(port.ready, rng.random() >= pause)
            await ctx.delay(1e-9)
            if ctx.get(dut.parts.valid) and ctx.get(dut.parts.ready):
                got["parts"].append(int(ctx.get(dut.parts.payload.more)))
            if ctx.get(dut.mismatch.valid):
                got["mismatch"].append((TopError(ctx.get(dut.mismatch.payload.code)),
                                        int(ctx.get(dut.mismatch.payload.tag))))
            got["dcu"] += bool(ctx.get(dut.dcu.valid) and ctx.get(dut.dcu.ready))
            await ctx.tick()
            if got["dcu"] == want_dcu and len(got["parts"]) == len(CASES):
                return
        raise AssertionError(f"hung: {got}")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for port, items in ((dut.route, route), (dut.groups, groups), (dut.entries, entries)):
        sim.add_testbench(paused_source(port, items, rng, pause))
    sim.add_testbench(sinks)
    sim.run()
    assert got["parts"] == [case[5] for case in CASES]
    assert got["mismatch"] == [(code, TopOp.ROUTE) for *_, code in CASES if code is not None]
