"""A small reader for the parts of a Liberty file the activity evaluation needs.

It keeps, per cell: the area, each pin's direction and Boolean `function`, and the state
element (`ff` or `latch` group: state variables, next state, clock, clear, preset). Timing and
power tables are parsed over but not kept: OpenSTA reads those itself.

Boolean functions are compiled into closures over bitsets: every value is a Python int whose bit
k is the signal's value in cycle k, so one call evaluates a gate for every simulated cycle.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..support.tools import ToolError

__all__ = ["Pin", "StateElement", "Cell", "Library", "read_liberty", "compile_function"]

#: a compiled function: (values of the names it reads, all-ones mask over the cycles) -> value
Function = Callable[[dict[str, int], int], int]


@dataclass(frozen=True)
class Pin:
    name: str
    direction: str  # input | output | inout | internal
    function: str | None = None


@dataclass(frozen=True)
class StateElement:
    kind: str  # "ff" or "latch"
    state: str  # the variable holding the stored value (e.g. IQ)
    state_inverted: str  # the variable holding its complement (e.g. IQN)
    next_state: str | None  # ff: next_state; latch: data_in
    clocked_on: str | None  # ff: clocked_on; latch: enable
    clear: str | None = None
    preset: str | None = None


@dataclass(frozen=True)
class Cell:
    name: str
    area: float
    pins: dict[str, Pin]
    state: StateElement | None = None

    @property
    def inputs(self) -> list[str]:
        return [p.name for p in self.pins.values() if p.direction == "input"]

    @property
    def outputs(self) -> list[str]:
        return [p.name for p in self.pins.values() if p.direction in ("output", "inout")]


@dataclass(frozen=True)
class Library:
    name: str
    cells: dict[str, Cell] = field(default_factory=dict)

    def cell(self, name: str) -> Cell:
        try:
            return self.cells[name]
        except KeyError:
            raise ToolError(f"cell {name!r} is not in liberty library {self.name!r}") from None


# --- Liberty syntax ---------------------------------------------------------------------------

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}();:,]|[^\s{}();:,"]+')


@dataclass
class _Group:
    kind: str
    args: list[str]
    attrs: dict[str, str]
    groups: list["_Group"]


def _parse_groups(text: str) -> list[_Group]:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = text.replace("\\\n", " ")
    tokens = _TOKEN.findall(text)
    pos = 0

    def unquote(tok: str) -> str:
        return tok[1:-1] if tok.startswith('"') else tok

    def body() -> tuple[dict[str, str], list[_Group]]:
        nonlocal pos
        attrs: dict[str, str] = {}
        groups: list[_Group] = []
        while pos < len(tokens) and tokens[pos] != "}":
            name = tokens[pos]
            pos += 1
            if pos < len(tokens) and tokens[pos] == ":":
                pos += 1
                value = []
                while pos < len(tokens) and tokens[pos] not in (";", "}"):
                    value.append(unquote(tokens[pos]))
                    pos += 1
                if pos < len(tokens) and tokens[pos] == ";":
                    pos += 1
                attrs[name] = " ".join(value)
            elif pos < len(tokens) and tokens[pos] == "(":
                pos += 1
                args = []
                while tokens[pos] != ")":
                    if tokens[pos] != ",":
                        args.append(unquote(tokens[pos]))
                    pos += 1
                pos += 1
                if pos < len(tokens) and tokens[pos] == "{":
                    pos += 1
                    sub_attrs, sub_groups = body()
                    pos += 1  # the closing brace
                    groups.append(_Group(name, args, sub_attrs, sub_groups))
                elif pos < len(tokens) and tokens[pos] == ";":
                    pos += 1  # complex attribute such as capacitive_load_unit (1, pf); unused
            # anything else (a stray token) is skipped
        return attrs, groups

    try:
        _, groups = body()
    except IndexError:
        raise ToolError("liberty file ends inside a group") from None
    return groups


def _cell(group: _Group) -> Cell:
    pins = {}
    state = None
    for sub in group.groups:
        if sub.kind == "pin":
            for name in sub.args:
                pins[name] = Pin(name, sub.attrs.get("direction", "input"),
                                 sub.attrs.get("function"))
        elif sub.kind in ("ff", "latch") and len(sub.args) == 2:
            a = sub.attrs
            state = StateElement(
                sub.kind, sub.args[0], sub.args[1],
                a.get("next_state") if sub.kind == "ff" else a.get("data_in"),
                a.get("clocked_on") if sub.kind == "ff" else a.get("enable"),
                a.get("clear"), a.get("preset"))
    return Cell(group.args[0], float(group.attrs.get("area", 0.0)), pins, state)


@functools.lru_cache(maxsize=4)
def _read(path: str, mtime: float) -> Library:
    groups = _parse_groups(Path(path).read_text())
    library = next((g for g in groups if g.kind == "library"), None)
    if library is None:
        raise ToolError(f"{path} holds no liberty library group")
    return Library(library.args[0] if library.args else Path(path).stem,
                   {g.args[0]: _cell(g) for g in library.groups if g.kind == "cell"})


def read_liberty(path: Path) -> Library:
    """The cells of the liberty file at `path` (parsed once per file version)."""
    path = Path(path)
    return _read(str(path), path.stat().st_mtime)


# --- Boolean functions ------------------------------------------------------------------------

_FUNC_TOKEN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_\[\]\.]*|[01]|[()!'&*|+^])")


def compile_function(expr: str) -> tuple[Function, frozenset[str]]:
    """Compile a Liberty Boolean function into (closure over bitsets, names it reads).

    Operators, from the highest precedence: postfix `'` and prefix `!` (not), `^` (xor),
    `&` / `*` / juxtaposition (and), `|` / `+` (or); `0` and `1` are constants.
    """
    tokens: list[str] = []
    pos = 0
    text = expr.strip()
    while pos < len(text):
        match = _FUNC_TOKEN.match(text, pos)
        if match is None:
            raise ToolError(f"liberty function {expr!r}: cannot read {text[pos:]!r}")
        tokens.append(match.group(1))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    names: set[str] = set()
    at = 0

    def peek() -> str | None:
        return tokens[at] if at < len(tokens) else None

    def take() -> str:
        nonlocal at
        if at == len(tokens):
            raise ToolError(f"liberty function {expr!r} ends early: unbalanced parentheses or "
                            "a missing operand")
        at += 1
        return tokens[at - 1]

    def primary() -> Function:
        tok = take()
        if tok == "(":
            inner = disjunction()
            if take() != ")":
                raise ToolError(f"liberty function {expr!r}: unbalanced parentheses")
            node = inner
        elif tok == "!":
            operand = primary()
            node = lambda v, m: operand(v, m) ^ m  # noqa: E731
        elif tok == "0":
            node = lambda v, m: 0  # noqa: E731
        elif tok == "1":
            node = lambda v, m: m  # noqa: E731
        elif tok[0].isalpha() or tok[0] == "_":
            names.add(tok)
            node = lambda v, m, tok=tok: v[tok]  # noqa: E731
        else:
            raise ToolError(f"liberty function {expr!r}: unexpected {tok!r}")
        while peek() == "'":
            take()
            node = (lambda f: lambda v, m: f(v, m) ^ m)(node)
        return node

    def exclusive() -> Function:
        node = primary()
        while peek() == "^":
            take()
            rhs = primary()
            node = (lambda a, b: lambda v, m: a(v, m) ^ b(v, m))(node, rhs)
        return node

    def conjunction() -> Function:
        node = exclusive()
        while peek() is not None and peek() not in ("|", "+", ")"):
            if peek() in ("&", "*"):
                take()
            rhs = exclusive()
            node = (lambda a, b: lambda v, m: a(v, m) & b(v, m))(node, rhs)
        return node

    def disjunction() -> Function:
        node = conjunction()
        while peek() in ("|", "+"):
            take()
            rhs = conjunction()
            node = (lambda a, b: lambda v, m: a(v, m) | b(v, m))(node, rhs)
        return node

    if not tokens:
        raise ToolError("liberty function is empty")
    function = disjunction()
    if at != len(tokens):
        raise ToolError(f"liberty function {expr!r}: unexpected {tokens[at]!r}")
    return function, frozenset(names)
