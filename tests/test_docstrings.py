"""The public docstrings say what the code does: each example shows the values it produces,
and each Returns section that names a DataFrame's columns names those the function returns.

The examples run in ``test_examples.py``; here they are read. An example hides its values
when its output is elided (``...``, ``[...]``, ``Row(id=...)``), skipped or matched loosely
(``+SKIP``, ``+ELLIPSIS``), or when what it prints is ``len(...)``, ``type(...)`` or a
``.count()`` in place of the rows: any of these passes whatever the function returns.

A Returns section names a DataFrame's columns as a bulleted list, one column per item, in
the order the frame has them: ``- ``name``: what it holds`` (the words optional). Where the
function carries the input's columns along, an item without a name says where they go:
``- the input's other columns``. The test runs each public function (and public method)
that returns a DataFrame on a few rows and compares.
"""

from __future__ import annotations

import ast
import doctest
import inspect
import itertools
import re
from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

import dedup_lib
from test_examples import _documented, _is_method, _members, _public_classes, _tests

#: What a Returns item that is not a column stands for: the input's columns carried along.
CARRIED = "<the input's other columns>"


# -- examples that hide their values ---------------------------------------------------------

#: Calls whose printed value stands in for the value itself (and ``.count()``).
STAND_INS = {"len", "type"}
#: Calls whose value is shown as it is, so a stand-in inside them still stands in.
SHOWN_AS_IS = {"print", "int", "float", "str", "bool", "round", "repr"}


def _stand_in(node: ast.AST) -> str | None:
    """The stand-in an expression shows instead of a value: ``len(x)``, ``type(x)`` or
    ``x.count()``, alone, in a tuple, printed, converted (``int(x.count())``) or at the root
    of an attribute, index or comparison (``type(error).__name__``, ``len(x) == 3``); None
    when it shows the value (``sorted(...)``, ``df.groupBy(...).count().collect()``)."""
    if isinstance(node, ast.Tuple):
        return next(filter(None, map(_stand_in, node.elts)), None)
    if isinstance(node, ast.Call):
        function = node.func
        if isinstance(function, ast.Name) and function.id in STAND_INS:
            return f"{function.id}()"
        if isinstance(function, ast.Attribute) and function.attr == "count" and not node.args:
            return ".count()"
        if isinstance(function, ast.Name) and function.id in SHOWN_AS_IS:
            return next(filter(None, map(_stand_in, node.args)), None)
        return None
    if isinstance(node, ast.Attribute | ast.Subscript):
        return _stand_in(node.value)
    if isinstance(node, ast.Compare):
        return next(filter(None, map(_stand_in, [node.left, *node.comparators])), None)
    if isinstance(node, ast.BinOp):
        return _stand_in(node.left) or _stand_in(node.right)
    return None


def _printed_stand_in(source: str) -> str | None:
    """The stand-in the example's source shows, if it is an expression (its value shown)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    return _stand_in(tree.body[0].value)


def hidden_values(test: doctest.DocTest) -> list[str]:
    """How each example of ``test`` hides its values, one line per example that does."""
    found = []
    for example in test.examples:
        where = f"{test.name}, line {test.lineno + example.lineno + 1}: {example.source.strip()}"
        flags = [
            name
            for name, flag in (("+SKIP", doctest.SKIP), ("+ELLIPSIS", doctest.ELLIPSIS))
            if example.options.get(flag)
        ]
        shown = example.exc_msg if example.exc_msg is not None else example.want
        stand_in = _printed_stand_in(example.source)
        if flags:
            found.append(f"{where}\n    uses {', '.join(flags)}")
        elif "..." in shown:
            found.append(f"{where}\n    elides its output with ...: {shown.strip()}")
        elif stand_in is not None and shown.strip():
            found.append(f"{where}\n    prints {stand_in} in place of the value")
    return found


def test_no_example_hides_its_values() -> None:
    hidden = [
        line for name in _documented() for test in _tests(name) for line in hidden_values(test)
    ]
    assert not hidden, "examples that pass whatever the code returns:\n" + "\n".join(hidden)


def _planted(doc: str) -> list[str]:
    """What the checker finds in a docstring planted here."""
    test = doctest.DocTestParser().get_doctest(doc, {}, "planted", "planted.py", 0)
    return hidden_values(test)


@pytest.mark.parametrize(
    ("example", "found"),
    [
        (">>> sorted(policies)\n[...]\n", "elides its output"),
        (">>> frame.first()\nRow(entity='orders', message_id=...)\n", "elides its output"),
        (">>> path\n'.../samples/day.parquet'\n", "elides its output"),
        (">>> slow()  # doctest: +SKIP\n42\n", "uses +SKIP"),
        (">>> table  # doctest: +ELLIPSIS\n  entity\n0 orders\n", "uses +ELLIPSIS"),
        (">>> len(rows)\n3\n", "prints len()"),
        (">>> len(rows), rows[0]\n(3, 'a')\n", "prints len()"),
        (">>> print(len(rows))\n3\n", "prints len()"),
        (">>> frame.where('x').count()\n206\n", "prints .count()"),
        (">>> type(error).__name__\n'InputError'\n", "prints type()"),
        (">>> sends.count() == again.count()\nTrue\n", "prints .count()"),
        (">>> int(lost.count())\n0\n", "prints .count()"),
        (">>> int(1)\nTraceback (most recent call last):\n...\nValueError: ...\n", "elides"),
    ],
)
def test_the_checker_finds_a_planted_example(example: str, found: str) -> None:
    """Each way of hiding a value, planted in a docstring, is found; an honest example is
    not (below)."""
    hidden = _planted(example)
    assert len(hidden) == 1, hidden
    assert found in hidden[0]


def test_the_checker_passes_an_honest_example() -> None:
    honest = (
        ">>> rows = [1, 2, 3]\n>>> rows\n[1, 2, 3]\n"
        ">>> frame.groupBy('verdict').count().collect()\n[Row(verdict='accepted', count=2)]\n"
        ">>> len(rows)  # its value is the point: no output, nothing shown\n"
        ">>> int('x')\nTraceback (most recent call last):\n...\n"
        "ValueError: invalid literal for int() with base 10: 'x'\n"
    )
    assert _planted(honest) == []


# -- the columns a Returns section names -----------------------------------------------------


def _section(doc: str, title: str) -> list[str]:
    """The lines of a numpydoc section, up to the next section's title."""
    lines = doc.partition(f"\n{title}\n{'-' * len(title)}\n")[2].splitlines()
    body = []
    for line, below in itertools.pairwise([*lines, ""]):
        if below.startswith("---") and set(below) == {"-"}:
            break
        body.append(line)
    return body


def returned_columns(doc: str) -> list[str]:
    """The columns a Returns section names (its bulleted items, in order); ``CARRIED`` for
    an item without a name (the input's other columns); empty when it names none."""
    columns = []
    for line in _section(doc, "Returns"):
        item = line.strip()
        if not item.startswith("- "):
            continue
        named = re.match(r"- ``([^`]+)``", item)
        columns.append(named.group(1) if named else CARRIED)
    return columns


def column_mismatch(named: list[str], returned: list[str], given: list[str]) -> str | None:
    """What differs between the columns a docstring names and those returned (None: they
    agree); the input's columns (``given``) that are not named stand where ``CARRIED`` is."""
    carried = [c for c in returned if c in given and c not in named]
    expected = list(named)
    if CARRIED in expected:
        at = expected.index(CARRIED)
        expected[at : at + 1] = carried
    if expected == returned:
        return None
    missing = [c for c in expected if c not in returned]
    unnamed = [c for c in returned if c not in expected]
    return (
        f"named {expected}\n    returned {returned}\n    named, not returned: {missing}; "
        f"returned, not named: {unnamed}"
        + ("" if missing or unnamed else "; the same columns in another order")
    )


def _frame_returning() -> dict[str, Callable[..., Any]]:
    """The public functions and methods that return a DataFrame (pandas or Spark), by the
    name a reader calls them with."""
    found: dict[str, Callable[..., Any]] = {}
    for name in dedup_lib.__all__:
        obj = getattr(dedup_lib, name)
        if inspect.isfunction(obj):
            found[name] = obj
    for klass in _public_classes():
        for member, (_, value) in _members(klass).items():
            if _is_method(value):
                found[f"{klass.__name__}.{member}"] = getattr(value, "__func__", value)
    return {
        name: function
        for name, function in found.items()
        if str(inspect.signature(function).return_annotation).endswith("DataFrame")
    }


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 3, 20, minute, second, tzinfo=UTC)


def _inputs(spark) -> SimpleNamespace:
    """A few sends with every column a function reads (content, ground truth): a retry
    caught, a resend under a new id, a new message under a reused id, a send without id."""
    sends = spark.createDataFrame(
        [
            (1, "orders", "order-1", at(0), "a", 1, 1),
            (2, "orders", "order-1", at(0, 30), "a", 1, 2),
            (3, "orders", "order-2", at(5), "a", 1, 3),
            (4, "orders", "order-1", at(6), "b", 2, 1),
            (5, "payments", None, at(7), "c", 3, 1),
        ],
        "event_id long, entity string, message_id string, send_time timestamp, "
        "payload_hash string, logical_id long, attempt int",
    )
    result = dedup_lib.detect_duplicates(sends, dedup_lib.DedupPolicy("PT10M"))
    return SimpleNamespace(spark=spark, sends=sends, result=result)


def _cache(given: SimpleNamespace) -> Any:
    if not hasattr(given, "cache"):
        given.cache = dedup_lib.ReplayCache.build(given.sends)
    return given.cache


def _counters(_: SimpleNamespace) -> tuple[Any, list[str]]:
    """Watch.counters on a monitor's metrics as they are before its first micro-batch: a
    running monitor (a Spark stream) costs seconds, and the columns are the same."""
    from dedup_lib.live.service.metrics import Metrics

    return dedup_lib.Watch.counters(SimpleNamespace(metrics=Metrics(60.0))), []  # type: ignore[arg-type]


#: How each function that returns a DataFrame is run here: its frame, and the columns of the
#: input it may carry along.
CASES: dict[str, Callable[[SimpleNamespace], tuple[Any, list[str]]]] = {
    "detect_duplicates": lambda g: (g.result, g.sends.columns),
    "by_content": lambda g: (
        dedup_lib.by_content(g.sends, dedup_lib.DedupPolicy("PT10M")),
        g.sends.columns,
    ),
    "missed_resends": lambda g: (dedup_lib.missed_resends(g.result), g.result.columns),
    "collisions": lambda g: (dedup_lib.collisions(g.result), g.result.columns),
    "summarize": lambda g: (dedup_lib.summarize(g.result), []),
    "id_quality": lambda g: (dedup_lib.id_quality(g.sends), []),
    "sends_over_time": lambda g: (dedup_lib.sends_over_time(g.sends), []),
    "count_sweep": lambda g: (dedup_lib.count_sweep(g.sends, capacities=(1, 2)), []),
    "generate_telemetry": lambda g: (dedup_lib.generate_telemetry(g.spark, 5, seed=1), []),
    "ReplayCache.summarize": lambda g: (_cache(g).summarize("PT10M"), []),
    "ReplayCache.ground_truth_summary": lambda g: (_cache(g).ground_truth_summary("PT10M"), []),
    "ReplayCache.over_time": lambda g: (_cache(g).over_time("PT10M"), []),
    "ReplayCache.top_keys": lambda g: (_cache(g).top_keys("PT10M"), []),
    "ReplayCache.resend_delays": lambda g: (_cache(g).resend_delays(), g.sends.columns),
    "ReplayCache.held_over_time": lambda g: (_cache(g).held_over_time("PT10M"), []),
    "ReplayCache.sweep": lambda g: (_cache(g).sweep(["PT1M", "PT10M"]), []),
    "LiveMonitor.alerts": lambda g: (dedup_lib.LiveMonitor().alerts(), []),
    "Watch.counters": _counters,
}


def test_every_returned_dataframe_names_its_columns() -> None:
    """Each public function returning a DataFrame lists its columns under Returns, and is
    run below."""
    wrong = []
    for name, function in _frame_returning().items():
        if not returned_columns(inspect.getdoc(function) or ""):
            wrong.append(f"{name}: its Returns section lists no column (``- ``name``: ...``)")
        if name not in CASES:
            wrong.append(f"{name}: not in CASES, so its columns are not checked")
    stale = sorted(set(CASES) - set(_frame_returning()))
    wrong += [f"{name}: in CASES, but returns no DataFrame" for name in stale]
    assert not wrong, "\n".join(wrong)


def test_the_returns_columns_are_those_returned(spark) -> None:
    """Every case on one set of inputs (one replay, one cache), each compared."""
    given = _inputs(spark)
    functions = _frame_returning()
    wrong = []
    for name, case in CASES.items():
        frame, carried_from = case(given)
        named = returned_columns(inspect.getdoc(functions[name]) or "")
        mismatch = column_mismatch(named, list(frame.columns), list(carried_from))
        if mismatch:
            wrong.append(f"{name}:\n    {mismatch}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("named", "returned", "given", "agrees"),
    [
        (["entity", "sends"], ["entity", "sends"], [], True),
        (["entity", "no_message_id"], ["entity", "without_message_id"], [], False),
        (["entity", "sends"], ["sends", "entity"], [], False),
        (["entity"], ["entity", "sends"], [], False),
        (
            [CARRIED, "verdict"],
            ["message_id", "send_time", "verdict"],
            ["message_id", "send_time"],
            True,
        ),
        (["event_id", CARRIED], ["event_id", "extra"], ["event_id", "extra"], True),
        (["verdict"], ["message_id", "verdict"], ["message_id"], False),
    ],
)
def test_the_columns_check_fails_on_a_planted_mismatch(named, returned, given, agrees) -> None:
    """A column named and not returned (the summarize ``no_message_id`` of issue 72), one
    returned and not named, or another order, each fails; carried columns stand where the
    docstring says."""
    assert (column_mismatch(named, returned, given) is None) is agrees


def test_the_returns_parser_reads_the_convention() -> None:
    doc = inspect.cleandoc(
        """Planted.

        Returns
        -------
        pandas.DataFrame
            One row per entity, with the columns:

            - ``entity``
            - ``without_message_id``: sends without MessageId, counted
              with those whose id is empty
            - the input's other columns

        Examples
        --------
        - ``not_a_column``
        """
    )
    assert returned_columns(doc) == ["entity", "without_message_id", CARRIED]
