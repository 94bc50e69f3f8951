"""An AXI4 read-channel protocol monitor for benches of AXI masters.

Checked on every rising edge (outside reset):
- AR: once `arvalid` is high it stays high, with address, length, size and burst unchanged,
  until `arready`; every burst is INCR, of the bus's full beat size, aligned to a beat, at most
  256 beats, and does not cross a 4 KB boundary;
- at most `max_outstanding` bursts are accepted and not yet finished;
- R: every beat belongs to an accepted burst, `rlast` comes exactly on each burst's last beat,
  and the slave holds `rvalid` and the beat until `rready`;
- the write channels stay idle (`awvalid`, `wvalid` low) when the master only reads;
- no X/Z on any valid or ready (cocotb raises when one is read as a bool);
- `assert_drained()`: every accepted burst got all its beats, none lost.

It records every accepted AR (`ars`: (address, beats, cycle accepted); `ar_offered`: the cycle
its `arvalid` rose), counts beats (`beat_cycles`: the cycle of each) and error beats (SLVERR /
DECERR, with the cycle of the first),
so a bench can compare them with a reference. Cycles count rising edges outside reset.
"""

from __future__ import annotations

from collections import deque

import cocotb
from cocotb.triggers import RisingEdge
from cocotbext.axi.constants import AxiResp

__all__ = ["AxiReadMonitor"]

PAGE_BYTES = 4096


class AxiReadMonitor:
    def __init__(self, dut, prefix: str, *, beat_bytes: int, max_outstanding: int | None = None,
                 read_only: bool = True):
        self._clk = dut.clk
        self._rst = dut.rst
        sig = lambda name: getattr(dut, f"{prefix}__{name}")
        self._ar = {n: sig(n) for n in ("arvalid", "arready", "araddr", "arlen", "arsize",
                                         "arburst")}
        self._r = {n: sig(n) for n in ("rvalid", "rready", "rlast", "rdata", "rresp")}
        self._writes = [sig("awvalid"), sig("wvalid")] if read_only else []
        self.beat_bytes = beat_bytes
        self.size = (beat_bytes - 1).bit_length()
        self.max_outstanding = max_outstanding
        self.ars: list[tuple[int, int, int]] = []
        self.ar_offered: list[int] = []
        self.beats = 0
        #: the cycle of every R beat, for the benches' timelines
        self.beat_cycles: list[int] = []
        self.error_beats = 0
        self.first_error_cycle: int | None = None
        self.peak_outstanding = 0
        self.cycle = 0
        self._open: deque[int] = deque()     # beats still due per accepted burst
        self._ar_stalled = None
        self._ar_since = None
        self._r_stalled = None
        self._task = cocotb.start_soon(self._run())

    def stop(self):
        self._task.cancel()

    @property
    def outstanding(self) -> int:
        return len(self._open)

    def forget_errors(self):
        """Start counting error beats afresh (a bench that injects errors case by case)."""
        self.error_beats = 0
        self.first_error_cycle = None

    def assert_drained(self):
        assert not self._open, (f"{len(self._open)} accepted bursts still miss "
                                f"{sum(self._open)} beats: beats were lost")

    def _check_ar(self, addr: int, beats: int, size: int, burst: int):
        assert burst == 1, f"AR {addr:#x}: burst type {burst}, expected INCR (1)"
        assert size == self.size, f"AR {addr:#x}: arsize {size}, expected {self.size}"
        assert addr % self.beat_bytes == 0, f"AR {addr:#x} is not aligned to a beat"
        assert 1 <= beats <= 256, f"AR {addr:#x}: {beats} beats"
        end = addr + beats * self.beat_bytes - 1
        assert addr // PAGE_BYTES == end // PAGE_BYTES, \
            f"AR {addr:#x} + {beats} beats crosses a 4 KB boundary"

    async def _run(self):
        ar, r = self._ar, self._r
        while True:
            await RisingEdge(self._clk)
            if bool(self._rst.value):
                # a reset ends every transfer on both sides of the bus
                self._open.clear()
                self._ar_stalled = self._r_stalled = None
                continue
            self.cycle += 1
            for valid in self._writes:
                assert not bool(valid.value), f"{valid._name} rose: this master only reads"

            if bool(ar["arvalid"].value):
                offer = (ar["araddr"].value.to_unsigned(), ar["arlen"].value.to_unsigned() + 1,
                         ar["arsize"].value.to_unsigned(), ar["arburst"].value.to_unsigned())
                if self._ar_stalled is not None:
                    assert offer == self._ar_stalled, \
                        f"AR changed from {self._ar_stalled} to {offer} while waiting for arready"
                else:
                    self._check_ar(*offer)
                    self._ar_since = self.cycle
                if bool(ar["arready"].value):
                    self.ars.append((offer[0], offer[1], self.cycle))
                    self.ar_offered.append(self._ar_since)
                    self._open.append(offer[1])
                    self._ar_stalled = None
                else:
                    self._ar_stalled = offer
            else:
                assert self._ar_stalled is None, \
                    f"arvalid dropped before arready (AR {self._ar_stalled})"

            rvalid = bool(r["rvalid"].value)
            if self._r_stalled is not None:
                assert rvalid, "the slave dropped rvalid before rready"
                beat = (r["rdata"].value.to_unsigned(), int(r["rlast"].value),
                        r["rresp"].value.to_unsigned())
                assert beat == self._r_stalled, "the slave changed a beat while waiting for rready"
            if rvalid and bool(r["rready"].value):
                assert self._open, "an R beat arrived with no burst outstanding"
                self.beats += 1
                self.beat_cycles.append(self.cycle)
                self._open[0] -= 1
                last = bool(r["rlast"].value)
                assert last == (self._open[0] == 0), \
                    f"rlast = {int(last)} with {self._open[0]} beats of the burst still due"
                if r["rresp"].value.to_unsigned() >= AxiResp.SLVERR:
                    self.error_beats += 1
                    if self.first_error_cycle is None:
                        self.first_error_cycle = self.cycle
                if last:
                    self._open.popleft()
                self._r_stalled = None
            elif rvalid:
                self._r_stalled = (r["rdata"].value.to_unsigned(), int(r["rlast"].value),
                                   r["rresp"].value.to_unsigned())
            else:
                self._r_stalled = None
            self.peak_outstanding = max(self.peak_outstanding, len(self._open))
            if self.max_outstanding is not None:
                assert len(self._open) <= self.max_outstanding, \
                    f"{len(self._open)} bursts outstanding, the limit is {self.max_outstanding}"
