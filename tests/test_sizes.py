"""The house's room sizes: no module over 500 lines, no class over 250 lines of code, no
function over 60 (docstrings not counted: a public docstring's sections and examples are
documentation, not code)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "dedup_lib"
#: The benchmarks' scripts, held to the module size too.
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
MODULE, CLASS, FUNCTION = 500, 250, 60
#: The most parameters a public function or a command's entry point takes (issue 72).
PARAMETERS = 12


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


def test_no_benchmark_script_is_over_the_module_size() -> None:
    over = [
        f"{path.name}: {lines} lines"
        for path in sorted(BENCHMARKS.glob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MODULE
    ]
    assert over == []


def test_no_public_door_is_wider_than_twelve_parameters() -> None:
    """Public functions (``dedup_lib.__all__``: its functions, its classes' constructors and
    public methods, its modules' functions) and the commands' entry points (every public
    function of ``dedup_lib.cli``'s modules) take at most 12 parameters, none as ``*args`` or
    ``**kwargs``: more options than that are a record (``WatchOptions``, ``PostmortemOptions``)."""
    import importlib
    import inspect
    import pkgutil

    import dedup_lib
    import dedup_lib.cli

    def own(module: object) -> list[tuple[str, object]]:
        name = getattr(module, "__name__", "")
        return [
            (n, f)
            for n, f in vars(module).items()
            if not n.startswith("_") and inspect.isfunction(f) and f.__module__ == name
        ]

    doors: list[tuple[str, object]] = []
    for name in (n for n in dedup_lib.__all__ if n != "__version__"):
        obj = getattr(dedup_lib, name)
        if inspect.ismodule(obj):
            doors += [(f"{name}.{n}", f) for n, f in own(obj)]
        elif inspect.isclass(obj):
            init = next(k.__dict__["__init__"] for k in obj.__mro__ if "__init__" in k.__dict__)
            if inspect.isfunction(init) and init.__module__.startswith("dedup_lib"):
                doors.append((name, init))
            for member, value in vars(obj).items():
                function = getattr(value, "__func__", value)
                if not member.startswith("_") and inspect.isfunction(function):
                    doors.append((f"{name}.{member}", function))
        else:
            doors.append((name, obj))
    for info in pkgutil.iter_modules(dedup_lib.cli.__path__):
        module = importlib.import_module(f"dedup_lib.cli.{info.name}")
        doors += [(f"dedup_lib.cli.{info.name}.{n}", f) for n, f in own(module)]
    assert len(doors) > 100
    wide = []
    for name, door in doors:
        taken = [
            p for p in inspect.signature(door).parameters.values() if p.name not in ("self", "cls")
        ]
        spread = [p.name for p in taken if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if len(taken) > PARAMETERS or spread:
            wide.append(f"{name}: {len(taken)} parameters" + (f", *{spread}" if spread else ""))
    assert wide == [], "\n".join(wide)
