"""Run a cocotb bench on an Amaranth component, under Icarus or Verilator.

`run_cocotb` emits the component's simulation Verilog (see `edgexpert.hw.emit`), builds it with
cocotb's runner in a folder of its own under build/sim/, runs the bench module and checks the
results file. Emission is shared between cases through build/cache/ (`edgexpert.hw.emit`): the
simulation Verilog of an RTLIL text already converted is reused, and a component passed as a
`Design` (class and arguments) reuses the RTLIL of an identical earlier elaboration (the CI's
accelerator top: 17 s of CPU saved per case). The simulator build stays per case folder:
the CI's cases of one design on one simulator already share a folder (the top's and the
engine's), so a shared build would save nothing there.

Parameters reach the bench as JSON in $EDGEXPERT_BENCH_PARAMS (`bench_params()` reads them); a
bench may write a JSON report to $EDGEXPERT_BENCH_REPORT (`write_bench_report()`), which comes
back in `SimResult.report`.

Environment: SIM picks the simulator when none is passed (icarus | verilator), WAVES=1 records
waves when `waves` is not passed, COCOTB_RANDOM_SEED is replaced by the explicit `seed`.

Waves: one VCD file per case, in the case's folder: `<toplevel>.vcd` on Icarus, `dump.vcd` on
Verilator (cocotb's names). VCD, not FST, on both: Verilator's FST writer needs the lz4 headers,
which scripts/setup.sh does not install, and a text file can be checked by any script.
`run_cocotb` prints the path on stderr and returns it in `SimResult.waves`.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from ..hw.emit import emit_rtl
from ..support.progress import progress_bar
from ..support.tools import ToolError, build_root, require, verilator_env

__all__ = ["SIMULATORS", "SimError", "SimResult", "run_cocotb", "bench_params",
           "write_bench_report", "default_simulator", "waves_requested"]

SIMULATORS = ("icarus", "verilator")


class SimError(RuntimeError):
    """The simulation failed: a test failed, the simulator crashed, or no results were written."""


@dataclass(frozen=True)
class SimResult:
    simulator: str
    build_dir: Path
    results_xml: Path
    passed: int
    skipped: int
    report: dict
    waves: Path | None


def _count_results(results_xml: Path) -> tuple[int, int, list[str]]:
    """(passed, skipped, names of failed tests) from cocotb's JUnit results file."""
    try:
        root = ElementTree.parse(results_xml).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise SimError(f"no usable results file {results_xml}: {exc}") from None
    passed, skipped, failed = 0, 0, []
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(case.get("name", "?"))
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
    return passed, skipped, failed


def _log_tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def default_simulator() -> str:
    sim = os.environ.get("SIM", "icarus")
    if sim not in SIMULATORS:
        raise SimError(f"SIM={sim!r} is not supported: accepted {', '.join(SIMULATORS)}")
    return sim


def waves_requested() -> bool:
    return os.environ.get("WAVES", "0") not in ("", "0")


def bench_params() -> dict:
    """Inside a cocotb bench: the parameters `run_cocotb` was given."""
    raw = os.environ.get("EDGEXPERT_BENCH_PARAMS")
    if raw is None:
        raise SimError("EDGEXPERT_BENCH_PARAMS is not set: run benches through "
                       "edgexpert.cocotb_tests.runner.run_cocotb")
    return json.loads(raw)


def write_bench_report(report: dict) -> None:
    """Inside a cocotb bench: hand a JSON-serialisable summary back to the caller."""
    path = os.environ.get("EDGEXPERT_BENCH_REPORT")
    if path:
        Path(path).write_text(json.dumps(report, indent=2, sort_keys=True))


@contextmanager
def _environ(extra: dict[str, str]):
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _ReportWatch:
    """A progress bar fed by a bench's report file: the bench rewrites it after each test (or
    run), so the number of entries is how far the simulation is. Polled from a thread, because
    the simulator runs in a child process."""

    def __init__(self, path: Path, total: int, desc: str):
        self._path, self._total, self._desc = path, total, desc
        self._stop = threading.Event()
        self._thread = None
        self._bar = None

    def _count(self) -> int:
        try:
            report = json.loads(self._path.read_text())
        except (OSError, ValueError):    # not written yet, or being written
            return -1
        return len(report.get("runs", report.get("tests", {})))

    def _poll(self):
        while not self._stop.wait(0.5):
            done = self._count()
            if done > self._bar.n:
                self._bar.update(done - self._bar.n)

    def __enter__(self):
        if self._total:
            self._bar = progress_bar(total=self._total, desc=self._desc, unit="test")
            if not self._bar.disable:       # no terminal, or --quiet: nothing to draw
                self._thread = threading.Thread(target=self._poll, daemon=True)
                self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        if self._bar is not None:
            self._bar.close()


def _case_dir(toplevel: str, case: str, simulator: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", case)
    return build_root() / "sim" / toplevel / f"{safe}-{simulator}"


def run_cocotb(component, *, toplevel: str, test_module: str, case: str, params: dict,
               simulator: str | None = None, seed: int = 1,
               waves: bool | None = None, test_filter: str | None = None,
               progress_total: int = 0) -> SimResult:
    """Simulate `component` (built, or an `edgexpert.hw.emit.Design`) under cocotb bench
    `test_module` and return its results.

    `case` names the build folder (build/sim/<toplevel>/<case>-<simulator>/); runs that name the
    same case share its build and take the folder one at a time. `test_filter` (a regular expression) runs only the cocotb tests it
    matches. `progress_total` > 0: a bar on stderr that counts the entries of the bench's report
    (its "runs" or "tests") as the bench writes them, out of that many. Raises SimError when any
    cocotb test fails or the simulator dies.
    """
    simulator = simulator or default_simulator()
    if simulator not in SIMULATORS:
        raise SimError(f"simulator {simulator!r} is not supported: accepted {', '.join(SIMULATORS)}")
    waves = waves_requested() if waves is None else waves
    case_dir = _case_dir(toplevel, case, simulator)
    case_dir.mkdir(parents=True, exist_ok=True)
    # benches that share a case (its build: the DRAM-memory runs reuse the latency ones') may be
    # run at once by two pytest workers; they take the folder in turn, never its files together
    with open(case_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _run_case(component, case_dir, case=case, toplevel=toplevel,
                         test_module=test_module, params=params, simulator=simulator, seed=seed, waves=waves,
                         test_filter=test_filter, progress_total=progress_total)


def _run_case(component, case_dir: Path, *, case: str, toplevel: str, test_module: str,
              params: dict, simulator: str, seed: int, waves: bool, test_filter: str | None,
              progress_total: int) -> SimResult:
    from cocotb_tools.runner import get_runner

    rtl = emit_rtl(component, toplevel, case_dir / "rtl")

    # cocotb's own WAVES variable would override the argument: the argument decides
    env: dict[str, str] = {"WAVES": "1" if waves else "0"}
    plusargs: list[str] = []
    wave_file = None
    if simulator == "verilator":
        env.update(verilator_env())
        build_args = ["-Wno-fatal"]  # WIDTH / CASEINCOMPLETE warnings on generated Verilog
        if waves:
            # cocotb's Verilator main writes dump.vcd in the test folder
            wave_file = case_dir / "dump.vcd"
    else:
        require("iverilog")
        build_args = []
        if waves:
            # cocotb's Icarus dump module takes its file from +dumpfile_path; cocotb asks vvp for
            # FST (-fst), and vvp's last format option wins, so -vcd goes after it
            wave_file = case_dir / f"{toplevel}.vcd"
            plusargs.append(f"+dumpfile_path={wave_file}")
            env["SIM_CMD_SUFFIX"] = "-vcd"
    if wave_file is not None:
        wave_file.unlink(missing_ok=True)
    report_path = case_dir / "report.json"
    report_path.unlink(missing_ok=True)
    results_xml = case_dir / "results.xml"
    sim_log = case_dir / "sim.log"

    watch = _ReportWatch(report_path, progress_total, f"{toplevel} {case}")
    with _environ(env), watch:
        runner = get_runner(simulator)
        try:
            # a build with waves has the dumper in it: its own folder, so that neither build
            # is taken for the other (Icarus skips compiling when its output is newer)
            runner.build(sources=[rtl.sim_verilog], hdl_toplevel=toplevel,
                         build_dir=case_dir / ("sim_build-waves" if waves else "sim_build"),
                         build_args=build_args,
                         timescale=("1ns", "1ps"), waves=waves,
                         log_file=case_dir / "build.log")
            runner.test(test_module=test_module, hdl_toplevel=toplevel, seed=seed, waves=waves,
                        test_filter=test_filter, plusargs=plusargs,
                        test_dir=case_dir, results_xml=str(results_xml), log_file=sim_log,
                        extra_env={"EDGEXPERT_BENCH_PARAMS": json.dumps(params, sort_keys=True),
                                   "EDGEXPERT_BENCH_REPORT": str(report_path)})
        except SystemExit as exc:
            # cocotb's runner exits the process when a run under pytest fails; the results file,
            # if written, still names the failed tests
            exit_code = exc.code
        except (OSError, subprocess.CalledProcessError, RuntimeError) as exc:
            if isinstance(exc, ToolError):
                raise
            raise SimError(f"{simulator} build of {toplevel} failed: {exc}; log "
                           f"{case_dir / 'build.log'}:\n{_log_tail(case_dir / 'build.log')}") from None
        else:
            exit_code = 0

    if not results_xml.is_file():
        raise SimError(f"{simulator} run of {test_module} wrote no results (exit {exit_code}); "
                       f"log {sim_log}:\n{_log_tail(sim_log)}")
    passed, skipped, failed = _count_results(results_xml)
    if failed:
        raise SimError(f"{simulator}: cocotb tests failed: {', '.join(failed)}; log "
                       f"{sim_log}:\n{_log_tail(sim_log)}")
    if exit_code:
        raise SimError(f"{simulator} run of {test_module} failed (exit {exit_code}); log "
                       f"{sim_log}:\n{_log_tail(sim_log)}")
    if passed == 0:
        raise SimError(f"{simulator} run of {test_module} passed no test; see {sim_log}")
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    if wave_file is not None:
        if not wave_file.is_file():
            raise SimError(f"{simulator} wrote no waves at {wave_file}; log {sim_log}")
        print(f"waves: {wave_file}", file=sys.stderr)
    return SimResult(simulator, case_dir, results_xml, passed, skipped, report, wave_file)
