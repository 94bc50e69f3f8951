"""Formal properties (docs/formal.md), checked with SymbiYosys: the EMA's AXI4 read master and
completion stream and the DCU's command stream pass at the CI depth, every cover of the EMA is
reached within it (the properties are not vacuous), and each deliberately broken variant fails
the property set it breaks (the checks can fail). The longer depths are benchmarks."""

from __future__ import annotations

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from edgexpert.formal.sby import run_job, write_job
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
    results = prove("dcu", 12)
    assert not _failures(results)


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


@pytest.mark.benchmark
@pytest.mark.parametrize("target", ["ema", "dcu"])
def test_properties_hold_longer(target):
    results = prove(target, LONG_DEPTH)
    assert not _failures(results)
