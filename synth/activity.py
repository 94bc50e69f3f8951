"""Switching activity of every net of the gate netlist, from a simulation of the RTL.

OpenSTA 2019 reads no VCD or SAIF, and it overwrites activities set on flip-flop outputs with its
own probabilistic propagation (checked on this build: annotations on Q pins made before the first
power evaluation are ignored; later ones are kept but never propagated into the logic). So the
flow computes the activity of every net itself and annotates every pin:

1. The block runs in Amaranth's simulator under its stimulus; the VCD is sampled once per clock
   cycle, just before each rising edge (`read_vcd`): every signal bit becomes a bitset whose bit k
   is its value in cycle k.
   Signals the VCD holds as text (an enum's member name, an FSM state's `Name/N`) are turned
   back into bits by the design's own text -> value tables (synth/signal_names.py).
2. Input ports and flip-flop outputs keep their RTL names through synthesis, so their values are
   taken from the trace by name (`evaluate`), each netlist name translated to the VCD's name of
   the same signal (synth/signal_names.py: Amaranth numbers clashing names differently in RTLIL
   and in the VCD; without that translation a name with `$` is not used). Every other net is
   computed from them by evaluating the liberty function of each gate over all cycles at once
   (zero-delay: no glitches).
3. A check that the mapping is right: for every flip-flop, the evaluated D input in cycle k must
   equal the traced Q in cycle k+1. A flip-flop whose name is not in the trace, or whose traced
   values disagree, gets its values from the netlist itself: Q[k+1] = D[k], iterated; feedback
   among such flip-flops is simulated cycle by cycle instead. Nets that depend on an input
   missing from the trace are "unknown" and get the configured default activity.

With clock gates (synth/clock_gating.py: an inverter on the clock, a latch open while the clock
is low, an AND of the clock and the latch), sampled once per cycle before the rising edge:
the latch shows the enable of the same cycle, so it is evaluated as a buffer; a flip-flop on a
gated clock loads only in the cycles whose enable is 1 (Q[k+1] = en[k] ? D[k] : Q[k]); the
inverted and gated clocks are clock nets, left to OpenSTA, each gated clock with its own
clock whose rate is the share of cycles it is enabled (`Evaluation.clock_gates`).

Activity is toggles per clock cycle, duty the fraction of cycles a net is high.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from ..support.tools import ToolError
from .liberty import Cell, Function, Library, Pin, compile_function
from .netlist import Netlist, NetlistCell, data_input_bits

__all__ = ["Trace", "read_vcd", "trace_lookup", "input_candidates", "Evaluation", "evaluate",
           "activity_tcl"]


@dataclass(frozen=True)
class Trace:
    """Signal values per clock cycle: (name, bit index) -> bitset over `cycles` cycles.

    Names are hierarchical below the design's top (`acc`, `sub.count`), as Yosys names nets
    after flattening."""
    cycles: int
    bits: dict[tuple[str, int], int]


def read_vcd(path: Path, clock: str = "clk",
             texts: dict[str, tuple[int, dict[str, int]]] | None = None) -> Trace:
    """Sample every plain signal of an Amaranth VCD just before each rising edge of `clock`.

    The design's top scope is the shallowest one holding `clock`. Decoded views that Amaranth
    adds (`\\payload.act[0]`) are skipped; the flat signals carry the same bits. A signal held as
    text is read when `texts` gives its name below the top scope, its width and the value of
    each of its texts (`signal_names.TraceNames.texts`), and skipped when not or when it holds a
    text the table lacks. (pyvcd's reader is not used: it rejects the `$`-prefixed names Amaranth
    gives unnamed signals, and is ten times slower on these files.)"""
    texts = texts or {}
    tokens = Path(path).read_bytes().split()
    variables: dict[bytes, list[tuple[tuple[str, ...], str, int]]] = {}
    text_variables: dict[bytes, list[tuple[tuple[str, ...], str]]] = {}
    changes: dict[bytes, list[tuple[int, int]]] = {}
    text_changes: dict[bytes, list[tuple[int, bytes]]] = {}
    scope: list[str] = []
    i, n = 0, len(tokens)
    while i < n:  # header: $scope / $var / $upscope up to $enddefinitions
        tok = tokens[i]
        if tok == b"$enddefinitions":
            i = tokens.index(b"$end", i) + 1
            break
        end = tokens.index(b"$end", i)
        if tok == b"$scope":
            scope.append(tokens[i + 2].decode())
        elif tok == b"$upscope":
            scope.pop()
        elif tok == b"$var":
            kind, width, code, reference = tokens[i + 1:i + 5]
            ref = reference.decode()
            # a flat signal: no single-bit select after the name (a full [N-1:0] range is fine),
            # not a view (`\\a.b`), not a real; a string is read only through `texts`
            span = tokens[i + 5:end]
            whole = not span or span == [f"[{int(width) - 1}:0]".encode()]
            if whole and kind != b"real" and not ref.startswith("\\") and "." not in ref:
                if kind == b"string":
                    text_variables.setdefault(code, []).append((tuple(scope), ref))
                else:
                    variables.setdefault(code, []).append((tuple(scope), ref, int(width)))
        i = end + 1
    time = 0
    while i < n:
        tok = tokens[i]
        head = tok[:1]
        if head == b"#":
            time = int(tok[1:])
        elif head in (b"b", b"B"):
            bits = tok[1:].replace(b"x", b"0").replace(b"z", b"0").replace(b"X", b"0") \
                .replace(b"Z", b"0")
            changes.setdefault(tokens[i + 1], []).append((time, int(bits, 2)))
            i += 1
        elif head in (b"s", b"S") and tokens[i + 1] in text_variables:
            text_changes.setdefault(tokens[i + 1], []).append((time, tok[1:]))
            i += 1
        elif head in (b"r", b"R", b"s", b"S"):
            i += 1  # a real value, or a text no table reads, and its identifier: no bits
        elif head in (b"0", b"1", b"x", b"z", b"X", b"Z"):
            changes.setdefault(tok[1:], []).append((time, 1 if head == b"1" else 0))
        i += 1  # anything else is a keyword ($dumpvars, $end, ...)

    clocks = [(len(s), s, code) for code, refs in variables.items() for s, r, w in refs
              if r == clock and w == 1]
    if not clocks:
        raise ToolError(f"{path} has no 1-bit signal {clock!r}: cannot find the clock edges")
    _, root, clock_code = min(clocks)
    edges = []
    previous = None
    for t, v in changes.get(clock_code, []):
        if v == 1 and previous == 0:
            edges.append(t)
        previous = v
    if len(edges) < 2:
        raise ToolError(f"{path} holds {len(edges)} rising edges of {clock!r}: too short to "
                        "measure activity")

    bits: dict[tuple[str, int], int] = {}

    def add(name: str, samples: list[int], width: int) -> None:
        rows = [format(v, f"0{width}b")[-width:] for v in samples]
        # one string per bit, cycle 0 first; reversed so that cycle 0 is the lowest bit
        for index, column in enumerate(reversed(list(zip(*rows)))):
            bits[(name, index)] = int("".join(reversed(column)), 2)

    def below_root(s: tuple[str, ...], reference: str) -> str | None:
        return ".".join(s[len(root):] + (reference,)) if s[:len(root)] == root else None

    for code, refs in variables.items():
        samples = _sample(changes.get(code, []), edges)
        for s, reference, width in refs:
            name = below_root(s, reference)
            if name is not None:
                add(name, samples, width)
    for code, refs in text_variables.items():
        samples = _sample(text_changes.get(code, []), edges, None)
        for s, reference in refs:
            name = below_root(s, reference)
            if name not in texts:
                continue
            width, values = texts[name]
            decoded = [values.get(text.decode(errors="replace")) if text is not None else None
                       for text in samples]
            if None not in decoded:
                add(name, decoded, width)
    return Trace(len(edges), bits)


def _sample(changes: list[tuple[int, object]], edges: list[int], initial: object = 0) -> list:
    """The value each signal held just before each edge (changes at an edge's own time belong to
    the cycle it starts); `initial` before its first change."""
    out, value, i = [], initial, 0
    for edge in edges:
        while i < len(changes) and changes[i][0] < edge:
            value = changes[i][1]
            i += 1
        out.append(value)
    return out


@functools.cache
def _compiled(expr: str) -> tuple[Function, frozenset[str]]:
    return compile_function(expr)


@dataclass
class Evaluation:
    """Per-net activity of a netlist under a trace, and how much of it came from the trace."""
    cycles: int
    activity: dict[int, tuple[float, float]]  # net bit -> (toggles per cycle, duty)
    high_cycles: dict[int, int]  # net bit -> cycles it is high
    unknown: set[int]  # nets whose values could not be computed
    clock_bits: set[int]  # the clock and the nets of clock gates derived from it
    stats: dict = field(default_factory=dict)
    #: per clock gate: the cell driving its gated clock, that output pin, and the cycles enabled
    clock_gates: list[tuple[str, str, int]] = field(default_factory=list)


#: a combinational stand-in for a clock gate's latch: it shows its enable in the same cycle
_TRANSPARENT = "edgexpert-transparent-latch"


@dataclass(frozen=True)
class _Gating:
    """The clock gates of a netlist, by structure (see the module doc)."""
    clock_nets: set[int]  # inverted and gated clocks
    gate_cells: set[str]  # the inverters, latches and ANDs of the gates
    buffers: list[NetlistCell]  # each latch as a _TRANSPARENT cell, D -> Q
    enable: dict[str, int]  # gated flip-flop -> the enable bit its gate holds
    gates: list[tuple[str, str, int]]  # (AND cell, its output pin, the enable bit)


def _truth(lib, pin_values: dict[str, int]) -> int | None:
    outputs = [p for p in lib.outputs if lib.pins[p].function]
    if len(outputs) != 1:
        return None
    compiled, names = _compiled(lib.pins[outputs[0]].function)
    return compiled({n: pin_values.get(n, 0) for n in names}, 1) & 1


def _find_gating(netlist: Netlist, library: Library, clock_bits: set[int]) -> _Gating:
    lib_of = {c.name: library.cell(c.type) for c in netlist.cells}
    inverted, latches, gate_cells = {}, {}, set()
    for c in netlist.cells:
        lib = lib_of[c.name]
        if lib.state is None and len(lib.inputs) == 1 and c.pins.get(lib.inputs[0]) in clock_bits \
                and _truth(lib, {lib.inputs[0]: 0}) == 1 and _truth(lib, {lib.inputs[0]: 1}) == 0:
            out = c.pins.get(lib.outputs[0])
            if isinstance(out, int):
                inverted[out] = c.name
    for c in netlist.cells:
        lib = lib_of[c.name]
        st = lib.state
        if st is not None and st.kind == "latch" and c.pins.get(st.clocked_on) in inverted:
            (q_pin,) = [p for p in lib.outputs if lib.pins[p].function == st.state]
            latches[c.pins[q_pin]] = (c, st.next_state, inverted[c.pins[st.clocked_on]])
    gates = {}
    for c in netlist.cells:
        lib = lib_of[c.name]
        if lib.state is not None or len(lib.inputs) != 2:
            continue
        a, b = (c.pins.get(p) for p in lib.inputs)
        clock_pin, other = ((lib.inputs[0], b) if a in clock_bits else
                            (lib.inputs[1], a) if b in clock_bits else (None, None))
        if clock_pin is None or other not in latches:
            continue
        other_pin = [p for p in lib.inputs if p != clock_pin][0]
        if all(_truth(lib, {clock_pin: x, other_pin: y}) == (x & y) for x in (0, 1) for y in (0, 1)):
            out_pin = lib.outputs[0]
            gates[c.pins[out_pin]] = (c.name, out_pin, other)
    used = {en for _, _, en in gates.values()}
    buffers = []
    for q, (cell, d_pin, inverter) in latches.items():
        if q in used:
            gate_cells |= {cell.name, inverter}
            buffers.append(NetlistCell(cell.name, _TRANSPARENT, {"A": cell.pins.get(d_pin),
                                                                  "Y": q}))
    gate_cells |= {name for name, _, _ in gates.values()}
    enable = {}
    for c in netlist.cells:
        st = lib_of[c.name].state
        if st is not None and st.kind == "ff" and c.pins.get(st.clocked_on) in gates:
            enable[c.name] = gates[c.pins[st.clocked_on]][2]
    clock_nets = set(gates) | {b for b, name in inverted.items() if name in gate_cells}
    return _Gating(clock_nets, gate_cells, buffers, enable, list(gates.values()))


def _with_transparent(library: Library) -> Library:
    cell = Cell(_TRANSPARENT, 0.0, {"A": Pin("A", "input"), "Y": Pin("Y", "output", "A")})
    return Library(library.name, {**library.cells, _TRANSPARENT: cell})


def trace_lookup(trace: Trace, candidates, trace_names: dict[str, str]) -> int | None:
    """A net bit's values over the trace's cycles from the first of its `candidates` the trace
    has: an RTL (name, index) or a constant "0" / "1". With `trace_names` (the netlist's RTL
    names to the trace's, `signal_names.TraceNames.of_net`) each name is mapped; without them
    a name with `$` is not used. None when no candidate is in the trace."""
    for candidate in candidates:
        if isinstance(candidate, str):
            return (1 << trace.cycles) - 1 if candidate == "1" else 0
        name, index = candidate
        if trace_names:
            # the same signal's name in the trace; a name the design does not give it (a
            # view's field, a cut memory's port) names no signal there
            name = trace_names.get(name)
        elif "$" in name:
            # Amaranth numbers clashing and unnamed signals (`en$14`, `$signature__en`) one
            # way in RTLIL and another in the VCD: such a name may mean another signal there
            continue
        if (name, index) in trace.bits:
            return trace.bits[(name, index)]
    return None


def input_candidates(netlist: Netlist, aliases: dict, port: str, index: int, bit: int) -> list:
    """The names an input bit's values are looked up by (`trace_lookup`), in order: the port
    itself, its alias (a cut memory's read data: a constant or the RTL names of its bits), then
    every RTL name of its net."""
    alias = aliases[port][index] if port in aliases else []
    return [(port, index), *([alias] if isinstance(alias, str) else alias),
            *netlist.names.get(bit, [])]


def evaluate(netlist: Netlist, library: Library, trace: Trace,
             aliases: dict[str, list] | None = None, clock: str = "clk",
             max_passes: int = 8, trace_names: dict[str, str] | None = None) -> Evaluation:
    """Values of every net of `netlist` in every cycle of `trace` (see the module doc).

    `aliases` names, for an input port that is not in the RTL (a cut-out memory's read data), the
    RTL names of each port bit: {port: [[(name, index), ...] | "0" | "1", ...]}. `trace_names`
    gives the trace's name of each RTL name's signal (`signal_names.TraceNames.of_net`); without
    it a name is taken as the trace's, unless it has a `$`."""
    aliases = aliases or {}
    trace_names = trace_names or {}
    cycles = trace.cycles
    mask = (1 << cycles) - 1
    values: dict[int, int] = {}
    known: set[int] = set()

    clock_bits = {b for b in netlist.inputs.get(clock, []) if isinstance(b, int)}
    gating = _find_gating(netlist, library, clock_bits)
    library = _with_transparent(library)
    cells = [c for c in netlist.cells if c.name not in gating.gate_cells] + gating.buffers
    inputs_total = inputs_traced = 0
    for port, i, bit in data_input_bits(netlist, clock):
        inputs_total += 1
        value = trace_lookup(trace, input_candidates(netlist, aliases, port, i, bit), trace_names)
        if value is not None:
            values[bit] = value
            known.add(bit)
            inputs_traced += 1

    sequential = [c for c in cells if library.cell(c.type).state is not None]
    combinational = [c for c in cells if library.cell(c.type).state is None]
    enable = gating.enable
    order = _topological(combinational, library)

    # the value each state element holds: from the trace where its output net is named there
    state: dict[str, int] = {}
    traced: set[str] = set()
    for cell in sequential:
        lib = library.cell(cell.type)
        for pin in lib.outputs:
            bit = cell.pins.get(pin)
            function = lib.pins[pin].function
            if isinstance(bit, int) and function in (lib.state.state, lib.state.state_inverted):
                value = trace_lookup(trace, netlist.names.get(bit, []), trace_names)
                if value is not None:
                    state[cell.name] = value if function == lib.state.state else value ^ mask
                    traced.add(cell.name)
                    break
        state.setdefault(cell.name, 0)

    def settle(unknown_state: set[str]) -> dict[str, tuple[int, bool]]:
        _drive_state_outputs(sequential, library, state, values, known, unknown_state, mask)
        _evaluate_combinational(order, library, values, known, mask)
        return {c.name: _next_state(c, library.cell(c.type), values, known, mask,
                                    enable.get(c.name), state[c.name])
                for c in sequential}

    # Untraced state elements follow the netlist (Q[k+1] = D[k]) with the traced ones fixed; then
    # every traced one must follow its D, or its name matched the wrong thing and it is untraced.
    from_trace = {name: state[name] for name in traced}
    simulated: set[str] = set()
    settle(set())
    for _ in range(len(sequential) + 1):
        untraced = [c for c in sequential if c.name not in traced]
        for _ in range(max_passes):
            moving = False
            for cell in untraced:
                nxt = _next_state(cell, library.cell(cell.type), values, known, mask,
                                  enable.get(cell.name), state[cell.name])[0]
                new = ((nxt << 1) | (state[cell.name] & 1)) & mask
                moving |= new != state[cell.name]
                state[cell.name] = new
            settle(set())
            if not moving:
                break
        else:
            # feedback among untraced elements settles one cycle per pass: simulate them instead
            _simulate_cycles(untraced, order, library, state, values, cycles, enable)
            simulated |= {c.name for c in untraced}
        wrong = {}
        for name, (nxt, ok) in settle(set()).items():
            if name in traced and ok:
                count = ((nxt ^ (state[name] >> 1)) & (mask >> 1)).bit_count()
                if count:
                    wrong[name] = count
        if not wrong:
            break
        traced -= set(wrong)
    # known-ness: an untraced state element is known when its next-state inputs are
    unknown_state: set[str] = set()
    while True:
        newly = {name for name, (_, ok) in settle(unknown_state).items()
                 if not ok and name not in traced and name not in unknown_state}
        if not newly:
            break
        unknown_state |= newly

    # a state element whose traced values the netlist reproduced (e.g. one demoted only because
    # it is fed by a wrongly named one) counts as traced
    agree = {name for name, value in from_trace.items() if state[name] == value}
    pair_mask = mask >> 1
    activity = {bit: (((v ^ (v >> 1)) & pair_mask).bit_count() / max(cycles - 1, 1),
                      v.bit_count() / cycles)
                for bit, v in values.items() if bit in known}
    clock_bits = clock_bits | gating.clock_nets
    nets = {b for c in netlist.cells for b in c.pins.values() if isinstance(b, int)} - clock_bits
    unknown = nets - set(activity)
    high = {bit: v.bit_count() for bit, v in values.items() if bit in known}
    gates = [(cell, pin, high.get(en, 0)) for cell, pin, en in gating.gates]
    return Evaluation(cycles, activity, high, unknown, clock_bits, {
        "cycles": cycles,
        "input_bits": inputs_total, "input_bits_from_trace": inputs_traced,
        "state_elements": len(sequential),
        "state_from_trace": len(agree),
        "state_from_netlist": len(sequential) - len(agree) - len(unknown_state),
        "state_simulated_cycle_by_cycle": len(simulated),
        "state_unknown": len(unknown_state),
        "state_names_disagreeing": len(from_trace) - len(agree),
        "nets": len(nets), "nets_evaluated": len(nets) - len(unknown),
        "nets_default_activity": len(unknown),
        "clock_gates": len(gates), "gated_flip_flops": len(enable),
    }, gates)


def _drivers(cells, library: Library) -> dict[int, NetlistCell]:
    out = {}
    for cell in cells:
        for pin in library.cell(cell.type).outputs:
            bit = cell.pins.get(pin)
            if isinstance(bit, int):
                out[bit] = cell
    return out


def _topological(cells, library: Library) -> list[NetlistCell]:
    """Combinational cells in an order where every cell comes after the cells driving it."""
    driver = _drivers(cells, library)
    order, done, active = [], set(), set()
    for start in cells:
        stack = [(start, False)]
        while stack:
            cell, expanded = stack.pop()
            if expanded:
                active.discard(cell.name)
                if cell.name not in done:
                    done.add(cell.name)
                    order.append(cell)
                continue
            if cell.name in done:
                continue
            if cell.name in active:
                raise ToolError(f"combinational loop through cell {cell.name} ({cell.type})")
            active.add(cell.name)
            stack.append((cell, True))
            for pin in library.cell(cell.type).inputs:
                src = driver.get(cell.pins.get(pin))
                if src is not None and src.name not in done:
                    stack.append((src, False))
    return order


def _drive_state_outputs(sequential, library, state, values, known, unknown_state, mask):
    for cell in sequential:
        lib = library.cell(cell.type)
        env = {lib.state.state: state[cell.name], lib.state.state_inverted: state[cell.name] ^ mask}
        for pin in lib.outputs:
            bit = cell.pins.get(pin)
            function = lib.pins[pin].function
            if isinstance(bit, int) and function:
                values[bit] = _compiled(function)[0](env, mask)
                (known.discard if cell.name in unknown_state else known.add)(bit)


def _simulate_cycles(flops, order, library: Library, state, values, cycles,
                     enable: dict[str, int]) -> None:
    """Cycle by cycle, the state of `flops` (untraced, in feedback): only the logic between
    their outputs and their next-state inputs (and the enables of their clock gates) is
    evaluated, one bit per cycle."""
    driver = _drivers(order, library)
    names = {c.name for c in flops}
    outputs = {}  # output bit -> (flop name, output function, liberty cell)
    for cell in flops:
        lib = library.cell(cell.type)
        for pin in lib.outputs:
            if isinstance(cell.pins.get(pin), int) and lib.pins[pin].function:
                outputs[cell.pins[pin]] = (cell.name, _compiled(lib.pins[pin].function)[0], lib)
    cone, seen = set(), set()
    stack = [cell.pins.get(p) for cell in flops for p in library.cell(cell.type).inputs]
    stack += [enable[cell.name] for cell in flops if cell.name in enable]
    while stack:
        bit = stack.pop()
        if not isinstance(bit, int) or bit in seen:
            continue
        seen.add(bit)
        if bit in driver and bit not in outputs:
            cell = driver[bit]
            cone.add(cell.name)
            stack.extend(cell.pins.get(p) for p in library.cell(cell.type).inputs)
    steps = [c for c in order if c.name in cone]
    leaves = [b for b in seen if b in values and b not in outputs
              and not (b in driver and driver[b].name in cone)]
    current = {name: state[name] & 1 for name in names}
    history = {name: 0 for name in names}
    for t in range(cycles):
        bits = {b: (values[b] >> t) & 1 for b in leaves}
        for bit, (name, function, lib) in outputs.items():
            q = current[name]
            bits[bit] = function({lib.state.state: q, lib.state.state_inverted: q ^ 1}, 1)
        for cell in steps:
            lib = library.cell(cell.type)
            for pin in lib.outputs:
                bit = cell.pins.get(pin)
                if isinstance(bit, int) and lib.pins[pin].function:
                    compiled, pins = _compiled(lib.pins[pin].function)
                    bits[bit] = compiled(_pin_values(cell, pins, bits, bits, 1)[0], 1)
        for cell in flops:
            history[cell.name] |= current[cell.name] << t
            current[cell.name] = _next_state(cell, library.cell(cell.type), bits, bits, 1,
                                             enable.get(cell.name), current[cell.name])[0]
    state.update(history)


def _pin_values(cell, names, values, known, mask):
    env, ok = {}, True
    for pin in names:
        bit = cell.pins.get(pin)
        if isinstance(bit, int):
            env[pin] = values.get(bit, 0)
            ok = ok and bit in known
        else:
            env[pin] = mask if bit == "1" else 0
    return env, ok


def _evaluate_combinational(order, library: Library, values, known, mask):
    for cell in order:
        lib = library.cell(cell.type)
        for pin in lib.outputs:
            bit = cell.pins.get(pin)
            function = lib.pins[pin].function
            if not isinstance(bit, int) or not function:
                continue
            compiled, names = _compiled(function)
            env, ok = _pin_values(cell, names, values, known, mask)
            values[bit] = compiled(env, mask)
            (known.add if ok else known.discard)(bit)


def _next_state(cell, lib, values, known, mask, enable: int | None = None,
                current: int = 0) -> tuple[int, bool]:
    """The value the state element takes at the next edge, per cycle, and whether it is known.
    Behind a clock gate with `enable` (a net bit), it keeps `current` where the enable is 0."""
    spec = lib.state
    nxt, names = _compiled(spec.next_state)
    env, ok = _pin_values(cell, names, values, known, mask)
    value = nxt(env, mask)
    if enable is not None:
        en = values.get(enable, 0)
        value = (value & en) | (current & ~en)
        ok = ok and enable in known
    for expr, forced in ((spec.clear, 0), (spec.preset, mask)):
        if expr:
            f, n = _compiled(expr)
            e, o = _pin_values(cell, n, values, known, mask)
            active = f(e, mask)
            value = (value & ~active) | (forced & active)
            ok = ok and o
    return value & mask, ok


def activity_tcl(netlist: Netlist, instances: dict[str, str], evaluation: Evaluation,
                 default_activity: float, clock_period_ns: float | None = None) -> str:
    """Tcl that annotates every pin of the power netlist with its net's activity and duty, and
    gives each gated clock a clock of its own at the rate it is enabled (`clock_period_ns`, the
    main clock's, is needed when there are clock gates). OpenSTA takes a clock network's
    activity from its clock, not from annotations (checked on this build), hence the clocks."""
    pins: dict[int, list[str]] = {}
    for cell in netlist.cells:
        for pin, bit in cell.pins.items():
            if isinstance(bit, int) and bit not in evaluation.clock_bits:
                pins.setdefault(bit, []).append(f"{instances[cell.name]}/{pin}")
    lines = ["proc edgexpert_annotate {activity duty pins} {",
             "  foreach pin $pins { sta::set_power_pin_activity [get_pins $pin] $activity $duty }",
             "}"]
    for bit in sorted(pins):
        act, duty = evaluation.activity.get(bit, (default_activity, 0.5))
        lines.append(f"edgexpert_annotate {act:.6g} {duty:.6g} {{{' '.join(pins[bit])}}}")
    by_cycles: dict[int, list[str]] = {}
    for cell, pin, enabled in evaluation.clock_gates:
        by_cycles.setdefault(enabled, []).append(f"{instances[cell]}/{pin}")
    if by_cycles and clock_period_ns is None:
        raise ValueError("the netlist has clock gates: activity_tcl needs clock_period_ns")
    for i, (enabled, gated) in enumerate(sorted(by_cycles.items())):
        # ticks in `enabled` of the window's cycles; one never enabled counts one tick (a bound)
        period = clock_period_ns * evaluation.cycles / max(enabled, 1)
        lines.append(f"create_clock -name edgexpert_gated{i} -period {period:.6g} "
                     f"[get_pins {{{' '.join(gated)}}}]")
    return "\n".join(lines) + "\n"
