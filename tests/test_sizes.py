"""The house's room sizes: no module over 500 lines, no class over 250 lines of code, no
function over 60 (docstrings not counted: a public docstring's sections and examples are
documentation, not code)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "dedup_lib"
MODULE, CLASS, FUNCTION = 500, 250, 60


def _code_lines(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The node's lines without its docstrings' (its own, its methods')."""
    lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
    for inner in ast.walk(node):
        if isinstance(inner, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = inner.body[0] if inner.body else None
            if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                lines -= doc.end_lineno - doc.lineno + 1  # type: ignore[operator]
    return lines


def _sizes() -> list[str]:
    over = []
    for path in sorted(SRC.rglob("*.py")):
        if "resources" in path.parts:
            continue
        text = path.read_text()
        name = str(path.relative_to(SRC))
        if len(text.splitlines()) > MODULE:
            over.append(f"module {name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and _code_lines(node) > CLASS:
                over.append(f"class {name}:{node.name}: {_code_lines(node)} lines")
            function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if function and _code_lines(node) > FUNCTION:
                over.append(f"function {name}:{node.name}: {_code_lines(node)} lines")
    return over


def test_no_room_is_over_its_size() -> None:
    assert _sizes() == []
