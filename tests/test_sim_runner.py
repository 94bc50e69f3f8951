# amaranth: UnusedElaboratable=no
# (a run rejected before elaboration leaves its component unused, on purpose)
"""The cocotb runner reports failures instead of hiding them."""

import re

import pytest

from edgexpert.hw.mac_lane import MacLane
from edgexpert.cocotb_tests.runner import SimError, run_cocotb

FAILING_BENCH = '''
import cocotb
from cocotb.triggers import ClockCycles
from edgexpert.cocotb_tests.streams import start_clock_and_reset

@cocotb.test()
async def passes(dut):
    await start_clock_and_reset(dut)

@cocotb.test()
async def compares_wrongly(dut):
    await start_clock_and_reset(dut)
    await ClockCycles(dut.clk, 2)
    assert int(dut.dot__valid.value) == 1, "deliberate mismatch"
'''


@pytest.fixture
def build_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEXPERT_BUILD_DIR", str(tmp_path))
    return tmp_path


def test_failing_cocotb_test_raises_with_its_name(build_dir):
    # the bench module sits in the case folder, which the runner puts on the simulator's path
    case_dir = build_dir / "sim" / "mac_lane" / "fails-icarus"
    case_dir.mkdir(parents=True)
    (case_dir / "failing_bench.py").write_text(FAILING_BENCH)
    with pytest.raises(SimError, match="cocotb tests failed: compares_wrongly"):
        run_cocotb(MacLane(1), toplevel="mac_lane", test_module="failing_bench", case="fails",
                   params={}, simulator="icarus")


def test_unknown_simulator(build_dir):
    with pytest.raises(SimError, match="simulator 'xsim' is not supported: accepted icarus, verilator"):
        run_cocotb(MacLane(1), toplevel="mac_lane", test_module="x", case="x", params={},
                   simulator="xsim")


SHORT_BENCH = '''
import cocotb
from cocotb.triggers import ClockCycles
from edgexpert.cocotb_tests.streams import start_clock_and_reset

@cocotb.test()
async def runs(dut):
    await start_clock_and_reset(dut)
    dut.pairs__valid.value = 1
    await ClockCycles(dut.clk, 20)
'''


@pytest.mark.parametrize("simulator", ["icarus", "verilator"])
def test_waves_one_file_per_case_with_the_dut_signals(build_dir, monkeypatch, capsys, simulator):
    case_dir = build_dir / "sim" / "mac_lane" / f"waves-{simulator}"
    case_dir.mkdir(parents=True)
    (case_dir / "short_bench.py").write_text(SHORT_BENCH)
    # the environment variable of pytest runs (no argument given)
    monkeypatch.setenv("WAVES", "1")
    result = run_cocotb(MacLane(1), toplevel="mac_lane", test_module="short_bench", case="waves",
                        params={}, simulator=simulator)
    waves = result.waves
    assert waves is not None and waves.parent == case_dir and waves.stat().st_size > 0
    assert f"waves: {waves}" in capsys.readouterr().err
    text = waves.read_text()
    assert "$enddefinitions" in text
    for signal in ("clk", "pairs__valid", "dot__valid"):
        assert re.search(rf" {signal}(\s\S+)? \$end", text), signal
    if simulator == "verilator":
        return      # (a second Verilator build costs CI time; the switch is the runner's own)
    # and without: no file, none returned
    monkeypatch.setenv("WAVES", "0")
    again = run_cocotb(MacLane(1), toplevel="mac_lane", test_module="short_bench", case="waves",
                       params={}, simulator=simulator)
    assert again.waves is None


def test_bench_progress_counts_the_report_entries(tmp_path, monkeypatch):
    """`run_cocotb(progress_total=N)`'s bar follows the bench's report file, on a terminal."""
    import io
    import json
    import sys
    import time

    from edgexpert.cocotb_tests.runner import _ReportWatch

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True
    monkeypatch.setattr(sys, "stderr", Terminal())
    report = tmp_path / "report.json"
    with _ReportWatch(report, 3, "bench") as watch:
        report.write_text(json.dumps({"tests": {"a": {}, "b": {}}}))
        for _ in range(20):
            time.sleep(0.25)
            if watch._bar.n == 2:
                break
        assert watch._bar.n == 2
    assert "bench" in sys.stderr.getvalue()
