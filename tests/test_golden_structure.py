"""How the modules of golden/ import each other: every import of the package at module level (none
hidden in a function to dodge a cycle), and no private name of one module imported by another.
Cycles anywhere in the project are tests/test_layers.py's."""

import ast
from pathlib import Path

import edgexpert.golden

GOLDEN = Path(edgexpert.golden.__file__).parent


def _modules() -> dict[str, ast.Module]:
    """Every module of golden/ and its subpackages, by its path below golden/ (`lm/model`)."""
    return {path.relative_to(GOLDEN).with_suffix("").as_posix(): ast.parse(path.read_text(),
                                                                            str(path))
            for path in sorted(GOLDEN.rglob("*.py"))}


def _golden_imports(name: str, node: ast.AST) -> list[ast.ImportFrom]:
    """Relative imports below `node` that stay inside golden/ (`from .x`, `from ..lm.x`)."""
    depth = name.count("/") + 1     # `from ..` leaves a module one folder below golden/
    return [n for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and 1 <= n.level <= depth]


def test_the_walk_sees_the_subpackages():
    names = _modules()
    assert "lm/model" in names and "decoding/policy" in names and len(names) > 30


def test_golden_imports_are_at_module_level():
    local = []
    for name, tree in _modules().items():
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                local += [f"{name}.{fn.name}: from {'.' * n.level}{n.module} import ..."
                          for n in _golden_imports(name, fn)]
    assert not local


def test_no_private_name_crosses_modules():
    crossing = [f"{name}: from {'.' * n.level}{n.module} import {alias.name}"
                for name, tree in _modules().items() for n in _golden_imports(name, tree)
                for alias in n.names if alias.name.startswith("_")]
    assert not crossing
