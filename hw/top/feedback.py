"""The DCU's jobs in the top: the host's GATE_UP jobs, and DOWN jobs completed in hardware from
the engine's outputs (docs/blocks/top.md, "The DCU path").

A DOWN job's selection is on the hidden vectors the engine computes on the GATE_UP channels the
DCU chose, so only the top has them. The host sends the DOWN job's header and prune words (what
only it knows); the top adds the entries (each candidate's hidden scale and routing weight) and
the data (the hidden values, 32 per beat per candidate):

- `CandidateTap`: each candidate and its masks to the engine, and its routing weight and
  feedback flag to two queues, one read per hidden scale, one per candidate's hidden vector;
- `ScaleTap`: the engine's hidden scales to the host, and for a feedback group each with its
  candidate's routing weight as a DCU entry;
- `HiddenPacker`: the engine's hidden values to the host, and for a feedback group packed 32 per
  beat per candidate into DCU data beats (`last` on the group's last);
- `DownJobs`: the host's route beats to the DCU in their order; after a DOWN job's header and
  prune words, the group's `count` entries; the matrix of each job to the `DataMux`;
- `DataMux`: the DCU's data beats, each job's from its source (GATE_UP: the host's DATA beats;
  DOWN: the packed hidden values), in the jobs' order;
- `WholeOnReject`: the DCU's commands to the EMA, and for a job the DCU rejects the job's
  matrix whole in its place, so the group it was for still gets its descriptor (issue 28).

Every part is a fork or a join of streams with one item per cycle and no state but a counter or
a beat register; a DOWN job waits only for its own group's outputs, which need nothing the host
sends after that group's CAND and X beats (docs/blocks/top.md, "The DCU path").
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.dcu import (COUNT_BITS, E_BITS, LANES, DcuError, dcu_data_layout,
                              dcu_entry_layout, dcu_header_layout, dcu_route_layout)
from ...contracts.ema import TAG_BITS, EmaOp, ema_command_layout
from ...contracts.top import OP_BITS, TopError, TopOp
from ...contracts.weight_layout import Matrix
from ..rejects import reject_signature
from ..streams import offer
from ..engine.layouts import (WEIGHT_BITS, act_layout, cand_layout, hidden_scale_layout,
                              mask_layout)
from .layouts import cand_item_layout, data_item_layout, route_item_layout

__all__ = ["weight_record_layout", "mark_layout", "order_layout", "group_layout",
           "job_record_layout", "part_record_layout", "ticket_layout", "CandidateTap",
           "MaskSource", "ScaleTap", "HiddenPacker", "DownJobs", "DataMux", "WholeOnReject",
           "MaskUnion"]

#: a candidate's routing weight, and whether the DCU makes its group's DOWN job
weight_record_layout = data.StructLayout({"g": WEIGHT_BITS, "feedback": 1})
#: whether a candidate's hidden values go to the DCU, and whether it ends its part (the DOWN
#: job its values are the data of)
mark_layout = data.StructLayout({"feedback": 1, "closes": 1})
#: what a DCU job's descriptor waits for: its matrix and whether the next part's job of that
#: matrix is merged with it (`MaskUnion`)
part_record_layout = data.StructLayout({"matrix": 1, "more": 1})


def ticket_layout(host_mask: int = 0) -> data.StructLayout:
    """A candidate's place in the engine's mask stream of one matrix (`MaskSource`): whether its
    group's masks are the DCU's, whether it ends its part, whether it ends its group, and with
    `host_mask` bits its mask from the host (the CAND beat's DOWN mask)."""
    return data.StructLayout({"feedback": 1, "closes": 1, "last": 1,
                              **({"mask": host_mask} if host_mask else {})})
#: the matrix of a DCU job, in the order the jobs enter the DCU
order_layout = data.StructLayout({"matrix": 1})
#: a feedback part's candidates (its DOWN job's count) and whether it ends its engine group
#: (its DOWN job is the group's last: no `more`)
group_layout = data.StructLayout({"count": COUNT_BITS, "last": 1})
#: what the EMA needs of a DCU job to fetch its matrix whole (`WholeOnReject`)
job_record_layout = data.StructLayout({name: dcu_header_layout.members[name] for name in
                                       ("tag", "layer", "expert", "matrix", "scales", "new_step")})


class CandidateTap(wiring.Component):
    """Each candidate to `engine`, its place in the engine's mask streams to `gate_up_tickets`
    and `down_tickets` (with the beat's DOWN mask), its routing weight and flag to `weights`
    and its flag to `marks`, each taking it in its own cycle (`offer`); with the last candidate
    of a feedback group's part (`part_last`, or the group's `last`) also the part's count to
    `groups` (its DOWN job's, `DownJobs`), with whether the part ends the group."""

    def __init__(self, tokens: int, ffn: int):
        super().__init__({
            "cand": In(stream.Signature(cand_item_layout(tokens, ffn))),
            "engine": Out(stream.Signature(cand_layout(tokens))),
            "gate_up_tickets": Out(stream.Signature(ticket_layout())),
            "down_tickets": Out(stream.Signature(ticket_layout(ffn))),
            "weights": Out(stream.Signature(weight_record_layout)),
            "marks": Out(stream.Signature(mark_layout)),
            "groups": Out(stream.Signature(group_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        item = self.cand.payload
        cand = item.cand
        seen = Signal(COUNT_BITS)         # the part's candidates taken before this one
        closes = item.feedback & (cand.part_last | cand.last)
        m.d.comb += [self.engine.payload.x.eq(cand.x), self.engine.payload.token.eq(cand.token),
                     self.engine.payload.weight.eq(cand.weight),
                     self.engine.payload.last.eq(cand.last),
                     self.down_tickets.payload.mask.eq(cand.down),
                     self.weights.payload.g.eq(cand.weight),
                     self.weights.payload.feedback.eq(item.feedback),
                     self.marks.payload.feedback.eq(item.feedback),
                     self.marks.payload.closes.eq(closes),
                     self.groups.payload.count.eq(seen + 1),
                     self.groups.payload.last.eq(cand.last)]
        for tickets in (self.gate_up_tickets, self.down_tickets):
            m.d.comb += [tickets.payload.feedback.eq(item.feedback),
                         tickets.payload.closes.eq(closes), tickets.payload.last.eq(cand.last)]
        # `groups` takes only a feedback part's last candidate
        m.d.comb += self.cand.ready.eq(offer(m, "tap", self.cand.valid, [
            (self.engine, 1), (self.gate_up_tickets, 1), (self.down_tickets, 1),
            (self.weights, 1), (self.marks, 1), (self.groups, closes)]))
        with m.If(self.cand.valid & self.cand.ready):
            m.d.sync += seen.eq(Mux(closes | cand.last, 0, seen + 1))
        return m


class MaskSource(wiring.Component):
    """Each candidate's mask of one matrix to the engine (`mask`), in the candidates' order
    (`tickets`): a host group's from its ticket (`host_mask`: the ticket's mask; else every
    one of the `channels`, the host's GATE_UP masks being in its inputs), a feedback group's
    from `parts`, the masks the DCU chose for its parts in order, each read by the ticket that
    ends its part (`MaskUnion`). A feedback candidate waits for its part's mask."""

    def __init__(self, channels: int, host_mask: bool):
        self._channels, self._host = channels, host_mask
        super().__init__({
            "tickets": In(stream.Signature(ticket_layout(channels if host_mask else 0))),
            "parts": In(stream.Signature(channels)),
            "mask": Out(stream.Signature(mask_layout(channels))),
        })

    def elaborate(self, platform):
        m = Module()
        t = self.tickets.payload
        host = t.mask if self._host else (1 << self._channels) - 1
        m.d.comb += [self.mask.valid.eq(self.tickets.valid & (~t.feedback | self.parts.valid)),
                     self.mask.payload.mask.eq(Mux(t.feedback, self.parts.payload, host)),
                     self.mask.payload.last.eq(t.last)]
        sent = self.mask.valid & self.mask.ready
        m.d.comb += [self.tickets.ready.eq(sent),
                     self.parts.ready.eq(sent & t.feedback & t.closes)]
        return m


class ScaleTap(wiring.Component):
    """Each hidden scale to `host`, with one `weights` record; when the record's flag is set,
    also a DCU entry (m, e, the routing weight g) to `entries`. The DCU's exponent is 8 bits
    (edgexpert.contracts.dcu): the engine's 16-bit hidden exponent is cut to its low 8, exact
    for the contract's exponents (quantize_vec's hidden scales: 20..40 on the bundled model,
    golden/blocks/dcu.py E_RANGE)."""

    def __init__(self, candidates: int):
        super().__init__({
            "scale": In(stream.Signature(hidden_scale_layout(candidates))),
            "weights": In(stream.Signature(weight_record_layout)),
            "host": Out(stream.Signature(hidden_scale_layout(candidates))),
            "entries": Out(stream.Signature(dcu_entry_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        s, w = self.scale.payload, self.weights.payload
        m.d.comb += [self.host.payload.eq(s), self.entries.payload.m.eq(s.scale.m),
                     self.entries.payload.e.eq(s.scale.e.as_signed()[:E_BITS].as_signed()),
                     self.entries.payload.g.eq(w.g)]
        both = self.scale.valid & self.weights.valid
        ready = offer(m, "scale", both, [(self.host, 1), (self.entries, w.feedback)])
        m.d.comb += [self.scale.ready.eq(both & ready), self.weights.ready.eq(both & ready)]
        return m


class HiddenPacker(wiring.Component):
    """Each hidden value to `host`; with its candidate's `marks` flag set, also into lane
    channel % 32 of a beat register, offered on `beats` once the beat's last lane (or the
    candidate's last channel) is in, `last` with the last value of the candidate that closes its
    part (the DOWN job's data ends there). One `marks` record is read per candidate (with its
    last channel). A value that closes a beat may be taken in the cycle the previous beat is,
    so the packer takes a value every cycle."""

    def __init__(self, candidates: int, ffn: int):
        self._ffn = ffn
        super().__init__({
            "hidden": In(stream.Signature(act_layout(candidates, ffn))),
            "marks": In(stream.Signature(mark_layout)),
            "host": Out(stream.Signature(act_layout(candidates, ffn))),
            "beats": Out(stream.Signature(data_item_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        h = self.hidden.payload
        feedback = self.marks.payload.feedback
        lanes = [Signal(signed(8), name=f"lane{i}") for i in range(LANES)]
        full, last = Signal(), Signal()
        lane = h.channel % LANES
        closes = (lane == LANES - 1) | (h.channel == self._ffn - 1)
        room = ~feedback | ~full | self.beats.ready
        both = self.hidden.valid & self.marks.valid
        take = both & self.host.ready & room
        m.d.comb += [self.host.payload.eq(h), self.host.valid.eq(both & room),
                     self.hidden.ready.eq(take),
                     self.marks.ready.eq(take & (h.channel == self._ffn - 1)),
                     self.beats.valid.eq(full), self.beats.payload.last.eq(last)]
        for i, reg in enumerate(lanes):
            m.d.comb += self.beats.payload.beat.lanes[i].eq(reg)
        packing = take & feedback
        with m.If(self.beats.valid & self.beats.ready):
            m.d.sync += full.eq(0)
        with m.If(packing):
            with m.Switch(lane):
                for i, reg in enumerate(lanes):
                    with m.Case(i):
                        m.d.sync += reg.eq(h.value)
            with m.If(closes):
                m.d.sync += [full.eq(1),
                             last.eq(self.marks.payload.closes & (h.channel == self._ffn - 1))]
        return m


class DownJobs(wiring.Component):
    """The host's route beats to the DCU's `route`, one job after the other in the host's order:
    the header (at the same time its job's matrix to `order`, its descriptor fields to `jobs`
    and its matrix and `more` to `parts`), then the beats up to the host's `last`; for a DOWN job then its group's entries
    from `entries`. A DOWN job's header waits for its part's record on `groups` (the part's
    DCU_CAND beats) and goes to the DCU with the part's count: the entries and hidden values the
    top has for it; its `more` to `parts` is the part's (set unless the part ends its engine
    group). A header whose count differs is reported on `mismatch` (`TopError.DOWN_COUNT`, tag
    ROUTE), else one whose `more` differs (`DOWN_MORE`: a `more` on the group's last job would
    hold its DOWN descriptor in `MaskUnion` for a job that never comes); either runs with the
    part's. `job` pulses with each header taken; `waiting` is high while a DOWN job's next entry
    has not come (its group's hidden scale is not out of the engine yet)."""

    def __init__(self):
        super().__init__({"route": In(stream.Signature(route_item_layout)),
                          "entries": In(stream.Signature(dcu_entry_layout)),
                          "groups": In(stream.Signature(group_layout)),
                          "dcu": Out(stream.Signature(dcu_route_layout)),
                          "order": Out(stream.Signature(order_layout)),
                          "jobs": Out(stream.Signature(job_record_layout)),
                          "parts": Out(stream.Signature(part_record_layout)),
                          "mismatch": Out(reject_signature(TopError, OP_BITS)),
                          "job": Out(1), "waiting": Out(1)})

    def elaborate(self, platform):
        m = Module()
        beat = self.route.payload.beat
        header = beat.header
        matrix = Signal()
        count = Signal.like(header.count)
        k = Signal.like(header.count)
        is_down = header.matrix == Matrix.DOWN
        part = self.groups.payload
        more = Mux(is_down, ~part.last, self.route.payload.more)
        count_differs = header.count != part.count
        m.d.comb += [self.order.payload.matrix.eq(header.matrix),
                     self.parts.payload.matrix.eq(header.matrix),
                     self.parts.payload.more.eq(more),
                     self.mismatch.payload.code.eq(Mux(count_differs, TopError.DOWN_COUNT,
                                                       TopError.DOWN_MORE)),
                     self.mismatch.payload.tag.eq(TopOp.ROUTE)]
        for name in job_record_layout.members:
            m.d.comb += getattr(self.jobs.payload, name).eq(getattr(header, name))

        def next_after(last, down):
            with m.If(last):
                with m.If(down):
                    m.next = "Entries"
                with m.Else():
                    m.next = "Header"

        with m.FSM(name="jobs"):
            with m.State("Header"):
                # a DOWN job's count is its group's: the header waits for the group's record
                go = self.route.valid & (~is_down | self.groups.valid)
                take = go & offer(m, "header", go, [(self.dcu, 1), (self.order, 1),
                                                     (self.jobs, 1), (self.parts, 1)])
                sent = Mux(is_down, part.count, header.count)
                m.d.comb += [self.dcu.payload.eq(beat), self.dcu.payload.header.count.eq(sent),
                             self.route.ready.eq(take), self.groups.ready.eq(take & is_down)]
                with m.If(take):
                    m.d.comb += [self.job.eq(1),
                                 self.mismatch.valid.eq(is_down & (
                                     count_differs | (self.route.payload.more != more)))]
                    m.d.sync += [matrix.eq(header.matrix), count.eq(sent), k.eq(0)]
                    m.next = "Body"
                    next_after(self.route.payload.last, is_down)
            with m.State("Body"):
                m.d.comb += [self.dcu.payload.eq(beat), self.dcu.valid.eq(self.route.valid),
                             self.route.ready.eq(self.dcu.ready)]
                with m.If(self.route.valid & self.route.ready):
                    next_after(self.route.payload.last, matrix == Matrix.DOWN)
            with m.State("Entries"):
                m.d.comb += [self.dcu.payload.entry.eq(self.entries.payload),
                             self.dcu.valid.eq(self.entries.valid),
                             self.entries.ready.eq(self.dcu.ready),
                             self.waiting.eq(~self.entries.valid)]
                with m.If(self.entries.valid & self.entries.ready):
                    m.d.sync += k.eq(k + 1)
                    with m.If(k == count - 1):
                        m.next = "Header"
        return m


class DataMux(wiring.Component):
    """The DCU's `data`: for each job in `order`, the beats of its source up to the one marked
    `last` (GATE_UP: `host`, the host's DATA beats; DOWN: `hidden`, the packed hidden values).
    `waiting` is high while a DOWN job's data is due and its next beat has not come."""

    def __init__(self):
        super().__init__({"order": In(stream.Signature(order_layout)),
                          "host": In(stream.Signature(data_item_layout)),
                          "hidden": In(stream.Signature(data_item_layout)),
                          "dcu": Out(stream.Signature(dcu_data_layout)),
                          "waiting": Out(1)})

    def elaborate(self, platform):
        m = Module()
        down = self.order.payload.matrix == Matrix.DOWN
        for source, mine in ((self.host, ~down), (self.hidden, down)):
            with m.If(self.order.valid & mine):
                m.d.comb += [self.dcu.payload.eq(source.payload.beat),
                             self.dcu.valid.eq(source.valid),
                             source.ready.eq(self.dcu.ready),
                             self.order.ready.eq(source.valid & self.dcu.ready
                                                 & source.payload.last)]
        m.d.comb += self.waiting.eq(self.order.valid & down & ~self.hidden.valid)
        return m


class WholeOnReject(wiring.Component):
    """The DCU's commands (`dcu`) to the EMA (`cmd`), and for each job the DCU rejects the job's
    matrix whole in the commands' place: its NEW_STEP when the header asked for one, its
    DESCRIPTOR (tag, layer, expert, matrix, scales from the header) and ceil(C / 32) MASK words
    selecting every one of its C channels (docs/blocks/top.md, "A rejected DCU job").

    `jobs`: each job's descriptor fields, in the order the jobs enter the DCU, each there before
    the DCU answers its job (the top queues it as the job's header enters the DCU); one is read
    per job, as the DCU's DESCRIPTOR leaves or with the substitute's last MASK word.
    `rejected`: the DCU's rejections (one cycle each, nothing to acknowledge). The DCU answers
    its jobs in order, a rejection only after the commands of every job before it have been
    taken, so the oldest unanswered record is the rejected job's; the DCU's next commands wait
    while a substitute is owed (a DCU word already offered is passed first: the stream rule).
    Up to `pending` rejections may be owed at once (the jobs in the DCU)."""

    def __init__(self, gate_up_channels: int, down_channels: int, pending: int):
        self._channels = (gate_up_channels, down_channels)
        self._pending = pending
        super().__init__({"dcu": In(stream.Signature(ema_command_layout)),
                          "jobs": In(stream.Signature(job_record_layout)),
                          "rejected": In(reject_signature(DcuError, TAG_BITS)),
                          "cmd": Out(stream.Signature(ema_command_layout))})

    def elaborate(self, platform):
        m = Module()
        job = self.jobs.payload
        owed = Signal(range(self._pending + 1))
        done = Signal()
        m.d.sync += owed.eq(owed + self.rejected.valid - done)
        words = [-(-c // LANES) for c in self._channels]
        word = Signal(range(max(words)))
        last_word = Mux(job.matrix == Matrix.DOWN, words[1] - 1, words[0] - 1)
        # every channel: all ones, the last word only up to the matrix's last channel (a bit
        # past it is the EMA's BAD_DESCRIPTOR)
        tails = [(1 << (c % LANES or LANES)) - 1 for c in self._channels]
        tail = Mux(job.matrix == Matrix.DOWN, tails[1], tails[0])
        handshake = self.cmd.valid & self.cmd.ready
        # a DCU word offered and not taken stays offered (the stream rule), owed or not
        offered = Signal()
        with m.FSM(name="substitute"):
            with m.State("Pass"):
                m.d.sync += offered.eq(self.cmd.valid & ~self.cmd.ready)
                with m.If((owed == 0) | offered):
                    m.d.comb += [self.cmd.payload.eq(self.dcu.payload),
                                 self.cmd.valid.eq(self.dcu.valid),
                                 self.dcu.ready.eq(self.cmd.ready),
                                 self.jobs.ready.eq(handshake & (self.dcu.payload.op
                                                                 == EmaOp.DESCRIPTOR))]
                with m.Elif(self.jobs.valid):
                    m.next = "New-Step"
            with m.State("New-Step"):
                m.d.sync += offered.eq(0)
                m.d.comb += [self.cmd.valid.eq(job.new_step),
                             self.cmd.payload.op.eq(EmaOp.NEW_STEP)]
                with m.If(handshake | ~job.new_step):
                    m.next = "Descriptor"
            with m.State("Descriptor"):
                d = self.cmd.payload.arg.descriptor
                m.d.comb += [self.cmd.valid.eq(1), self.cmd.payload.op.eq(EmaOp.DESCRIPTOR),
                             d.tag.eq(job.tag), d.layer.eq(job.layer), d.expert.eq(job.expert),
                             d.matrix.eq(job.matrix), d.scales.eq(job.scales)]
                with m.If(handshake):
                    m.d.sync += word.eq(0)
                    m.next = "Mask"
            with m.State("Mask"):
                m.d.comb += [self.cmd.valid.eq(1), self.cmd.payload.op.eq(EmaOp.MASK),
                             self.cmd.payload.arg.mask.eq(Mux(word == last_word, tail,
                                                              (1 << LANES) - 1))]
                with m.If(handshake):
                    m.d.sync += word.eq(word + 1)
                    with m.If(word == last_word):
                        m.d.comb += [self.jobs.ready.eq(1), done.eq(1)]
                        m.next = "Pass"
        return m


class MaskUnion(wiring.Component):
    """The DCU's EMA commands (`dcu`: per job an optional NEW_STEP, its DESCRIPTOR and its MASK
    words) to `cmd` with the parts of an engine group merged, and each job's mask to the
    engine's side (`gate_up`, `down`: the job's channels, in the jobs' order).

    `parts` has a record per job, in the order the DCU answers them (`DownJobs` queues it as
    the job's header enters the DCU): a job with `more` is a part whose group's next part's job
    of the same matrix follows. Its DESCRIPTOR is dropped and its MASK words are ORed into the
    matrix's union; the next job without `more` goes out with its own DESCRIPTOR and its MASK
    words ORed with the union, which it clears: the group's one descriptor selects the union of
    its parts' channels, and the feeder walks the expert once (docs/blocks/top.md, "The DCU
    path"). A NEW_STEP goes out as it comes. After a job's last MASK word its whole mask is
    offered to its matrix's output (a register: the next job's words wait for it)."""

    def __init__(self, gate_up_channels: int, down_channels: int):
        self._channels = (gate_up_channels, down_channels)
        super().__init__({"dcu": In(stream.Signature(ema_command_layout)),
                          "parts": In(stream.Signature(part_record_layout)),
                          "cmd": Out(stream.Signature(ema_command_layout)),
                          "gate_up": Out(stream.Signature(gate_up_channels)),
                          "down": Out(stream.Signature(down_channels))})

    def elaborate(self, platform):
        m = Module()
        words = [-(-c // LANES) for c in self._channels]
        unions = [[Signal(LANES, name=f"union_{k}_{i}") for i in range(n)]
                  for k, n in enumerate(words)]
        part = [Signal(LANES, name=f"part_{i}") for i in range(max(words))]
        word = Signal(range(max(words)))
        job = self.parts.payload
        item = self.dcu.payload
        down = job.matrix == Matrix.DOWN
        last_word = Mux(down, words[1] - 1, words[0] - 1)
        union_word = Signal(LANES)
        with m.Switch(Cat(word, down)):
            for k, n in enumerate(words):
                for i in range(n):
                    with m.Case(i | k << len(word)):
                        m.d.comb += union_word.eq(unions[k][i])
        merged = item.arg.mask | union_word
        # what goes out: a NEW_STEP, the last part's DESCRIPTOR and its merged MASK words
        passed = ~job.more | ((item.op != EmaOp.DESCRIPTOR) & (item.op != EmaOp.MASK))
        with m.FSM(name="union"):
            with m.State("Words"):
                ready = self.parts.valid & (~passed | self.cmd.ready)
                m.d.comb += [self.cmd.valid.eq(self.dcu.valid & self.parts.valid & passed),
                             self.cmd.payload.eq(item),
                             self.dcu.ready.eq(ready)]
                with m.If(item.op == EmaOp.MASK):
                    m.d.comb += self.cmd.payload.arg.mask.eq(merged)
                with m.If(self.dcu.valid & ready):
                    with m.If(item.op == EmaOp.DESCRIPTOR):
                        m.d.sync += word.eq(0)
                    with m.If(item.op == EmaOp.MASK):
                        m.d.sync += word.eq(word + 1)
                        for i, reg in enumerate(part):
                            with m.If(word == i):
                                m.d.sync += reg.eq(item.arg.mask)
                        for k, n in enumerate(words):
                            for i in range(n):
                                with m.If((word == i) & (down == k)):
                                    m.d.sync += unions[k][i].eq(Mux(job.more, merged, 0))
                        with m.If(word == last_word):
                            m.next = "Part"
            with m.State("Part"):
                for k, port in enumerate((self.gate_up, self.down)):
                    m.d.comb += [port.valid.eq(down == k),
                                 port.payload.eq(Cat(*part)[:self._channels[k]])]
                done = Mux(down, self.down.ready, self.gate_up.ready)
                m.d.comb += self.parts.ready.eq(done)
                with m.If(done):
                    m.next = "Words"
        return m
