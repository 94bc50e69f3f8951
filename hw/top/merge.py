"""`CommandMerge`: the EMA command words of several sources (the host's, the PRU's) to the EMA
controller and the feeder's job queue, one whole command at a time."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import EmaOp, ema_command_layout
from ...contracts.weight_layout import Matrix
from ..ema.geometry import EmaGeometry
from .layouts import job_layout

__all__ = ["CommandMerge"]


class CommandMerge(wiring.Component):
    """Grants one of `sources` (job_layout words; the lowest index first when several wait) a
    whole command: a DESCRIPTOR and its ceil(in_channels / 32) mask words, or a single NEW_STEP
    (or stray MASK) word; no other source's word comes between. The granted word goes:

    - but for NEW_STEP, to `ema` and `jobs` (the feeder's copy, with `uses`) at once, so `valid`
      on each waits for the other's `ready` (both take it or neither: the feeder sees exactly
      what the EMA sees);
    - NEW_STEP to `ema` only, and only while `step_clear` (the feeder has finished every
      descriptor so far): a new step reuses the buffer and the location table from the start,
      so the lines of the last step must have been read.
    """

    def __init__(self, geometry: EmaGeometry, sources: int, max_uses: int):
        if sources < 1:
            raise ValueError(f"sources is {sources}: accepted 1 or more")
        self._g = geometry
        self._n = sources
        super().__init__({
            "sources": In(stream.Signature(job_layout(max_uses))).array(sources),
            "step_clear": In(1),
            "ema": Out(stream.Signature(ema_command_layout)),
            "jobs": Out(stream.Signature(job_layout(max_uses))),
        })

    def elaborate(self, platform):
        m = Module()
        g, n = self._g, self._n
        most = max(g.mask_words(mat) for mat in Matrix)
        locked = Signal()                       # inside a descriptor's words
        owner = Signal(range(n))                # ... of this source
        left = Signal(range(most + 1))          # its mask words still to come
        sel = Signal(range(n))
        with m.If(locked):
            m.d.comb += sel.eq(owner)
        with m.Else():
            for i in reversed(range(n)):        # the last assignment wins: the lowest valid
                with m.If(self.sources[i].valid):
                    m.d.comb += sel.eq(i)

        valid = Signal()
        word = Signal.like(self.jobs.payload)
        for i, src in enumerate(self.sources):
            with m.If(sel == i):
                m.d.comb += [valid.eq(src.valid), word.eq(src.payload)]
        ready = Signal()
        cmd = word.cmd
        m.d.comb += [self.ema.payload.eq(cmd), self.jobs.payload.eq(word)]
        with m.If(cmd.op == EmaOp.NEW_STEP):
            m.d.comb += [self.ema.valid.eq(valid & self.step_clear),
                         ready.eq(self.ema.ready & self.step_clear)]
        with m.Else():
            m.d.comb += [self.ema.valid.eq(valid & self.jobs.ready),
                         self.jobs.valid.eq(valid & self.ema.ready),
                         ready.eq(self.ema.ready & self.jobs.ready)]
        for i, src in enumerate(self.sources):
            m.d.comb += src.ready.eq(ready & (sel == i))

        with m.If(valid & ready):
            with m.If(cmd.op == EmaOp.DESCRIPTOR):
                words = {mat: g.mask_words(mat) for mat in Matrix}
                m.d.sync += [locked.eq(1), owner.eq(sel),
                             left.eq(words[Matrix.DOWN])]
                with m.If(cmd.arg.descriptor.matrix == Matrix.GATE_UP):
                    m.d.sync += left.eq(words[Matrix.GATE_UP])
            with m.Elif(locked & (cmd.op == EmaOp.MASK)):
                m.d.sync += left.eq(left - 1)
                with m.If(left == 1):
                    m.d.sync += locked.eq(0)
        return m
