# amaranth: UnusedElaboratable=no
"""The top's `UseCounter` (hw/top/prefill.py) in Amaranth's simulator against a model of its
contract: layers of `length` tokens cut into chunks of `chunk`, each token routed to 1..K
distinct experts (often from a few popular ones, so counts reach the chunk); the PRU's fetch
words per chunk (a NEW_STEP, then per expert of the chunk, ascending, a GATE_UP and a DOWN
descriptor with their mask words) must leave with uses = ceil(tokens of the expert in the
chunk / candidates) on the GATE_UP, 0 elsewhere, and the routes unchanged and in order. The
fetch words are offered from the start (before their chunk's routes), so a descriptor let
through early gets a wrong count; random pauses on all four streams."""

import math
import random
from collections import deque

import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from edgexpert.contracts.ema import EmaOp, ema_command_layout
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.hw.top.prefill import UseCounter

ROUTE = data.StructLayout({"expert": unsigned(5), "weight": unsigned(17), "last": 1})
E, K, CANDIDATES = 32, 4, 4
MASK_WORDS = {Matrix.GATE_UP: 3, Matrix.DOWN: 1}


def _command(op, arg) -> int:
    return ema_command_layout.const({"op": op, "arg": arg}).as_value().value


def _plan(rng: random.Random, length: int, chunk: int, layers: int):
    """Routes (as layout values), and the fetch words with the uses each must leave with."""
    routes, words = [], []
    for layer in range(layers):
        for start in range(0, length, chunk):
            count = {}
            # a few popular experts or K shared by all, so that counts reach the chunk
            mode = rng.choice(["popular", "shared", "any"])
            pool = rng.sample(range(E), K + 2 if mode == "popular" else K) \
                if mode != "any" else list(range(E))
            for _ in range(start, min(length, start + chunk)):
                chosen = rng.sample(pool, K if mode == "shared" else rng.randint(1, K))
                for j, e in enumerate(chosen):
                    routes.append({"expert": e, "weight": rng.getrandbits(17),
                                   "last": int(j == len(chosen) - 1)})
                    count[e] = count.get(e, 0) + 1
            words.append((_command(EmaOp.NEW_STEP, {"mask": 0}), 0))
            for e in sorted(count):
                for matrix in Matrix:
                    words.append((_command(EmaOp.DESCRIPTOR, {"descriptor": {
                        "tag": 0, "layer": layer, "expert": e, "matrix": int(matrix),
                        "scales": 1}}),
                        math.ceil(count[e] / CANDIDATES) if matrix == Matrix.GATE_UP else 0))
                    words += [(_command(EmaOp.MASK, {"mask": rng.getrandbits(32)}), 0)
                              for _ in range(MASK_WORDS[matrix])]
    return routes, words


@pytest.mark.parametrize("seed,length,chunk", [(1, 11, 4), (2, 16, 16), (3, 7, 16), (4, 9, 1)])
def test_use_counter_gives_each_expert_its_groups(seed, length, chunk):
    rng = random.Random(seed)
    dut = UseCounter(ROUTE, n_experts=E, chunk=chunk, candidates=CANDIDATES, length_bits=8)
    routes, words = _plan(rng, length, chunk, layers=3)
    want_routes, want_words = list(routes), list(words)
    routes, words = deque(routes), deque(words)
    got_routes, got_words = [], []
    cmd_layout = dut.o_cmd.payload.shape()

    async def tb(ctx):
        ctx.set(dut.length, length)
        for _ in range(20_000):
            ctx.set(dut.i_route.valid, bool(routes) and rng.random() < 0.7)
            if routes:
                ctx.set(dut.i_route.payload, ROUTE.const(routes[0]))
            ctx.set(dut.i_cmd.valid, bool(words) and rng.random() < 0.7)
            if words:
                ctx.set(dut.i_cmd.payload.as_value(), words[0][0])
            ctx.set(dut.o_route.ready, rng.random() < 0.6)
            ctx.set(dut.o_cmd.ready, rng.random() < 0.6)
            if ctx.get(dut.i_route.valid) and ctx.get(dut.i_route.ready):
                routes.popleft()
            if ctx.get(dut.i_cmd.valid) and ctx.get(dut.i_cmd.ready):
                words.popleft()
            if ctx.get(dut.o_route.valid) and ctx.get(dut.o_route.ready):
                bits = ctx.get(dut.o_route.payload.as_value())
                got_routes.append({name: (bits >> f.offset) & ((1 << f.width) - 1)
                                   for name, f in ROUTE})
            if ctx.get(dut.o_cmd.valid) and ctx.get(dut.o_cmd.ready):
                bits = ctx.get(dut.o_cmd.payload.as_value())
                got_words.append((bits & ((1 << cmd_layout["cmd"].width) - 1),
                                  bits >> cmd_layout["uses"].offset))
            await ctx.tick()
            if not routes and not words:
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert got_routes == want_routes
    assert len(got_words) == len(want_words), f"{len(got_words)} words for {len(want_words)}"
    for i, (g, w) in enumerate(zip(got_words, want_words)):
        assert g == w, f"word {i}: (bits, uses) {g} != {w}"
    if length == chunk == 16:
        assert {u for _, u in want_words} == {0, 1, 2, 3, 4} and dut.max_uses == 4


def test_use_counter_names_a_bad_size():
    with pytest.raises(ValueError, match="chunk is 0: accepted 1 or more"):
        UseCounter(ROUTE, n_experts=E, chunk=0, candidates=CANDIDATES, length_bits=8)

