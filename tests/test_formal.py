"""Formal properties (docs/formal.md), checked with SymbiYosys: the EMA's AXI4 read master and
completion stream and the DCU's command stream pass at the CI depth, every cover of the EMA is
reached within it (the properties are not vacuous), and each deliberately broken variant fails
the property set it breaks (the checks can fail). The longer depths are benchmarks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from edgexpert.formal.sby import run_job, write_job
from edgexpert.hw.streams import offer
from edgexpert.formal.streams import StreamRulesCheck
from edgexpert.formal.targets import TARGETS, cover, prove

#: the CI depth: the EMA's last cover (an error beat, then every burst drained) is reached at
#: step 15, so 16 cycles see every property's situation at least once
CI_DEPTH = 16
#: ar_region's solver time doubles with each cycle (about 80 s at 16 on a loaded 2-core
#: machine, docs/formal.md): CI checks it to 14, seven cycles past the first AR
CI_DEPTH_REGION = 14
#: the benchmark depth (docs/formal.md has its run times)
LONG_DEPTH = 20


def _failures(results):
    return {r.name: (r.status, r.steps) for r in results if not r.passed}


def test_ema_properties_hold():
    sets = [s for s in TARGETS["ema"].sets if s != "ar_region"]
    results = prove("ema", CI_DEPTH, sets=sets) + prove("ema", CI_DEPTH_REGION,
                                                        sets=["ar_region"])
    assert sorted(r.name for r in results) == sorted(TARGETS["ema"].sets)
    assert not _failures(results)
    assert all(r.steps == r.depth for r in results)


def test_ema_covers_are_reached():
    result, steps, unreached = cover("ema", CI_DEPTH)
    assert unreached == 0 and len(steps) == 5, (steps, unreached)
    assert result.passed


@pytest.mark.parametrize("mutant", sorted(TARGETS["ema"].mutants))
def test_ema_mutant_fails(mutant):
    breaks = TARGETS["ema"].mutants[mutant]
    (result,) = prove("ema", CI_DEPTH, sets=[breaks], mutant=mutant)
    assert result.status == "FAIL", result
    assert result.trace is not None and result.trace.is_file()


def test_dcu_command_stream_holds():
    # the DCU's first EMA command can be taken at step 14 (its cover): 16 cycles see it
    results = prove("dcu", CI_DEPTH)
    assert not _failures(results)
    result, steps, unreached = cover("dcu", CI_DEPTH)
    assert steps and unreached == 0, (steps, unreached)


def test_whole_on_reject_command_stream_holds():
    """The top's stand-in for a rejected DCU job keeps the stream rule whatever the rejections'
    timing, and its commands can be taken (issue 28; the cover is reached at step 0, a DCU
    word passed through, which the summary prints without its step number)."""
    results = prove("whole_on_reject", CI_DEPTH)
    assert not _failures(results)
    result, _, unreached = cover("whole_on_reject", CI_DEPTH)
    assert result.passed and unreached == 0


#: the parts checked under the stream rule alone (formal/targets.py `_PARTS`): each passes at
#: the CI depth and reaches every output's handshake cover within its cover depth
STREAM_PARTS = {"pru": 30, "dispatcher": CI_DEPTH, "command_merge": CI_DEPTH,
                "command_fork": CI_DEPTH, "feeder": CI_DEPTH, "use_counter": CI_DEPTH,
                "candidate_tap": CI_DEPTH, "scale_tap": CI_DEPTH, "hidden_packer": CI_DEPTH,
                "down_jobs": CI_DEPTH, "data_mux": CI_DEPTH, "mask_source": CI_DEPTH,
                "mask_union": CI_DEPTH}
#: the engine's first expert output is taken at step 42 and every output's at 52 (its
#: covers): the full depth is the benchmark's, CI checks the first 20 cycles
ENGINE_CI_DEPTH = 20
ENGINE_COVER_DEPTH = 53


@pytest.mark.parametrize("name", sorted(STREAM_PARTS))
def test_part_keeps_the_stream_rule(name):
    assert not _failures(prove(name, CI_DEPTH))
    result, _, unreached = cover(name, STREAM_PARTS[name])
    assert result.passed and unreached == 0


def test_engine_keeps_the_stream_rule_to_the_ci_depth():
    assert not _failures(prove("engine", ENGINE_CI_DEPTH))


def test_every_target_is_a_prove_choice():
    from edgexpert.cli.prove import TARGET_NAMES
    assert sorted(TARGET_NAMES) == sorted(TARGETS)


class _AllAtOnce(wiring.Component):
    """The fork the top's parts had: an item to two outputs at once, each `valid` waiting for
    the other's `ready`; a `ready` that falls withdraws the other's `valid`."""
    def __init__(self):
        super().__init__({"i": In(stream.Signature(8)), "a": Out(stream.Signature(8)),
                          "b": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.a.payload.eq(self.i.payload), self.b.payload.eq(self.i.payload),
                     self.a.valid.eq(self.i.valid & self.b.ready),
                     self.b.valid.eq(self.i.valid & self.a.ready),
                     self.i.ready.eq(self.a.ready & self.b.ready)]
        return m


class _Offered(_AllAtOnce):
    """The same fork through `offer`: each output takes the item in its own cycle."""
    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.a.payload.eq(self.i.payload), self.b.payload.eq(self.i.payload),
                     self.i.ready.eq(offer(m, "fork", self.i.valid,
                                           [(self.a, 1), (self.b, 1)]))]
        return m


def test_stream_rule_catches_an_all_at_once_fork_and_offer_keeps_it(tmp_path):
    old = write_job(StreamRulesCheck(_AllAtOnce(), check="streams"), "all", tmp_path / "a", 6)
    assert run_job(old, 6).status == "FAIL"
    new = write_job(StreamRulesCheck(_Offered(), check="streams"), "offer", tmp_path / "b", 12)
    assert run_job(new, 12).status == "PASS"


class _Dropper(wiring.Component):
    """A producer that breaks the stream rule: it offers an item for one cycle and withdraws
    it whether taken or not."""
    def __init__(self):
        super().__init__({"out": Out(stream.Signature(8)), "go": In(1)})

    def elaborate(self, platform):
        m = Module()
        offered = Signal()
        m.d.sync += offered.eq(self.go & ~offered)
        m.d.comb += [self.out.valid.eq(offered), self.out.payload.eq(0x5A)]
        return m


def test_stream_rule_catches_a_withdrawn_valid(tmp_path):
    job = write_job(StreamRulesCheck(_Dropper(), check="streams"), "dropper", tmp_path, 6)
    assert run_job(job, 6).status == "FAIL"


def test_prove_command_reports_each_set_and_refuses_an_unknown_mutant():
    cli = [sys.executable, "-m", "edgexpert", "prove", "ema"]
    out = subprocess.run([*cli, "--depth", "4", "--sets", "ar_handshake,done_stream", "--json"],
                         capture_output=True, text=True, check=True).stdout
    report = json.loads(out)
    assert [(r["set"], r["status"], r["steps"]) for r in report["sets"]] == [
        ("ar_handshake", "PASS", 4), ("done_stream", "PASS", 4)]
    bad = subprocess.run([*cli, "--mutant", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "no mutant 'nope' for ema: accepted page_8k, drop_arvalid" in bad.stderr


@pytest.mark.benchmark
def test_properties_hold_longer():
    """docs/formal.md's longer runs: the EMA to 20 cycles (ar_region to 16), the DCU to 17
    (its step 17 alone took the solver over 2 minutes), the engine past its last cover."""
    sets = [s for s in TARGETS["ema"].sets if s != "ar_region"]
    results = (prove("ema", LONG_DEPTH, sets=sets) + prove("ema", CI_DEPTH, sets=["ar_region"])
               + prove("dcu", 17) + prove("engine", ENGINE_COVER_DEPTH + 1))
    assert not _failures(results)
    result, steps, unreached = cover("engine", ENGINE_COVER_DEPTH)
    assert unreached == 0 and max(steps) <= ENGINE_COVER_DEPTH
