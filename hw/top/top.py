"""`AcceleratorTop`: the EMA system, the feeder and the expert engine behind one command stream."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...contracts.ema import CSR_DATA_BITS, EmaOp
from ...contracts.top import TOP_CSR_ADDR_BITS
from ...contracts.weight_layout import WeightLayout
from ..axi import Axi4Signature, forward
from ..ema import EmaSystem
from ..ema.geometry import AXI_ID_WIDTH
from ..ema.ports import ReadSignature, StreamFIFO
from ..engine import ExpertEngine
from ..engine.layouts import act_layout, hidden_scale_layout, moe_layout, sum_layout
from ..pru import Pru
from .command import Dispatcher
from .feeder import LineReader, Locator, MaskWalker, Replayer, Router
from .layouts import command_layout
from .merge import CommandMerge
from .prefill import UseCounter
from .registers import TopRegisters

__all__ = ["AcceleratorTop", "top_parameters", "JOB_QUEUE_DEPTH", "DONE_QUEUE_DEPTH"]

#: the feeder's copy of descriptors and mask words: a group's two descriptors with their mask
#: words are 2 + ceil(D/32) + ceil(F/32) beats (10 at the bundled model), so 32 let the host
#: send the next groups' fetches while the engine computes
JOB_QUEUE_DEPTH = 32
#: completions waiting for the feeder: the EMA holds its R channel while a completion is
#: refused, so the queue keeps it fetching ahead
DONE_QUEUE_DEPTH = 8


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

    Parts: `Dispatcher` (command beats to the EMA, the engine and the PRU), `CommandMerge` (the
    host's EMA words and the PRU's to the EMA and the feeder's job queue, whole commands),
    `EmaSystem` (controller, weight buffer, location table, residency), the feeder (`MaskWalker`,
    `Locator`, `LineReader`, `Router`: each fetched matrix's scale block and selected columns
    from the buffer into the engine, tagged with their channels), `ExpertEngine`, and
    `TopRegisters` (status, counters, and the EMA's registers through the same port).

    The host's contract, per group (one expert for 1..candidates candidates): a GATE_UP and then
    a DOWN descriptor of the expert, each with its scale block and its mask words (the channels
    the group computes on, at least one each), then the group's CAND beats (`last` on the last)
    and its X beats; a group's descriptors may be sent before the previous group's CAND and X
    (the EMA then fetches while the engine computes), but NEW_STEP only after the CAND and X of
    every group of the step before it (NEW_STEP waits for the feeder to finish that step's
    descriptors); FLUSH of a token after every group that adds to it.

    With `pru` (a PruParams: the prefill path, docs/blocks/top.md "Prefill"): the PRU, its
    scores and logits from SCORE and LOGIT beats, its routes out on `route` through the
    `UseCounter`, its fetch words into the merge with their `uses`, and the `Replayer` in front
    of the walker. The host then sends per layer the logits, and after reading the routes the
    groups of the PRU's experts in ascending order, each expert's tokens in token order.
    """

    def __init__(self, layout: WeightLayout, *, ema: dict, candidates: int, lanes: int,
                 tokens: int, pru=None):
        self._ema = EmaSystem(layout, **ema)
        self._pru = pru
        self._engine = ExpertEngine(layout.d_model, layout.expert_ffn, candidates, lanes,
                                    self._ema.geometry.data_width, tokens)
        self._layout = layout
        self._sizes = (tokens, candidates)
        d, f = layout.d_model, layout.expert_ffn
        g = self._ema.geometry
        members = {} if pru is None else {"route": Out(stream.Signature(pru.route_layout))}
        super().__init__({
            **members,
            "cmd": In(stream.Signature(command_layout(tokens, candidates, d, pru))),
            "hidden": Out(stream.Signature(act_layout(candidates, f))),
            "hidden_scale": Out(stream.Signature(hidden_scale_layout(candidates))),
            "expert_out": Out(stream.Signature(sum_layout(candidates, d))),
            "moe_out": Out(stream.Signature(moe_layout(tokens, d))),
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

    def elaborate(self, platform):
        m = Module()
        tokens, candidates = self._sizes
        lay = self._layout
        ema = m.submodules.ema = self._ema
        engine = m.submodules.engine = self._engine
        g = ema.geometry
        disp = m.submodules.dispatcher = Dispatcher(tokens, candidates, lay.d_model, self._pru)
        if self._pru is None:
            max_uses, sources = 1, 1
        else:
            p = self._pru
            pru = m.submodules.pru = Pru(p)
            uses = m.submodules.uses = UseCounter(p.route_layout, n_experts=p.n_experts,
                                                  chunk=p.chunk, candidates=candidates,
                                                  length_bits=p.length_bits)
            max_uses, sources = uses.max_uses, 2
        merge = m.submodules.merge = CommandMerge(g, sources, max_uses)
        jobs = m.submodules.jobs = StreamFIFO(merge.jobs.payload.shape(), JOB_QUEUE_DEPTH)
        done = m.submodules.done = StreamFIFO(ema.done.payload.shape(), DONE_QUEUE_DEPTH)
        walker = m.submodules.walker = MaskWalker(g)
        locator = m.submodules.locator = Locator(g)
        reader = m.submodules.reader = LineReader(g, ema.buffer_banks)
        router = m.submodules.router = Router(g, lay.d_model, lay.expert_ffn)
        regs = m.submodules.registers = TopRegisters()

        connect(m, flipped(self.cmd), disp.cmd)
        host = merge.sources[0]
        m.d.comb += [host.valid.eq(disp.ema.valid), host.payload.cmd.eq(disp.ema.payload),
                     disp.ema.ready.eq(host.ready)]
        connect(m, merge.ema, ema.cmd)
        connect(m, merge.jobs, jobs.w)
        connect(m, ema.done, done.w)
        again = Signal()
        if self._pru is None:
            m.d.comb += [walker.jobs.valid.eq(jobs.r.valid),
                         walker.jobs.payload.eq(jobs.r.payload.cmd),
                         jobs.r.ready.eq(walker.jobs.ready)]
            connect(m, done.r, walker.done)
        else:
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
            connect(m, uses.o_cmd, merge.sources[1])
            replayer = m.submodules.replayer = Replayer(g, max_uses)
            connect(m, jobs.r, replayer.jobs_in)
            connect(m, done.r, replayer.done_in)
            connect(m, replayer.jobs, walker.jobs)
            connect(m, replayer.done, walker.done)
            m.d.comb += again.eq(replayer.again)
        connect(m, walker.channels, locator.channels)
        connect(m, locator.lines, reader.lines)
        connect(m, reader.words, router.words)
        m.d.comb += [ema.loc_rd.addr.eq(locator.loc.addr), locator.loc.data.eq(ema.loc_rd.data),
                     ema.res_rd.addr.eq(0)]
        for b in range(ema.buffer_banks):
            m.d.comb += [ema.buf_rd[b].addr.eq(reader.buf[b].addr),
                         reader.buf[b].data.eq(ema.buf_rd[b].data)]
        for name in ("gate_up", "gate_up_scales", "down", "down_scales"):
            connect(m, getattr(router, name), getattr(engine, name))
        for name in ("cand", "x", "flush"):
            connect(m, getattr(disp, name), getattr(engine, name))
        for name in ("hidden", "hidden_scale", "expert_out", "moe_out"):
            connect(m, getattr(engine, name), flipped(getattr(self, name)))
        forward(m, self.m_axi, ema.m_axi)
        m.d.comb += [regs.csr.addr.eq(self.csr.addr), self.csr.data.eq(regs.csr.data)]
        connect(m, regs.ema, ema.csr)

        # descriptors handed to the feeder (a replayed pair's two again) and not yet fed to the
        # engine: a NEW_STEP waits for 0. A replay is counted when the walker takes its first
        # word, right after it walked the pair's last item, which reaches the router (and ends
        # the DOWN) cycles later: the count does not touch 0 between a pair's walks
        pending = Signal(range(JOB_QUEUE_DEPTH + DONE_QUEUE_DEPTH + 8 + 2 * max_uses))
        issued = merge.jobs.valid & merge.jobs.ready & \
            (merge.jobs.payload.cmd.op == EmaOp.DESCRIPTOR)
        m.d.sync += pending.eq(pending + issued + (again << 1) - router.ended)
        m.d.comb += merge.step_clear.eq(pending == 0)

        # a group is in the engine from its last candidate to its last expert output; the
        # engine holds up to three groups (hw/engine/engine.py, GROUP_QUEUE) and one more may
        # be combined with its last expert output still waiting for the host: up to four. The
        # newest group's inputs are loaded from its last X on; each group's two matrices end
        # (their last words taken) while it is in the engine, because the MAC arrays take
        # columns only for a group they hold: `owed` counts the matrices of started groups
        # that have not ended yet
        in_flight = Signal(3)
        loaded = Signal()
        owed = Signal(3)
        group_start = engine.cand.valid & engine.cand.ready & engine.cand.payload.last
        group_end = self.expert_out.valid & self.expert_out.ready & self.expert_out.payload.last
        m.d.sync += [in_flight.eq(in_flight + group_start - group_end),
                     owed.eq(owed + (group_start << 1) - router.ended)]
        with m.If(group_start):
            m.d.sync += loaded.eq(0)
        with m.If(engine.x.valid & engine.x.ready & engine.x.payload.last):
            m.d.sync += loaded.eq(1)
        in_group = in_flight != 0
        wait = Signal()
        # the feeder waits for a completion a group in flight needs: memory, not compute
        m.d.comb += wait.eq(in_group & loaded & walker.awaiting & (owed != 0))
        feeding = locator.lines.valid | reader.words.valid | walker.channels.valid
        m.d.comb += [regs.busy.eq((pending != 0) | in_group | feeding),
                     regs.memory_wait.eq(wait), regs.compute.eq(in_group & ~wait),
                     regs.group.eq(group_start), regs.matrix.eq(router.ended),
                     regs.word.eq(router.moved), regs.fault.eq(walker.fault),
                     regs.fault_status.eq(walker.fault_status),
                     regs.fault_tag.eq(walker.fault_tag)]
        return m
