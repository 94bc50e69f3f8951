# amaranth: UnusedElaboratable=no
# (a run rejected before elaboration leaves its component unused, on purpose)
"""The cocotb runner reports failures instead of hiding them."""

import pytest

from edgexpert.hw.mac_lane import MacLane
from edgexpert.sim.runner import SimError, run_cocotb

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
    assert int(dut.o_stream__valid.value) == 1, "deliberate mismatch"
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
