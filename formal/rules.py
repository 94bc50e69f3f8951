"""What every property wrapper shares: a free mirror of the checked block's ports, one-cycle-old
copies of signals (Amaranth 0.5 removed `Past`), the valid-until-ready rule of a stream, and
properties grouped in named sets so that each set is one SymbiYosys task with its own PASS/FAIL.

A wrapper is a `wiring.Component` whose ports mirror the checked block's: on the top level of
the RTLIL they are free inputs (the solver chooses them every cycle) and the block's outputs,
so the environment is free except for the `Assume`s a wrapper states.
"""

from __future__ import annotations

from amaranth.hdl import Assert, Assume, Cover, Module, ResetSignal, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import Out

__all__ = ["PropertyWrapper", "mirror", "streams_of"]


def mirror(m: Module, outer: wiring.Component, inner: wiring.Component) -> None:
    """Join every port of `inner` to the port of the same path of `outer` (same signature):
    what `inner` drives goes out, the rest comes in. Member by member, so plain ports, nested
    interfaces and arrays of them are all joined alike."""
    outer_ports = {path: value for path, _, value in outer.signature.flatten(outer)}
    for path, member, value in inner.signature.flatten(inner):
        if member.flow == Out:
            m.d.comb += outer_ports[path].eq(value)
        else:
            m.d.comb += value.eq(outer_ports[path])


def streams_of(component: wiring.Component, signature=None, obj=None, path: str = ""):
    """(name, interface, is_output) of every `amaranth.lib.stream` port of `component`, nested
    ones and array elements included, named by their flattened path (`m_axi`, `buf_rd[0]`)."""
    signature = component.signature if signature is None else signature
    obj = component if obj is None else obj
    for name, member in signature.members.items():
        if not member.is_signature:
            continue
        value = getattr(obj, name)
        # an array member is a (nested) list of interfaces
        todo = [(f"{path}{name}", value)]
        while todo:
            label, item = todo.pop(0)
            if isinstance(item, list):
                todo += [(f"{label}[{i}]", v) for i, v in enumerate(item)]
            elif isinstance(member.signature, stream.Signature):
                yield label, item, member.flow == Out
            else:
                yield from streams_of(component, member.signature, item, f"{label}.")


class PropertyWrapper(wiring.Component):
    """Base of the property wrappers: `check` names the property set whose `Assert`s are
    emitted (the others are left out, so a failure belongs to one set); every `Assume` and
    `Cover` is always emitted.

    `resets` lets the solver raise the synchronous reset on any cycle (the checked block and the
    wrapper's own registers reset together, as a memory model on the bus must with its master);
    without it the reset stays low and the run starts from the registers' initial values,
    which are their reset values.
    """

    #: the property sets a wrapper defines, name -> what it checks (one line, for reports)
    SETS: dict[str, str] = {}

    def __init__(self, signature, check: str | None, resets: bool):
        if check is not None and check not in self.SETS:
            raise ValueError(f"no property set {check!r}: accepted {', '.join(self.SETS)}")
        self._check = check
        self._resets = bool(resets)
        super().__init__(signature)

    def begin(self) -> Module:
        """The module every wrapper's `elaborate` starts from: `past_valid` (high from the
        second cycle after the start or a reset, so a one-cycle-old copy means something)."""
        m = Module()
        self._m = m
        self.past_valid = Signal()
        m.d.sync += self.past_valid.eq(1)
        if not self._resets:
            m.d.comb += Assume(~ResetSignal())
        return m

    def past(self, value, name: str | None = None, reset_less: bool = False) -> Value:
        """`value` one cycle ago (its initial value on the first cycle, and after a reset
        unless `reset_less`)."""
        old = Signal.like(Value.cast(value), name=name or "past", reset_less=reset_less)
        self._m.d.sync += old.eq(value)
        return old

    def stable(self, value) -> Value:
        """`value` equals its copy of one cycle ago."""
        return Value.cast(value) == self.past(value)

    def prove(self, set_name: str, test, message: str | None = None) -> None:
        """An `Assert` of property set `set_name`, emitted when that set is the one checked."""
        if set_name not in self.SETS:
            raise KeyError(set_name)
        if self._check == set_name:
            self._m.d.comb += Assert(test, message)

    def assume(self, test, message: str | None = None) -> None:
        self._m.d.comb += Assume(test, message)

    def cover(self, test, message: str | None = None) -> None:
        self._m.d.comb += Cover(test, message)

    def stream_rule(self, iface, produced_here: bool, set_name: str | None = None) -> None:
        """The valid-until-ready rule (docs/architecture.md, Streams; amaranth.lib.stream):
        once `valid` is high it stays high, with the payload unchanged, until the cycle that
        `ready` is high. Proved (`set_name`) on an output the checked block produces; assumed
        of an input, which a well-behaved producer feeds."""
        if iface.signature.always_valid or iface.signature.always_ready:
            return      # a stream that never waits has no rule to keep
        waited = self.past(iface.valid & ~iface.ready, name="waited")
        test = ~(self.past_valid & waited) | (iface.valid & self.stable(iface.payload))
        if produced_here:
            self.prove(set_name, test)
        else:
            self.assume(test)
