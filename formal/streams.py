"""The valid-until-ready rule on every stream port of a block: proved of each output, assumed of
each input (a well-behaved producer feeds it); every other input is free."""

from __future__ import annotations

from amaranth.lib import wiring

from .rules import PropertyWrapper, mirror, streams_of

__all__ = ["StreamRulesCheck"]


class StreamRulesCheck(PropertyWrapper):
    """`component` with the stream rule on its ports; one property set, `streams` (every output
    stream at once: a failure's trace names the port)."""

    SETS = {"streams": "every output stream: valid held until ready, payload stable"}

    def __init__(self, component: wiring.Component, *, check: str | None = None,
                 resets: bool = True, held_while: dict[str, str] | None = None):
        """`held_while` {port: input stream}: the environment keeps that plain input port
        unchanged while the stream offers an item (a rule of the block's contract)."""
        self._component = component
        self._held_while = dict(held_while or {})
        outputs = [name for name, _, out in streams_of(component) if out]
        if not outputs:
            raise ValueError(f"{type(component).__name__} has no output stream to check")
        self.outputs = outputs
        super().__init__(component.signature, check, resets)

    def elaborate(self, platform):
        m = self.begin()
        m.submodules.dut = self._component
        mirror(m, self, self._component)
        for port, source in self._held_while.items():
            offered = self.past(getattr(self, source).valid, name=f"{source}_offered")
            self.assume(~offered | self.stable(getattr(self, port)))
        for _, iface, produced_here in streams_of(self):
            self.stream_rule(iface, produced_here, "streams")
            if produced_here:
                self.cover(iface.valid & iface.ready)
        return m
