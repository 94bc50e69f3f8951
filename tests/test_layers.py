"""Imports go one way (docs/architecture.md, "Layers"): the contracts and support at the bottom;
hw/ and golden/ above them and blind to each other, golden/'s subpackages in one order; sim/'s
performance model above golden/ and blind to hw/, its RTL stimuli above both; synth/ and the
benches above sim/; the formal property wrappers above hw/ alone; the block registry above
those; the command line on top. A bench imports none of golden's integer primitives: it takes
every expected value from golden/ or contracts/. hw/ never reads the configuration: its
parameters are arguments. The test reads every module's imports with `ast`
(function-local ones included, so a cycle cannot hide behind one) and fails on an import that
is not allowed and on any cycle between modules."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

#: package (or module) -> the project packages it may import, besides itself and `edgexpert`
_CORE = {"edgexpert.contracts", "edgexpert.support"}
_GOLDEN = {"edgexpert.golden"} | {f"edgexpert.golden.{sub}" for sub in
                                  ("lm", "integer", "blocks", "decoding", "policies", "traces",
                                   "studies")}
_SIM = {"edgexpert.sim.perf", "edgexpert.sim.stimuli"}
ALLOWED = {
    "edgexpert.support": set(),
    "edgexpert.contracts": set(),
    "edgexpert.hw": _CORE,
    # golden/ by concern, each above the ones it builds on: the model, its integer path, the
    # block references, decoding, the policies, then what is written or studied with them
    "edgexpert.golden": _CORE,
    "edgexpert.golden.lm": _CORE,
    "edgexpert.golden.integer": _CORE | {"edgexpert.golden.lm"},
    "edgexpert.golden.blocks": _CORE | {"edgexpert.golden.integer"},
    "edgexpert.golden.decoding": _CORE | {"edgexpert.golden.lm", "edgexpert.golden.integer"},
    "edgexpert.golden.policies": _CORE | {"edgexpert.golden.lm", "edgexpert.golden.integer",
                                          "edgexpert.golden.blocks", "edgexpert.golden.decoding"},
    "edgexpert.golden.traces": _CORE | {"edgexpert.golden.lm", "edgexpert.golden.integer",
                                        "edgexpert.golden.blocks", "edgexpert.golden.decoding",
                                        "edgexpert.golden.policies"},
    "edgexpert.golden.studies": _CORE | _GOLDEN - {"edgexpert.golden.studies"},
    # sim/: the performance model never sees the RTL; the RTL stimuli never see the model
    "edgexpert.sim": _CORE,
    "edgexpert.sim.perf": _CORE | _GOLDEN,
    "edgexpert.sim.stimuli": _CORE | _GOLDEN | {"edgexpert.hw"},
    "edgexpert.synth": _CORE | {"edgexpert.hw"} | _GOLDEN | _SIM,
    "edgexpert.cocotb_tests": _CORE | {"edgexpert.hw"} | _GOLDEN | _SIM,
    # the property wrappers elaborate the RTL; like the RTL they never see its references
    "edgexpert.formal": _CORE | {"edgexpert.hw"},
    "edgexpert.blocks": _CORE | {"edgexpert.hw"} | _GOLDEN | _SIM,
    "edgexpert.cli": _CORE | {"edgexpert.hw", "edgexpert.synth", "edgexpert.cocotb_tests",
                              "edgexpert.formal", "edgexpert.blocks"} | _GOLDEN | _SIM,
    "edgexpert.__main__": {"edgexpert.cli"},
}
#: a bench drives the RTL and compares with golden's values; it computes none itself (docs/
#: architecture.md, "Layers"), so it never needs the integer primitives an expected value is made
#: of: it imports golden's functions that give the values (golden/integer/int_model.py,
#: golden/traces/expert_outputs.py, golden/blocks/) instead
BENCH_FORBIDDEN = {"edgexpert.golden.integer.intops"}
#: hw/ takes its parameters as arguments and never reads the configuration's schema: the
#: configuration becomes the blocks' arguments above it (edgexpert/contracts/hardware.py)
HW_FORBIDDEN = {"edgexpert.contracts.config", "edgexpert.contracts.hardware"}


def _folder(package: str) -> Path:
    return Path(importlib.util.find_spec(package).submodule_search_locations[0])


def project_modules() -> dict[str, Path]:
    """Every module of the installed distribution, by import name, found from the folders the
    packages are installed from (so the test reads what the wheel would hold)."""
    root = _folder("edgexpert")
    folders = {"edgexpert": root}
    for name in ("hw", "golden", "sim", "synth", "cocotb_tests", "formal"):
        folders[f"edgexpert.{name}"] = _folder(f"edgexpert.{name}")
    out = {}
    for package, folder in folders.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, at module level or inside functions."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            targets = [(module, a.name) for a in node.names]
        else:
            continue
        for module, member in targets:
            if not module.startswith("edgexpert"):
                continue
            submodule = f"{module}.{member}" if member else None
            found.add(submodule if submodule in modules else module)
    found.discard(name)
    return found


def unit_of(module: str) -> str:
    matches = [u for u in ALLOWED if module == u or module.startswith(u + ".")]
    return max(matches, key=len) if matches else module


def test_every_module_belongs_to_a_layer():
    stray = [m for m in project_modules() if m != "edgexpert" and unit_of(m) not in ALLOWED]
    assert not stray, f"modules outside every layer (add them to ALLOWED): {stray}"


def test_no_import_goes_up_or_sideways():
    modules = project_modules()
    bad = []
    for name, path in modules.items():
        unit = unit_of(name)
        for target in imports_of(name, path, modules):
            to = unit_of(target)
            if target != "edgexpert" and to != unit and to not in ALLOWED.get(unit, set()):
                bad.append(f"{name} imports {target} ({unit} may import only "
                           f"{sorted(ALLOWED.get(unit, set()))})")
    assert not bad, "\n".join(bad)


def forbidden_imports(modules: dict[str, Path], unit: str, forbidden: set[str]) -> list[str]:
    """The modules of `unit` that import a module of `forbidden`."""
    return [f"{name} imports {target}" for name, path in sorted(modules.items())
            if unit_of(name) == unit
            for target in sorted(imports_of(name, path, modules)) if target in forbidden]


def bench_arithmetic(modules: dict[str, Path]) -> list[str]:
    """The bench modules that import a module of BENCH_FORBIDDEN."""
    return forbidden_imports(modules, "edgexpert.cocotb_tests", BENCH_FORBIDDEN)


def test_no_bench_computes_an_expected_value():
    bad = bench_arithmetic(project_modules())
    assert not bad, ("a bench imports golden's integer primitives (take the expected value "
                     "from golden/ or contracts/ instead):\n" + "\n".join(bad))


def test_hw_never_reads_the_configuration():
    bad = forbidden_imports(project_modules(), "edgexpert.hw", HW_FORBIDDEN)
    assert not bad, ("hw/ reads the configuration (take the values as arguments; "
                     "edgexpert/contracts/hardware.py translates it):\n" + "\n".join(bad))


def test_no_import_cycle_between_modules():
    modules = project_modules()
    graph = {name: imports_of(name, path, modules) & modules.keys()
             for name, path in modules.items()}
    # iterative depth-first search: a back edge closes a cycle
    state, cycles = {}, []
    for start in sorted(graph):
        if start in state:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        state[start] = "open"
        while stack:
            node, edges = stack[-1]
            for nxt in edges:
                if state.get(nxt) == "open":
                    path = [n for n, _ in stack]
                    cycles.append(" -> ".join(path[path.index(nxt):] + [nxt]))
                elif nxt not in state:
                    state[nxt] = "open"
                    stack.append((nxt, iter(sorted(graph[nxt]))))
                    break
            else:
                state[node] = "done"
                stack.pop()
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_checker_sees_a_planted_upward_import(tmp_path):
    """The walk resolves relative imports: a hw module importing golden is caught."""
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from ..golden.lm.model import MoEModel\n")
    modules = {"edgexpert.golden.lm.model": planted}
    assert imports_of("edgexpert.hw.planted", planted, modules) == {"edgexpert.golden.lm.model"}
    assert unit_of("edgexpert.golden.lm.model") not in ALLOWED[unit_of("edgexpert.hw.planted")]


def test_the_checker_sees_a_bench_computing_an_expected_value(tmp_path):
    """A bench importing intops, even inside a function, is refused."""
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from edgexpert.golden.integer.intops import requant\n")
    modules = {"edgexpert.cocotb_tests.top.planted": planted,
               "edgexpert.golden.integer.intops": planted}
    assert bench_arithmetic(modules) == ["edgexpert.cocotb_tests.top.planted imports "
                                         "edgexpert.golden.integer.intops"]
