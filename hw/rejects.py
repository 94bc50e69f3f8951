"""A checking block's rejection port and its registers (edgexpert.contracts.rejects): the DCU,
the PRU and the top's command path report a rejected command alike."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..contracts.ema import CSR_DATA_BITS
from ..contracts.rejects import RejectCsr, reject_layout, reject_status_layout
from .ema.geometry import COUNTER_BITS
from .streams import ReadSignature, answer_reads, event_counter

__all__ = ["reject_signature", "RejectRegisters", "report"]


def reject_signature(code, tag_bits: int) -> wiring.Signature:
    """A rejected command's completion: `valid` for one cycle per command, nothing to
    acknowledge (a stream with `ready` would stall the block where nobody listens; an
    always-ready stream's constant `ready` cannot be a top-level port)."""
    return wiring.Signature({"valid": Out(1), "payload": Out(reject_layout(code, tag_bits))})


class RejectRegisters(wiring.Component):
    """Latches the first rejected command (`rejected`: its first bad field and tag; one port per
    checker of the block, the lowest first when two report in one cycle) in STATUS until reset,
    counts rejected commands and the commands `completed` with their work (48-bit counters, as
    the EMA's, one cycle behind their events). Unlike the EMA's STATUS, a rejection stops
    nothing. `csr`: `RejectCsr` address in, the register one cycle later."""

    def __init__(self, code, tag_bits: int, sources: int = 1):
        self._status = reject_status_layout(code, tag_bits)
        super().__init__({
            "csr": In(ReadSignature(RejectCsr.as_shape().width, CSR_DATA_BITS)),
            "rejected": In(reject_signature(code, tag_bits)).array(sources),
            "completed": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        status = Signal(self._status)
        for port in reversed(self.rejected):      # the last assignment wins: the lowest port
            with m.If(port.valid & ~status.error):
                m.d.sync += [status.error.eq(1), status.code.eq(port.payload.code),
                             status.tag.eq(port.payload.tag)]
        rejected = sum(port.valid for port in self.rejected)
        counters = {RejectCsr.COMPLETED: self.completed, RejectCsr.REJECTED: rejected}
        counts = {reg: event_counter(m, reg.name.lower(), event, COUNTER_BITS)
                  for reg, event in counters.items()}
        answer_reads(m, self.csr, {RejectCsr.STATUS: status.as_value(), **counts})
        return m


def report(m: Module, registers: RejectRegisters, rejected, completed, out=None,
           source: int = 0) -> None:
    """A checker's completions (`rejected`, a `reject_signature` port, and the `completed`
    pulse) into its block's `registers` (port `source`) and, with `out`, to the block's own
    `rejected` port."""
    port = registers.rejected[source]
    m.d.comb += [port.valid.eq(rejected.valid), port.payload.eq(rejected.payload),
                 registers.completed.eq(completed)]
    if out is not None:
        m.d.comb += [out.valid.eq(rejected.valid), out.payload.eq(rejected.payload)]
