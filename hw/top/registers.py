"""`TopRegisters`: the top's status and performance counters, and the one register read port
that also reaches the EMA controller's registers and the checking blocks' (the command path's,
the DCU's, the PRU's)."""


from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...contracts.ema import CSR_ADDR_BITS, CSR_DATA_BITS, EmaStatus
from ...contracts.rejects import RejectCsr
from ...contracts.top import TOP_CSR_ADDR_BITS, TopCsr
from ..ema.geometry import COUNTER_BITS
from ..streams import ReadSignature, event_counter

__all__ = ["TopRegisters", "Activity"]


class TopRegisters(wiring.Component):
    """Counts the events and cycles of `TopCsr` (a flag, a pulse or a count each per cycle)
    and latches the first EMA completion that was not OK. `csr` reads one register one cycle
    after its address: addresses below `TOP_CSR_BASE` are forwarded to the EMA controller's port
    `ema`, the checking blocks' STATUS and REJECTED to their ports (`command`, `dcu`, `pru`:
    `RejectCsr` maps, the same latency; `pru` reads 0 in a top without a PRU), the others are
    the top's."""

    csr: In(ReadSignature(TOP_CSR_ADDR_BITS, CSR_DATA_BITS))
    ema: Out(ReadSignature(CSR_ADDR_BITS, CSR_DATA_BITS))
    command: Out(ReadSignature(RejectCsr.as_shape().width, CSR_DATA_BITS))
    dcu: Out(ReadSignature(RejectCsr.as_shape().width, CSR_DATA_BITS))
    pru: Out(ReadSignature(RejectCsr.as_shape().width, CSR_DATA_BITS))
    busy: In(1)
    memory_wait: In(1)
    compute: In(1)
    group: In(1)
    # the feeder's two lanes: up to two matrices end and two words move in a cycle
    matrix: In(2)
    word: In(2)
    dcu_job: In(1)
    descriptor_wait: In(1)
    feedback_wait: In(1)
    fault: In(1)
    fault_status: In(EmaStatus)
    fault_tag: In(8)

    def elaborate(self, platform):
        m = Module()
        counted = {TopCsr.BUSY_CYCLES: self.busy, TopCsr.MEMORY_WAIT_CYCLES: self.memory_wait,
                   TopCsr.COMPUTE_CYCLES: self.compute, TopCsr.GROUPS: self.group,
                   TopCsr.MATRICES: self.matrix, TopCsr.WORDS: self.word,
                   TopCsr.DCU_JOBS: self.dcu_job,
                   TopCsr.DESCRIPTOR_WAIT_CYCLES: self.descriptor_wait,
                   TopCsr.FEEDBACK_WAIT_CYCLES: self.feedback_wait}
        counters = {reg: event_counter(m, reg.name.lower(), event, COUNTER_BITS)
                    for reg, event in counted.items()}
        error = Signal()
        status = Signal(2)
        tag = Signal(8)
        with m.If(self.fault & ~error):
            m.d.sync += [error.eq(1), status.eq(self.fault_status), tag.eq(self.fault_tag)]

        m.d.comb += self.ema.addr.eq(self.csr.addr[:CSR_ADDR_BITS])
        forwarded = {TopCsr.COMMAND_STATUS: (self.command, RejectCsr.STATUS),
                     TopCsr.COMMAND_REJECTED: (self.command, RejectCsr.REJECTED),
                     TopCsr.DCU_STATUS: (self.dcu, RejectCsr.STATUS),
                     TopCsr.DCU_REJECTED: (self.dcu, RejectCsr.REJECTED),
                     TopCsr.PRU_STATUS: (self.pru, RejectCsr.STATUS),
                     TopCsr.PRU_REJECTED: (self.pru, RejectCsr.REJECTED)}
        # the register read answers from: 0 the EMA, 1 the top's own, then the ports above
        ports = [self.command, self.dcu, self.pru]
        source = Signal(range(2 + len(ports)))
        value = Signal(CSR_DATA_BITS)
        m.d.sync += source.eq(self.csr.addr[CSR_ADDR_BITS])
        with m.Switch(self.csr.addr):
            with m.Case(TopCsr.STATUS):
                m.d.sync += value.eq(self.busy | error << 1 | status << 2 | tag << 8)
            for reg, counter in counters.items():
                with m.Case(reg):
                    m.d.sync += value.eq(counter)
            for reg, (port, inner) in forwarded.items():
                with m.Case(reg):
                    m.d.comb += port.addr.eq(inner)
                    m.d.sync += source.eq(2 + ports.index(port))
            with m.Default():
                m.d.sync += value.eq(0)
        data = self.ema.data
        for i, port in enumerate(ports):
            data = Mux(source == 2 + i, port.data, data)
        m.d.comb += self.csr.data.eq(Mux(source == 1, value, data))
        return m


class Activity(wiring.Component):
    """What the top is doing each cycle, for `TopRegisters`' counters, and whether a NEW_STEP
    may go to the EMA (`step_clear`).

    - `pending`: descriptors handed to the feeder (a replayed pair's two again) and not yet fed
      to the engine; a NEW_STEP waits for 0 (`step_clear`). A replay is counted when the split
      takes its first word, no later than the pair's last walk ends (the split takes words
      before the lanes walk them): the count does not touch 0 between a pair's walks.
    - A group is in the engine from its last candidate (`group_start`) to its last expert
      output (`group_end`); it is loaded from its last X on (`x_last`). Each group's two
      matrices end (their last words taken) while it is in the engine, because the MAC arrays
      take columns only for a group they hold: `owed` counts the matrices of started groups that
      have not ended yet.
    - No word reaching the engine (`moved` 0) while a group in flight is loaded and owed words:
      `memory_wait` if a lane waits for a notice or a line (`awaiting`, `waiting`), else
      `descriptor_wait` if a lane has no descriptor (`hungry`: the DCU has not made it yet);
      every other cycle with a group in flight is `compute`.

    `pending` counts 0 .. `pending_bound` - 1 (the feeder's queues, the lanes' and a
    replay's uses)."""

    issued: In(1)
    again: In(1)
    ended: In(2)
    moved: In(2)
    awaiting: In(1)
    waiting: In(1)
    hungry: In(1)
    feeding: In(1)
    deciding: In(1)
    group_start: In(1)
    group_end: In(1)
    x_last: In(1)
    step_clear: Out(1)
    busy: Out(1)
    memory_wait: Out(1)
    descriptor_wait: Out(1)
    compute: Out(1)

    def __init__(self, pending_bound: int, groups_held: int):
        self._bounds = (pending_bound, groups_held)
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        pending_bound, groups_held = self._bounds
        pending = Signal(range(pending_bound))
        m.d.sync += pending.eq(pending + self.issued + (self.again << 1) - self.ended)
        in_flight = Signal(range(groups_held + 1))
        loaded = Signal()
        owed = Signal(range(2 * groups_held + 1))
        m.d.sync += [in_flight.eq(in_flight + self.group_start - self.group_end),
                     owed.eq(owed + (self.group_start << 1) - self.ended)]
        with m.If(self.group_start):
            m.d.sync += loaded.eq(0)
        with m.If(self.x_last):
            m.d.sync += loaded.eq(1)
        in_group = in_flight != 0
        idle = in_group & loaded & (owed != 0) & (self.moved == 0)
        wait = idle & (self.awaiting | self.waiting)
        starved = idle & ~wait & self.hungry
        m.d.comb += [self.step_clear.eq(pending == 0),
                     self.busy.eq((pending != 0) | in_group | self.feeding | self.deciding),
                     self.memory_wait.eq(wait), self.descriptor_wait.eq(starved),
                     self.compute.eq(in_group & ~wait & ~starved)]
        return m
