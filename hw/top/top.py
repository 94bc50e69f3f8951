"""`AcceleratorTop`: the EMA system, the DCU, the feeder and the expert engine behind one command
stream."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...contracts.dcu import LANES, dcu_entry_layout
from ...contracts.ema import CSR_DATA_BITS, EmaOp, EmaStatus
from ...contracts.top import OP_BITS, TOP_CSR_ADDR_BITS, TopError
from ...contracts.weight_layout import WeightLayout
from ..axi import Axi4Signature, forward
from ..dcu import Dcu
from ..ema import EmaSystem
from ..ema.geometry import AXI_ID_WIDTH
from ..streams import ReadSignature, StreamFIFO
from ..engine import ExpertEngine
from ..engine.engine import GROUP_QUEUE
from ..pru import Pru
from ..rejects import RejectRegisters, report
from .command import CommandFork, CommandMerge, Dispatcher
from .feedback import (CandidateTap, DataMux, DownJobs, HiddenPacker, ScaleTap, WholeOnReject,
                       group_layout, job_record_layout, mark_layout, order_layout,
                       weight_record_layout)
from .lanes import JOB_QUEUE_DEPTH, LANE_QUEUE_DEPTH, Feeder
from .layouts import command_layout, data_item_layout, route_item_layout
from .prefill import UseCounter
from .registers import TopRegisters

__all__ = ["AcceleratorTop", "top_parameters", "GROUPS_HELD", "ORDER_QUEUE_DEPTH"]

#: groups between the host's CAND beats and the engine's hidden outputs: the engine holds up to
#: GROUP_QUEUE (hw/engine/engine.py) and one more may wait to be combined (below); the feedback
#: queues (routing weights, flags, DCU entries) hold this many groups' candidates
GROUPS_HELD = GROUP_QUEUE + 1
#: jobs between the DCU's route and data ports: the DCU's collector takes the next header once
#: the job before has reached the selector (docs/blocks/dcu.md), so two at most; four of slack
ORDER_QUEUE_DEPTH = 4


def top_parameters(config) -> dict:
    """`AcceleratorTop`'s keyword arguments (all but the layout) from a validated configuration:
    the EMA system's (`hardware.ema`) and the engine's candidates, lanes and token slots
    (`hardware.engine`). Here, not in the block registry, because the benches (below the
    registry) build the bundled top too."""
    ema, engine = config.hardware.ema, config.hardware.engine
    return {"ema": {"data_width": ema.axi_data_width, "addr_width": ema.axi_addr_width,
                    "outstanding": ema.outstanding_reads, "buffer_bytes": ema.buffer_bytes,
                    "buffer_banks": ema.buffer_banks, "slots": ema.slots},
            "candidates": engine.candidates, "lanes": engine.lanes, "tokens": engine.tokens}


class AcceleratorTop(wiring.Component):
    """The accelerator's top (docs/blocks/top.md): a host command stream in, the EMA's AXI4
    master out, the engine's outputs out.

    Parts: `Dispatcher` (command beats to their consumers), `CommandMerge` (the host's EMA words
    and the DCU's commands, a whole command at a time) and `CommandFork` (to the EMA and the
    feeder's job queue, NEW_STEP held until the feeder has finished the step before), `Dcu`
    with the DOWN-job feedback (feedback.py: the engine's hidden scales and values with the
    candidates' routing weights made into the DOWN jobs' entries and data), `EmaSystem`, the
    feeder (`MaskWalker`, `Locator`, `LineReader`, `Router`), `ExpertEngine`, and
    `TopRegisters` (status, counters, and the EMA's registers through the same port).

    The host's contract, per group (one expert for 1..candidates candidates), with its own
    masks: a GATE_UP and then a DOWN descriptor of the expert, each with its scale block and its
    mask words (at least one channel each), then the group's CAND beats (`last` on the last)
    and its X beats; a group's descriptors may be sent before the previous group's CAND and X,
    but NEW_STEP only after the CAND and X of every group of the step before it; FLUSH of a
    token after every group that adds to it. With the DCU's masks: a GATE_UP job (ROUTE and
    DATA beats) and a DOWN job's header and prune words (ROUTE) instead of the descriptors, the
    step's first job asking for the NEW_STEP, DCU_CAND instead of CAND, each DOWN job after its
    group's GATE_UP job and before that group's CAND and X (docs/blocks/top.md, "The DCU path").

    With `pru` (a PruParams: the prefill path, docs/blocks/top.md "Prefill"): the PRU, its
    scores and logits from SCORE and LOGIT beats, its routes out on `route` through the
    `UseCounter`, its fetch words into the merge (source 2) with their `uses`, and the
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
        if self._pru is None:
            max_uses = 1
        else:
            p = self._pru
            pru = m.submodules.pru = Pru(p)
            uses = m.submodules.uses = UseCounter(p.route_layout, n_experts=p.n_experts,
                                                  chunk=p.chunk, candidates=candidates,
                                                  length_bits=p.length_bits)
            max_uses = uses.max_uses
        merge = m.submodules.merge = CommandMerge(g, sources=2 if self._pru is None else 3)
        fork = m.submodules.fork = CommandFork()
        feeder = m.submodules.feeder = Feeder(g, ema.buffer_banks, max_uses)
        regs = m.submodules.registers = TopRegisters()
        dcu = m.submodules.dcu = self._dcu

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
        if self._pru is not None:
            # the PRU's scores and logits from the host; its routes out through the counter,
            # its fetch words into the merge with their uses; the feeder replays its pairs
            connect(m, disp.score, pru.i_score)
            connect(m, disp.logit, pru.i_logit)
            length = Signal(p.length_bits)
            with m.If(disp.score.valid & disp.score.ready):
                m.d.sync += length.eq(disp.score.payload.length)
            m.d.comb += uses.length.eq(length)
            connect(m, pru.o_route, uses.i_route)
            connect(m, uses.o_route, flipped(self.route))
            connect(m, pru.o_ema, uses.i_cmd)
            source = merge.inputs[2]
            m.d.comb += [source.valid.eq(uses.o_cmd.valid),
                         source.payload.eq(uses.o_cmd.payload.cmd),
                         uses.o_cmd.ready.eq(source.ready)]
            with m.If(merge.grant == 2):
                m.d.comb += feeder.jobs.payload.uses.eq(uses.o_cmd.payload.uses)
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

        # the DCU path (feedback.py): the host's route and data beats queue for the DCU (a
        # GATE_UP job's whole route and data fit); the candidates' routing weights and flags
        # queue for the hidden scales and values, which go to the host and, for a feedback
        # group, to the DOWN job as its entries and packed data
        d_words, f_words = (-(-c // LANES) for c in (lay.d_model, lay.expert_ffn))
        route_q = m.submodules.route_queue = StreamFIFO(route_item_layout,
                                                        1 + d_words + candidates)
        data_q = m.submodules.data_queue = StreamFIFO(data_item_layout, candidates * d_words)
        held = GROUPS_HELD * candidates
        weights_q = m.submodules.weight_queue = StreamFIFO(weight_record_layout, held)
        marks_q = m.submodules.mark_queue = StreamFIFO(mark_layout, held)
        entries_q = m.submodules.entry_queue = StreamFIFO(dcu_entry_layout, held)
        packed_q = m.submodules.packed_queue = StreamFIFO(data_item_layout, candidates * f_words)
        order_q = m.submodules.order_queue = StreamFIFO(order_layout, ORDER_QUEUE_DEPTH)
        # a DOWN job's group (its count) and each job's descriptor fields until the DCU answers
        groups_q = m.submodules.group_queue = StreamFIFO(group_layout, GROUPS_HELD)
        records_q = m.submodules.job_queue = StreamFIFO(job_record_layout, ORDER_QUEUE_DEPTH)
        whole = m.submodules.whole_on_reject = WholeOnReject(lay.d_model, lay.expert_ffn,
                                                              ORDER_QUEUE_DEPTH)
        tap = m.submodules.cand_tap = CandidateTap(tokens, lay.expert_ffn)
        scales = m.submodules.scale_tap = ScaleTap(candidates)
        packer = m.submodules.packer = HiddenPacker(candidates, lay.expert_ffn)
        down = m.submodules.down_jobs = DownJobs()
        mux = m.submodules.data_mux = DataMux()
        connect(m, disp.cand, tap.cand)
        connect(m, tap.engine, engine.cand)
        connect(m, tap.weights, weights_q.w)
        connect(m, tap.marks, marks_q.w)
        connect(m, tap.groups, groups_q.w)
        connect(m, groups_q.r, down.groups)
        connect(m, engine.hidden_scale, scales.scale)
        connect(m, weights_q.r, scales.weights)
        connect(m, scales.host, flipped(self.hidden_scale))
        connect(m, scales.entries, entries_q.w)
        connect(m, engine.hidden, packer.hidden)
        connect(m, marks_q.r, packer.marks)
        connect(m, packer.host, flipped(self.hidden))
        connect(m, packer.beats, packed_q.w)
        connect(m, disp.route, route_q.w)
        connect(m, route_q.r, down.route)
        connect(m, entries_q.r, down.entries)
        connect(m, down.dcu, dcu.route)
        connect(m, down.order, order_q.w)
        # a job the DCU rejects is fetched whole, so its group is not left without its matrix
        connect(m, down.jobs, records_q.w)
        connect(m, records_q.r, whole.jobs)
        connect(m, dcu.cmd, whole.dcu)
        m.d.comb += [whole.rejected.valid.eq(dcu.rejected.valid),
                     whole.rejected.payload.eq(dcu.rejected.payload)]
        connect(m, whole.cmd, merge.inputs[1])
        connect(m, order_q.r, mux.order)
        connect(m, disp.data, data_q.w)
        connect(m, data_q.r, mux.host)
        connect(m, packed_q.r, mux.hidden)
        connect(m, mux.dcu, dcu.data)
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
        connect(m, down.mismatch, checks.rejected[1 + lanes])
        connect(m, regs.command, checks.csr)
        connect(m, regs.dcu, dcu.csr)
        if self._pru is not None:
            connect(m, regs.pru, pru.csr)

        # descriptors handed to the feeder (a replayed pair's two again) and not yet fed to the
        # engine: a NEW_STEP waits for 0. A replay is counted when the split takes its first
        # word, no later than the pair's last walk ends (the split takes words before the
        # lanes walk them): the count does not touch 0 between a pair's walks
        pending = Signal(range(JOB_QUEUE_DEPTH + 2 * LANE_QUEUE_DEPTH + 8 + 2 * max_uses))
        issued = fork.jobs.valid & fork.jobs.ready & (fork.jobs.payload.op == EmaOp.DESCRIPTOR)
        m.d.sync += pending.eq(pending + issued + (feeder.again << 1) - feeder.ended)
        m.d.comb += fork.step_clear.eq(pending == 0)

        # a group is in the engine from its last candidate to its last expert output; the
        # engine holds up to GROUP_QUEUE groups (hw/engine/engine.py) and one more may be
        # combined with its last expert output still waiting for the host: GROUPS_HELD. The
        # newest group's inputs are loaded from its last X on; each group's two matrices end
        # (their last words taken) while it is in the engine, because the MAC arrays take
        # columns only for a group they hold: `owed` counts the matrices of started groups
        # that have not ended yet
        in_flight = Signal(range(GROUPS_HELD + 1))
        loaded = Signal()
        owed = Signal(range(2 * GROUPS_HELD + 1))
        group_start = engine.cand.valid & engine.cand.ready & engine.cand.payload.last
        group_end = self.expert_out.valid & self.expert_out.ready & self.expert_out.payload.last
        m.d.sync += [in_flight.eq(in_flight + group_start - group_end),
                     owed.eq(owed + (group_start << 1) - feeder.ended)]
        with m.If(group_start):
            m.d.sync += loaded.eq(0)
        with m.If(engine.x.valid & engine.x.ready & engine.x.payload.last):
            m.d.sync += loaded.eq(1)
        in_group = in_flight != 0
        wait, starved = Signal(), Signal()
        # no word reaches the engine while a lane waits for a notice or a line a group in
        # flight needs: memory, not compute; or for the descriptor itself (the DCU has not
        # made it yet)
        idle = in_group & loaded & (owed != 0) & (feeder.moved == 0)
        m.d.comb += [wait.eq(idle & (feeder.awaiting | feeder.waiting)),
                     starved.eq(idle & ~wait & feeder.hungry)]
        # DCU jobs started and not yet out as a descriptor (each job gives one, the DCU's or,
        # rejected, its whole matrix)
        selecting = Signal(range(2 * ORDER_QUEUE_DEPTH + 1))
        made = whole.cmd.valid & whole.cmd.ready & (whole.cmd.payload.op == EmaOp.DESCRIPTOR)
        m.d.sync += selecting.eq(selecting + down.job - made)
        deciding = (selecting != 0) | route_q.r.valid
        m.d.comb += [regs.busy.eq((pending != 0) | in_group | feeder.feeding | deciding),
                     regs.memory_wait.eq(wait), regs.descriptor_wait.eq(starved),
                     regs.compute.eq(in_group & ~wait & ~starved),
                     regs.dcu_job.eq(down.job),
                     regs.feedback_wait.eq((down.waiting & dcu.route.ready) | mux.waiting),
                     regs.group.eq(group_start), regs.matrix.eq(feeder.ended),
                     regs.word.eq(feeder.moved),
                     regs.fault.eq(ema.done.valid & (ema.done.payload.status != EmaStatus.OK)),
                     regs.fault_status.eq(ema.done.payload.status),
                     regs.fault_tag.eq(ema.done.payload.tag)]
        return m
