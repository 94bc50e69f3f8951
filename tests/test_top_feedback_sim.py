"""The top's stand-in for a rejected DCU job (hw/top/feedback.py, `WholeOnReject`; issue 28) in
Amaranth's simulator: a DCU that answers random jobs in order, some with their commands, some
with a rejection (one cycle, at a random time after the commands before it were taken), random
pauses on the DCU's commands and the output; each job's record queued before the DCU answers
the job (as the top queues it when the job's header enters the DCU). The output must be every job's
commands in job order: a good job's as the DCU gave them, a rejected job's NEW_STEP (when its
header asked) and DESCRIPTOR with its fields and every channel of its matrix in its MASK words
(docs/contracts.md, "The top's commands: accepted ranges"); an offered word held until taken."""

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from edgexpert.contracts.ema import EmaOp, ema_command_layout
from edgexpert.contracts.weight_layout import Matrix
from edgexpert.hw.top.feedback import WholeOnReject, job_record_layout

#: GATE_UP 40 channels (two mask words, the last with 8), DOWN 8 (one word of 8)
CHANNELS = (40, 8)


def _word(op: EmaOp, **arg) -> int:
    return ema_command_layout.const({"op": op, "arg": arg}).as_bits()


def _whole(record: dict) -> list[int]:
    """A rejected job's commands, from the contract: every channel of its matrix selected."""
    words = [_word(EmaOp.NEW_STEP, mask=0)] if record["new_step"] else []
    words.append(_word(EmaOp.DESCRIPTOR, descriptor={k: record[k] for k in (
        "tag", "layer", "expert", "matrix", "scales")}))
    left = CHANNELS[record["matrix"]]
    while left > 0:
        words.append(_word(EmaOp.MASK, mask=(1 << min(left, 32)) - 1))
        left -= 32
    return words


def _jobs(rng: random.Random, count: int) -> list[tuple[dict, list[int] | None]]:
    """(record, the DCU's commands or None for a rejected job)."""
    jobs = []
    for n in range(count):
        record = {"tag": n % 256, "layer": rng.randrange(4), "expert": rng.randrange(32),
                  "matrix": rng.randrange(2), "scales": rng.randrange(2),
                  "new_step": int(rng.random() < 0.3)}
        if rng.random() < 0.4:
            jobs.append((record, None))
            continue
        # the DCU's own masks: any bits, so a word the stand-in made up shows
        words = _whole(record)
        words[-1 - (record["matrix"] == Matrix.GATE_UP):] = [
            _word(EmaOp.MASK, mask=rng.getrandbits(8)) for _ in
            range(1 + (record["matrix"] == Matrix.GATE_UP))]
        jobs.append((record, words))
    return jobs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rejected_jobs_are_fetched_whole_in_order(seed):
    rng = random.Random(seed)
    dut = WholeOnReject(*CHANNELS, pending=4)
    jobs = _jobs(rng, 60)
    want = [w for record, words in jobs for w in (words if words is not None else _whole(record))]
    records = deque(job_record_layout.const(r).as_bits() for r, _ in jobs)
    cycles = []             # the output's (valid, ready, word) each cycle

    async def tb(ctx):
        dcu_held = False
        pending = deque(jobs)
        out_before = 0          # output words due before the DCU answers the next job
        for _ in range(20_000):
            ctx.set(dut.jobs.valid, bool(records))
            if records:
                ctx.set(dut.jobs.payload.as_value(), records[0])
            # the DCU answers its next job once every word before it has left
            ctx.set(dut.rejected.valid, 0)
            ctx.set(dut.dcu.valid, 0)
            taken = sum(v and r for v, r, _ in cycles)
            if pending and taken >= out_before:
                record, words = pending[0]
                if words is None:
                    if rng.random() < 0.5:
                        ctx.set(dut.rejected.valid, 1)
                        ctx.set(dut.rejected.payload.tag, record["tag"])
                        pending.popleft()
                        out_before += len(_whole(record))
                else:
                    dcu_held = dcu_held or rng.random() < 0.6
                    ctx.set(dut.dcu.valid, dcu_held)
                    ctx.set(dut.dcu.payload.as_value(), words[0])
            ctx.set(dut.cmd.ready, rng.random() < 0.6)
            cycles.append((ctx.get(dut.cmd.valid), ctx.get(dut.cmd.ready),
                           ctx.get(dut.cmd.payload.as_value())))
            if ctx.get(dut.jobs.valid) and ctx.get(dut.jobs.ready):
                records.popleft()
            if ctx.get(dut.dcu.valid) and ctx.get(dut.dcu.ready):
                dcu_held = False
                words.pop(0)
                out_before += 1
                if not words:
                    pending.popleft()
            await ctx.tick()
            if not pending and taken == len(want):
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    for (valid, ready, word), after in zip(cycles, cycles[1:]):
        if valid and not ready:
            assert after[0] and after[2] == word, "an offered command word changed before taken"
    assert [w for v, r, w in cycles if v and r] == want
    assert not records, f"{len(records)} job records not read"
