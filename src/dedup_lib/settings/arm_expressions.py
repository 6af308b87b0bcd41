"""Just enough of the Resource Manager template expression language to read entity settings and
names: ``[parameters('x')]``, ``[variables('x')]``, ``concat()``, ``format()`` and literals.

The parser builds :class:`Call` trees; evaluating them against a template's parameters and
variables is the template reader's job. Names are kept as :data:`Piece` sequences so that an
entity's last segment can be read even where its namespace part is an expression.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from dedup_lib.errors import excerpt


class UnresolvedError(Exception):
    """A template expression this reader does not evaluate; the message says why."""


@dataclass(frozen=True)
class Call:
    """A function call in a template expression: ``func(args)``; ``plain`` when no property
    or index access follows it; ``text`` is its canonical source, for messages and matching."""

    func: str
    args: tuple[object, ...]
    plain: bool
    text: str


@dataclass(frozen=True)
class Opaque:
    """Part of a name that cannot be evaluated here, by its canonical source text."""

    text: str


#: A part of a name: literal text, or an expression that cannot be evaluated here.
Piece = str | Opaque

_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+)|(?P<ident>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<punct>[(),.\[\]]))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: ``str``, ``num``, ``ident`` or ``punct``."""
    out, pos = [], 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if found is None or found.end() == pos:
            if text[pos:].strip() == "":
                break
            raise UnresolvedError(f"cannot parse the expression at {excerpt(text[pos:], 30)}")
        kind = found.lastgroup
        assert kind is not None
        out.append((kind, found[kind]))
        pos = found.end()
    return out


def parse_expression(text: str) -> object:
    """The expression's tree: a string, number, boolean, ``None`` or a :class:`Call`. Raises
    :class:`UnresolvedError` for text outside the grammar understood here."""
    return _Parser(text).parse()


#: Deepest nesting of calls and index access read; deeper is refused, not a RecursionError.
_MAX_DEPTH = 50


class _Parser:
    """Just enough of the template expression grammar: calls, string and number literals,
    property and index access."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.depth = 0

    def parse(self) -> object:
        node = self.expression()
        if self.at != len(self.tokens):
            raise UnresolvedError("unexpected text after the expression")
        return node

    def take(self, value: str | None = None) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise UnresolvedError("the expression ends too early")
        token = self.tokens[self.at]
        if value is not None and token[1] != value:
            raise UnresolvedError(f"expected {value!r}, found {excerpt(token[1], 30)}")
        self.at += 1
        return token

    def peek(self) -> str | None:
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def expression(self) -> object:
        if self.depth >= _MAX_DEPTH:
            raise UnresolvedError(f"the expression nests calls over {_MAX_DEPTH} deep")
        self.depth += 1
        try:
            return self._expression()
        finally:
            self.depth -= 1

    def _expression(self) -> object:
        start = self.at
        kind, text = self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            if len(text) > 20:
                raise UnresolvedError(f"the number {excerpt(text, 12)} is too large")
            return int(text)
        if kind != "ident":
            raise UnresolvedError(f"unexpected {excerpt(text, 30)}")
        if self.peek() != "(" and text.lower() in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[text.lower()]
        self.take("(")
        args = []
        while self.peek() != ")":
            args.append(self.expression())
            if self.peek() != ")":
                self.take(",")
        self.take(")")
        plain = True
        while self.peek() in (".", "["):
            plain = False
            if self.take()[1] == ".":
                self.take()
            else:
                self.expression()
                self.take("]")
        canonical = "".join(
            token.lower() if token_kind == "ident" else token
            for token_kind, token in self.tokens[start : self.at]
        )
        return Call(text.lower(), tuple(args), plain, canonical)


def template_expression(raw: Any) -> str | None:
    """The expression inside a template string ``[...]``, or ``None`` for a literal."""
    if not isinstance(raw, str) or raw.startswith("[["):
        return None
    return raw[1:-1] if raw.startswith("[") and raw.endswith("]") else None


def merge_pieces(pieces: Iterable[Piece]) -> tuple[Piece, ...]:
    """The pieces with adjacent literal text joined and empty text dropped, so that two
    names built differently compare equal."""
    out: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and out and isinstance(out[-1], str):
            out[-1] += piece
        elif piece != "":
            out.append(piece)
    return tuple(out)


def split_name(pieces: tuple[Piece, ...]) -> tuple[tuple[Piece, ...], str] | None:
    """(the parent part, the last literal segment after ``/``), or ``None`` when the last
    segment is not literal text."""
    tail = ""
    for at in range(len(pieces) - 1, -1, -1):
        piece = pieces[at]
        if isinstance(piece, Opaque):
            return None
        if "/" in piece:
            head, segment = piece.rsplit("/", 1)
            return merge_pieces([*pieces[:at], head]), segment + tail
        tail = piece + tail
    return (), tail
