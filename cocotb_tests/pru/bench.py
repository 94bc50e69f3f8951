"""cocotb bench of the prompt routing unit (`Pru`) on prefill traces.

Each test feeds every prompt of one trace back to back (no reset in between): the scores on
`score`, then per layer every token's router logits twice (docs/blocks/pru.md), with `valid`
and `ready` paused by one backpressure mode on all four streams. It checks every `route` beat
(class, expert, weight, last) and every `cmd` word against golden, bit for bit and in order,
the stream rules on both outputs (streams.StreamSink: X/Z, held payload), that no output beat
is left over afterwards, and that nothing hangs. Reported per test: prompts, tokens, layers,
cycles and tokens per cycle (token-layers: one token's routing in one layer, both phases).

This module runs inside the simulator; `edgexpert.cocotb_tests.pru.run_bench` starts it. Seeds:
cocotb's (COCOTB_RANDOM_SEED, fixed by the caller, logged); each test derives its own.
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from edgexpert.cocotb_tests.pru import LANES, MAX_TOKENS
from edgexpert.cocotb_tests.pru.vectors import prompt_vectors, pru_params
from edgexpert.cocotb_tests.streams import BACKPRESSURE_MODES, BenchTB, pauses
from edgexpert.contracts.prefill_trace import read_prefill_trace
from edgexpert.contracts.pru import WEIGHT_BITS
from edgexpert.cocotb_tests.runner import bench_params, write_bench_report

_report: dict = {}
# read at import: each trace and mode is a cocotb test of its own, named when cocotb collects
# them; the module imported outside a run (no $EDGEXPERT_BENCH_PARAMS) has none
_TRACES = bench_params()["traces"] if "EDGEXPERT_BENCH_PARAMS" in os.environ else {}


def quiet_limit(hw) -> int:
    """Cycles without an output beat after which the PRU is taken to hang: a layer's shared-set
    phase gives no output for up to max_tokens tokens of n_experts / lanes + 1 cycles each and
    up to 2 per pick (the max tree's register), and a token's weights take top_k (WEIGHT_BITS +
    1) cycles; random pauses on both sides add a factor of up to 4."""
    return 4 * (MAX_TOKENS * (hw.beats_per_token + 2 * hw.top_k + 2)
                + hw.top_k * (WEIGHT_BITS + 1))


def _record(name: str, **values):
    _report[name] = values
    write_bench_report({"seed": int(os.environ["COCOTB_RANDOM_SEED"]), "tests": _report})


class TB(BenchTB):
    """The PRU's clock, reset and four streams (`score`, `logit` in; `route`, `cmd`
    out), with the trace it runs on and the PRU's parameters for that trace."""

    def __init__(self, dut, trace_name: str):
        super().__init__(dut)
        self.trace = read_prefill_trace(_TRACES[trace_name]["file"])
        self.hw = pru_params(self.trace, MAX_TOKENS, LANES)

    def open_streams(self, mode: str, rng: random.Random):
        """The four streams, each paused by `mode` from an rng of its own seeded from `rng`."""
        self.add_source("score", pauses(mode, random.Random(rng.random())), rng)
        self.add_source("logit", pauses(mode, random.Random(rng.random())), rng)
        self.add_sink("route", pauses(mode, random.Random(rng.random())))
        self.add_sink("cmd", pauses(mode, random.Random(rng.random())))


async def _run_trace(dut, trace_name: str, mode: str):
    tb = TB(dut, trace_name)
    trace, hw = tb.trace, tb.hw
    seed = int(os.environ["COCOTB_RANDOM_SEED"]) + BACKPRESSURE_MODES.index(mode)
    rng = random.Random(seed)
    dut._log.info(f"PRU bench {trace_name}/{mode}: seed {seed}, {trace.header['source']}")
    await tb.reset()
    tb.open_streams(mode, rng)
    scores, logits = tb.sources["score"], tb.sources["logit"]
    routes, ema = tb.sinks["route"], tb.sinks["cmd"]
    prompts = sorted(set(trace["tok_prompt"].tolist()))
    vectors = [prompt_vectors(trace, p, hw) for p in prompts]
    cycles = 0
    feeders = [cocotb.start_soon(scores.send_all([w for v in vectors for w in v.scores])),
               cocotb.start_soon(logits.send_all([w for v in vectors for w in v.logits]))]
    want_routes = [w for v in vectors for w in v.routes]
    want_ema = [w for v in vectors for w in v.ema]
    quiet, seen, limit = 0, 0, quiet_limit(hw)
    while len(routes.items) < len(want_routes) or len(ema.items) < len(want_ema):
        await RisingEdge(dut.clk)
        cycles += 1
        now = len(routes.items) + len(ema.items)
        quiet = 0 if now != seen else quiet + 1
        seen = now
        assert quiet < limit, (f"no output for {limit} cycles: {len(routes.items)} of "
                                     f"{len(want_routes)} routes, {len(ema.items)} of "
                                     f"{len(want_ema)} EMA words")
    for got, want, name in ((list(routes.items), want_routes, "route"),
                            (list(ema.items), want_ema, "cmd")):
        for i, (g, w) in enumerate(zip(got, want)):
            assert g == w, f"{name} beat {i}: {g:#x}, golden {w:#x}"
        assert len(got) == len(want), f"{name}: {len(got)} beats, golden {len(want)}"
    await ClockCycles(dut.clk, 50)
    assert len(routes.items) == len(want_routes) and len(ema.items) == len(want_ema), \
        "output beats after golden's last one"
    assert all(f.done() for f in feeders), "inputs left unconsumed"
    tb.stop_sinks()
    tokens = sum(v.tokens for v in vectors)
    _record(f"{trace_name}/{mode}", prompts=len(prompts), tokens=tokens, layers=hw.n_layers,
            route_beats=len(want_routes), ema_words=len(want_ema), cycles=cycles,
            tokens_per_cycle=round(tokens * hw.n_layers / cycles, 5),
            lengths=[v.tokens for v in vectors])


def _make(trace_name: str, mode: str):
    async def test(dut):
        await _run_trace(dut, trace_name, mode)
    test.__name__ = test.__qualname__ = f"{trace_name}_{mode}"
    return cocotb.test(test)


for _name, _spec in _TRACES.items():
    for _mode in _spec["modes"]:
        globals()[f"test_{_name}_{_mode}"] = _make(_name, _mode)
