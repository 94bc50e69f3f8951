"""The command path: the host's command stream to its consumers (`Dispatcher`), the EMA command
sources joined a whole command at a time (`CommandMerge`), and the joined commands to the EMA and
the feeder (`CommandFork`)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import EmaOp, ema_command_layout
from ...contracts.top import TopOp
from ...contracts.weight_layout import Matrix
from ..ema.geometry import EmaGeometry
from ...contracts.top import inputs_per_beat
from ..engine.layouts import flush_layout, x_layout
from .layouts import cand_item_layout, command_layout, data_item_layout, route_item_layout

__all__ = ["Dispatcher", "CommandMerge", "CommandFork"]


class Dispatcher(wiring.Component):
    """Routes each command beat by its op, in order (one beat per cycle, no buffering):

    - EMA: to `ema` (the host's source of the EMA commands, `CommandMerge`);
    - ROUTE, DATA: to the DCU path's `route` and `data` queues;
    - CAND, DCU_CAND: to `cand`, with `feedback` set for DCU_CAND (the group's DOWN job is the
      DCU's: the top keeps the candidate's routing weight and the group's hidden outputs);
    - X, FLUSH: to the engine's streams (the engine takes a group's candidates once the group
      before has all its inputs, its inputs only after its candidates, and a flush only when no
      group is in flight: the host orders them so);
    - with `pru` (PruParams): SCORE and LOGIT to the PRU's `score` and `logit` inputs.
    """

    def __init__(self, tokens: int, candidates: int, d_model: int, word_bits: int, pru=None):
        pru_ports = {} if pru is None else {"score": Out(stream.Signature(pru.score_layout)),
                                            "logit": Out(stream.Signature(pru.logit_layout))}
        self._pru = pru
        super().__init__({
            "cmd": In(stream.Signature(command_layout(tokens, candidates, d_model, word_bits,
                                                      pru))),
            "ema": Out(stream.Signature(ema_command_layout)),
            "route": Out(stream.Signature(route_item_layout)),
            "data": Out(stream.Signature(data_item_layout)),
            "cand": Out(stream.Signature(cand_item_layout(tokens))),
            "x": Out(stream.Signature(x_layout(candidates, d_model,
                                               inputs_per_beat(word_bits)))),
            "flush": Out(stream.Signature(flush_layout(tokens))),
            **pru_ports,
        })

    def elaborate(self, platform):
        m = Module()
        cmd = self.cmd
        arg = cmd.payload.arg
        m.d.comb += [self.ema.payload.eq(arg.ema), self.route.payload.eq(arg.route),
                     self.data.payload.eq(arg.data), self.cand.payload.cand.eq(arg.cand),
                     self.cand.payload.feedback.eq(cmd.payload.op == TopOp.DCU_CAND),
                     self.x.payload.eq(arg.x), self.flush.payload.eq(arg.flush)]
        ports = {TopOp.EMA: self.ema, TopOp.ROUTE: self.route, TopOp.DATA: self.data,
                 TopOp.CAND: self.cand, TopOp.DCU_CAND: self.cand, TopOp.X: self.x,
                 TopOp.FLUSH: self.flush}
        if self._pru is not None:
            m.d.comb += [self.score.payload.eq(arg.score), self.logit.payload.eq(arg.logit)]
            ports.update({TopOp.SCORE: self.score, TopOp.LOGIT: self.logit})
        with m.Switch(cmd.payload.op):
            for op, port in ports.items():
                with m.Case(op):
                    m.d.comb += [port.valid.eq(cmd.valid), cmd.ready.eq(port.ready)]
        return m


class CommandMerge(wiring.Component):
    """Joins `sources` streams of EMA commands into one, granting a source a *whole* command:
    a NEW_STEP (or a stray MASK word) alone, a DESCRIPTOR with the mask words that follow it
    (`geometry.mask_words(matrix)`), never interleaved with another source's. Between commands
    the sources take turns (round robin from the one after the last granted); a command offered
    and not yet taken keeps its source, so the output's payload holds while it waits. Source 0
    is the host's EMA words, 1 the DCU's commands, 2 the PRU's fetch words. `grant` is the
    source whose word `cmd` offers (the top tells the PRU's words by it)."""

    def __init__(self, geometry: EmaGeometry, sources: int = 2):
        if not isinstance(sources, int) or isinstance(sources, bool) or sources < 1:
            raise TypeError(f"sources must be an integer in 1.., not {sources!r}")
        self._words = {mat: geometry.mask_words(mat) for mat in Matrix}
        super().__init__({
            "inputs": In(stream.Signature(ema_command_layout)).array(sources),
            "cmd": Out(stream.Signature(ema_command_layout)),
            "grant": Out(range(sources)),
        })

    def elaborate(self, platform):
        m = Module()
        n = len(self.inputs)
        words = self._words
        owner = Signal(range(n))
        locked = Signal()                      # `owner` holds the port
        left = Signal(range(max(words.values()) + 1))   # mask words still to come
        previous = Signal(range(n))            # the source granted last
        pick = Signal(range(n))
        with m.Switch(previous):
            for p in range(n):
                with m.Case(p):
                    # the first valid source after `previous` wins: assigned last
                    for s in reversed([(p + 1 + i) % n for i in range(n)]):
                        with m.If(self.inputs[s].valid):
                            m.d.comb += pick.eq(s)
        sel = Signal(range(n))
        m.d.comb += sel.eq(Mux(locked, owner, pick))
        m.d.comb += self.grant.eq(sel)
        for s, port in enumerate(self.inputs):
            with m.If(sel == s):
                m.d.comb += [self.cmd.valid.eq(port.valid), self.cmd.payload.eq(port.payload),
                             port.ready.eq(self.cmd.ready)]
        cmd = self.cmd.payload
        take = self.cmd.valid & self.cmd.ready
        with m.If(take):
            with m.If(left != 0):
                m.d.sync += [left.eq(left - 1), locked.eq(left != 1)]
                with m.If(left == 1):
                    m.d.sync += previous.eq(sel)
            with m.Elif(cmd.op == EmaOp.DESCRIPTOR):
                m.d.sync += [left.eq(Mux(cmd.arg.descriptor.matrix == Matrix.DOWN,
                                         words[Matrix.DOWN], words[Matrix.GATE_UP])),
                             locked.eq(1), owner.eq(sel)]
            with m.Else():
                m.d.sync += [locked.eq(0), previous.eq(sel)]
        with m.Elif(self.cmd.valid):
            m.d.sync += [locked.eq(1), owner.eq(sel)]
        return m


class CommandFork(wiring.Component):
    """The joined EMA commands to the EMA (`ema`) and, but for NEW_STEP, to the feeder's job
    queue (`jobs`): offered to both at once, so `valid` on each waits for the other's `ready`
    (both take it or neither: the feeder sees exactly what the EMA sees). NEW_STEP goes to `ema`
    only, and only while `step_clear` (the feeder has finished every descriptor so far): a new
    step reuses the buffer and the location table from the start, so the lines of the last step
    must have been read."""

    def __init__(self):
        super().__init__({"cmd": In(stream.Signature(ema_command_layout)), "step_clear": In(1),
                          "ema": Out(stream.Signature(ema_command_layout)),
                          "jobs": Out(stream.Signature(ema_command_layout))})

    def elaborate(self, platform):
        m = Module()
        cmd = self.cmd
        m.d.comb += [self.ema.payload.eq(cmd.payload), self.jobs.payload.eq(cmd.payload)]
        with m.If(cmd.payload.op == EmaOp.NEW_STEP):
            m.d.comb += [self.ema.valid.eq(cmd.valid & self.step_clear),
                         cmd.ready.eq(self.ema.ready & self.step_clear)]
        with m.Else():
            m.d.comb += [self.ema.valid.eq(cmd.valid & self.jobs.ready),
                         self.jobs.valid.eq(cmd.valid & self.ema.ready),
                         cmd.ready.eq(self.ema.ready & self.jobs.ready)]
        return m
