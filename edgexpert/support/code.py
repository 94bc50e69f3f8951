"""A Python module's code without its comments and docstrings, for cache keys: a key should
change when what the code does may change, not when its documentation is edited."""

from __future__ import annotations

import ast

__all__ = ["code_only"]

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def code_only(source: str) -> str:
    """`source`'s syntax tree, dumped without docstrings (comments the parser drops, line
    numbers `ast.dump` leaves out): equal for two sources that differ only in those."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, _DOCUMENTED) and node.body and _is_docstring(node.body[0]):
            node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


def _is_docstring(statement: ast.stmt) -> bool:
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            and isinstance(statement.value.value, str))
