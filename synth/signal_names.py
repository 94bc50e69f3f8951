"""Which signal of the simulation trace each net name of the netlist is, from the design itself.

Amaranth names signals per module when it prepares a design (`Fragment.prepare`): a signal keeps
its own name unless another one of the module took it first, and then it becomes `name$N`, N the
number of names taken so far. Synthesis (`rtlil.convert`) names the block's ports first and
routes them through the modules that use them; the simulator has no ports. So a name can mean
another signal in the VCD than in the netlist: in the accelerator top the netlist's port
`m_axi__rresp` is the VCD's `m_axi__rresp$222`, and the VCD's `m_axi__rresp` is the EMA's port
(a `$` name can move the same way). `trace_names` prepares the design both ways from one
elaboration and pairs the names each gives the same signal object: a netlist name found there
means that signal in the trace, whatever its spelling.

Amaranth also writes some signals into the VCD as text, never as bits: an enum-shaped signal as
its member's name (`OKAY`), an FSM's state through its decoder (`Idle/0`). The VCD writer's own
formatting, applied to every value of the signal, gives the text -> value table that turns them
back into bits (`read_vcd`).

Checked against Amaranth 0.5.10 (pyproject.toml pins it): the simulator prepares
`Fragment.get(component, None).prepare()` and writes each signal under ("bench", *module name)
(amaranth/sim/pysim.py `_VCDWriter`); `rtlil.convert` names the ports from the signature and
prepares with hierarchy (top,) (amaranth/back/rtlil.py `convert`); the tables read the private
`Signal._format` the VCD writer reads.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from amaranth.hdl import Format, Fragment, Value, ValueCastable
from amaranth.hdl._ir import PortDirection  # prepare() accepts no other port direction
from amaranth.lib import wiring

__all__ = ["TraceNames", "trace_names", "vcd_text"]

#: widest signal whose decoder is tabulated over every value (2**16 calls, well under a second)
MAX_DECODED_BITS = 16

#: how pyvcd writes a string value (pyvcd 0.4.2, `StringVariable.format_value`)
_VCD_ESCAPES = {9: "\\t", 10: "\\n", 13: "\\r", 32: "\\x20", 92: "\\\\"}


@dataclass(frozen=True)
class TraceNames:
    #: a net name as the netlist spells it (RTLIL name, flattened: `engine.acc`) -> the same
    #: signal's name in the trace
    of_net: dict[str, str]
    #: the trace name of each signal the VCD holds as text -> (its width, {text: value})
    texts: dict[str, tuple[int, dict[str, int]]]


def vcd_text(text: str) -> str:
    """`text` as it appears in the VCD."""
    return text.translate(_VCD_ESCAPES)


def _rtlil_ports(component) -> list:
    """The ports `rtlil.convert` gives a component: its signature's members, in order."""
    ports = []
    for path, member, value in component.signature.flatten(component):
        if isinstance(value, ValueCastable):
            value = value.as_value()
        if isinstance(value, Value):
            direction = PortDirection.Input if member.flow == wiring.In else PortDirection.Output
            ports.append(("__".join(map(str, path)), value, direction))
    return ports


def _text_values(signal) -> tuple[int, dict[str, int]] | None:
    """(width, {VCD text: value}) of a signal the VCD writes as text; None for one it writes as
    bits, or whose text does not give its value back (two values, one text: left out)."""
    width, signed = len(signal), signal.shape().signed
    decoder = signal.decoder
    if decoder is not None and not isinstance(decoder, enum.EnumMeta):
        if width > MAX_DECODED_BITS:
            return None
        low = -(1 << (width - 1)) if signed else 0
        pairs = []
        for value in range(low, low + (1 << width)):
            try:
                pairs.append((decoder(value), value))
            except Exception:
                # a value the decoder rejects (an FSM's unused code) never reached the VCD: its
                # writer calls the same decoder and the simulation would have stopped
                continue
    elif isinstance(signal._format, Format.Enum):
        # a value that is no member prints "[unknown]": that text has no single value
        pairs = [(name, v) for v, name in signal._format._variants.items()]
    else:
        return None
    table: dict[str, int] = {}
    ambiguous = set()
    for text, value in pairs:
        text = vcd_text(text)
        if text in table:
            ambiguous.add(text)
        table[text] = value & ((1 << width) - 1)
    return width, {t: v for t, v in table.items() if t not in ambiguous}


def trace_names(component, top: str) -> TraceNames:
    """The names of `component` as the netlist of module `top` and as its simulation's VCD
    spell them (see the module doc)."""
    fragment = Fragment.get(component, None)
    defined = set(fragment.domains)
    simulated = fragment.prepare()  # what amaranth.sim.Simulator does
    # The first prepare created the missing domains and made their clock and reset ports; the
    # second, on the fragment it completed, must not propagate again (the domains it pushed into
    # every module would clash) and is given those ports as prepare() adds them: last, unnamed.
    clocks = [(None, s, PortDirection.Input) for name, domain in fragment.domains.items()
              if name not in defined for s in (domain.clk, domain.rst) if s is not None]
    synthesized = fragment.prepare([*_rtlil_ports(component), *clocks], hierarchy=(top,),
                                   propagate_domains=False)

    def flat(module: tuple[str, ...], name: str) -> str:
        return ".".join((*module[1:], name))  # Yosys's `flatten` joins them with dots

    of_net, texts = {}, {}
    # both list the same modules in the same order (depth first over one fragment tree)
    for net, sim in zip(synthesized.fragments.values(), simulated.fragments.values(), strict=True):
        for signal, name in net.signal_names.items():
            if signal in sim.signal_names:
                of_net[flat(net.name, name)] = flat(sim.name, sim.signal_names[signal])
        for signal, name in sim.signal_names.items():
            table = _text_values(signal)
            if table is not None:
                texts[flat(sim.name, name)] = table
    return TraceNames(of_net, texts)
