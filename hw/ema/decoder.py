"""Stage 1: the command decoder. Descriptors and their mask words in; the items of each
descriptor out: its scale block, every run of neighbouring channels to fetch, and a marker."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import WritePort
from amaranth.lib.wiring import In, Out

from ...contracts.ema import (MASK_BITS, TAG_BITS, EmaError, EmaOp, EmaStatus,
                              ema_command_layout, ema_descriptor_layout)
from ...contracts.weight_layout import Matrix
from .geometry import EmaGeometry
from ..streams import ReadSignature, field_registers
from .ports import ErrorSignature
from .slots import RunFinder, SlotTable

__all__ = ["ItemKind", "item_layout", "Decoder"]


class ItemKind(enum.Enum, shape=2):
    RUN = 0         # neighbouring columns: channels first .. first + count - 1
    SCALE = 1       # the matrix's scale block (base is its address)
    MARKER = 2      # the descriptor's end: its completion follows its reads


def item_layout(g: EmaGeometry, addr_width: int) -> data.StructLayout:
    """One item for the allocator: what to read (`base` is the address of column 0, or of the
    scale block), for which slot and descriptor, and the descriptor's status as the decoder
    knows it: FAILED (it failed a check here), ABORTED (the engine had stopped before its
    lookup: it fetches nothing), else OK."""
    return data.StructLayout({
        "kind": ItemKind, "first": g.channel_bits, "count": g.channel_bits, "base": addr_width,
        "slot": g.slot_bits, "matrix": 1, "tag": TAG_BITS, "status": EmaStatus,
    })


class Decoder(wiring.Component):
    """Takes one command beat per cycle in Idle and Mask, and per descriptor: looks its matrix
    up in the slot table (1 cycle), computes its addresses (1 cycle), offers its scale block
    (0-1 cycle), then per mask word reads the slot's residency word (1 cycle), drops the resident
    channels and writes the word back (1 cycle), and offers one run per cycle; a run that reaches
    the word's top stays open for the next word. The marker follows the last run.

    `items` is a register: valid and payload hold until `ready`. `stopped` (an error is latched)
    at a descriptor's lookup makes it fetch nothing and complete ABORTED. A descriptor past its
    lookup can meet a stop only by a bus error (a command error stops the engine before the next
    lookup); if it then fails a mask check, the beat writer still completes it ABORTED and
    STATUS keeps the bus error. Its own errors leave through `error`.
    `new_step` is high while a NEW_STEP is taken; `skipped` counts de-duplicated channels.
    """
    def __init__(self, geometry: EmaGeometry, addr_width: int):
        self._g = geometry
        self._addr_width = addr_width
        super().__init__({
            "cmd": In(stream.Signature(ema_command_layout)),
            "items": Out(stream.Signature(item_layout(geometry, addr_width))),
            "res_rd": Out(ReadSignature(geometry.res_addr_bits, MASK_BITS)),
            "res_wr": In(WritePort.Signature(addr_width=geometry.res_addr_bits, shape=MASK_BITS)),
            "stopped": In(1),
            "error": Out(ErrorSignature),
            "new_step": Out(1),
            "skipped": Out(range(MASK_BITS + 1)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        s = _Decode(self, m)
        with m.FSM(name="decoder") as fsm:
            s.descriptor_states()
            s.mask_states()
            s.run_states()
        m.d.comb += self.busy.eq(~fsm.ongoing("Idle") | self.items.valid)
        return m


class _Decode:
    """The decoder's registers and its FSM's states, in three groups (`Decoder.elaborate`)."""

    def __init__(self, c: Decoder, m: Module):
        g, lay = c._g, c._g.layout
        self.c, self.m, self.g = c, m, g
        self.slots = m.submodules.slots = SlotTable(g)
        self.runs = m.submodules.runs = RunFinder()
        # Datapath registers are loaded before they are used, so none has a reset: on a few
        # thousand flip-flops a reset costs a gate each and a net with thousands of loads.
        self.desc = field_registers(ema_descriptor_layout, "desc")
        self.failed = Signal(reset_less=True)   # this descriptor is bad: take masks, fetch nothing
        self.skip = Signal(reset_less=True)     # fetch nothing: bad (failed), or stopped (aborted)
        self.hit = Signal(reset_less=True)      # its slot already existed in this step
        self.slot = Signal(g.slot_bits, reset_less=True)
        self.index = Signal(range(lay.n_layers * lay.experts_per_layer), reset_less=True)
        self.block = Signal(c._addr_width, reset_less=True)     # the matrix block (scale block)
        self.columns = Signal(c._addr_width, reset_less=True)   # column 0
        self.k = Signal(g.mask_word_bits, reset_less=True)      # mask word being processed
        self.mask_word = Signal(MASK_BITS, reset_less=True)
        self.w = Signal(MASK_BITS, reset_less=True)     # selected, not resident channels left
        self.word_start = Signal(reset_less=True)       # first cycle on word k: a run may go on
        self.open_valid = Signal()      # a run that reached the top of the previous word
        self.open_first = Signal(g.channel_bits, reset_less=True)
        self.open_count = Signal(g.channel_bits, reset_less=True)
        self._item_register()
        self._word_signals()

    def _item_register(self):
        m, c = self.m, self.c
        item = field_registers(c.items.payload.shape(), "item")
        valid = Signal()
        self.emit_item = Signal(c.items.payload.shape())    # what `emit` offers this cycle
        self.emitting = Signal()
        m.d.comb += [self.emit_item.slot.eq(self.slot), self.emit_item.matrix.eq(self.desc.matrix),
                     self.emit_item.tag.eq(self.desc.tag),
                     self.emit_item.status.eq(Mux(self.failed, EmaStatus.FAILED,
                                                  Mux(self.skip, EmaStatus.ABORTED,
                                                      EmaStatus.OK))),
                     c.items.valid.eq(valid), c.items.payload.eq(item)]
        with m.If(self.emitting):
            m.d.sync += [valid.eq(1), item.eq(self.emit_item)]
        with m.Elif(c.items.ready):
            m.d.sync += valid.eq(0)
        self.free = ~valid | c.items.ready

    def _word_signals(self):
        m, c, g = self.m, self.c, self.g
        mx = self.desc.matrix
        self.word_base = Cat(Const(0, (MASK_BITS - 1).bit_length()), self.k)
        self.last_word = self.k == Mux(mx, g.mask_words(Matrix.DOWN) - 1,
                                       g.mask_words(Matrix.GATE_UP) - 1)
        # mask bits past the matrix's last input channel are a bad descriptor
        tail_bits = Signal(MASK_BITS)
        for matrix in Matrix:
            valid_bits = g.layout.in_channels(matrix) - (g.mask_words(matrix) - 1) * MASK_BITS
            with m.If(mx == int(matrix)):
                m.d.comb += tail_bits.eq(Const(((1 << MASK_BITS) - 1) ^ ((1 << valid_bits) - 1),
                                               MASK_BITS))
        self.mask_in = c.cmd.payload.arg.mask
        self.mask_bad = self.last_word & (self.mask_in & tail_bits).any()
        # residency word of (slot, k)
        res_word_bits = (g.res_words_per_slot - 1).bit_length()
        self.res_addr = Cat(self.k[:res_word_bits], self.slot) if res_word_bits else self.slot
        self.resident = Signal(MASK_BITS)
        m.d.comb += [c.res_rd.addr.eq(self.res_addr),
                     self.resident.eq(Mux(self.hit, c.res_rd.data, 0)),
                     self.slots.key.layer.eq(self.desc.layer),
                     self.slots.key.expert.eq(self.desc.expert),
                     self.slots.key.matrix.eq(self.desc.matrix),
                     self.slots.scale_slot.eq(self.slot),
                     self.runs.word.eq(self.w)]

    def emit(self, kind, first=0, count=0, base=0):
        self.m.d.comb += [self.emitting.eq(1), self.emit_item.kind.eq(kind),
                          self.emit_item.first.eq(first), self.emit_item.count.eq(count),
                          self.emit_item.base.eq(base)]

    def fail(self, code):
        e = self.c.error
        self.m.d.comb += [e.valid.eq(1), e.payload.code.eq(code), e.payload.tag.eq(self.desc.tag)]

    def descriptor_states(self):
        """Idle (take a descriptor or NEW_STEP), Lookup, Address, Scales."""
        m, c, lay = self.m, self.c, self.g.layout
        cmd = c.cmd.payload
        with m.State("Idle"):
            m.d.comb += c.cmd.ready.eq(1)
            with m.If(c.cmd.valid):
                with m.Switch(cmd.op):
                    with m.Case(EmaOp.DESCRIPTOR):
                        m.d.sync += [self.desc.eq(cmd.arg.descriptor), self.failed.eq(0),
                                     self.skip.eq(0), self.k.eq(0), self.open_valid.eq(0)]
                        m.next = "Lookup"
                    with m.Case(EmaOp.NEW_STEP):
                        m.d.comb += [self.slots.clear.eq(1), c.new_step.eq(1)]
                    with m.Default():
                        self.fail(EmaError.BAD_COMMAND)
        with m.State("Lookup"):
            in_range = ((self.desc.layer < lay.n_layers)
                        & (self.desc.expert < lay.experts_per_layer))
            m.d.sync += self.index.eq(self.desc.layer * lay.experts_per_layer + self.desc.expert)
            with m.If(c.stopped):
                # stopped: this descriptor completes as ABORTED without touching the tables
                m.d.sync += self.skip.eq(1)
            with m.Elif(~in_range):
                self.fail(EmaError.BAD_DESCRIPTOR)
                m.d.sync += [self.failed.eq(1), self.skip.eq(1)]
            with m.Elif(self.slots.hit):
                m.d.sync += [self.hit.eq(1), self.slot.eq(self.slots.hit_slot)]
            with m.Elif(self.slots.full):
                self.fail(EmaError.SLOTS_FULL)
                m.d.sync += [self.failed.eq(1), self.skip.eq(1)]
            with m.Else():
                m.d.comb += self.slots.take.eq(1)
                m.d.sync += [self.hit.eq(0), self.slot.eq(self.slots.free_slot)]
            m.next = "Address"
        with m.State("Address"):
            # constant multipliers: the expert's index times the bytes of one expert
            product = self.index * lay.expert_bytes
            mx = self.desc.matrix
            m.d.sync += [
                self.block.eq(product + Mux(mx, lay.block_address(0, 0, Matrix.DOWN),
                                            lay.block_address(0, 0, Matrix.GATE_UP))),
                self.columns.eq(product + Mux(mx, lay.columns_address(0, 0, Matrix.DOWN),
                                              lay.columns_address(0, 0, Matrix.GATE_UP))),
            ]
            m.next = "Scales"
        with m.State("Scales"):
            want = self.desc.scales & ~self.skip & ~self.slots.scales
            with m.If(~want):
                m.next = "Mask"
            with m.Elif(self.free):
                self.emit(ItemKind.SCALE, base=self.block)
                m.d.comb += self.slots.set_scales.eq(1)
                m.next = "Mask"

    def mask_states(self):
        """Mask (take a mask word, check it, read its residency word), Resolve."""
        m, c = self.m, self.c
        with m.State("Mask"):
            m.d.comb += c.cmd.ready.eq(1)
            with m.If(c.cmd.valid):
                with m.If(c.cmd.payload.op != EmaOp.MASK):
                    # the descriptor is cut short: it fails, the engine stops
                    with m.If(~c.stopped):
                        self.fail(EmaError.BAD_COMMAND)
                        m.d.sync += self.failed.eq(1)
                    m.next = "Marker"
                with m.Else():
                    m.d.sync += self.mask_word.eq(self.mask_in)
                    with m.If(self.mask_bad & ~self.skip):
                        self.fail(EmaError.BAD_DESCRIPTOR)
                        m.d.sync += [self.failed.eq(1), self.skip.eq(1)]
                    with m.If(self.skip | self.mask_bad):
                        with m.If(self.last_word):
                            m.next = "Marker"
                        with m.Else():
                            m.d.sync += self.k.eq(self.k + 1)
                    with m.Else():
                        m.next = "Resolve"
        with m.State("Resolve"):
            # the residency word read on the mask's arrival is here now
            resident, word = self.resident, self.mask_word
            m.d.comb += [c.res_wr.addr.eq(self.res_addr), c.res_wr.en.eq(1),
                         c.res_wr.data.eq(resident | word),
                         c.skipped.eq(sum((word & resident)[i] for i in range(MASK_BITS)))]
            m.d.sync += [self.w.eq(word & ~resident), self.word_start.eq(1)]
            m.next = "Runs"

    def run_states(self):
        """Runs (one run per cycle), Flush (the open run after the last word), Marker."""
        m, runs = self.m, self.runs
        first, count = self.open_first, self.open_count
        with m.State("Runs"):
            word_done = Signal()
            with m.If(self.open_valid & self.word_start & self.w[0]):
                # the open run continues from the previous word
                with m.If(runs.end == MASK_BITS):
                    m.d.sync += count.eq(count + MASK_BITS)
                    m.d.comb += word_done.eq(1)
                with m.Elif(self.free):
                    self.emit(ItemKind.RUN, first, count + runs.end, self.columns)
                    m.d.sync += [self.open_valid.eq(0), self.w.eq(runs.rest),
                                 self.word_start.eq(0)]
            with m.Elif(self.open_valid):
                with m.If(self.free):
                    self.emit(ItemKind.RUN, first, count, self.columns)
                    m.d.sync += [self.open_valid.eq(0), self.word_start.eq(0)]
            with m.Elif(self.w == 0):
                m.d.comb += word_done.eq(1)
            with m.Elif(runs.end == MASK_BITS):
                m.d.sync += [self.open_valid.eq(1), first.eq(self.word_base + runs.first),
                             count.eq(MASK_BITS - runs.first)]
                m.d.comb += word_done.eq(1)
            with m.Elif(self.free):
                self.emit(ItemKind.RUN, self.word_base + runs.first, runs.end - runs.first,
                          self.columns)
                m.d.sync += [self.w.eq(runs.rest), self.word_start.eq(0)]
            with m.If(word_done):
                with m.If(self.last_word):
                    m.next = "Flush"
                with m.Else():
                    m.d.sync += self.k.eq(self.k + 1)
                    m.next = "Mask"
        with m.State("Flush"):
            with m.If(~self.open_valid):
                m.next = "Marker"
            with m.Elif(self.free):
                self.emit(ItemKind.RUN, first, count, self.columns)
                m.d.sync += self.open_valid.eq(0)
                m.next = "Marker"
        with m.State("Marker"):
            with m.If(self.free):
                self.emit(ItemKind.MARKER)
                m.next = "Idle"
