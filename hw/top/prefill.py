"""`UseCounter`: how many engine groups use each expert the PRU fetches for a prefill chunk;
`PrefillPath`: the PRU with it, as the top joins them.

The PRU fetches each expert of a chunk once (hw/pru/fetch.py), but a chunk of `chunk` tokens
gives an expert up to `chunk` of them, more than one engine group of `candidates` holds; the
feeder walks the expert's descriptor pair once per group (`Replayer`, feeder.py). The count
comes from the PRU's own routes, in hardware: the top sees every route on its way to the host,
so it needs no host round trip before the fetch words can go.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import EmaOp, ema_command_layout
from ...contracts.weight_layout import Matrix
from ..pru import Pru
from .layouts import job_layout

__all__ = ["UseCounter", "PrefillPath"]


class UseCounter(wiring.Component):
    """Routes pass from `i_route` to `o_route` (the PRU's route layout: `expert`, `last` on a
    token's last expert, the rest carried); the PRU's command words pass from `i_cmd` to
    `o_cmd` with `uses` (job_layout).

    Counting: each route adds one to its expert's count; a token ends with `last`; the chunk
    ends after `chunk` tokens or at the layer's last token (`length` tokens, the prompt's, held
    by the top from the score beats: one prompt at a time). At the chunk's end the counts move to
    a second table (the next chunk counts meanwhile) with the number of distinct experts; if
    that table still serves the chunk before, the chunk's last route waits.

    Uses: a DESCRIPTOR word waits until a chunk's table is there; a GATE_UP descriptor leaves
    with uses = ceil(count[expert] / candidates), and each DOWN descriptor ends one expert of
    the table, which is free again after the chunk's last (the PRU fetches exactly the experts
    the chunk's routes name, each once, GATE_UP then DOWN). NEW_STEP and MASK words pass with
    uses 0."""

    def __init__(self, route_layout, *, n_experts: int, chunk: int, candidates: int,
                 length_bits: int):
        for name, value in (("n_experts", n_experts), ("chunk", chunk),
                            ("candidates", candidates), ("length_bits", length_bits)):
            if value < 1:
                raise ValueError(f"{name} is {value}: accepted 1 or more")
        self._sizes = (n_experts, chunk, candidates)
        self.max_uses = -(-chunk // candidates)
        super().__init__({
            "i_route": In(stream.Signature(route_layout)),
            "o_route": Out(stream.Signature(route_layout)),
            "i_cmd": In(stream.Signature(ema_command_layout)),
            "o_cmd": Out(stream.Signature(job_layout(self.max_uses))),
            "length": In(length_bits),
        })

    def elaborate(self, platform):
        m = Module()
        n_experts, chunk, candidates = self._sizes
        counts = Array(Signal(range(chunk + 1), name=f"count{e}") for e in range(n_experts))
        held = Array(Signal(range(chunk + 1), name=f"held{e}") for e in range(n_experts))
        distinct = Signal(range(n_experts + 1))     # experts counted in this chunk
        left = Signal(range(n_experts + 1))         # experts of the held table not yet fetched
        token = Signal(len(self.length))            # the token's index in its layer
        in_chunk = Signal(range(chunk))             # ... and in its chunk

        route = self.i_route.payload
        ends = route.last & ((in_chunk == chunk - 1) | (token == self.length - 1))
        m.d.comb += [self.o_route.payload.eq(route),
                     self.o_route.valid.eq(self.i_route.valid & ~(ends & (left != 0))),
                     self.i_route.ready.eq(self.o_route.ready & ~(ends & (left != 0)))]
        with m.If(self.i_route.valid & self.i_route.ready):
            fresh = counts[route.expert] == 0
            with m.If(route.last):
                m.d.sync += [token.eq(token + 1), in_chunk.eq(in_chunk + 1)]
            with m.If(ends):
                # the table takes this chunk's counts, this route included; counting restarts
                for e in range(n_experts):
                    m.d.sync += [held[e].eq(counts[e] + (route.expert == e)), counts[e].eq(0)]
                m.d.sync += [left.eq(distinct + fresh), distinct.eq(0), in_chunk.eq(0)]
                with m.If(token == self.length - 1):
                    m.d.sync += token.eq(0)
            with m.Else():
                m.d.sync += [counts[route.expert].eq(counts[route.expert] + 1),
                             distinct.eq(distinct + fresh)]

        cmd = self.i_cmd.payload
        is_desc = cmd.op == EmaOp.DESCRIPTOR
        desc = cmd.arg.descriptor
        count = held[desc.expert]
        uses = Signal.like(self.o_cmd.payload.uses)
        # ceil(count / candidates) as a sum of comparisons: no divider
        m.d.comb += uses.eq(sum(count > k * candidates for k in range(self.max_uses)))
        wait = is_desc & (left == 0)
        m.d.comb += [self.o_cmd.payload.cmd.eq(cmd),
                     self.o_cmd.payload.uses.eq(Mux(is_desc & (desc.matrix == Matrix.GATE_UP),
                                                    uses, 0)),
                     self.o_cmd.valid.eq(self.i_cmd.valid & ~wait),
                     self.i_cmd.ready.eq(self.o_cmd.ready & ~wait)]
        with m.If(self.o_cmd.valid & self.o_cmd.ready & is_desc & (desc.matrix == Matrix.DOWN)):
            m.d.sync += left.eq(left - 1)
        return m


class PrefillPath(wiring.Component):
    """The PRU with its `UseCounter` (docs/blocks/top.md, "Prefill"): SCORE and LOGIT beats in
    (`score`, `logit`), the routes out to the host (`route`) and the fetch words out with their
    uses (`cmd`, the merge's source 2). The prompt's length is held from its score beats (one
    prompt at a time: UseCounter's contract). `csr` is the PRU's register port; `max_uses` the
    most engine groups one fetched pair serves (the feeder's `Replayer`)."""

    def __init__(self, params, candidates: int):
        self._pru = Pru(params)
        self._uses = UseCounter(params.route_layout, n_experts=params.n_experts,
                                chunk=params.chunk, candidates=candidates,
                                length_bits=params.length_bits)
        self.max_uses = self._uses.max_uses
        super().__init__({
            "score": In(stream.Signature(params.score_layout)),
            "logit": In(stream.Signature(params.logit_layout)),
            "route": Out(stream.Signature(params.route_layout)),
            "cmd": Out(stream.Signature(job_layout(self.max_uses))),
            "csr": self._pru.signature.members["csr"],
        })

    def elaborate(self, platform):
        m = Module()
        pru = m.submodules.pru = self._pru
        uses = m.submodules.uses = self._uses
        wiring.connect(m, wiring.flipped(self.score), pru.score)
        wiring.connect(m, wiring.flipped(self.logit), pru.logit)
        wiring.connect(m, wiring.flipped(self.csr), pru.csr)
        length = Signal.like(uses.length)
        with m.If(self.score.valid & self.score.ready):
            m.d.sync += length.eq(self.score.payload.length)
        m.d.comb += uses.length.eq(length)
        wiring.connect(m, pru.route, uses.i_route)
        wiring.connect(m, uses.o_route, wiring.flipped(self.route))
        wiring.connect(m, pru.cmd, uses.i_cmd)
        wiring.connect(m, uses.o_cmd, wiring.flipped(self.cmd))
        return m
