"""`Dispatcher`: the host's command stream to the EMA, the feeder and the engine."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import ema_command_layout
from ...contracts.top import TopOp
from ..engine.layouts import act_layout, cand_layout, flush_layout
from .layouts import command_layout

__all__ = ["Dispatcher"]


class Dispatcher(wiring.Component):
    """Routes each command beat by its op, in order (one beat per cycle, no buffering):

    - EMA: to `ema`, the host's source of the `CommandMerge` (merge.py), which hands it to the
      EMA and the feeder's job queue;
    - CAND, X, FLUSH: to the engine's streams (the engine takes a group's candidates once the
      group before has all its inputs, its inputs only after its candidates, and a flush only
      when no group is in flight: the host orders them so);
    - with `pru` (PruParams): SCORE and LOGIT to the PRU's `score` and `logit` inputs;
    - any other code (SCORE and LOGIT without a PRU): dropped.
    """

    def __init__(self, tokens: int, candidates: int, d_model: int, pru=None):
        members = {
            "cmd": In(stream.Signature(command_layout(tokens, candidates, d_model, pru))),
            "ema": Out(stream.Signature(ema_command_layout)),
            "cand": Out(stream.Signature(cand_layout(tokens))),
            "x": Out(stream.Signature(act_layout(candidates, d_model))),
            "flush": Out(stream.Signature(flush_layout(tokens))),
        }
        if pru is not None:
            members.update(score=Out(stream.Signature(pru.score_layout)),
                           logit=Out(stream.Signature(pru.logit_layout)))
        self._pru = pru
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cmd = self.cmd
        arg = cmd.payload.arg
        ports = {TopOp.EMA: ("ema", self.ema), TopOp.CAND: ("cand", self.cand),
                 TopOp.X: ("x", self.x), TopOp.FLUSH: ("flush", self.flush)}
        if self._pru is not None:
            ports.update({TopOp.SCORE: ("score", self.score), TopOp.LOGIT: ("logit", self.logit)})
        with m.Switch(cmd.payload.op):
            for op, (name, port) in ports.items():
                m.d.comb += port.payload.eq(getattr(arg, name))
                with m.Case(op):
                    m.d.comb += [port.valid.eq(cmd.valid), cmd.ready.eq(port.ready)]
            with m.Default():
                # a code this top has no unit for: dropped, so the stream goes on
                m.d.comb += cmd.ready.eq(1)
        return m
