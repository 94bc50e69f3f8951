"""Properties of the EMA controller's AXI4 read master and of its completion stream, with an
environment that is free except for the AXI4 rules a slave keeps and the stream rule a command
producer keeps (docs/formal.md states each one and its source).

The checked block is `EmaController` with its residency read data free: every residency word
the solver likes, so whatever `EmaSystem`'s memories hold is one of the cases, and what is
proved of the controller's `m_axi` and `done` holds of `EmaSystem`'s, which are the same wires.
"""

from __future__ import annotations

from unittest import mock

from amaranth.hdl import Array, Cat, Fragment, Mux, ResetSignal, Signal
from amaranth.lib import wiring

from ..contracts.weight_layout import WeightLayout
from ..hw.axi import AxiBurst, AxiResp
from ..hw.ema import EmaController
from ..hw.ema import issuer as ema_issuer
from ..hw.ema.geometry import MAX_BURST_BEATS, PAGE_BYTES
from .rules import PropertyWrapper, mirror

__all__ = ["EMA_MUTANTS", "EmaReadMasterCheck"]

#: deliberately broken variants, each known to break one property set (the check can fail)
EMA_MUTANTS = {
    # the issuer's page constant doubled: bursts may cross a 4 KiB boundary (RTL changed)
    "page_8k": "ar_4k",
    # ARVALID dropped after one cycle of waiting for ARREADY (at the port)
    "drop_arvalid": "ar_handshake",
}


class EmaReadMasterCheck(PropertyWrapper):
    """`EmaController(layout, **params)` with the AXI4 slave environment and the properties.

    The slave is free (ARREADY, RVALID, RDATA, RRESP, RLAST, RID, any cycle) but keeps AXI4's
    rules: RVALID only while a burst is outstanding, RLAST on each burst's last beat and only
    there, RID the burst's ID, no EXOKAY, and RVALID with its payload held until RREADY. The
    command producer keeps the stream rule; commands themselves are free (bad ones included).
    `done.ready`, the CSR address and the residency data are free.
    """

    SETS = {
        "ar_handshake": "ARVALID held until ARREADY with ARADDR/ARLEN/ARSIZE/ARBURST/ARID "
                        "stable; ARVALID low after a reset",
        "ar_legal": "ARBURST INCR, ARSIZE the bus width, ARID 0, ARADDR beat-aligned, "
                    "ARLEN + 1 within AXI4's 256 and the EMA's own bound",
        "ar_region": "every burst reads inside the weights (base .. base + total bytes)",
        "ar_4k": "no burst crosses a 4 KiB boundary",
        "outstanding": "bursts accepted and not finished never exceed `outstanding`",
        "rready": "with a burst outstanding, RREADY is low only while a completion waits for "
                  "done.ready or in the cycle a new completion is loaded",
        "bus_error": "after an SLVERR/DECERR beat no AR is offered (only one already offered "
                     "may be accepted) and no buffer line is written",
        "done_stream": "done: valid held until ready, payload stable",
    }

    def __init__(self, layout: WeightLayout, *, check: str | None = None, resets: bool = True,
                 mutant: str | None = None, **params):
        if mutant is not None and mutant not in EMA_MUTANTS:
            raise ValueError(f"no mutant {mutant!r}: accepted {', '.join(EMA_MUTANTS)}")
        self._mutant = mutant
        self._layout = layout
        self._controller = EmaController(layout, **params)
        super().__init__(self._controller.signature, check, resets)

    @property
    def controller(self) -> EmaController:
        return self._controller

    def burst_bound(self) -> int:
        """The longest burst the EMA may issue: AXI4's 256 beats (AMBA AXI4 spec, A3.4.1),
        a 4 KiB page (A3.4.1) and its longest read (`EmaGeometry.max_read_beats`)."""
        g = self._controller.geometry
        return min(MAX_BURST_BEATS, PAGE_BYTES // g.beat_bytes, g.max_read_beats)

    def elaborate(self, platform):
        m = self.begin()
        c = self._controller
        if self._mutant == "page_8k":
            m.submodules.dut = _Patched(c, mock.patch.object(ema_issuer, "PAGE_BYTES",
                                                             2 * PAGE_BYTES))
        else:
            m.submodules.dut = c
        mirror(m, self, c)
        axi, g, n = self.m_axi, c.geometry, c.outstanding
        beat_bytes = g.beat_bytes
        arvalid = axi.arvalid
        if self._mutant == "drop_arvalid":
            # the master seen by the slave lets go of ARVALID after one cycle of waiting; the
            # controller is told of no handshake then (a broken master, not a broken slave)
            held = Signal()
            m.d.sync += held.eq(c.m_axi.arvalid & ~axi.arready & ~held)
            arvalid = Signal()
            m.d.comb += [arvalid.eq(c.m_axi.arvalid & ~held), axi.arvalid.eq(arvalid),
                         c.m_axi.arready.eq(axi.arready & ~held)]
        ar_hs = arvalid & axi.arready
        r_hs = axi.rvalid & axi.rready
        bad_beat = r_hs & axi.rresp.as_value()[1]    # SLVERR or DECERR: A3.4.4

        # --- the slave's book: bursts accepted and not finished, their lengths in order ---
        depth = n + 1                            # one more than allowed: an excess shows
        lengths = Array(Signal(8, name=f"len{i}") for i in range(depth))
        head = Signal(range(depth))
        tail = Signal(range(depth))
        outstanding = Signal(range(depth + 1))
        beat = Signal(8)                         # beats of the head burst already taken
        last_beat = r_hs & axi.rlast
        with m.If(ar_hs):
            m.d.sync += [lengths[tail].eq(axi.arlen),
                         tail.eq(Mux(tail == depth - 1, 0, tail + 1))]
        with m.If(last_beat):
            m.d.sync += [head.eq(Mux(head == depth - 1, 0, head + 1)), beat.eq(0)]
        with m.Elif(r_hs):
            m.d.sync += beat.eq(beat + 1)
        m.d.sync += outstanding.eq(outstanding + ar_hs - last_beat)

        # --- the slave keeps AXI4's rules (AMBA AXI4 spec, sections named) ----------------
        # A3.3.1: read data only after its address handshake; A3.4.1: RLAST on the last beat
        self.assume(~axi.rvalid | (outstanding != 0))
        self.assume(~axi.rvalid | (axi.rlast == (beat == lengths[head])))
        # A5.3: a burst's data carries its ARID; the EMA issues ID 0 only (proved in ar_legal)
        self.assume(~axi.rvalid | (axi.rid == 0))
        # EXOKAY answers only an exclusive access, and the EMA never asks for one (no ARLOCK)
        self.assume(~axi.rvalid | (axi.rresp != AxiResp.EXOKAY))
        # A3.2.1: RVALID held until RREADY, the beat unchanged meanwhile
        r_wait = self.past(axi.rvalid & ~axi.rready, name="r_waited")
        self.assume(~(self.past_valid & r_wait)
                    | (axi.rvalid & self.stable(Cat(axi.rdata, axi.rresp, axi.rlast, axi.rid))))
        # the command producer keeps the stream rule
        self.stream_rule(self.cmd, produced_here=False)

        # --- ar_handshake: A3.2.1 (valid held, payload stable); A3.1.2 (low after reset) ----
        ar_payload = Cat(axi.araddr, axi.arlen, axi.arsize, axi.arburst, axi.arid)
        ar_wait = self.past(arvalid & ~axi.arready, name="ar_waited")
        self.prove("ar_handshake", ~(self.past_valid & ar_wait)
                   | (arvalid & self.stable(ar_payload)))
        was_reset = self.past(ResetSignal(), name="was_reset", reset_less=True)
        self.prove("ar_handshake", ~was_reset | ~arvalid)

        # --- ar_legal: A3.4.1 (burst type, size), A5 (ID); the EMA's own bounds ------------
        beats = axi.arlen + 1
        end = axi.araddr + beats * beat_bytes
        layout = self._layout
        self.prove("ar_legal", ~arvalid | (
            (axi.arburst == AxiBurst.INCR) & (axi.arsize == (beat_bytes - 1).bit_length())
            & (axi.arid == 0) & (axi.araddr[:(beat_bytes - 1).bit_length()] == 0)
            & (beats <= self.burst_bound())))
        # the EMA's own: it reads the weight layout and nothing else (docs/weight-layout.md)
        self.prove("ar_region", ~arvalid | ((axi.araddr >= layout.base_address)
                                            & (end <= layout.base_address + layout.total_bytes)))

        # --- ar_4k: A3.4.1, a burst must not cross a 4 KiB boundary ------------------------
        page_bits = (PAGE_BYTES - 1).bit_length()
        self.prove("ar_4k", ~arvalid | (axi.araddr[:page_bits] + beats * beat_bytes
                                        <= PAGE_BYTES))

        # --- outstanding: the EMA's `outstanding` parameter ------------------------------
        self.prove("outstanding", outstanding <= n)

        # --- rready: docs/blocks/ema.md, "Bursts and outstanding reads" --------------------
        done = self.done
        excused = done.valid & ~done.ready       # a completion waits
        idle_r = self.past((outstanding != 0) & ~axi.rready & ~excused, name="r_idle")
        # ... else the cycle's low RREADY must have let a marker load a new completion
        self.prove("rready", ~(self.past_valid & idle_r) | done.valid)

        # --- bus_error: docs/blocks/ema.md, "No AR after the error beat" -------------------
        errored = Signal()                       # an error beat was taken before this cycle
        with m.If(bad_beat):
            m.d.sync += errored.eq(1)
        self.prove("bus_error", ~errored | ~arvalid | ar_wait)
        self.prove("bus_error", ~(errored | bad_beat) | ~self.buf_wr.en)

        # --- done_stream: docs/architecture.md, Streams -----------------------------------
        self.stream_rule(done, produced_here=True, set_name="done_stream")

        # --- covers: the properties are not vacuous at this depth --------------------------
        self.cover(ar_hs)
        self.cover(outstanding == n)
        self.cover(arvalid & (axi.araddr[:page_bits] + beats * beat_bytes == PAGE_BYTES))
        self.cover(errored & (outstanding == 0))
        self.cover(done.valid & done.ready)
        return m


class _Patched(wiring.Component):
    """`component` elaborated, submodules and all, under `patch` (a mutant's changed constant:
    a part reads its constants when it is elaborated)."""
    def __init__(self, component, patch):
        self._component, self._patch = component, patch
        super().__init__({})

    def elaborate(self, platform):
        with self._patch:
            return Fragment.get(self._component, platform)
