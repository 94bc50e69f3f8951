"""The fuzz bench of one checking block alone (the DCU, the PRU) in Amaranth's simulator (issue
28, item 2; docs/blocks/dcu.md and pru.md, "Fuzz bench"): what the two share. A block's module
(dcu/fuzz.py, pru/fuzz.py) draws each sequence's jobs, good and bad, with golden's expected
outputs; this module plays them.

One simulation for the whole run (the block behind a `ResetInserter`), one testbench that steps
every stream each cycle: each input stream presents its next beat unless it pauses (a pause is
drawn only between beats: a raised `valid` holds its payload until `ready`), each output stream
is ready unless it pauses, with a pause probability drawn per stream and per sequence; the
`rejected` port is sampled every cycle. Per sequence it asserts:

- no hang: every output the sequence owes (its words on each output stream and its rejections)
  arrives, and every input beat is taken, within the sequence's cycle bound (the block's
  `cycle_bound`: its jobs' sizes at full speed, scaled for the pauses);
- every output stream's words, in order, and the rejections (code, tag), in order, equal the
  expected ones (golden's words; the codes the bad jobs were built with), and nothing more
  comes in IDLE_CYCLES after;
- the registers (STATUS, the completed and rejected counters) hold what the jobs since the last
  reset make them: STATUS names the first rejection since reset, the counters count;
- a sequence the fuzz resets (at a random cycle within a third of `bound`) has
  produced a prefix of its expected outputs; after the reset every register reads 0, no output
  comes for IDLE_CYCLES, and the next sequence is compared as any.

A failure names the seed and the sequence number (`BlockFuzzError`). Sequence i is drawn from
`random.Random(f"{seed}-{i}")` and the pauses and resets from `random.Random(f"{seed}-{i}-bench")`,
so a run is deterministic and any sequence can be replayed from its number.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

from amaranth.hdl import ResetInserter, Signal, Value
from amaranth.sim import Simulator

from edgexpert.contracts.rejects import RejectCsr, reject_status_layout
from edgexpert.support.progress import progress_bar

__all__ = ["Sequence", "BlockFuzzError", "IDLE_CYCLES", "MAX_PAUSE", "pause_slowdown",
           "run_block_fuzz"]

#: cycles without any output that end a sequence (nothing beyond the expected) and follow a reset
IDLE_CYCLES = 24
#: the largest pause probability drawn for a stream
MAX_PAUSE = 0.6


def pause_slowdown(max_pause: float = MAX_PAUSE) -> float:
    """The factor a cycle bound at full speed is multiplied by under pauses: a stream that pauses
    with probability p moves a beat every 1 / (1 - p) cycles on average; the factor allows four
    times that, so a sum over hundreds of beats exceeds it with a negligible probability."""
    return 4 / (1 - max_pause)


@dataclass
class Sequence:
    """One sequence's beats and what it owes: `inputs` and `outputs` by port name (lists of
    integers), `rejections` (code, tag) in order, `completed` the jobs that complete with their
    work, `bound` the cycles within which all of it must arrive (at full speed: `run_block_fuzz`
    scales it for the pauses), `counts` what the report adds up (valid and bad jobs)."""
    inputs: dict[str, list[int]]
    outputs: dict[str, list[int]]
    rejections: list[tuple[int, int]]
    completed: int
    bound: int
    counts: dict[str, int] = field(default_factory=dict)
    #: for a block that tags a rejection with its command's number since reset (the PRU): the
    #: commands the sequence issues; `rejections`' tags are then numbers within the sequence
    numbered: int | None = None


class BlockFuzzError(AssertionError):
    pass


class _Bench:
    """The block's streams, driven and sampled once a cycle."""

    def __init__(self, dut, rst: Signal, inputs: dict, outputs: dict, csr_names: dict):
        self.dut, self.rst = dut, rst
        self.inputs, self.outputs = inputs, outputs
        self.csr_names = csr_names           # RejectCsr -> the block's register name
        self.queue = {p: [] for p in inputs}
        self.head = {p: 0 for p in inputs}
        self.current = {p: None for p in inputs}
        self.got = {p: [] for p in outputs}
        self.rejections: list[tuple[int, int]] = []
        self.pause = {p: 0.0 for p in [*inputs, *outputs]}
        self.rng = random.Random(0)
        self.cycles = 0
        self.signals = ([self.inputs[p].ready for p in inputs]
                        + [s for p in outputs for s in (self.outputs[p].valid,
                                                         Value.cast(self.outputs[p].payload))]
                        + [dut.rejected.valid, dut.rejected.payload.code,
                           dut.rejected.payload.tag])

    def load(self, seq: Sequence, rng: random.Random):
        self.rng = rng
        for p in self.queue:
            self.queue[p], self.head[p] = list(seq.inputs.get(p, [])), 0
        for p in self.got:
            self.got[p] = []
        self.rejections = []
        for p in self.pause:
            self.pause[p] = rng.choice([0.0, rng.uniform(0, MAX_PAUSE)])

    def pending_inputs(self) -> int:
        return sum(len(q) - self.head[p] + (self.current[p] is not None)
                   for p, q in self.queue.items())

    async def step(self, ctx, live: bool = True) -> bool:
        """One cycle; returns whether an output (a word or a rejection) came."""
        for p, port in self.inputs.items():
            if live and self.current[p] is None and self.head[p] < len(self.queue[p]) \
                    and self.rng.random() >= self.pause[p]:
                self.current[p] = self.queue[p][self.head[p]]
                self.head[p] += 1
            ctx.set(port.valid, self.current[p] is not None)
            if self.current[p] is not None:
                ctx.set(Value.cast(port.payload), self.current[p])
        ready = {p: live and self.rng.random() >= self.pause[p] for p in self.outputs}
        for p, port in self.outputs.items():
            ctx.set(port.ready, ready[p])
        sampled = (await ctx.tick().sample(*self.signals))[2:]
        self.cycles += 1
        came = False
        for p, taken in zip(self.inputs, sampled):
            if taken and self.current[p] is not None:
                self.current[p] = None
        at = len(self.inputs)
        for p, port in self.outputs.items():
            valid, payload = sampled[at], sampled[at + 1]
            at += 2
            came |= bool(valid)
            if valid and ready[p]:
                self.got[p].append(int(payload))
        valid, code, tag = sampled[at:]
        if valid:
            self.rejections.append((int(code), int(tag)))
            came = True
        return came

    async def idle(self, ctx, cycles: int) -> bool:
        """`cycles` cycles with nothing driven and nobody ready; whether an output came."""
        came = False
        for _ in range(cycles):
            came |= await self.step(ctx, live=False)
        return came

    async def registers(self, ctx) -> dict[str, int]:
        out = {}
        for reg, name in self.csr_names.items():
            ctx.set(self.dut.csr.addr, reg)
            await ctx.tick()
            self.cycles += 1
            out[name] = ctx.get(self.dut.csr.data)
        return out

    async def reset(self, ctx):
        for p in self.queue:
            self.queue[p], self.head[p], self.current[p] = [], 0, None
        for port in self.inputs.values():
            ctx.set(port.valid, 0)
        ctx.set(self.rst, 1)
        await ctx.tick()
        ctx.set(self.rst, 0)
        self.cycles += 1


def run_block_fuzz(block: str, dut, inputs: Callable, outputs: Callable, csr_enum,
                   sequence: Callable[[random.Random], Sequence], code_enum, tag_bits: int,
                   sequences: int, seed: int, reset_probability: float = 0.15,
                   progress: bool = False) -> dict:
    """Play `sequences` sequences drawn by `sequence(rng)` on `dut` (module doc); `inputs(dut)`
    and `outputs(dut)` name its streams, `csr_enum` is its register map (`RejectCsr`'s
    addresses under the block's names). Returns the
    report: the counts (sequences, the `counts` of every sequence, words and rejections checked,
    resets, hangs and mismatches, which are 0 or this has raised) and the wall time."""
    rst = Signal()
    csr_names = {RejectCsr(int(reg)): reg.name for reg in csr_enum}
    bench = _Bench(dut, rst, inputs(dut), outputs(dut), csr_names)
    status_layout = reject_status_layout(code_enum, tag_bits)
    counts = Counter()
    slowdown = pause_slowdown()
    wall = time.time()
    since_reset = {"completed": 0, "rejected": 0, "first": None, "numbered": 0}

    def fail(i: int, text: str):
        raise BlockFuzzError(f"{block} fuzz, seed {seed}, sequence {i}: {text}")

    async def check_registers(ctx, i: int):
        regs = await bench.registers(ctx)
        completed = regs[csr_names[RejectCsr.COMPLETED]]
        rejected = regs[csr_names[RejectCsr.REJECTED]]
        status = status_layout.from_bits(regs[csr_names[RejectCsr.STATUS]])
        want = (since_reset["completed"], since_reset["rejected"])
        if (completed, rejected) != want:
            fail(i, f"counters {completed} completed, {rejected} rejected; expected {want}")
        first = since_reset["first"]
        got = (int(status.error), int(status.code), int(status.tag))
        if got != ((0, 0, 0) if first is None else (1, *first)):
            fail(i, f"STATUS (error, code, tag) {got}; the first rejection since reset {first}")

    async def after_reset(ctx, i: int):
        await bench.reset(ctx)
        counts["resets"] += 1
        since_reset.update(completed=0, rejected=0, first=None, numbered=0)
        if await bench.idle(ctx, IDLE_CYCLES):
            fail(i, "an output after the reset")
        await check_registers(ctx, i)

    async def play(ctx, i: int, seq: Sequence, rng: random.Random):
        if seq.numbered is not None:
            seq.rejections = [(code, (tag + since_reset["numbered"]) % 2**tag_bits)
                              for code, tag in seq.rejections]
            since_reset["numbered"] += seq.numbered
        bench.load(seq, rng)
        counts["sequences"] += 1
        counts.update(seq.counts)
        bound = int(seq.bound * slowdown) + 100
        # within a third of the bound at full speed (a generous one): most resets cut the
        # sequence
        reset_at = (rng.randrange(1, seq.bound // 3 + 2) if rng.random() < reset_probability
                    else None)

        def owed() -> bool:
            return (any(len(bench.got[p]) < len(seq.outputs[p]) for p in seq.outputs)
                    or len(bench.rejections) < len(seq.rejections) or bench.pending_inputs())

        start = bench.cycles
        while owed() and bench.cycles - start != reset_at:
            await bench.step(ctx)
            if bench.cycles - start > bound:
                have = {p: f"{len(bench.got[p])}/{len(seq.outputs[p])}" for p in seq.outputs}
                fail(i, f"hang: {bound} cycles, outputs {have}, rejections "
                        f"{len(bench.rejections)}/{len(seq.rejections)}, "
                        f"{bench.pending_inputs()} input beats not taken")
        for p in seq.outputs:
            got, want = bench.got[p], seq.outputs[p]
            wrong = next((k for k, (g, w) in enumerate(zip(got, want)) if g != w), None)
            if wrong is not None or len(got) > len(want):
                k = len(want) if wrong is None else wrong
                fail(i, f"{p} word {k}: RTL {got[k]:#x} != golden "
                        f"{want[k] if k < len(want) else None!r} (mismatch)")
        if bench.rejections != seq.rejections[:len(bench.rejections)]:
            fail(i, f"rejections {bench.rejections}, expected {seq.rejections} (mismatch)")
        if reset_at is not None:
            # a sequence done before its reset cycle is reset right after its outputs
            counts["cut_by_reset"] += bool(owed())
            await after_reset(ctx, i)
            return
        if await bench.idle(ctx, IDLE_CYCLES) or bench.rejections != seq.rejections:
            fail(i, f"an output beyond the expected ones (rejections {bench.rejections}, "
                    f"expected {seq.rejections})")
        since_reset["completed"] += seq.completed
        since_reset["rejected"] += len(seq.rejections)
        if seq.rejections and since_reset["first"] is None:
            since_reset["first"] = seq.rejections[0]
        await check_registers(ctx, i)
        counts["checked_words"] += sum(len(w) for w in seq.outputs.values())
        counts["checked_rejections"] += len(seq.rejections)

    async def testbench(ctx):
        await after_reset(ctx, -1)        # the registers read 0 from the start
        counts["resets"] -= 1
        with progress_bar(total=sequences, desc=f"bench fuzz {block}", unit="seq",
                          enabled=progress) as bar:
            for i in range(sequences):
                seq = sequence(random.Random(f"{seed}-{i}"))
                await play(ctx, i, seq, random.Random(f"{seed}-{i}-bench"))
                bar.update(1)

    sim = Simulator(ResetInserter({"sync": rst})(dut))
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    report = {"block": block, "seed": seed, "sequences": sequences,
              "counts": {**dict(counts), "hangs": 0, "mismatches": 0, "cycles": bench.cycles},
              "wall_s": round(time.time() - wall, 1)}
    return report
