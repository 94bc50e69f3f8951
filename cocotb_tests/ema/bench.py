"""cocotb bench of the EMA controller (`EmaSystem`) against cocotbext-axi's AxiRam holding expert
weights laid out per `WeightLayout`.

Every test checks, besides its own subject: the AXI protocol monitor on every cycle (valid held
until ready, payload stable, INCR, aligned, <= 256 beats, no 4 KB crossing, outstanding limit, no
beat lost, write channels idle), the completions in order against the reference model, and where
a step ends normally, every line of the weight buffer against the memory image, every fetched
column and scale block (found through the location table) against the weights it must hold, the
residency words, the AR sequence against the layout's reads split at 4 KB / 256 beats, and the
counters against what the monitor saw.

This module runs inside the simulator; `edgexpert.cocotb_tests.ema.run_bench` starts it. Seeds:
cocotb's (COCOTB_RANDOM_SEED, fixed by the caller, logged); each test derives its own.
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi.constants import AxiResp

from edgexpert.cocotb_tests.ema.harness import EmaTB, decode_status, pause_generator
from edgexpert.contracts.ema import Descriptor, encode_descriptor, encode_step, new_step_command
from edgexpert.golden.blocks.ema import split_bursts
from edgexpert.contracts.ema import EmaCsr, EmaError, EmaOp, EmaStatus, ema_command_layout
from edgexpert.contracts.mask_trace import read_mask_trace
from edgexpert.cocotb_tests.runner import write_bench_report
from edgexpert.contracts.weight_layout import Matrix

_report: dict = {}
#: the AXI4 RRESP whose beat makes the EMA report each bus error (AMBA AXI spec, A3.4.4)
RRESP = {EmaError.SLVERR: AxiResp.SLVERR, EmaError.DECERR: AxiResp.DECERR}


def _record(tb: EmaTB, name: str, **values):
    _report[name] = values
    write_bench_report({"seed": int(os.environ["COCOTB_RANDOM_SEED"]),
                        "data_width": tb.g.data_width, "outstanding": tb.outstanding,
                        "tests": _report})


async def _check_counters(tb: EmaTB, results, ars_from: int = 0) -> dict:
    """Counters since the last reset against the monitor and the reference."""
    c = await tb.counters()
    status = decode_status(c["STATUS"])
    assert status == {"busy": 0, "error": 0, "code": EmaError.NONE, "tag": 0}, status
    ars = tb.monitor.ars[ars_from:]
    assert c["BURSTS"] == len(ars)
    assert c["BEATS"] == sum(n for _, n, _ in ars)
    assert c["BYTES"] == c["BEATS"] * tb.g.beat_bytes
    assert c["DESCRIPTORS"] == sum(len(r.completions) for r in results)
    assert c["FETCHED_CHANNELS"] == sum(r.fetched_channels for r in results)
    assert c["SKIPPED_CHANNELS"] == sum(r.skipped_channels for r in results)
    assert c["STALL_CYCLES"] == c["BUSY_CYCLES"] - c["BEATS"]
    assert 1 <= c["PEAK_OUTSTANDING"] <= tb.outstanding
    assert tb.monitor.peak_outstanding <= tb.outstanding
    return c


def _expected_ars(tb: EmaTB, results) -> list[tuple[int, int]]:
    return [b for r in results for b in tb.ref.bursts(r)]


async def _steps(tb: EmaTB, steps: list[list[Descriptor]], name: str):
    """Run steps one after another, checking everything after each; record measurements."""
    buffer = await tb.read_buffer()
    results, checked_bytes, start = [], 0, tb.monitor.cycle
    for step in steps:
        result = await tb.run_step(step)
        results.append(result)
        buffer = tb.expected_lines(buffer, result)
        await tb.check_buffer(buffer)
        checked_bytes += await tb.check_step_contents(result)
    tb.monitor.assert_drained()
    assert [(a, n) for a, n, _ in tb.monitor.ars] == _expected_ars(tb, results)
    c = await _check_counters(tb, results)
    _record(tb, name, steps=len(steps), descriptors=c["DESCRIPTORS"], bursts=c["BURSTS"],
            beats=c["BEATS"], busy_cycles=c["BUSY_CYCLES"],
            utilization=round(c["BEATS"] / c["BUSY_CYCLES"], 4),
            weight_bytes_checked=checked_bytes, buffer_lines_checked=tb.g.lines * len(steps),
            skipped_channels=c["SKIPPED_CHANNELS"], cycles=tb.monitor.cycle - start,
            memory=tb.ram.report())
    return results


@cocotb.test()
@cocotb.parametrize(pauses=["none", "random"])
async def random_masks(dut, pauses: str):
    """Random descriptors (dense, runs, sparse, empty, repeated matrices) over three steps; with
    random pauses on all four channels and a random memory latency."""
    name = f"random_masks/{pauses}"
    latency = 30 if pauses == "none" else \
        random.Random(f"{cocotb.RANDOM_SEED}-{name}").randint(1, 120)
    tb = EmaTB(dut, name, latency=latency, pauses=pauses)
    await tb.reset()
    steps = [tb.random_step(tb.rng.randint(5, 9), tag0=40 * i) for i in range(3)]
    await _steps(tb, steps, name)


@cocotb.test()
async def trace_masks(dut):
    """Steps of the golden model's depth-coalesced mask trace (params["trace_file"], written by
    run_bench; its source is in the report), at a memory latency of 100 cycles."""
    tb = EmaTB(dut, "trace_masks", latency=100)
    trace = read_mask_trace(tb.params["trace_file"], tb.layout)
    steps, tag = [], 0
    for entries in trace.steps:
        step = []
        for e in entries:
            step.append(Descriptor(tag % 256, e.layer, e.expert, e.matrix, e.channels, True))
            tag += 1
        steps.append(step)
    await tb.reset()
    await _steps(tb, steps, "trace_masks")
    _report["trace_masks"]["mask_source"] = trace.source
    _record(tb, "trace_masks", **_report["trace_masks"])


@cocotb.test()
async def dense_bursts(dut):
    """Whole matrices with their scale blocks: long reads that must split at every 4 KB page and
    at 256 beats; latency 100 cycles, no pauses."""
    tb = EmaTB(dut, "dense_bursts", latency=100)
    lay = tb.layout
    step = []
    for layer, expert in [(0, lay.experts_per_layer - 1), (1, 1)]:
        for matrix in Matrix:
            step.append(Descriptor(len(step), layer, expert, matrix,
                                   range(lay.in_channels(matrix)), scales=True))
    await tb.reset()
    results = await _steps(tb, [step], "dense_bursts")
    ars = tb.monitor.ars
    B = tb.g.beat_bytes
    # at least one read was cut at a page boundary inside it
    reads = [(r.address, r.beats) for r in results[0].reads]
    assert any(len(split_bursts(a, n, B)) > 1 for a, n in reads)
    assert any((a + n * B) % 4096 == 0 for a, n, _ in ars[:-1])
    if B * 256 < 4096:
        assert any(n == 256 for _, n, _ in ars), "no burst reached the 256-beat cap"


def _raw_descriptor(tag: int, layer: int, expert: int, matrix: int, masks: list[int]) -> list[int]:
    """Command words without the host-side range checks (to reach the RTL's own checks)."""
    const = lambda op, arg: ema_command_layout.const({"op": op, "arg": arg}).as_value().value
    words = [const(EmaOp.DESCRIPTOR, {"descriptor": {"tag": tag, "layer": layer,
                                                     "expert": expert, "matrix": matrix,
                                                     "scales": 0}})]
    return words + [const(EmaOp.MASK, {"mask": m}) for m in masks]


async def _expect_error(tb: EmaTB, words: list[int], statuses: list[EmaStatus], code: EmaError,
                        tag: int, max_cycles: int):
    """Commands that end in an error: every descriptor completes (no hang) with the expected
    status, STATUS names the error and the descriptor, the bus drains; then a reset clears it."""
    got = await tb.run_commands(words, len(statuses), max_cycles)
    assert [c.status for c in got] == statuses, f"{[c.status.name for c in got]}"
    assert all(c.slot == 0 for c in got if c.status != EmaStatus.OK), got
    await ClockCycles(tb.dut.clk, 20)
    status = decode_status(await tb.csr(EmaCsr.STATUS))
    assert status == {"busy": 0, "error": 1, "code": code, "tag": tag}, status
    tb.monitor.assert_drained()
    # the engine keeps taking commands after the error: the host never blocks
    await tb.run_commands(encode_step(tb.layout, [Descriptor(99, 0, 0, Matrix.DOWN, [1])]),
                          1, 500)
    assert tb.completions()[0].status == EmaStatus.ABORTED
    await tb.reset()
    status = decode_status(await tb.csr(EmaCsr.STATUS))
    assert status["error"] == 0 and status["code"] == EmaError.NONE, status


@cocotb.test()
@cocotb.parametrize(resp=["slverr", "decerr"])
async def bus_error(dut, resp: str):
    """SLVERR / DECERR on one beat in the middle of a step: STATUS names the descriptor, that
    descriptor FAILS and every later one is ABORTED, no AR follows, every issued burst drains,
    no beat after the error reaches the buffer; a reset, and the next step is exact."""
    name = f"bus_error/{resp}"
    tb = EmaTB(dut, name, latency=20)
    await tb.reset()
    lay, B = tb.layout, tb.g.beat_bytes
    # a first step fills the buffer with other data, so lines the failed step must not write
    # hold something that differs from what it would have written
    filler = [Descriptor(i, 1 - i % 2, (i + 1) % lay.experts_per_layer, Matrix(i % 2),
                         range(lay.in_channels(Matrix(i % 2))), True) for i in range(2)]
    await tb.run_step(filler)
    before = await tb.read_buffer()

    step = [Descriptor(10 + i, i % 2, i % lay.experts_per_layer, Matrix((i + 1) % 2),
                       [c for c in range(lay.in_channels(Matrix((i + 1) % 2))) if (c // 3) % 2],
                       scales=True) for i in range(4)]
    result = tb.ref.step(step)
    bursts = tb.ref.bursts(result)
    owners = [r.tag for r in result.reads for _ in split_bursts(r.address, r.beats, B)]
    bad = len(bursts) // 2
    bad_beat = tb.rng.randrange(bursts[bad][1])
    first_ar = len(tb.monitor.ars)   # the memory numbers bursts since the test's reset, too
    code = EmaError.SLVERR if resp == "slverr" else EmaError.DECERR
    tb.ram.errors[(first_ar + bad, bad_beat)] = RRESP[code]
    tag = owners[bad]
    statuses = [EmaStatus.OK if d.tag < tag else EmaStatus.FAILED if d.tag == tag
                else EmaStatus.ABORTED for d in step]
    code = EmaError.SLVERR if resp == "slverr" else EmaError.DECERR

    got = await tb.run_commands(encode_step(lay, step), len(step), tb.bound(result))
    assert [c.status for c in got] == statuses, f"{[c.status.name for c in got]}"
    await ClockCycles(dut.clk, 20)
    tb.monitor.assert_drained()
    status = decode_status(await tb.csr(EmaCsr.STATUS))
    assert status == {"busy": 0, "error": 1, "code": code, "tag": tag}, status
    assert tb.monitor.error_beats == 1
    assert all(c.slot == 0 for c in got if c.status != EmaStatus.OK), got
    # no AR offered after the error beat's cycle (one offered before may be accepted later)
    ars = tb.monitor.ars[first_ar:]
    assert [(a, n) for a, n, _ in ars] == bursts[:len(ars)]
    late = [hex(a) for (a, _, _), offered in zip(ars, tb.monitor.ar_offered[first_ar:])
            if offered > tb.monitor.first_error_cycle]
    assert not late, f"ARs {late} offered after the error beat's cycle"
    # lines up to the failing beat hold the new data, every later line still the old data
    lines = await tb.read_buffer()
    new = tb.ref.buffer_lines(result, tb.image, lay.base_address)
    order = [line for r in result.reads for line in range(r.line, r.line + r.beats)]
    cut = sum(n for _, n in bursts[:bad]) + bad_beat
    differs = 0
    for i, line in enumerate(order):
        if i < cut:
            assert lines[line] == new[line], f"line {line} before the error"
        else:
            assert lines[line] == before[line], f"line {line} written after the error"
            differs += before[line] != new[line]
    assert differs, "the check of lines after the error is vacuous"

    # the engine stays usable: a reset, then an exact step (burst numbers restart at the reset)
    tb.ram.errors.clear()
    await tb.reset()
    assert decode_status(await tb.csr(EmaCsr.STATUS))["error"] == 0
    ars_from = len(tb.monitor.ars)
    after = await tb.run_step(tb.random_step(5, tag0=200))
    await tb.check_buffer(tb.expected_lines(lines, after))
    checked = await tb.check_step_contents(after)
    assert [(a, n) for a, n, _ in tb.monitor.ars[ars_from:]] == tb.ref.bursts(after)
    await _check_counters(tb, [after], ars_from)
    _record(tb, name, failing_tag=tag, completions=[s.name for s in statuses],
            bursts_issued=len(ars), bursts_planned=len(bursts),
            weight_bytes_checked_after_reset=checked)


def _long_descriptor(rng: random.Random, lay, tag: int, key) -> Descriptor:
    """A descriptor with many reads or long ones: every other channel (the most reads a matrix
    can make), runs of three with gaps, or the whole matrix."""
    n = lay.in_channels(key[2])
    kind = rng.choice(["alternate", "alternate", "runs", "dense"])
    if kind == "alternate":
        channels = range(rng.randrange(2), n, 2)
    elif kind == "runs":
        channels = [c for c in range(n) if c % 5 < 3]
    else:
        channels = range(n)
    return Descriptor(tag, *key, channels, scales=rng.random() < 0.7)


def _error_case(tb: EmaTB, rng: random.Random, index: int):
    """One case: long descriptors, error beats in one to three of them, sometimes a descriptor
    with its layer out of range among them. The first case is the one issue 16 reported (an
    error on beat 0 of a descriptor of 33 reads, latency 60)."""
    lay = tb.layout
    keys = [(layer, expert, matrix) for layer in range(lay.n_layers)
            for expert in range(lay.experts_per_layer) for matrix in Matrix]
    rng.shuffle(keys)
    step: list[Descriptor] = []
    if index == 0:
        keys.remove((0, 0, Matrix.GATE_UP))
        step.append(Descriptor(0, 0, 0, Matrix.GATE_UP,
                               range(0, lay.in_channels(Matrix.GATE_UP), 2), scales=True))
    for key in keys[:rng.randint(3, 6) - len(step)]:
        candidate = step + [_long_descriptor(rng, lay, len(step), key)]
        try:
            tb.ref.step(candidate)
        except ValueError:      # over the buffer: the step is long enough
            break
        step = candidate
    result = tb.ref.step(step)
    bursts = tb.ref.bursts(result)
    owners = [r.tag for r in result.reads
              for _ in split_bursts(r.address, r.beats, tb.g.beat_bytes)]
    errors: dict[tuple[int, int], EmaError] = {}
    if index == 0:
        errors[(0, 0)] = EmaError.SLVERR
    else:
        fetching = sorted(set(owners))
        for tag in rng.sample(fetching, min(len(fetching), rng.randint(1, 3))):
            burst = rng.choice([i for i, t in enumerate(owners) if t == tag])
            errors[(burst, rng.randrange(bursts[burst][1]))] = rng.choice(
                [EmaError.SLVERR, EmaError.DECERR])
    if index and rng.random() < 0.3:
        # a descriptor the controller itself rejects, somewhere after the first one
        at = rng.randint(1, len(step))
        step.insert(at, Descriptor(len(step), lay.n_layers, 0, Matrix.DOWN, [1]))
    return step, errors


def _step_words(tb: EmaTB, step: list[Descriptor]) -> list[int]:
    """NEW_STEP and the descriptors, those with a layer out of range encoded without the host's
    check (which would refuse them)."""
    words = [new_step_command()]
    for d in step:
        if d.layer >= tb.layout.n_layers:
            masks = [sum(1 << (c % 32) for c in d.channels if c // 32 == k)
                     for k in range(tb.g.mask_words(d.matrix))]
            words += _raw_descriptor(d.tag, d.layer, d.expert, int(d.matrix), masks)
        else:
            words += encode_descriptor(tb.layout, d)
    return words


@cocotb.test()
async def bus_errors_random(dut):
    """Error completions on long descriptors at high latency, case by case (params
    "error_cases" of them, each with its own seed from "error_seed" on, logged): latency
    60..200, random pauses on the command, completion, AR and R channels, SLVERR / DECERR on
    beats of one to three descriptors, and in some cases a descriptor with its layer out of
    range. Each case against `EmaReference.step_with_errors`: every completion (the first
    failure in command order FAILED, slot 0; before it OK; after it ABORTED, slot 0), STATUS,
    the ARs a prefix of the planned bursts reaching at least the failing one, no AR offered
    after the cycle of the first error beat, every burst drained, every line before the first
    error beat new and every later one unchanged. A reset between cases."""
    tb = EmaTB(dut, "bus_errors_random", latency=60, pauses="random")
    cases = tb.params.get("error_cases", 6)
    seed0 = tb.params.get("error_seed", cocotb.RANDOM_SEED)
    await tb.reset()
    lines = await tb.read_buffer()
    counts = {"cases": 0, "descriptors": 0, "failed_on_bus_error": 0, "bad_descriptor_first": 0,
              "errors_in_several_descriptors": 0, "aborted": 0, "late_accepted_ars": 0,
              "lines_checked_unchanged": 0}
    for index in range(cases):
        seed = seed0 + index
        rng = random.Random(f"bus_errors_random-{seed}")
        latency = 60 if index == 0 else rng.randint(60, 200)
        tb.rng = rng        # the stream drivers' pauses come from the case's own seed
        tb.ram.set_latency(latency)
        tb.ram.ar_pause(pause_generator(rng, rng.choice([0.0, 0.3, 0.6])))
        tb.ram.r_pause(pause_generator(rng, rng.choice([0.0, 0.3, 0.6])))
        tb.ram.errors.clear()
        await tb.reset()
        step, errors = _error_case(tb, rng, index)
        out = tb.ref.step_with_errors(step, errors)
        dut._log.info("error case %d: seed %d, latency %d, %d descriptors, errors %s, tags %s",
                      index, seed, latency, len(step), errors, [d.tag for d in step])
        for key, code in errors.items():
            tb.ram.errors[key] = RRESP[code]
        ars_from, buf_from = len(tb.monitor.ars), len(tb.writes.buf)
        tb.monitor.forget_errors()
        where = f"error case {index} (seed {seed})"

        got = await tb.run_commands(_step_words(tb, step), len(step), tb.bound(out.result))
        assert got == out.completions, f"{where}: completions {got} != {out.completions}"
        await ClockCycles(dut.clk, 20)
        tb.monitor.assert_drained()
        status = decode_status(await tb.csr(EmaCsr.STATUS))
        assert status == {"busy": 0, "error": 1, "code": out.code, "tag": out.tag}, \
            f"{where}: STATUS {status}"
        ars = tb.monitor.ars[ars_from:]
        offered = tb.monitor.ar_offered[ars_from:]
        assert [(a, n) for a, n, _ in ars] == out.bursts[:len(ars)], f"{where}: ARs"
        assert len(ars) >= out.bursts_issued_at_least, f"{where}: {len(ars)} ARs"
        if out.code in (EmaError.SLVERR, EmaError.DECERR):
            first = tb.monitor.first_error_cycle
            late = [(hex(a), c) for (a, _, _), c in zip(ars, offered) if c > first]
            assert not late, f"{where}: ARs offered after the error beat's cycle {first}: {late}"
            counts["late_accepted_ars"] += sum(c > first for _, _, c in ars)
            counts["failed_on_bus_error"] += 1
        else:
            assert tb.monitor.error_beats == 0, f"{where}: a burst after the bad descriptor"
            assert len(ars) == len(out.bursts), f"{where}: a burst of the bad descriptor's " \
                "predecessors is missing"
            counts["bad_descriptor_first"] += 1
        # exactly the beats before the first error beat were written, each where it belongs;
        # read back, those lines hold the new data and every later line the old
        tb.check_writes(out.result, tb.writes.buf[buf_from:], [], out.written_beats)
        after = await tb.read_buffer()
        new = tb.ref.buffer_lines(out.result, tb.image, tb.layout.base_address)
        order = [line for r in out.result.reads for line in range(r.line, r.line + r.beats)]
        for i, line in enumerate(order):
            if i < out.written_beats:
                assert after[line] == new[line], f"{where}: line {line} before the error"
            else:
                assert after[line] == lines[line], f"{where}: line {line} written after the error"
                counts["lines_checked_unchanged"] += lines[line] != new[line]
        lines = after
        counts["cases"] += 1
        counts["descriptors"] += len(step)
        counts["aborted"] += sum(c.status == EmaStatus.ABORTED for c in got)
        counts["errors_in_several_descriptors"] += len(errors) > 1   # one per descriptor
    _record(tb, "bus_errors_random", first_seed=seed0, **counts)


@cocotb.test()
async def reset_mid_burst(dut):
    """A reset while bursts are in flight (beats half delivered): STATUS and counters clear,
    nothing hangs, and the next step is exact."""
    tb = EmaTB(dut, "reset_mid_burst", latency=20)
    await tb.reset()
    lay = tb.layout
    step = [Descriptor(i, i % 2, 1, Matrix.GATE_UP, range(lay.in_channels(Matrix.GATE_UP)), True)
            for i in range(2)]
    result = tb.ref.step(step)
    total = sum(r.beats for r in result.reads)
    sender = cocotb.start_soon(tb.send(encode_step(lay, step)))
    for _ in range(tb.bound(result)):
        await RisingEdge(dut.clk)
        if tb.monitor.beats >= total // 3 and tb.monitor.outstanding:
            break
    assert tb.monitor.outstanding, "no burst in flight to reset in"
    in_flight = tb.monitor.outstanding
    sender.cancel()
    await tb.reset(cycles=2)
    c = await tb.counters()
    assert decode_status(c["STATUS"]) == {"busy": 0, "error": 0, "code": EmaError.NONE,
                                          "tag": 0}
    assert all(v == 0 for k, v in c.items() if k != "STATUS"), c
    assert not tb.sink.items
    ars_from = len(tb.monitor.ars)
    before = await tb.read_buffer()
    after = await tb.run_step(tb.random_step(6, tag0=100))
    await tb.check_buffer(tb.expected_lines(before, after))
    checked = await tb.check_step_contents(after)
    assert [(a, n) for a, n, _ in tb.monitor.ars[ars_from:]] == tb.ref.bursts(after)
    tb.monitor.assert_drained()
    await _check_counters(tb, [after], ars_from)
    _record(tb, "reset_mid_burst", bursts_in_flight_at_reset=in_flight,
            weight_bytes_checked_after_reset=checked)


@cocotb.test()
async def command_errors(dut):
    """Errors the controller finds itself: a layer out of range, mask bits past the last
    channel, a MASK where a descriptor belongs, more matrices than slots, more data than the
    buffer holds. Each: the descriptor FAILS, later ones are ABORTED, STATUS names it, nothing
    hangs, a reset clears it."""
    tb = EmaTB(dut, "command_errors", latency=10)
    await tb.reset()
    lay, g = tb.layout, tb.g
    good = lambda tag, ch=(0, 1, 2): encode_descriptor(lay, Descriptor(tag, 0, 0, Matrix.DOWN, ch))
    down_words = g.mask_words(Matrix.DOWN)
    cases = {}

    # layer out of range (the host-side check is bypassed on purpose)
    words = [new_step_command()] + good(1) + _raw_descriptor(
        2, lay.n_layers, 0, 1, [1] * down_words) + good(3, (5,))
    await _expect_error(tb, words, [EmaStatus.OK, EmaStatus.FAILED, EmaStatus.ABORTED],
                        EmaError.BAD_DESCRIPTOR, 2, 2000)
    cases["layer_out_of_range"] = "FAILED"

    # a mask bit for channel in_channels(DOWN), one past the last
    extra = lay.in_channels(Matrix.DOWN)
    masks = [0] * down_words
    masks[extra // 32] |= 1 << (extra % 32)
    words = [new_step_command()] + _raw_descriptor(4, 0, 1, 1, masks) + good(5)
    await _expect_error(tb, words, [EmaStatus.FAILED, EmaStatus.ABORTED],
                        EmaError.BAD_DESCRIPTOR, 4, 2000)
    cases["mask_past_last_channel"] = "FAILED"

    # a MASK beat where a descriptor belongs: named by the last descriptor's tag
    stray = ema_command_layout.const({"op": EmaOp.MASK, "arg": {"mask": 1}}).as_value().value
    words = [new_step_command()] + good(6) + [stray] + good(7)
    await _expect_error(tb, words, [EmaStatus.OK, EmaStatus.ABORTED], EmaError.BAD_COMMAND, 6,
                        2000)
    cases["stray_mask"] = "BAD_COMMAND"

    # more distinct matrices in one step than slots
    keys = [(layer, expert, matrix) for layer in range(lay.n_layers)
            for expert in range(lay.experts_per_layer) for matrix in Matrix][:g.slots + 2]
    descs = [Descriptor(20 + i, *key, [i % 8]) for i, key in enumerate(keys)]
    statuses = [EmaStatus.OK] * g.slots + [EmaStatus.FAILED, EmaStatus.ABORTED]
    await _expect_error(tb, encode_step(lay, descs), statuses, EmaError.SLOTS_FULL,
                        20 + g.slots, 20000)
    cases["slots_full"] = "FAILED"

    # dense matrices until the buffer overflows
    descs, lines = [], 0
    for i, (layer, expert) in enumerate((l, e) for l in range(lay.n_layers)
                                        for e in range(lay.experts_per_layer)):
        d = Descriptor(60 + i, layer, expert, Matrix.GATE_UP,
                       range(lay.in_channels(Matrix.GATE_UP)))
        descs.append(d)
        lines += g.run_beats(Matrix.GATE_UP, lay.in_channels(Matrix.GATE_UP))
        if lines > g.lines:
            break
    descs.append(Descriptor(90, 0, 0, Matrix.DOWN, [3]))
    statuses = [EmaStatus.OK] * (len(descs) - 2) + [EmaStatus.FAILED, EmaStatus.ABORTED]
    await _expect_error(tb, encode_step(lay, descs), statuses, EmaError.BUFFER_FULL,
                        descs[-2].tag, 20 * g.lines + 5000)
    cases["buffer_full"] = "FAILED"

    # and after the last reset, an exact step
    ars_from = len(tb.monitor.ars)
    before = await tb.read_buffer()
    after = await tb.run_step(tb.random_step(4, tag0=150))
    await tb.check_buffer(tb.expected_lines(before, after))
    await tb.check_step_contents(after)
    assert [(a, n) for a, n, _ in tb.monitor.ars[ars_from:]] == tb.ref.bursts(after)
    await _check_counters(tb, [after], ars_from)
    _record(tb, "command_errors", cases=cases)
