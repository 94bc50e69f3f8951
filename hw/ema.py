"""EMA (external-memory access) controller: channel-masked expert weights from AXI4 into the
on-chip weight buffer.

A descriptor names one matrix of one expert and carries its input-channel mask (docs/blocks/ema.md,
`hw/layouts.py`). The controller

1. looks the matrix up in the slot table of the current step (a hit means some of its channels are
   already resident), drops the resident channels from the mask (de-duplication) and marks the rest
   resident;
2. turns every run of neighbouring selected channels into one read at the address
   `edgexpert.contracts.weight_layout.WeightLayout` gives (the scale block, when asked for, is one more read);
3. allocates buffer lines for each read (bump allocation from line 0 of the step) and records where
   every channel's column starts in the location table;
4. splits each read into AXI4 INCR bursts that never cross a 4 KB boundary nor exceed 256 beats, and
   issues them with up to `outstanding` bursts in flight, one AR per cycle;
5. writes every R beat into the buffer line reserved for it, and after a descriptor's last beat
   delivers its completion.

Contract:
- completions come in command order, one per descriptor, with a status (`EmaStatus`);
- AR issue never waits for R data: only the outstanding limit and the memory's `arready` hold it;
- `rready` is high whenever a burst's beats are due, except on the one cycle per descriptor that its
  completion leaves, and while a completion waits for the consumer;
- SLVERR / DECERR on any beat, a bad descriptor, a full slot table or a full buffer latch the first
  error (code and descriptor tag) in STATUS; the engine stops issuing, drains every burst already
  issued (beats after the error are dropped, never written), keeps consuming commands so the host
  never blocks, and completes each remaining descriptor as FAILED or ABORTED. A reset clears it all.
- the buffer, location table and residency words are memories outside this component (ports
  `buf_wr`, `loc_wr`, `res_rd`, `res_wr`), so synthesis of the controller counts logic only;
  `EmaSystem` puts them together.

The memory map is elaborated from a `WeightLayout`: the address arithmetic uses only constant
multipliers (by the expert size and the column strides).
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ..contracts.weight_layout import ALIGN, Matrix, WeightLayout
from .axi import AXI_BURST_INCR, axi4_read_signature, axi4_signature
from ..contracts.ema import (CSR_ADDR_BITS, CSR_DATA_BITS, EXPERT_BITS, LAYER_BITS, MASK_BITS,
                      TAG_BITS, EmaCsr, EmaError, EmaOp, EmaStatus, ema_command_layout,
                      ema_completion_layout, ema_status_layout)

__all__ = ["DATA_WIDTHS", "AXI_ID_WIDTH", "COUNTER_BITS", "EmaGeometry", "EmaController",
           "EmaSystem"]

DATA_WIDTHS = (64, 128, 256)
AXI_ID_WIDTH = 4
COUNTER_BITS = 48
#: the 4 KB rule: an AXI burst may not cross a 4 KB address boundary
PAGE_BYTES = 4096
MAX_BURST_BEATS = 256


def _bits(n: int) -> int:
    """Bits that hold 0..n."""
    return max(1, int(n).bit_length())


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class EmaGeometry:
    """Every number the controller, its memories and its models derive from the parameters."""
    layout: WeightLayout
    data_width: int
    buffer_bytes: int
    slots: int

    @property
    def beat_bytes(self) -> int:
        return self.data_width // 8

    @property
    def lines(self) -> int:
        return self.buffer_bytes // self.beat_bytes

    @property
    def line_bits(self) -> int:
        return (self.lines - 1).bit_length() or 1

    @property
    def max_in_channels(self) -> int:
        return max(self.layout.in_channels(m) for m in Matrix)

    @property
    def chan_stride(self) -> int:
        """Location-table entries per slot: every input channel plus the scale block's entry."""
        return _pow2_at_least(self.max_in_channels + 1)

    @property
    def scale_entry(self) -> int:
        """Location-table index (within a slot) of the scale block: the last entry."""
        return self.chan_stride - 1

    @property
    def res_words_per_slot(self) -> int:
        return max(1, self.chan_stride // MASK_BITS)

    def mask_words(self, matrix: Matrix) -> int:
        return -(-self.layout.in_channels(matrix) // MASK_BITS)

    def stride_beats(self, matrix: Matrix) -> int:
        return self.layout.column_stride(matrix) // self.beat_bytes

    def column_beats(self, matrix: Matrix) -> int:
        return -(-self.layout.column_bytes(matrix) // self.beat_bytes)

    def scale_beats(self, matrix: Matrix) -> int:
        return -(-self.layout.scale_bytes(matrix) // ALIGN) * ALIGN // self.beat_bytes

    def run_beats(self, matrix: Matrix, count: int) -> int:
        """Beats of one read of `count` neighbouring columns (padding between them included)."""
        return (count - 1) * self.stride_beats(matrix) + self.column_beats(matrix)

    @property
    def max_read_beats(self) -> int:
        return max(max(self.run_beats(m, self.layout.in_channels(m)), self.scale_beats(m))
                   for m in Matrix)


def _check_int(name: str, value, lo: int, hi: int):
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


def _lowest_one(value):
    """The lowest set bit of `value`, alone (one-hot), or 0."""
    return value & (-value)[:len(value)]


def _encode(m: Module, onehot) -> Signal:
    """Index of the bit set in `onehot` (an OR tree per index bit: log depth, not a mux chain)."""
    out = Signal(_bits(len(onehot) - 1))
    for b in range(len(out)):
        m.d.comb += out[b].eq(Cat(onehot[i] for i in range(len(onehot)) if (i >> b) & 1).any())
    return out


class EmaController(wiring.Component):
    """Descriptor stream in, AXI4 read master out, weight-buffer writes, completions out.

    Parameters
    ----------
    layout : WeightLayout
        The external-memory map of the expert weights (fixes every address).
    data_width : int
        AXI data width in bits: 64, 128 or 256.
    addr_width : int
        AXI address width, 16..64; must reach the end of the weights.
    outstanding : int
        AXI read bursts in flight at once, 1..64.
    buffer_bytes : int
        Weight-buffer size in bytes: a power of two, 1 KiB..1 MiB.
    slots : int
        Slot-table entries (distinct layer/expert/matrix per step), 1..128.

    Ports
    -----
    cmd : In(stream.Signature(ema_command_layout))
    done : Out(stream.Signature(ema_completion_layout))
    m_axi : Out(axi4_read_signature(addr_width, data_width, 4))
    buf_wr : line address, data, enable of the weight buffer (one line = one beat)
    loc_wr : entry address (slot * chan_stride + channel), buffer line, enable
    res_rd, res_wr : residency words (slot * res_words_per_slot + word), 1-cycle read latency
    csr : register read port (`EmaCsr` address in, 64-bit data out one cycle later)
    """

    def __init__(self, layout: WeightLayout, *, data_width: int = 256, addr_width: int = 32,
                 outstanding: int = 16, buffer_bytes: int = 65536, slots: int = 32):
        if not isinstance(layout, WeightLayout):
            raise TypeError(f"layout must be a WeightLayout, not {layout!r}")
        if data_width not in DATA_WIDTHS:
            raise ValueError(f"data_width must be one of 64, 128, 256, not {data_width!r}")
        _check_int("addr_width", addr_width, 16, 64)
        _check_int("outstanding", outstanding, 1, 64)
        _check_int("slots", slots, 1, 128)
        if buffer_bytes not in tuple(2**n for n in range(10, 21)):
            raise ValueError(f"buffer_bytes must be a power of two in 1024..1048576, "
                             f"not {buffer_bytes!r}")
        end = layout.base_address + layout.total_bytes
        if end > 2**addr_width:
            raise ValueError(f"addr_width {addr_width} does not reach the end of the weights "
                             f"({end:#x}): accepted {max(16, (end - 1).bit_length())}..64")
        if layout.n_layers > 2**LAYER_BITS or layout.experts_per_layer > 2**EXPERT_BITS:
            raise ValueError(f"the descriptor holds at most {2**LAYER_BITS} layers and "
                             f"{2**EXPERT_BITS} experts, not {layout.n_layers} and "
                             f"{layout.experts_per_layer}")
        self._geometry = EmaGeometry(layout, data_width, buffer_bytes, slots)
        self._addr_width = addr_width
        self._outstanding = outstanding
        g = self._geometry
        line_bits = g.line_bits
        super().__init__({
            "cmd": In(_stream(ema_command_layout)),
            "done": Out(_stream(ema_completion_layout)),
            "m_axi": Out(axi4_read_signature(addr_width, data_width, AXI_ID_WIDTH)),
            "buf_wr": Out(_write_signature(line_bits, data_width)),
            "loc_wr": Out(_write_signature(self.loc_addr_bits, line_bits)),
            "res_rd": Out(_read_signature(self.res_addr_bits, MASK_BITS)),
            "res_wr": Out(_write_signature(self.res_addr_bits, MASK_BITS)),
            "csr": In(_read_signature(CSR_ADDR_BITS, CSR_DATA_BITS)),
        })

    # --- parameters, read-only -------------------------------------------------------------
    @property
    def geometry(self) -> EmaGeometry:
        return self._geometry

    @property
    def layout(self) -> WeightLayout:
        return self._geometry.layout

    @property
    def data_width(self) -> int:
        return self._geometry.data_width

    @property
    def addr_width(self) -> int:
        return self._addr_width

    @property
    def outstanding(self) -> int:
        return self._outstanding

    @property
    def buffer_bytes(self) -> int:
        return self._geometry.buffer_bytes

    @property
    def slots(self) -> int:
        return self._geometry.slots

    @property
    def loc_addr_bits(self) -> int:
        return (self.slots * self._geometry.chan_stride - 1).bit_length() or 1

    @property
    def res_addr_bits(self) -> int:
        return (self.slots * self._geometry.res_words_per_slot - 1).bit_length() or 1

    def elaborate(self, platform):
        m = Module()
        g = self._geometry
        lay = g.layout
        B = g.beat_bytes
        aw = self._addr_width
        ch_bits = _bits(g.max_in_channels)
        beat_bits = _bits(g.max_read_beats)
        line_bits = g.line_bits
        slot_bits = _bits(self.slots - 1)
        word_bits = _bits(max(g.mask_words(mx) for mx in Matrix))
        axi = self.m_axi

        # --- error status: the first error wins; R errors are the oldest, then the emit stage's,
        # then the command decoder's
        err = Signal()
        err_code = Signal(EmaError)
        err_tag = Signal(TAG_BITS)
        r_err_set = Signal()
        r_err_code = Signal(EmaError)
        r_err_tag = Signal(TAG_BITS)
        e_err_set = Signal()
        e_err_tag = Signal(TAG_BITS)
        f_err_set = Signal()
        f_err_code = Signal(EmaError)
        f_err_tag = Signal(TAG_BITS)
        with m.If(~err):
            with m.If(r_err_set):
                m.d.sync += [err.eq(1), err_code.eq(r_err_code), err_tag.eq(r_err_tag)]
            with m.Elif(e_err_set):
                m.d.sync += [err.eq(1), err_code.eq(EmaError.BUFFER_FULL), err_tag.eq(e_err_tag)]
            with m.Elif(f_err_set):
                m.d.sync += [err.eq(1), err_code.eq(f_err_code), err_tag.eq(f_err_tag)]
        # beats after a bus error are dropped; bursts not yet issued are not issued
        r_err = Signal()

        # ================= stage 1: command decoder, slot table, residency, runs =============
        cmd = self.cmd.payload
        # Datapath registers (descriptor, runs, queue payloads) are loaded before they are used,
        # so none has a reset: on a few thousand flip-flops a reset costs a gate each and a net
        # with thousands of loads.
        d_tag = Signal(TAG_BITS, reset_less=True)
        d_layer = Signal(LAYER_BITS, reset_less=True)
        d_expert = Signal(EXPERT_BITS, reset_less=True)
        d_matrix = Signal(reset_less=True)
        d_scales = Signal(reset_less=True)
        d_fail = Signal(reset_less=True)    # this descriptor is bad: consume masks, fetch nothing
        d_skip = Signal(reset_less=True)    # fetch nothing: bad, or an earlier error stopped us
        d_hit = Signal(reset_less=True)     # its slot already existed in this step
        d_slot = Signal(slot_bits, reset_less=True)
        d_index = Signal(range(lay.n_layers * lay.experts_per_layer), reset_less=True)
        d_block = Signal(aw, reset_less=True)      # address of the matrix block (its scale block)
        d_columns = Signal(aw, reset_less=True)    # address of column 0
        k = Signal(word_bits, reset_less=True)     # mask word being processed
        mask_word = Signal(MASK_BITS, reset_less=True)
        w = Signal(MASK_BITS, reset_less=True)     # selected, not resident channels left in word k
        word_start = Signal(reset_less=True)       # first cycle on word k: an open run may go on
        open_valid = Signal()       # a run that reached the top of the previous word
        open_first = Signal(ch_bits, reset_less=True)
        open_count = Signal(ch_bits, reset_less=True)

        # slot table: one tag per slot, valid up to next_slot; scale residency per slot
        # (entries at and above next_slot are never looked at: no reset needed)
        slot_layer = [Signal(LAYER_BITS, name=f"slot{i}_layer", reset_less=True)
                      for i in range(self.slots)]
        slot_expert = [Signal(EXPERT_BITS, name=f"slot{i}_expert", reset_less=True)
                       for i in range(self.slots)]
        slot_matrix = [Signal(name=f"slot{i}_matrix", reset_less=True) for i in range(self.slots)]
        slot_scales = Signal(self.slots, reset_less=True)
        next_slot = Signal(range(self.slots + 1))

        # the item handed to stage 2 (emit): a run of columns, a scale block, or a marker
        ITEM_RUN, ITEM_SCALE, ITEM_MARKER = 0, 1, 2
        e_valid = Signal()
        e_kind = Signal(2, reset_less=True)
        e_first = Signal(ch_bits, reset_less=True)
        e_count = Signal(ch_bits, reset_less=True)
        e_slot = Signal(slot_bits, reset_less=True)
        e_matrix = Signal(reset_less=True)
        e_base = Signal(aw, reset_less=True)
        e_tag = Signal(TAG_BITS, reset_less=True)
        e_fail = Signal(reset_less=True)
        e_take = Signal()           # stage 2 finishes its item this cycle
        e_free = ~e_valid | e_take
        f_emit = Signal()           # stage 1 hands an item to stage 2 this cycle
        f_item = {"kind": Signal(2), "first": Signal(ch_bits), "count": Signal(ch_bits),
                  "base": Signal(aw)}
        with m.If(f_emit):
            m.d.sync += [e_valid.eq(1), e_kind.eq(f_item["kind"]), e_first.eq(f_item["first"]),
                         e_count.eq(f_item["count"]), e_base.eq(f_item["base"]),
                         e_slot.eq(d_slot), e_matrix.eq(d_matrix), e_tag.eq(d_tag),
                         e_fail.eq(d_fail)]
        with m.Elif(e_take):
            m.d.sync += e_valid.eq(0)

        def emit(kind, first=0, count=0, base=0):
            m.d.comb += [f_emit.eq(1), f_item["kind"].eq(kind), f_item["first"].eq(first),
                         f_item["count"].eq(count), f_item["base"].eq(base)]

        def fail(code):
            m.d.comb += [f_err_set.eq(1), f_err_code.eq(code), f_err_tag.eq(d_tag)]

        # the run arithmetic on word w: lowest selected bit p, first unselected bit q above it
        # (w + lowest-one carries through the run), and w without that run
        lsb = _lowest_one(w)
        carry = Signal(MASK_BITS + 1)
        m.d.comb += carry.eq(w + lsb)
        run_p = _encode(m, lsb)
        run_q = _encode(m, carry & ~Cat(w, Const(0, 1)))     # MASK_BITS when the run hits the top
        w_rest = (w & carry[:MASK_BITS])
        word_base = Cat(Const(0, (MASK_BITS - 1).bit_length()), k)
        words_of = Mux(d_matrix, g.mask_words(Matrix.DOWN) - 1, g.mask_words(Matrix.GATE_UP) - 1)
        last_word = k == words_of

        # mask bits past the matrix's last input channel are a bad descriptor
        tail_bits = Signal(MASK_BITS)
        for mx in Matrix:
            valid_bits = lay.in_channels(mx) - (g.mask_words(mx) - 1) * MASK_BITS
            with m.If(d_matrix == int(mx)):
                m.d.comb += tail_bits.eq(Const(((1 << MASK_BITS) - 1) ^ ((1 << valid_bits) - 1),
                                               MASK_BITS))
        mask_in = cmd.arg.mask
        mask_bad = last_word & (mask_in & tail_bits).any()

        hits = Signal(self.slots)
        for i in range(self.slots):
            m.d.comb += hits[i].eq((i < next_slot) & (slot_layer[i] == d_layer)
                                   & (slot_expert[i] == d_expert) & (slot_matrix[i] == d_matrix))
        hit_index = _encode(m, hits)
        in_range = (d_layer < lay.n_layers) & (d_expert < lay.experts_per_layer)

        # residency word of (slot, k)
        res_word_bits = (g.res_words_per_slot - 1).bit_length()
        res_addr = Cat(k[:res_word_bits], d_slot) if res_word_bits else d_slot
        m.d.comb += self.res_rd.addr.eq(res_addr)
        resident = Signal(MASK_BITS)
        m.d.comb += resident.eq(Mux(d_hit, self.res_rd.data, 0))

        skipped_add = Signal(range(MASK_BITS + 1))

        with m.FSM(name="decoder") as fsm:
            with m.State("Idle"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    with m.Switch(cmd.op):
                        with m.Case(EmaOp.DESCRIPTOR):
                            dsc = cmd.arg.descriptor
                            m.d.sync += [d_tag.eq(dsc.tag), d_layer.eq(dsc.layer),
                                         d_expert.eq(dsc.expert), d_matrix.eq(dsc.matrix),
                                         d_scales.eq(dsc.scales), d_fail.eq(0), d_skip.eq(0),
                                         k.eq(0), open_valid.eq(0)]
                            m.next = "Lookup"
                        with m.Case(EmaOp.NEW_STEP):
                            m.d.sync += [next_slot.eq(0), slot_scales.eq(0)]
                        with m.Default():
                            fail(EmaError.BAD_COMMAND)
            with m.State("Lookup"):
                m.d.sync += d_index.eq(d_layer * lay.experts_per_layer + d_expert)
                with m.If(err):
                    # stopped: this descriptor completes as ABORTED without touching the tables
                    m.d.sync += d_skip.eq(1)
                with m.Elif(~in_range):
                    fail(EmaError.BAD_DESCRIPTOR)
                    m.d.sync += [d_fail.eq(1), d_skip.eq(1)]
                with m.Elif(hits.any()):
                    m.d.sync += [d_hit.eq(1), d_slot.eq(hit_index)]
                with m.Elif(next_slot == self.slots):
                    fail(EmaError.SLOTS_FULL)
                    m.d.sync += [d_fail.eq(1), d_skip.eq(1)]
                with m.Else():
                    m.d.sync += [d_hit.eq(0), d_slot.eq(next_slot), next_slot.eq(next_slot + 1),
                                 slot_scales.bit_select(next_slot, 1).eq(0)]
                    for i in range(self.slots):
                        with m.If(next_slot == i):
                            m.d.sync += [slot_layer[i].eq(d_layer), slot_expert[i].eq(d_expert),
                                         slot_matrix[i].eq(d_matrix)]
                m.next = "Address"
            with m.State("Address"):
                # constant multiplier: the expert's index times the bytes of one expert
                product = d_index * lay.expert_bytes
                offsets = {mx: lay.block_address(0, 0, mx) for mx in Matrix}
                m.d.sync += [
                    d_block.eq(product + Mux(d_matrix, offsets[Matrix.DOWN],
                                             offsets[Matrix.GATE_UP])),
                    d_columns.eq(product + Mux(d_matrix,
                                               lay.columns_address(0, 0, Matrix.DOWN),
                                               lay.columns_address(0, 0, Matrix.GATE_UP))),
                ]
                m.next = "Scales"
            with m.State("Scales"):
                want = d_scales & ~d_skip & ~slot_scales.bit_select(d_slot, 1)
                with m.If(~want):
                    m.next = "Mask"
                with m.Elif(e_free):
                    emit(ITEM_SCALE, base=d_block)
                    m.d.sync += slot_scales.bit_select(d_slot, 1).eq(1)
                    m.next = "Mask"
            with m.State("Mask"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    with m.If(cmd.op != EmaOp.MASK):
                        # the descriptor is cut short: it fails, the engine stops
                        with m.If(~err):
                            fail(EmaError.BAD_COMMAND)
                            m.d.sync += d_fail.eq(1)
                        m.next = "Marker"
                    with m.Else():
                        m.d.sync += mask_word.eq(mask_in)
                        with m.If(mask_bad & ~d_skip):
                            fail(EmaError.BAD_DESCRIPTOR)
                            m.d.sync += [d_fail.eq(1), d_skip.eq(1)]
                        with m.If(d_skip | mask_bad):
                            with m.If(last_word):
                                m.next = "Marker"
                            with m.Else():
                                m.d.sync += k.eq(k + 1)
                        with m.Else():
                            m.next = "Resolve"
            with m.State("Resolve"):
                # the residency word read on the mask's arrival is here now
                m.d.comb += [self.res_wr.addr.eq(res_addr), self.res_wr.en.eq(1),
                             self.res_wr.data.eq(resident | mask_word),
                             skipped_add.eq(sum((mask_word & resident)[i]
                                                for i in range(MASK_BITS)))]
                m.d.sync += [w.eq(mask_word & ~resident), word_start.eq(1)]
                m.next = "Runs"
            with m.State("Runs"):
                word_done = Signal()
                merge = open_valid & word_start & w[0]
                with m.If(merge):
                    # the open run continues from the previous word
                    with m.If(run_q == MASK_BITS):
                        m.d.sync += open_count.eq(open_count + MASK_BITS)
                        m.d.comb += word_done.eq(1)
                    with m.Elif(e_free):
                        emit(ITEM_RUN, open_first, open_count + run_q, d_columns)
                        m.d.sync += [open_valid.eq(0), w.eq(w_rest), word_start.eq(0)]
                with m.Elif(open_valid):
                    with m.If(e_free):
                        emit(ITEM_RUN, open_first, open_count, d_columns)
                        m.d.sync += [open_valid.eq(0), word_start.eq(0)]
                with m.Elif(w == 0):
                    m.d.comb += word_done.eq(1)
                with m.Elif(run_q == MASK_BITS):
                    m.d.sync += [open_valid.eq(1), open_first.eq(word_base + run_p),
                                 open_count.eq(MASK_BITS - run_p)]
                    m.d.comb += word_done.eq(1)
                with m.Elif(e_free):
                    emit(ITEM_RUN, word_base + run_p, run_q - run_p, d_columns)
                    m.d.sync += [w.eq(w_rest), word_start.eq(0)]
                with m.If(word_done):
                    with m.If(last_word):
                        m.next = "Flush"
                    with m.Else():
                        m.d.sync += k.eq(k + 1)
                        m.next = "Mask"
            with m.State("Flush"):
                with m.If(~open_valid):
                    m.next = "Marker"
                with m.Elif(e_free):
                    emit(ITEM_RUN, open_first, open_count, d_columns)
                    m.d.sync += open_valid.eq(0)
                    m.next = "Marker"
            with m.State("Marker"):
                with m.If(e_free):
                    emit(ITEM_MARKER)
                    m.next = "Idle"

        # ================= stage 2: address, length, allocation ===============================
        work_layout = data.StructLayout({
            "marker": 1, "addr": aw, "beats": beat_bits, "line": line_bits,
            "tag": TAG_BITS, "slot": slot_bits, "status": EmaStatus,
        })
        loc_layout = data.StructLayout({
            "scale": 1, "slot": slot_bits, "first": ch_bits, "count": ch_bits,
            "line": line_bits, "stride": _bits(max(g.stride_beats(mx) for mx in Matrix)),
        })
        work = m.submodules.work = SyncFIFO(width=work_layout.size, depth=4)
        locq = m.submodules.locq = SyncFIFO(width=loc_layout.size, depth=4)
        work_in = Signal(work_layout)
        loc_in = Signal(loc_layout)
        m.d.comb += [work.w_data.eq(work_in), locq.w_data.eq(loc_in)]

        alloc = Signal(range(g.lines + 1))
        e_desc_err = Signal()
        stride_of = Mux(e_matrix, g.stride_beats(Matrix.DOWN), g.stride_beats(Matrix.GATE_UP))
        run_addr = e_base + Mux(e_matrix, e_first * lay.column_stride(Matrix.DOWN),
                                e_first * lay.column_stride(Matrix.GATE_UP))
        run_beats = Mux(e_matrix,
                        (e_count - 1) * g.stride_beats(Matrix.DOWN) + g.column_beats(Matrix.DOWN),
                        (e_count - 1) * g.stride_beats(Matrix.GATE_UP)
                        + g.column_beats(Matrix.GATE_UP))
        scale_beats = Mux(e_matrix, g.scale_beats(Matrix.DOWN), g.scale_beats(Matrix.GATE_UP))
        beats = Signal(beat_bits)
        m.d.comb += beats.eq(Mux(e_kind == ITEM_SCALE, scale_beats, run_beats))
        fits = (alloc + beats) <= g.lines
        fetched_add = Signal(ch_bits)

        m.d.comb += [
            work_in.addr.eq(Mux(e_kind == ITEM_SCALE, e_base, run_addr)),
            work_in.beats.eq(beats),
            work_in.line.eq(alloc),
            work_in.tag.eq(e_tag),
            work_in.slot.eq(e_slot),
            loc_in.scale.eq(e_kind == ITEM_SCALE),
            loc_in.slot.eq(e_slot),
            loc_in.first.eq(e_first),
            loc_in.count.eq(e_count),
            loc_in.line.eq(alloc),
            loc_in.stride.eq(stride_of),
        ]
        with m.If(e_valid):
            with m.If(e_kind == ITEM_MARKER):
                m.d.comb += [work_in.marker.eq(1),
                             work_in.status.eq(Mux(e_fail | e_desc_err, EmaStatus.FAILED,
                                                   Mux(err, EmaStatus.ABORTED, EmaStatus.OK)))]
                with m.If(work.w_rdy):
                    m.d.comb += [work.w_en.eq(1), e_take.eq(1)]
                    m.d.sync += e_desc_err.eq(0)
            with m.Elif(err):
                m.d.comb += e_take.eq(1)          # the engine stopped: fetch nothing more
            with m.Elif(~fits):
                m.d.comb += [e_take.eq(1), e_err_set.eq(1), e_err_tag.eq(e_tag)]
                m.d.sync += e_desc_err.eq(1)
            with m.Elif(work.w_rdy & locq.w_rdy):
                m.d.comb += [work.w_en.eq(1), locq.w_en.eq(1), e_take.eq(1)]
                m.d.sync += alloc.eq(alloc + beats)
                with m.If(e_kind == ITEM_RUN):
                    m.d.comb += fetched_add.eq(e_count)
        with m.If(fsm.ongoing("Idle") & self.cmd.valid & (cmd.op == EmaOp.NEW_STEP)):
            # stage 2 holds at most the previous descriptor's marker here: no line is in use
            m.d.sync += alloc.eq(0)

        # ================= location writer: one entry per cycle ================================
        l_rem = Signal(ch_bits)
        l_entry = Signal(self.loc_addr_bits, reset_less=True)
        l_line = Signal(line_bits, reset_less=True)
        l_stride = Signal(loc_layout.members["stride"], reset_less=True)
        loc_out = data.View(loc_layout, locq.r_data)
        writing = l_rem != 0
        m.d.comb += [self.loc_wr.addr.eq(l_entry), self.loc_wr.data.eq(l_line),
                     self.loc_wr.en.eq(writing)]
        chan_bits = (g.chan_stride - 1).bit_length()

        def entry(slot, channel):
            return Cat(channel[:chan_bits], slot) if chan_bits else slot
        with m.If(writing):
            m.d.sync += [l_rem.eq(l_rem - 1), l_entry.eq(l_entry + 1),
                         l_line.eq(l_line + l_stride)]
        with m.If(~writing | (l_rem == 1)):
            m.d.comb += locq.r_en.eq(1)
            with m.If(locq.r_rdy):
                m.d.sync += [
                    l_rem.eq(Mux(loc_out.scale, 1, loc_out.count)),
                    l_entry.eq(entry(loc_out.slot, Mux(loc_out.scale, g.scale_entry,
                                                       loc_out.first))),
                    l_line.eq(loc_out.line), l_stride.eq(loc_out.stride),
                ]

        # ================= stage 3: AR issue ===================================================
        inflight_layout = data.StructLayout({
            "marker": 1, "line": line_bits, "tag": TAG_BITS, "slot": slot_bits,
            "status": EmaStatus,
        })
        # buffered (registered output): the head entry decides every beat's buffer line, and an
        # unregistered read through the queue was the controller's critical path
        inflight = m.submodules.inflight = SyncFIFOBuffered(width=inflight_layout.size,
                                                            depth=self._outstanding + 3)
        infl_in = Signal(inflight_layout)
        m.d.comb += inflight.w_data.eq(infl_in)
        h_valid = Signal()
        h = Signal(work_layout, reset_less=True)
        outstanding = Signal(range(self._outstanding + 1))
        peak = Signal(range(self._outstanding + 1))
        size_shift = (B - 1).bit_length()
        to_page = (PAGE_BYTES - h.addr[:12]) >> size_shift
        limit = Mux(to_page < MAX_BURST_BEATS, to_page, MAX_BURST_BEATS)
        piece = Signal(range(MAX_BURST_BEATS + 1))
        m.d.comb += piece.eq(Mux(h.beats < limit, h.beats, limit))
        ar_free = ~axi.arvalid | axi.arready
        ar_load = Signal()
        h_done = Signal()
        r_last_beat = Signal()      # a burst's last beat is taken this cycle
        # the AR payload needs no reset: it means nothing while arvalid is low
        ar_addr = Signal(aw, reset_less=True)
        ar_len = Signal(8, reset_less=True)
        m.d.comb += [axi.araddr.eq(ar_addr), axi.arlen.eq(ar_len),
                     axi.arid.eq(0), axi.arsize.eq(size_shift), axi.arburst.eq(AXI_BURST_INCR),
                     infl_in.line.eq(h.line), infl_in.tag.eq(h.tag), infl_in.slot.eq(h.slot),
                     infl_in.status.eq(h.status), infl_in.marker.eq(h.marker)]
        with m.If(h_valid):
            with m.If(h.marker):
                with m.If(inflight.w_rdy):
                    m.d.comb += [inflight.w_en.eq(1), h_done.eq(1)]
            with m.Elif(r_err):
                m.d.comb += h_done.eq(1)          # drain: never issue after a bus error
            with m.Elif(ar_free & inflight.w_rdy & (outstanding != self._outstanding)):
                m.d.comb += [ar_load.eq(1), inflight.w_en.eq(1)]
                m.d.sync += [ar_addr.eq(h.addr), ar_len.eq(piece - 1),
                             h.addr.eq(h.addr + (piece << size_shift)),
                             h.line.eq(h.line + piece), h.beats.eq(h.beats - piece)]
                m.d.comb += h_done.eq(h.beats == piece)
        with m.If(ar_load):
            m.d.sync += axi.arvalid.eq(1)
        with m.Elif(axi.arready):
            m.d.sync += axi.arvalid.eq(0)
        with m.If(~h_valid | h_done):
            m.d.comb += work.r_en.eq(1)
            m.d.sync += h_valid.eq(work.r_rdy)
            with m.If(work.r_rdy):
                m.d.sync += h.eq(work.r_data)
        with m.If(ar_load & ~r_last_beat):
            m.d.sync += outstanding.eq(outstanding + 1)
        with m.Elif(~ar_load & r_last_beat):
            m.d.sync += outstanding.eq(outstanding - 1)
        with m.If(outstanding > peak):
            m.d.sync += peak.eq(outstanding)

        # ================= stage 4: R data into the buffer, completions =======================
        head = data.View(inflight_layout, inflight.r_data)
        r_first = Signal(init=1)    # the next beat starts a burst
        r_line = Signal(line_bits, reset_less=True)
        r_desc_err = Signal()       # a bus error hit the descriptor whose beats are arriving
        beat = Signal()
        beat_bad = axi.rresp[1]     # SLVERR (2) or DECERR (3)
        line = Mux(r_first, head.line, r_line)
        comp_free = ~self.done.valid | self.done.ready
        completion = Signal(ema_completion_layout, reset_less=True)
        m.d.comb += self.done.payload.eq(completion)
        with m.If(self.done.ready):
            m.d.sync += self.done.valid.eq(0)
        with m.If(inflight.r_rdy & head.marker):
            with m.If(comp_free):
                m.d.comb += inflight.r_en.eq(1)
                m.d.sync += [
                    self.done.valid.eq(1),
                    completion.tag.eq(head.tag),
                    completion.slot.eq(head.slot),
                    completion.status.eq(
                        Mux(head.status != EmaStatus.OK, head.status,
                            Mux(r_desc_err, EmaStatus.FAILED,
                                Mux(r_err, EmaStatus.ABORTED, EmaStatus.OK)))),
                    r_desc_err.eq(0),
                ]
        with m.Elif(inflight.r_rdy):
            m.d.comb += [axi.rready.eq(1), beat.eq(axi.rvalid)]
        m.d.comb += [self.buf_wr.addr.eq(line), self.buf_wr.data.eq(axi.rdata),
                     self.buf_wr.en.eq(beat & ~beat_bad & ~r_err)]
        with m.If(beat):
            m.d.sync += [r_line.eq(line + 1), r_first.eq(axi.rlast)]
            with m.If(axi.rlast):
                m.d.comb += [inflight.r_en.eq(1), r_last_beat.eq(1)]
            with m.If(beat_bad):
                m.d.sync += [r_err.eq(1), r_desc_err.eq(1)]
                m.d.comb += [r_err_set.eq(1), r_err_tag.eq(head.tag),
                             r_err_code.eq(Mux(axi.rresp[0], EmaError.DECERR, EmaError.SLVERR))]

        # ================= counters and the register read port ===============================
        busy = Signal()
        m.d.comb += busy.eq(~fsm.ongoing("Idle") | e_valid | work.r_rdy | h_valid | writing
                            | locq.r_rdy | inflight.r_rdy | axi.arvalid)
        counters = {name: Signal(COUNTER_BITS, name=f"count_{name.lower()}") for name in
                    ("BYTES", "BEATS", "BURSTS", "DESCRIPTORS", "BUSY_CYCLES", "STALL_CYCLES",
                     "FETCHED_CHANNELS", "SKIPPED_CHANNELS")}
        written = self.buf_wr.en
        increments = {
            "BYTES": Mux(written, B, 0),
            "BEATS": beat,
            "BURSTS": axi.arvalid & axi.arready,
            "DESCRIPTORS": self.done.valid & self.done.ready,
            "BUSY_CYCLES": busy,
            "STALL_CYCLES": busy & ~beat,
            "FETCHED_CHANNELS": fetched_add,
            "SKIPPED_CHANNELS": skipped_add,
        }
        for name, counter in counters.items():
            # registered increments: the counters lag one cycle, and their 48-bit adders stay off
            # the paths that decide a beat or a completion
            step = Signal(len(Value.cast(increments[name])), name=f"inc_{name.lower()}")
            m.d.sync += [step.eq(increments[name]), counter.eq(counter + step)]

        status = Signal(ema_status_layout)
        m.d.comb += [status.busy.eq(busy), status.error.eq(err), status.code.eq(err_code),
                     status.tag.eq(err_tag)]
        csr_data = Signal(CSR_DATA_BITS, reset_less=True)
        m.d.comb += self.csr.data.eq(csr_data)
        with m.Switch(self.csr.addr):
            with m.Case(EmaCsr.STATUS):
                m.d.sync += csr_data.eq(status.as_value())
            for name, counter in counters.items():
                with m.Case(EmaCsr[name]):
                    m.d.sync += csr_data.eq(counter)
            with m.Case(EmaCsr.PEAK_OUTSTANDING):
                m.d.sync += csr_data.eq(peak)
            with m.Default():
                m.d.sync += csr_data.eq(0)
        return m


def _stream(layout):
    return stream.Signature(layout)


def _write_signature(addr_bits: int, data_bits: int) -> wiring.Signature:
    return wiring.Signature({"addr": Out(addr_bits), "data": Out(data_bits), "en": Out(1)})


def _read_signature(addr_bits: int, data_bits: int) -> wiring.Signature:
    """Address out, data back one cycle later."""
    return wiring.Signature({"addr": Out(addr_bits), "data": In(data_bits)})


class EmaSystem(wiring.Component):
    """The EMA controller with its memories: the banked weight buffer, the location table and
    the residency words, each an `amaranth.lib.memory.Memory`, plus read ports for the MAC
    cluster (and the benches). The AXI4 write channels are tied off (the EMA only reads), so a
    full AXI4 slave model attaches to `m_axi`.

    Buffer line L lives in bank L % buffer_banks at row L // buffer_banks, so consecutive lines of a
    column sit in different banks and the MAC cluster reads `buffer_banks` lines per cycle.

    Ports (besides the controller's cmd, done, csr)
    -----
    m_axi : Out(axi4_signature(addr_width, data_width, 4))
    buf_rd : per bank, row in, line out one cycle later
    loc_rd : location-table entry (slot * chan_stride + channel) in, buffer line out
    res_rd : residency word (slot * res_words_per_slot + word) in, mask of resident channels out
    """

    def __init__(self, layout: WeightLayout, *, data_width: int = 256, addr_width: int = 32,
                 outstanding: int = 16, buffer_bytes: int = 65536, buffer_banks: int = 4,
                 slots: int = 32):
        if buffer_banks not in (1, 2, 4, 8):
            raise ValueError(f"buffer_banks must be one of 1, 2, 4, 8, not {buffer_banks!r}")
        # the controller validates every parameter it shares with this wrapper
        self._controller = EmaController(layout, data_width=data_width, addr_width=addr_width,
                                         outstanding=outstanding, buffer_bytes=buffer_bytes,
                                         slots=slots)
        self._banks = buffer_banks
        c = self._controller
        g = c.geometry
        row_bits = (g.lines // buffer_banks - 1).bit_length() or 1
        super().__init__({
            "cmd": In(_stream(ema_command_layout)),
            "done": Out(_stream(ema_completion_layout)),
            "m_axi": Out(axi4_signature(addr_width, data_width, AXI_ID_WIDTH)),
            "csr": In(_read_signature(CSR_ADDR_BITS, CSR_DATA_BITS)),
            "buf_rd": In(_read_signature(row_bits, data_width)).array(buffer_banks),
            "loc_rd": In(_read_signature(c.loc_addr_bits, g.line_bits)),
            "res_rd": In(_read_signature(c.res_addr_bits, MASK_BITS)),
        })

    @property
    def controller(self) -> EmaController:
        return self._controller

    @property
    def geometry(self) -> EmaGeometry:
        return self._controller.geometry

    @property
    def buffer_banks(self) -> int:
        return self._banks

    def elaborate(self, platform):
        m = Module()
        c = m.submodules.controller = self._controller
        g = c.geometry
        banks = self._banks
        bank_bits = (banks - 1).bit_length()

        wiring.connect(m, wiring.flipped(self.cmd), c.cmd)
        wiring.connect(m, c.done, wiring.flipped(self.done))
        wiring.connect(m, wiring.flipped(self.csr), c.csr)
        for name in c.m_axi.signature.members:
            port, inner = getattr(self.m_axi, name), getattr(c.m_axi, name)
            if c.m_axi.signature.members[name].flow == wiring.Out:
                m.d.comb += port.eq(inner)
            else:
                m.d.comb += inner.eq(port)
        # write channels tied off: never a write, every response accepted
        m.d.comb += [self.m_axi.awvalid.eq(0), self.m_axi.wvalid.eq(0), self.m_axi.bready.eq(1)]

        for b in range(banks):
            bank = m.submodules[f"buffer_bank{b}"] = Memory(
                shape=unsigned(g.data_width), depth=g.lines // banks, init=[])
            wr = bank.write_port()
            rd = bank.read_port()
            m.d.comb += [wr.addr.eq(c.buf_wr.addr >> bank_bits), wr.data.eq(c.buf_wr.data),
                         wr.en.eq(c.buf_wr.en & ((c.buf_wr.addr & (banks - 1)) == b)),
                         rd.addr.eq(self.buf_rd[b].addr), self.buf_rd[b].data.eq(rd.data)]

        loc = m.submodules.locations = Memory(shape=unsigned(g.line_bits),
                                              depth=self.slots_entries, init=[])
        loc_wr, loc_rd = loc.write_port(), loc.read_port()
        m.d.comb += [loc_wr.addr.eq(c.loc_wr.addr), loc_wr.data.eq(c.loc_wr.data),
                     loc_wr.en.eq(c.loc_wr.en),
                     loc_rd.addr.eq(self.loc_rd.addr), self.loc_rd.data.eq(loc_rd.data)]

        res = m.submodules.residency = Memory(shape=unsigned(MASK_BITS),
                                              depth=c.slots * g.res_words_per_slot, init=[])
        res_wr, res_rd_ctrl, res_rd = res.write_port(), res.read_port(), res.read_port()
        m.d.comb += [res_wr.addr.eq(c.res_wr.addr), res_wr.data.eq(c.res_wr.data),
                     res_wr.en.eq(c.res_wr.en),
                     res_rd_ctrl.addr.eq(c.res_rd.addr), c.res_rd.data.eq(res_rd_ctrl.data),
                     res_rd.addr.eq(self.res_rd.addr), self.res_rd.data.eq(res_rd.data)]
        return m

    @property
    def slots_entries(self) -> int:
        return self._controller.slots * self.geometry.chan_stride
