"""cocotb bench of the accelerator top with its PRU on a prefill chunk of a bundled prompt.

The external memory and the AXI monitor as in bench.py. The host (prefill.py) sends the chunk's
scores, then per layer its logits (both PRU phases), reads the PRU's routes from the top's
`route` port, and sends the engine's groups formed from them and a FLUSH per token; it sends no
EMA word (the PRU's fetches reach the EMA through the command merge, the feeder walks each
expert once per group). Per layer the report has the cycles from its first LOGIT beat to its
last moe_out item and the top's and the EMA's counters over them (busy, memory wait, compute,
words fed, R beats, bytes). Checked bit for bit, in order: every route against the trace's experts,
weights and classes (cocotb_tests/pru/vectors.py), every hidden, hidden_scale, expert_out and
moe_out against the trace's MoE arrays (golden's integer model with the PRU's routes); the
EMA's completions (DESCRIPTORS: two per expert the trace's fetch lists name) and bytes (whole
experts), the top's GROUPS and MATRICES (two per group: the replays). Fails as bench.py does.

This module runs inside the simulator; `edgexpert.cocotb_tests.top.run_prefill` starts it.
"""

from __future__ import annotations

import random
import time

import cocotb
import numpy as np

from edgexpert.cocotb_tests.engine.host import OUTPUTS, unpack, values_in
from edgexpert.cocotb_tests.pru.vectors import prompt_vectors
from edgexpert.cocotb_tests.top.harness import TopTB
from edgexpert.cocotb_tests.top.prefill import (expected_group_outputs, expected_moe,
                                                group_beats, groups_from_routes, logit_beats,
                                                score_beats)
from edgexpert.contracts.ema import EmaCsr
from edgexpert.contracts.prefill_trace import read_prefill_trace
from edgexpert.contracts.top import TopCsr
from edgexpert.hw.pru import PruParams
from edgexpert.hw.top import command_layout

#: counters read before and after every layer (bench.py reads the same per batch)
COUNTERS = {"busy": TopCsr.BUSY_CYCLES, "memory_wait": TopCsr.MEMORY_WAIT_CYCLES,
            "compute": TopCsr.COMPUTE_CYCLES, "words": TopCsr.WORDS, "beats": EmaCsr.BEATS,
            "bytes": EmaCsr.BYTES}


class PrefillTB(TopTB):
    """The top with its PRU on the prefill trace: the PRU's parameters (`pru`) and the layout
    of the command beats (`cmd_layout`) the host packs."""

    trace_reader = staticmethod(read_prefill_trace)

    def __init__(self, dut, rng: random.Random, mode: str):
        super().__init__(dut, rng, mode)
        self.pru = PruParams(**self.params["pru"])
        self.cmd_layout = command_layout(self.tokens, self.candidates, self.layout.d_model,
                                         self.ema["data_width"], self.pru,
                                         expert_ffn=self.layout.expert_ffn)


@cocotb.test()
@cocotb.parametrize(mode=["none", "random"])
async def prefill_chunk(dut, mode: str):
    """The trace's first prompt (one chunk) through every layer of the PRU, every stream and
    the AXI read channels paused by `mode`."""
    name = f"prefill_chunk/{mode}"
    rng = random.Random(f"{cocotb.RANDOM_SEED}-{name}")
    tb = PrefillTB(dut, rng, mode)
    trace, pru, cmd_layout, layout = tb.trace, tb.pru, tb.cmd_layout, tb.layout
    d, f, word_bits = layout.d_model, layout.expert_ffn, tb.ema["data_width"]
    vec = prompt_vectors(trace, 0, pru)
    rows = trace.prompt(0)
    t = vec.tokens
    assert t <= tb.tokens and t <= pru.chunk, f"{t} tokens: the bench runs one chunk"
    await tb.reset()
    tb.add_streams(("route",) + OUTPUTS)
    route = tb.sinks["route"]
    want = {p: [] for p in OUTPUTS}
    layers = []
    wall = time.time()
    await tb.cmd.send_all(score_beats(cmd_layout, vec.scores))
    n_routes = 0
    groups_total = 0
    before = await tb.counters(COUNTERS)
    for layer in range(pru.n_layers):
        start = route.cycles
        task = cocotb.start_soon(tb.cmd.send_all(logit_beats(cmd_layout, vec.logits, layer,
                                                             t, pru.beats_per_token)))
        routes_want = sum(int(e >= 0) for e in rows["experts"][:, layer].ravel())
        await route.wait_for(n_routes + routes_want, max_cycles=40 * t * 64 + 5000)
        await task
        got = [unpack(pru.route_layout, v) for v in list(route.items)[n_routes:]]
        n_routes += routes_want
        groups = groups_from_routes(got, tb.candidates)
        groups_total += len(groups)
        expect = expected_group_outputs(rows, layer, groups)
        for p in ("hidden", "hidden_scale", "expert_out"):
            want[p] += expect[p]
        want["moe_out"] += expected_moe(rows, layer, t, word_bits)
        beats = group_beats(cmd_layout, rows, layer, groups, candidates=tb.candidates,
                            tokens=tb.tokens, d_model=d, expert_ffn=f, word_bits=word_bits)
        task = cocotb.start_soon(tb.cmd.send_all(beats))
        words = len(groups) * (d * 2 + f) + 2000
        bound = 40 * (len(beats) + words) + 8 * tb.latency * len(groups) + 20_000
        await tb.sinks["moe_out"].wait_for(len(want["moe_out"]), max_cycles=bound)
        await task
        after = await tb.counters(COUNTERS)
        layers.append({"layer": layer, "groups": len(groups),
                       "experts": len({g.expert for g in groups}),
                       # whole experts: per candidate every GATE_UP and DOWN column
                       "macs": layout.group_macs(sum(len(g.cands) for g in groups)),
                       "cycles": route.cycles - start,
                       **{k: after[k] - before[k] for k in COUNTERS}})
        before = after
    await tb.drain(want)
    wall = time.time() - wall
    got_routes = list(route.items)
    assert len(got_routes) == len(vec.routes), f"route: {len(got_routes)} for {len(vec.routes)}"
    wrong = [i for i, (g, w) in enumerate(zip(got_routes, vec.routes)) if g != w]
    assert not wrong, (f"route {wrong[0]}: RTL {unpack(pru.route_layout, got_routes[wrong[0]])} "
                       f"!= golden {unpack(pru.route_layout, vec.routes[wrong[0]])}")
    mismatches = {"route": 0, **tb.compare(name, "golden", want)}
    route.stop()
    fetched = sum(int(np.unpackbits(trace["fetch_experts"][c]).sum())
                  for c in np.flatnonzero(trace["fetch_prompt"] == 0)
                  if trace["fetch_layer"][c] < pru.n_layers)
    completions = await tb.csr(EmaCsr.DESCRIPTORS)
    assert completions == 2 * fetched, f"EMA completions {completions}: the PRU fetches " \
        f"{fetched} experts, two descriptors each"
    fetched_bytes = await tb.csr(EmaCsr.BYTES)
    assert fetched_bytes == fetched * layout.expert_fetch_bytes, \
        f"EMA bytes {fetched_bytes}: {fetched} whole experts are " \
        f"{fetched * layout.expert_fetch_bytes}"
    groups_counted = await tb.csr(TopCsr.GROUPS)
    matrices = await tb.csr(TopCsr.MATRICES)
    assert groups_counted == groups_total and matrices == 2 * groups_total, \
        f"GROUPS {groups_counted}, MATRICES {matrices} for {groups_total} groups"
    await tb.check_idle()
    tb.monitor.stop()
    tb.record(name, {"tokens": t, "layers": layers, "experts_fetched": fetched,
                     "bytes_fetched": fetched_bytes, "groups": groups_total,
                     "replays": groups_total - fetched, "routes": len(vec.routes),
                     "cycles": sum(entry["cycles"] for entry in layers),
                     "wall_s": round(wall, 2),
                     "items_checked": {"route": len(vec.routes),
                                       **{p: values_in(want[p]) for p in OUTPUTS}},
                     "mismatches": mismatches, "memory": tb.ram.report()})
