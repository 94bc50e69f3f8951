"""`AcceleratorTop`: the EMA system, the DCU, the feeder and the expert engine behind one command
stream."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...contracts.ema import CSR_DATA_BITS, EmaOp, EmaStatus
from ...contracts.top import OP_BITS, TOP_CSR_ADDR_BITS, TopError
from ...contracts.weight_layout import WeightLayout
from ..axi import Axi4Signature, forward
from ..dcu import Dcu
from ..ema import EmaSystem
from ..ema.geometry import AXI_ID_WIDTH
from ..streams import ReadSignature
from ..engine import ExpertEngine
from ..rejects import RejectRegisters, report
from .command import CommandFork, CommandMerge, Dispatcher
from .dcu_path import GROUPS_HELD, DcuPath
from .lanes import JOB_QUEUE_DEPTH, LANE_QUEUE_DEPTH, Feeder
from .layouts import command_layout
from .prefill import PrefillPath
from .registers import Activity, TopRegisters

__all__ = ["AcceleratorTop"]

class AcceleratorTop(wiring.Component):
    """The accelerator's top (docs/blocks/top.md): a host command stream in, the EMA's AXI4
    master out, the engine's outputs out.

    Parts: `Dispatcher` (command beats to their consumers), `CommandMerge` (the host's EMA words
    and the DCU's commands, a whole command at a time) and `CommandFork` (to the EMA and the
    feeder's job queue, NEW_STEP held until the feeder has finished the step before), `DcuPath`
    (the `Dcu` with the DOWN-job feedback: the engine's hidden scales and values with the
    candidates' routing weights made into the DOWN jobs' entries and data), `EmaSystem`, the
    `Feeder`, `ExpertEngine`, `Activity` (what the top does each cycle, and when a NEW_STEP may
    go) and `TopRegisters` (status, counters, and the EMA's registers through the same port).

    The host's contract, per group (one expert for 1..candidates candidates), with its own
    masks: a GATE_UP and then a DOWN descriptor of the expert, each with its scale block and its
    mask words (at least one channel each), then the group's CAND beats (`last` on the last)
    and its X beats; a group's descriptors may be sent before the previous group's CAND and X,
    but NEW_STEP only after the CAND and X of every group of the step before it; FLUSH of a
    token after every group that adds to it. With the DCU's masks: a GATE_UP job (ROUTE and
    DATA beats) and a DOWN job's header and prune words (ROUTE) instead of the descriptors, per
    part of the group (`more` on all but the last part's, `part_last` on each part's last
    DCU_CAND), the step's first job asking for the NEW_STEP, DCU_CAND instead of CAND, each
    DOWN job after its group's GATE_UP jobs (docs/blocks/top.md, "The DCU path").

    With `pru` (a PruParams: the prefill path, docs/blocks/top.md "Prefill"): `PrefillPath`
    (the PRU and its `UseCounter`), its scores and logits from SCORE and LOGIT beats, its
    routes out on `route`, its fetch words into the merge (source 2) with their `uses`, and the
    `Replayer` in front of the walker. The host then sends per layer the logits, and after
    reading the routes the groups of the PRU's experts in ascending order, each expert's tokens
    in token order.
    """

    def __init__(self, layout: WeightLayout, *, ema: dict, candidates: int, lanes: int,
                 tokens: int, pru=None):
        # a location-table read port for each of the feeder's two lanes
        self._ema = EmaSystem(layout, **ema, loc_readers=2)
        self._pru = pru
        self._dcu = Dcu(layout.d_model, layout.expert_ffn, candidates)
        self._engine = ExpertEngine(layout.d_model, layout.expert_ffn, candidates, lanes,
                                    self._ema.geometry.data_width, tokens)
        self._layout = layout
        self._sizes = (tokens, candidates)
        d = layout.d_model
        g = self._ema.geometry
        members = {} if pru is None else {"route": Out(stream.Signature(pru.route_layout))}
        super().__init__({
            **members,
            "cmd": In(stream.Signature(command_layout(tokens, candidates, d, g.data_width,
                                                      pru, expert_ffn=layout.expert_ffn))),
            # the engine's outputs, as it makes them
            **{name: self._engine.signature.members[name]
               for name in ("hidden", "hidden_scale", "expert_out", "moe_out")},
            "m_axi": Out(Axi4Signature(len(self._ema.m_axi.araddr),
                                       g.data_width, AXI_ID_WIDTH)),
            "csr": In(ReadSignature(TOP_CSR_ADDR_BITS, CSR_DATA_BITS)),
        })

    @property
    def ema(self) -> EmaSystem:
        return self._ema

    @property
    def engine(self) -> ExpertEngine:
        return self._engine

    @property
    def dcu(self) -> Dcu:
        return self._dcu

    def elaborate(self, platform):
        m = Module()
        tokens, candidates = self._sizes
        lay = self._layout
        ema = m.submodules.ema = self._ema
        engine = m.submodules.engine = self._engine
        g = ema.geometry
        disp = m.submodules.dispatcher = Dispatcher(tokens, candidates, lay.d_model,
                                                    lay.expert_ffn, g.data_width, self._pru)
        # the EMA's commands: the host's EMA words (source 0), the DCU's (source 1) and with a
        # PRU its fetch words (source 2), a whole command at a time, then to the EMA and the
        # feeder's job queue
        prefill = None
        if self._pru is not None:
            prefill = m.submodules.prefill = PrefillPath(self._pru, candidates)
        max_uses = 1 if prefill is None else prefill.max_uses
        merge = m.submodules.merge = CommandMerge(g, sources=2 if self._pru is None else 3)
        fork = m.submodules.fork = CommandFork()
        feeder = m.submodules.feeder = Feeder(g, ema.buffer_banks, max_uses)
        regs = m.submodules.registers = TopRegisters()

        connect(m, flipped(self.cmd), disp.cmd)
        connect(m, disp.ema, merge.inputs[0])
        connect(m, merge.cmd, fork.cmd)
        connect(m, fork.ema, ema.cmd)
        # the feeder's job queue keeps each word's uses: the PRU's (source 2) from the
        # UseCounter, the fork passing the merge's word the cycle the merge grants it
        m.d.comb += [feeder.jobs.valid.eq(fork.jobs.valid),
                     feeder.jobs.payload.cmd.eq(fork.jobs.payload),
                     fork.jobs.ready.eq(feeder.jobs.ready)]
        # the walkers start a descriptor on its notice, the readers each line once it is
        # written; the completions (all its data in, or the error) only report faults
        connect(m, ema.issued, feeder.issued)
        m.d.comb += [feeder.filled.eq(ema.filled), ema.done.ready.eq(1)]
        if prefill is not None:
            # the PRU's scores and logits from the host, its routes out, its fetch words into
            # the merge with their uses; the feeder replays its pairs
            connect(m, disp.score, prefill.score)
            connect(m, disp.logit, prefill.logit)
            connect(m, prefill.route, flipped(self.route))
            source = merge.inputs[2]
            m.d.comb += [source.valid.eq(prefill.cmd.valid),
                         source.payload.eq(prefill.cmd.payload.cmd),
                         prefill.cmd.ready.eq(source.ready)]
            with m.If(merge.grant == 2):
                m.d.comb += feeder.jobs.payload.uses.eq(prefill.cmd.payload.uses)
        for reader, port in zip(feeder.loc, ema.loc_rd):
            connect(m, reader, port)
        for reader, port in zip(feeder.buf, ema.buf_rd):
            connect(m, reader, port)
        m.d.comb += ema.res_rd.addr.eq(0)
        for name in ("gate_up", "gate_up_scales", "down", "down_scales"):
            connect(m, getattr(feeder, name), getattr(engine, name))
        for name in ("x", "flush"):
            connect(m, getattr(disp, name), getattr(engine, name))
        for name in ("expert_out", "moe_out"):
            connect(m, getattr(engine, name), flipped(getattr(self, name)))

        # the DCU path (dcu_path.py): CAND beats to the engine through it, its EMA commands
        # into the merge (source 1), the engine's hidden outputs through it to the host
        path = m.submodules.dcu_path = DcuPath(self._dcu, tokens=tokens, candidates=candidates,
                                                d_model=lay.d_model, expert_ffn=lay.expert_ffn)
        for name in ("cand", "route", "data"):
            connect(m, getattr(disp, name), getattr(path, name))
        connect(m, path.engine_cand, engine.cand)
        connect(m, path.engine_gate_up_mask, engine.gate_up_mask)
        connect(m, path.engine_down_mask, engine.down_mask)
        connect(m, engine.hidden_scale, path.hidden_scale)
        connect(m, engine.hidden, path.hidden)
        connect(m, path.host_hidden_scale, flipped(self.hidden_scale))
        connect(m, path.host_hidden, flipped(self.hidden))
        connect(m, path.cmd, merge.inputs[1])
        forward(m, self.m_axi, ema.m_axi)
        m.d.comb += [regs.csr.addr.eq(self.csr.addr), self.csr.data.eq(regs.csr.data)]
        connect(m, regs.ema, ema.csr)
        # the checking blocks' status and rejections, through the same port: the command
        # path's, the feeder lanes' and the DCU path's in one pair of registers
        lanes = len(feeder.rejected)
        checks = m.submodules.command_registers = RejectRegisters(TopError, OP_BITS,
                                                                  sources=2 + lanes)
        report(m, checks, disp.rejected, disp.passed)
        for k, port in enumerate(feeder.rejected):
            connect(m, port, checks.rejected[1 + k])
        connect(m, path.mismatch, checks.rejected[1 + lanes])
        connect(m, regs.command, checks.csr)
        connect(m, regs.dcu, path.csr)
        if prefill is not None:
            connect(m, regs.pru, prefill.csr)

        activity = m.submodules.activity = Activity(
            JOB_QUEUE_DEPTH + 2 * LANE_QUEUE_DEPTH + 8 + 2 * max_uses, GROUPS_HELD)
        def taken(port):
            return port.valid & port.ready

        m.d.comb += [
            activity.issued.eq(taken(fork.jobs) & (fork.jobs.payload.op == EmaOp.DESCRIPTOR)),
            activity.group_start.eq(taken(engine.cand) & engine.cand.payload.last),
            activity.group_end.eq(taken(self.expert_out) & self.expert_out.payload.last),
            activity.x_last.eq(taken(engine.x) & engine.x.payload.last),
            activity.deciding.eq(path.deciding),
            fork.step_clear.eq(activity.step_clear)]
        for name in ("again", "ended", "moved", "awaiting", "waiting", "hungry", "feeding"):
            m.d.comb += getattr(activity, name).eq(getattr(feeder, name))
        for name in ("busy", "memory_wait", "descriptor_wait", "compute"):
            m.d.comb += getattr(regs, name).eq(getattr(activity, name))
        m.d.comb += [regs.dcu_job.eq(path.job), regs.feedback_wait.eq(path.feedback_wait),
                     regs.group.eq(activity.group_start), regs.matrix.eq(feeder.ended),
                     regs.word.eq(feeder.moved),
                     regs.fault.eq(ema.done.valid & (ema.done.payload.status != EmaStatus.OK)),
                     regs.fault_status.eq(ema.done.payload.status),
                     regs.fault_tag.eq(ema.done.payload.tag)]
        return m
