"""The command path: the host's command stream to its consumers (`Dispatcher`), the EMA command
sources joined a whole command at a time (`CommandMerge`), and the joined commands to the EMA and
the feeder (`CommandFork`)."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import EmaOp, ema_command_layout
from ...contracts.top import OP_BITS, WEIGHT_MAX, TopError, TopOp
from ...contracts.weight_layout import Matrix
from ..ema.geometry import EmaGeometry
from ...contracts.top import inputs_per_beat
from ..engine.layouts import flush_layout, x_layout
from ..rejects import reject_signature
from ..streams import offer
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

    Checks every CAND, DCU_CAND, X and FLUSH beat and every op against the instance
    (docs/contracts.md, "The top's commands: accepted ranges"; the EMA, the DCU and the PRU
    check their own beats) and keeps the engine in step whatever comes: it follows the groups
    (a group closes at its `last` CAND or its `candidates`-th; its X beats are due until its
    n x beats-th passed on). A bad beat is reported on `rejected` (its first bad field,
    `TopError`, and its op) when it is taken, and:

    - an unknown op, a FLUSH of a slot past `tokens`, an X beat with no group open, and an X
      beat with a bad candidate or beat number that does not carry `last` are dropped (not
      counted among the group's beats);
    - a CAND with a bad token slot or weight goes on with weight 0 into slot 0 (it adds nothing
      to any sum; the group stays whole), the `candidates`-th without `last` with `last`;
    - a bad X beat that ends its group (its `last`, or the n x beats-th without `last` or not
      of the last candidate) goes on as the group's last candidate's beat 0 with `last` (the
      group closes; its outputs are not meaningful);
    - a CAND while the group before still has X beats due waits while the dispatcher closes
      that group with an X beat of zeros (candidate n - 1, beat 0, `last`), reported as X's
      LAST.

    `passed` pulses with every good beat taken.
    """

    def __init__(self, tokens: int, candidates: int, d_model: int, expert_ffn: int,
                 word_bits: int, pru=None):
        pru_ports = {} if pru is None else {"score": Out(stream.Signature(pru.score_layout)),
                                            "logit": Out(stream.Signature(pru.logit_layout))}
        self._pru = pru
        self._sizes = (tokens, candidates, -(-d_model // inputs_per_beat(word_bits)))
        super().__init__({
            "cmd": In(stream.Signature(command_layout(tokens, candidates, d_model, word_bits,
                                                      pru, expert_ffn=expert_ffn))),
            "ema": Out(stream.Signature(ema_command_layout)),
            "route": Out(stream.Signature(route_item_layout)),
            "data": Out(stream.Signature(data_item_layout)),
            "cand": Out(stream.Signature(cand_item_layout(tokens, expert_ffn))),
            "x": Out(stream.Signature(x_layout(candidates, d_model,
                                               inputs_per_beat(word_bits)))),
            "flush": Out(stream.Signature(flush_layout(tokens))),
            "rejected": Out(reject_signature(TopError, OP_BITS)),
            "passed": Out(1),
            **pru_ports,
        })

    def elaborate(self, platform):
        m = Module()
        tokens, candidates, beats = self._sizes
        cmd = self.cmd
        op, arg = cmd.payload.op, cmd.payload.arg
        m.d.comb += [self.ema.payload.eq(arg.ema), self.route.payload.eq(arg.route),
                     self.data.payload.eq(arg.data), self.cand.payload.cand.eq(arg.cand),
                     self.cand.payload.feedback.eq(op == TopOp.DCU_CAND),
                     self.x.payload.eq(arg.x), self.flush.payload.eq(arg.flush)]
        passed = {TopOp.EMA: self.ema, TopOp.ROUTE: self.route, TopOp.DATA: self.data}
        if self._pru is not None:
            m.d.comb += [self.score.payload.eq(arg.score), self.logit.payload.eq(arg.logit)]
            passed.update({TopOp.SCORE: self.score, TopOp.LOGIT: self.logit})

        forming = Signal(range(candidates))     # CANDs of the group being formed so far
        n = Signal(range(candidates + 1))       # candidates of the group whose X beats are due
        x_open = Signal()                       # a group's X beats are due
        x_seen = Signal(range(candidates * beats))  # of them taken
        x_final = Signal.like(x_seen)           # the number of the group's last one: n x beats - 1
        code = Signal(TopError)                 # the beat's first bad field
        take = cmd.valid & cmd.ready
        m.d.comb += [self.rejected.payload.code.eq(code), self.rejected.payload.tag.eq(op),
                     self.rejected.valid.eq(take & (code != TopError.NONE)),
                     self.passed.eq(take & (code == TopError.NONE))]

        cand, x = arg.cand, arg.x
        cand_last = cand.last | (forming == candidates - 1)
        with m.Switch(op):
            for o, port in passed.items():
                with m.Case(o):
                    m.d.comb += [port.valid.eq(cmd.valid), cmd.ready.eq(port.ready)]
            with m.Case(TopOp.CAND, TopOp.DCU_CAND):
                with m.If(cand.token >= tokens):
                    m.d.comb += code.eq(TopError.TOKEN)
                with m.Elif(cand.weight > WEIGHT_MAX):
                    m.d.comb += code.eq(TopError.WEIGHT)
                with m.Elif(~cand.last & (forming == candidates - 1)):
                    m.d.comb += code.eq(TopError.COUNT)
                with m.If(x_open & cmd.valid):
                    # the group before has X beats due: close it first (its inputs cut short)
                    m.d.comb += [self.x.valid.eq(1), self.x.payload.candidate.eq(n - 1),
                                 self.x.payload.beat.eq(0), self.x.payload.values.eq(0),
                                 self.x.payload.last.eq(1)]
                    with m.If(self.x.ready):
                        m.d.comb += [self.rejected.valid.eq(1),
                                     self.rejected.payload.code.eq(TopError.LAST),
                                     self.rejected.payload.tag.eq(TopOp.X)]
                        m.d.sync += x_open.eq(0)
                with m.Elif(~x_open):
                    m.d.comb += [self.cand.valid.eq(cmd.valid), cmd.ready.eq(self.cand.ready),
                                 self.cand.payload.cand.last.eq(cand_last)]
                    with m.If((code == TopError.TOKEN) | (code == TopError.WEIGHT)):
                        m.d.comb += [self.cand.payload.cand.token.eq(0),
                                     self.cand.payload.cand.weight.eq(0)]
                    with m.If(take):
                        m.d.sync += forming.eq(Mux(cand_last, 0, forming + 1))
                        with m.If(cand_last):
                            m.d.sync += [n.eq(forming + 1), x_open.eq(1), x_seen.eq(0),
                                         x_final.eq((forming + 1) * beats - 1)]
            with m.Case(TopOp.X):
                counted_end = x_seen == x_final
                with m.If(~x_open | (x.candidate >= n)):
                    m.d.comb += code.eq(TopError.CANDIDATE)
                with m.Elif(x.beat >= beats):
                    m.d.comb += code.eq(TopError.BEAT)
                with m.Elif((x.last != counted_end) | (x.last & (x.candidate != n - 1))):
                    m.d.comb += code.eq(TopError.LAST)
                # the beat ends its group: its `last`, or the n x beats-th with good indices
                ends = x_open & (x.last | (counted_end & (code != TopError.CANDIDATE)
                                           & (code != TopError.BEAT)))
                with m.If((code == TopError.NONE) | ends):
                    m.d.comb += [self.x.valid.eq(cmd.valid), cmd.ready.eq(self.x.ready)]
                    with m.If(code != TopError.NONE):
                        m.d.comb += [self.x.payload.candidate.eq(n - 1),
                                     self.x.payload.beat.eq(0), self.x.payload.last.eq(1)]
                    with m.If(take):
                        m.d.sync += x_seen.eq(x_seen + 1)
                        with m.If(ends):
                            m.d.sync += x_open.eq(0)
                with m.Else():
                    m.d.comb += cmd.ready.eq(1)     # dropped: not counted in the group's beats
            with m.Case(TopOp.FLUSH):
                with m.If(arg.flush.token >= tokens):
                    m.d.comb += [code.eq(TopError.TOKEN), cmd.ready.eq(1)]
                with m.Else():
                    m.d.comb += [self.flush.valid.eq(cmd.valid), cmd.ready.eq(self.flush.ready)]
            with m.Default():
                m.d.comb += [code.eq(TopError.OP), cmd.ready.eq(1)]
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
    queue (`jobs`): offered to both, each taking it in its own cycle (`offer`), the next command
    once both have (the feeder sees exactly what the EMA sees). NEW_STEP goes to `ema` only, and
    is first offered only while `step_clear` (the feeder has finished every descriptor so far): a
    new step reuses the buffer and the location table from the start, so the lines of the last
    step must have been read. Once offered it stays offered until taken."""

    def __init__(self):
        super().__init__({"cmd": In(stream.Signature(ema_command_layout)), "step_clear": In(1),
                          "ema": Out(stream.Signature(ema_command_layout)),
                          "jobs": Out(stream.Signature(ema_command_layout))})

    def elaborate(self, platform):
        m = Module()
        cmd = self.cmd
        step = cmd.payload.op == EmaOp.NEW_STEP
        offered = Signal()          # a NEW_STEP offered to the EMA and not yet taken
        may_go = ~step | self.step_clear | offered
        m.d.comb += [self.ema.payload.eq(cmd.payload), self.jobs.payload.eq(cmd.payload)]
        ready = offer(m, "fork", cmd.valid & may_go, [(self.ema, 1), (self.jobs, ~step)])
        m.d.comb += cmd.ready.eq(ready & may_go)
        m.d.sync += offered.eq(self.ema.valid & ~self.ema.ready & step)
        return m
