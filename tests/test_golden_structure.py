"""How the modules of golden/ import each other: every import of the package at module level (none
hidden in a function to dodge a cycle), and no private name of one module imported by another.
Cycles anywhere in the project are tests/test_layers.py's."""

import ast
from pathlib import Path

import edgexpert.golden

GOLDEN = Path(edgexpert.golden.__file__).parent


def _modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text(), str(path)) for path in sorted(GOLDEN.glob("*.py"))}


def _golden_imports(node: ast.AST) -> list[ast.ImportFrom]:
    """`from .x import ...` (level 1) statements below `node`."""
    return [n for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and n.level == 1]


def test_golden_imports_are_at_module_level():
    local = []
    for name, tree in _modules().items():
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                local += [f"{name}.{fn.name}: from .{n.module} import ..." for n in _golden_imports(fn)]
    assert not local


def test_no_private_name_crosses_modules():
    crossing = [f"{name}: from .{n.module} import {alias.name}"
                for name, tree in _modules().items() for n in _golden_imports(tree)
                for alias in n.names if alias.name.startswith("_")]
    assert not crossing
