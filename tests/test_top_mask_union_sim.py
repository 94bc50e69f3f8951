"""The DCU path's merge of an engine group's parts (hw/top/feedback.py `MaskUnion`,
`MaskSource`; docs/blocks/top.md, "The DCU path") in Amaranth's simulator, against expectations
written from the contract: random jobs whose parts chain by `more`, random pauses on every input
and output.

- `MaskUnion`: the output is each job's NEW_STEP as it came, and per chain (the jobs of one
  matrix up to one without `more`) the last job's DESCRIPTOR with every MASK word the OR of the
  chain's words; each job's whole mask leaves on its matrix's port, in job order.
- `MaskSource`: per candidate ticket, a host group's mask (the ticket's, or every channel) or a
  feedback group's part mask, each part's mask read by the ticket that closes its part.
"""

import random
from collections import deque

import pytest
from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.sim import Simulator

from edgexpert.contracts.ema import EmaOp, ema_command_layout
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.hw.top.feedback import MaskSource, MaskUnion, part_record_layout, ticket_layout

#: GATE_UP 40 channels (two mask words, the last with 8), DOWN 8 (one word of 8)
CHANNELS = (40, 8)


def _word(op: EmaOp, **arg) -> int:
    return ema_command_layout.const({"op": op, "arg": arg}).as_bits()


def _union_case(rng: random.Random, chains: int):
    """Jobs in an order the DCU may answer them (each matrix's chains in order, the two
    matrices interleaved job by job), their records and the outputs the contract gives."""
    per_matrix = []
    for matrix in (Matrix.GATE_UP, Matrix.DOWN):
        jobs = []
        for _ in range(chains):
            parts = rng.randint(1, 4)
            for p in range(parts):
                words = -(-CHANNELS[matrix] // 32)
                masks = [rng.getrandbits(min(32, CHANNELS[matrix] - 32 * i))
                         for i in range(words)]
                jobs.append({"matrix": int(matrix), "more": int(p < parts - 1), "masks": masks,
                             "new_step": rng.random() < 0.2, "tag": rng.randrange(256),
                             "layer": rng.randrange(2), "expert": rng.randrange(4)})
        per_matrix.append(deque(jobs))
    order = []
    while any(per_matrix):
        pick = rng.choice([q for q in per_matrix if q])
        order.append(pick.popleft())
    words, records, out = [], [], []
    parts = {0: [], 1: []}
    union = {0: None, 1: None}
    for job in order:
        records.append(part_record_layout.const({"matrix": job["matrix"],
                                                 "more": job["more"]}).as_bits())
        descriptor = _word(EmaOp.DESCRIPTOR, descriptor={
            "tag": job["tag"], "layer": job["layer"], "expert": job["expert"],
            "matrix": job["matrix"], "scales": 1})
        step = [_word(EmaOp.NEW_STEP, mask=0)] if job["new_step"] else []
        words += step + [descriptor] + [_word(EmaOp.MASK, mask=w) for w in job["masks"]]
        out += step
        have = union[job["matrix"]] or [0] * len(job["masks"])
        merged = [a | b for a, b in zip(have, job["masks"])]
        if job["more"]:
            union[job["matrix"]] = merged
        else:
            union[job["matrix"]] = None
            out += [descriptor] + [_word(EmaOp.MASK, mask=w) for w in merged]
        parts[job["matrix"]].append(sum(w << (32 * i) for i, w in enumerate(job["masks"])))
    return words, records, out, parts


def _run(dut, inputs: dict, outputs: list[str], total: dict, seed: int, pressure: float):
    """Every input queue offered (held once offered), every output drained, each paused with
    probability `pressure` a cycle; the outputs taken, or a hang after 20,000 cycles."""
    rng = random.Random(seed)
    queues = {name: deque(items) for name, items in inputs.items()}

    def bits(payload):
        # a plain-shaped payload is a Signal, a layout's a View
        return payload if isinstance(payload, Signal) else payload.as_value()

    got = {name: [] for name in outputs}

    async def tb(ctx):
        offered = {name: False for name in queues}
        for _ in range(20_000):
            for name, q in queues.items():
                port = getattr(dut, name)
                offered[name] = bool(q) and (offered[name] or rng.random() >= pressure)
                ctx.set(port.valid, offered[name])
                if q:
                    ctx.set(bits(port.payload), q[0])
            for name in outputs:
                ctx.set(getattr(dut, name).ready, rng.random() >= pressure)
            for name, q in queues.items():
                if offered[name] and ctx.get(getattr(dut, name).ready):
                    q.popleft()
                    offered[name] = False
            for name in outputs:
                port = getattr(dut, name)
                if ctx.get(port.valid) and ctx.get(port.ready):
                    got[name].append(ctx.get(bits(port.payload)))
            await ctx.tick()
            if all(len(got[n]) == total[n] for n in outputs) and not any(queues.values()):
                break

    # the clock domain declared here: MaskSource alone has no register to declare it
    top = Module()
    top.domains.sync = ClockDomain()
    top.submodules.dut = dut
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got, queues


@pytest.mark.parametrize("seed", range(4))
def test_parts_merge_into_one_descriptor_and_each_job_keeps_its_mask(seed):
    rng = random.Random(20261204 + seed)
    words, records, out, parts = _union_case(rng, chains=6)
    dut = MaskUnion(*CHANNELS)
    total = {"cmd": len(out), "gate_up": len(parts[0]), "down": len(parts[1])}
    got, left = _run(dut, {"dcu": words, "parts": records}, list(total), total, seed,
                     pressure=0.0 if seed == 0 else 0.4)
    assert not any(left.values()), f"hang: {[(n, len(q)) for n, q in left.items()]} left"
    assert got["cmd"] == out
    assert got["gate_up"] == parts[0] and got["down"] == parts[1]


@pytest.mark.parametrize("seed", range(3))
def test_each_candidate_gets_its_groups_mask(seed):
    rng = random.Random(20261205 + seed)
    channels = 8
    tickets, parts, want = [], [], []
    for _ in range(12):
        feedback = rng.random() < 0.6
        sizes = [rng.randint(1, 2) for _ in range(rng.randint(1, 3))] if feedback else [3]
        n = sum(sizes)
        c = 0
        for p, size in enumerate(sizes):
            part = rng.getrandbits(channels)
            if feedback:
                parts.append(part)
            for i in range(size):
                host = rng.getrandbits(channels)
                last = c == n - 1
                tickets.append(ticket_layout(channels).const({
                    "feedback": int(feedback), "closes": int(feedback and i == size - 1),
                    "last": int(last), "mask": host}).as_bits())
                want.append((part if feedback else host) | int(last) << channels)
                c += 1
    dut = MaskSource(channels, host_mask=True)
    got, left = _run(dut, {"tickets": tickets, "parts": parts}, ["mask"], {"mask": len(want)},
                     seed, pressure=0.4)
    assert not any(left.values()), f"hang: {[(n, len(q)) for n, q in left.items()]} left"
    assert got["mask"] == want
