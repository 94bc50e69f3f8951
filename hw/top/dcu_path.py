"""`DcuPath`: the DCU with the top's feedback around it (docs/blocks/top.md, "The DCU path") as
one component: the parts of feedback.py and their queues, joined port to port."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect, flipped

from ...contracts.dcu import LANES, DcuCsr, dcu_entry_layout
from ...contracts.ema import CSR_DATA_BITS, EmaOp, ema_command_layout
from ...contracts.top import OP_BITS, TopError
from ..dcu import Dcu
from ..engine.engine import GROUP_QUEUE
from ..engine.layouts import act_layout, cand_layout, hidden_scale_layout, mask_layout
from ..rejects import reject_signature
from ..streams import ReadSignature, StreamFIFO
from .feedback import (CandidateTap, DataMux, DownJobs, HiddenPacker, MaskSource, MaskUnion,
                       ScaleTap, WholeOnReject, group_layout, job_record_layout, mark_layout,
                       order_layout, part_record_layout, ticket_layout, weight_record_layout)
from .layouts import cand_item_layout, data_item_layout, route_item_layout

__all__ = ["DcuPath", "GROUPS_HELD", "ORDER_QUEUE_DEPTH"]

#: groups between the host's CAND beats and the engine's hidden outputs: the engine holds up to
#: GROUP_QUEUE (hw/engine/engine.py) and one more may wait to be combined (the top's
#: `expert_out`); the feedback queues (routing weights, flags, DCU entries) hold this many
#: groups' candidates
GROUPS_HELD = GROUP_QUEUE + 1
#: jobs between the DCU's route and data ports: the DCU's collector takes the next header once
#: the job before has reached the selector (docs/blocks/dcu.md), so two at most; four of slack
ORDER_QUEUE_DEPTH = 4


class DcuPath(wiring.Component):
    """The host's CAND and DCU_CAND beats in (`cand`) and to the engine (`engine_cand`, each
    candidate's masks on `engine_gate_up_mask` and `engine_down_mask`: a host group's from its
    beat, a feedback group's the DCU's for its part); the host's ROUTE and DATA beats in
    (`route`, `data`); the engine's hidden scales and values in and to the host
    (`host_hidden_scale`, `host_hidden`); the EMA commands of the DCU's jobs out (`cmd`, a
    rejected job's matrix whole in its place, the parts of an engine group as one descriptor of
    the union of their masks). The route and data beats queue for the DCU (a GATE_UP job's
    whole route and data fit); the candidates' routing weights and flags queue for the hidden
    scales and values, which for a feedback group become its parts' DOWN jobs' entries and
    packed data.

    Also out: `mismatch` (a DOWN job's count that is not its group's, `DownJobs`), the DCU's
    register port (`csr`), and for the counters `job` (a DCU job started), `deciding` (a job in
    the DCU or waiting for it, not yet out as a descriptor) and `feedback_wait` (a DOWN job
    waits for its group's hidden outputs)."""

    def __init__(self, dcu: Dcu, *, tokens: int, candidates: int, d_model: int, expert_ffn: int):
        self._dcu = dcu
        self._sizes = (tokens, candidates, d_model, expert_ffn)
        super().__init__({
            "cand": In(stream.Signature(cand_item_layout(tokens, expert_ffn))),
            "route": In(stream.Signature(route_item_layout)),
            "data": In(stream.Signature(data_item_layout)),
            "engine_cand": Out(stream.Signature(cand_layout(tokens))),
            "engine_gate_up_mask": Out(stream.Signature(mask_layout(d_model))),
            "engine_down_mask": Out(stream.Signature(mask_layout(expert_ffn))),
            "hidden_scale": In(stream.Signature(hidden_scale_layout(candidates))),
            "hidden": In(stream.Signature(act_layout(candidates, expert_ffn))),
            "host_hidden_scale": Out(stream.Signature(hidden_scale_layout(candidates))),
            "host_hidden": Out(stream.Signature(act_layout(candidates, expert_ffn))),
            "cmd": Out(stream.Signature(ema_command_layout)),
            "mismatch": Out(reject_signature(TopError, OP_BITS)),
            "csr": In(ReadSignature(DcuCsr.as_shape().width, CSR_DATA_BITS)),
            "job": Out(1), "deciding": Out(1), "feedback_wait": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        tokens, candidates, d_model, expert_ffn = self._sizes
        dcu = m.submodules.dcu = self._dcu
        d_words, f_words = (-(-c // LANES) for c in (d_model, expert_ffn))
        held = GROUPS_HELD * candidates
        # a GATE_UP job's route beats, or the DOWN jobs' headers and prune words of a group's
        # parts, which `inline` sends before the group's DCU_CAND beats (the first part's
        # header waits for its part's count in `DownJobs`, the others in the queue)
        route_q = m.submodules.route_queue = StreamFIFO(
            route_item_layout, max(1 + d_words + candidates, candidates * (1 + f_words)))
        data_q = m.submodules.data_queue = StreamFIFO(data_item_layout, candidates * d_words)
        weights_q = m.submodules.weight_queue = StreamFIFO(weight_record_layout, held)
        marks_q = m.submodules.mark_queue = StreamFIFO(mark_layout, held)
        entries_q = m.submodules.entry_queue = StreamFIFO(dcu_entry_layout, held)
        packed_q = m.submodules.packed_queue = StreamFIFO(data_item_layout, candidates * f_words)
        order_q = m.submodules.order_queue = StreamFIFO(order_layout, ORDER_QUEUE_DEPTH)
        # a DOWN job's part (its count: a group has up to `candidates` parts) and each job's
        # descriptor fields and part record until the DCU answers
        groups_q = m.submodules.group_queue = StreamFIFO(group_layout, held)
        records_q = m.submodules.job_queue = StreamFIFO(job_record_layout, ORDER_QUEUE_DEPTH)
        parts_q = m.submodules.part_queue = StreamFIFO(part_record_layout, ORDER_QUEUE_DEPTH)
        # each candidate's place in the engine's mask streams, and the masks the DCU chose for
        # the parts not yet handed to their candidates: as many as the feedback queues hold
        gu_tickets_q = m.submodules.gate_up_ticket_queue = StreamFIFO(ticket_layout(), held)
        dn_tickets_q = m.submodules.down_ticket_queue = StreamFIFO(ticket_layout(expert_ffn),
                                                                   held)
        gu_parts_q = m.submodules.gate_up_part_queue = StreamFIFO(d_model, held)
        dn_parts_q = m.submodules.down_part_queue = StreamFIFO(expert_ffn, held)
        union = m.submodules.mask_union = MaskUnion(d_model, expert_ffn)
        gu_source = m.submodules.gate_up_masks = MaskSource(d_model, host_mask=False)
        dn_source = m.submodules.down_masks = MaskSource(expert_ffn, host_mask=True)
        whole = m.submodules.whole_on_reject = WholeOnReject(d_model, expert_ffn,
                                                              ORDER_QUEUE_DEPTH)
        tap = m.submodules.cand_tap = CandidateTap(tokens, expert_ffn)
        scales = m.submodules.scale_tap = ScaleTap(candidates)
        packer = m.submodules.packer = HiddenPacker(candidates, expert_ffn)
        down = m.submodules.down_jobs = DownJobs()
        mux = m.submodules.data_mux = DataMux()
        connect(m, flipped(self.cand), tap.cand)
        connect(m, tap.engine, flipped(self.engine_cand))
        connect(m, tap.gate_up_tickets, gu_tickets_q.w)
        connect(m, tap.down_tickets, dn_tickets_q.w)
        connect(m, gu_tickets_q.r, gu_source.tickets)
        connect(m, dn_tickets_q.r, dn_source.tickets)
        connect(m, gu_parts_q.r, gu_source.parts)
        connect(m, dn_parts_q.r, dn_source.parts)
        connect(m, gu_source.mask, flipped(self.engine_gate_up_mask))
        connect(m, dn_source.mask, flipped(self.engine_down_mask))
        connect(m, tap.weights, weights_q.w)
        connect(m, tap.marks, marks_q.w)
        connect(m, tap.groups, groups_q.w)
        connect(m, groups_q.r, down.groups)
        connect(m, flipped(self.hidden_scale), scales.scale)
        connect(m, weights_q.r, scales.weights)
        connect(m, scales.host, flipped(self.host_hidden_scale))
        connect(m, scales.entries, entries_q.w)
        connect(m, flipped(self.hidden), packer.hidden)
        connect(m, marks_q.r, packer.marks)
        connect(m, packer.host, flipped(self.host_hidden))
        connect(m, packer.beats, packed_q.w)
        connect(m, flipped(self.route), route_q.w)
        connect(m, route_q.r, down.route)
        connect(m, entries_q.r, down.entries)
        connect(m, down.dcu, dcu.route)
        connect(m, down.order, order_q.w)
        # a job the DCU rejects is fetched whole, so its group is not left without its matrix
        connect(m, down.jobs, records_q.w)
        connect(m, records_q.r, whole.jobs)
        connect(m, dcu.cmd, whole.dcu)
        connect(m, dcu.rejected, whole.rejected)
        # an engine group's parts become one descriptor, their masks each part's candidates'
        connect(m, down.parts, parts_q.w)
        connect(m, parts_q.r, union.parts)
        connect(m, whole.cmd, union.dcu)
        connect(m, union.cmd, flipped(self.cmd))
        connect(m, union.gate_up, gu_parts_q.w)
        connect(m, union.down, dn_parts_q.w)
        connect(m, order_q.r, mux.order)
        connect(m, flipped(self.data), data_q.w)
        connect(m, data_q.r, mux.host)
        connect(m, packed_q.r, mux.hidden)
        connect(m, mux.dcu, dcu.data)
        connect(m, down.mismatch, flipped(self.mismatch))
        connect(m, flipped(self.csr), dcu.csr)

        # DCU jobs started and not yet out as a descriptor (each job gives one, the DCU's or,
        # rejected, its whole matrix)
        selecting = Signal(range(2 * ORDER_QUEUE_DEPTH + 1))
        made = whole.cmd.valid & whole.cmd.ready & (whole.cmd.payload.op == EmaOp.DESCRIPTOR)
        m.d.sync += selecting.eq(selecting + down.job - made)
        m.d.comb += [self.job.eq(down.job),
                     self.deciding.eq((selecting != 0) | route_q.r.valid),
                     self.feedback_wait.eq((down.waiting & dcu.route.ready) | mux.waiting)]
        return m
