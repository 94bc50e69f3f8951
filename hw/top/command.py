"""`Dispatcher`: the host's command stream to the EMA, the feeder and the engine."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import EmaOp, ema_command_layout
from ...contracts.top import TopOp
from ..engine.layouts import act_layout, cand_layout, flush_layout
from .layouts import command_layout

__all__ = ["Dispatcher"]


class Dispatcher(wiring.Component):
    """Routes each command beat by its op, in order (one beat per cycle, no buffering):

    - EMA: to `ema` and, but for NEW_STEP, to `jobs` (the feeder's copy of the descriptors and
      mask words); offered to both at once, so `valid` on each waits for the other's `ready`
      (both take it or neither: the feeder sees exactly what the EMA sees);
    - NEW_STEP: to `ema` only, and only while `step_clear` (the feeder has finished every
      descriptor so far): a new step reuses the buffer and the location table from the start,
      so the lines of the last step must have been read;
    - CAND, X, FLUSH: to the engine's streams (the engine takes a group's candidates once the
      group before has all its inputs, its inputs only after its candidates, and a flush only
      when no group is in flight: the host orders them so).
    """

    def __init__(self, tokens: int, candidates: int, d_model: int):
        super().__init__({
            "cmd": In(stream.Signature(command_layout(tokens, candidates, d_model))),
            "step_clear": In(1),
            "ema": Out(stream.Signature(ema_command_layout)),
            "jobs": Out(stream.Signature(ema_command_layout)),
            "cand": Out(stream.Signature(cand_layout(tokens))),
            "x": Out(stream.Signature(act_layout(candidates, d_model))),
            "flush": Out(stream.Signature(flush_layout(tokens))),
        })

    def elaborate(self, platform):
        m = Module()
        cmd = self.cmd
        arg = cmd.payload.arg
        m.d.comb += [self.ema.payload.eq(arg.ema), self.jobs.payload.eq(arg.ema),
                     self.cand.payload.eq(arg.cand), self.x.payload.eq(arg.x),
                     self.flush.payload.eq(arg.flush)]
        with m.Switch(cmd.payload.op):
            with m.Case(TopOp.EMA):
                with m.If(arg.ema.op == EmaOp.NEW_STEP):
                    m.d.comb += [self.ema.valid.eq(cmd.valid & self.step_clear),
                                 cmd.ready.eq(self.ema.ready & self.step_clear)]
                with m.Else():
                    m.d.comb += [self.ema.valid.eq(cmd.valid & self.jobs.ready),
                                 self.jobs.valid.eq(cmd.valid & self.ema.ready),
                                 cmd.ready.eq(self.ema.ready & self.jobs.ready)]
            for op, port in ((TopOp.CAND, self.cand), (TopOp.X, self.x),
                             (TopOp.FLUSH, self.flush)):
                with m.Case(op):
                    m.d.comb += [port.valid.eq(cmd.valid), cmd.ready.eq(port.ready)]
        return m
