"""settings.arm_expressions: the template expressions read (calls, literals, property and index
access), those refused with why, and names as pieces whose last segment is read where it is
literal. No Spark."""

from __future__ import annotations

import pytest

from dedup_lib.settings.arm_expressions import (
    Call,
    Opaque,
    UnresolvedError,
    merge_pieces,
    parse_expression,
    split_name,
    template_expression,
)


def test_calls_and_literals_become_a_tree_in_canonical_text() -> None:
    tree = parse_expression("Concat(parameters('ns'), '/it''s', 5, true)")
    assert tree == Call(
        "concat",
        (Call("parameters", ("ns",), True, "parameters('ns')"), "/it's", 5, True),
        True,
        "concat(parameters('ns'),'/it''s',5,true)",
    )
    access = parse_expression("resourceGroup().tags['window']")
    assert isinstance(access, Call)
    assert (access.func, access.plain) == ("resourcegroup", False)
    assert parse_expression("null") is None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("parameters('x'))", "unexpected text after the expression"),
        ("concat('a'", "ends too early"),
        ("concat('a' 'b')", "expected ','"),
        ("'a' ; 'b'", "cannot parse the expression at"),
        ("1" * 21, "is too large"),
        ("f(" * 60 + ")" * 60, "nests calls over 50 deep"),
    ],
)
def test_text_outside_the_grammar_is_refused_with_why(text: str, why: str) -> None:
    with pytest.raises(UnresolvedError, match=why):
        parse_expression(text)


def test_a_template_string_is_an_expression_unless_its_bracket_is_doubled() -> None:
    assert template_expression("[parameters('x')]") == "parameters('x')"
    assert template_expression("[[literal]") is None
    assert template_expression("PT10M") is None
    assert template_expression(10) is None


def test_a_name_s_last_segment_is_read_where_it_is_literal() -> None:
    namespace = Opaque("parameters('ns')")
    pieces = merge_pieces([namespace, "/", "", "orders", "-eu"])
    assert pieces == (namespace, "/orders-eu")
    assert split_name(pieces) == ((namespace,), "orders-eu")
    assert split_name(("shop-sb/", "orders")) == (("shop-sb",), "orders")
    assert split_name(("orders",)) == ((), "orders")
    assert split_name(("shop-sb/", Opaque("variables('q')"))) is None
