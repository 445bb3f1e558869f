"""Parse Tensor Comprehensions source into the typed tree of `ast_nodes` (lark, LALR(1)).

Lark's exceptions never escape: every syntax error becomes a `TcError` located at the
offending character or token.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import lark
from lark import Lark, Token, Transformer, v_args

from mirage_xdsl.frontends.tc.ast_nodes import (
    Access,
    Binary,
    Call,
    Expr,
    IndexExpr,
    Loc,
    Name,
    Number,
    Param,
    Program,
    Range,
    Statement,
    TcDef,
    Unary,
)
from mirage_xdsl.frontends.tc.errors import TcError

__all__ = ["FUNCTIONS", "parse"]

FUNCTIONS: dict[str, int] = {"exp": 1, "log": 1, "sqrt": 1, "tanh": 1, "fmax": 2, "fmin": 2, "max": 2, "min": 2}
"""Built-in functions and their arity; any other `name(...)` is a tensor access."""

# How expected terminals are named in syntax errors (anonymous string terminals print quoted).
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "ASSIGN_OP": "an assignment operator (=, +=, +=!, ...)",
    "$END": "end of input",
}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    grammar = resources.files(__package__).joinpath("grammar.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True, maybe_placeholders=True)


def _loc(item: Any) -> Loc:
    """Location of a token or of a tree's meta."""
    return Loc(getattr(item, "line", 1) or 1, getattr(item, "column", 1) or 1)


class _IndexFormError(Exception):
    """An access argument is not an affine subscript (so the call is not a tensor access)."""


def _as_index(expr: Expr) -> IndexExpr:
    """Read a parsed expression as an affine subscript, e.g. `i + 2*j - 1`.

    Raises:
        _IndexFormError: the expression is not affine in plain names with int coefficients.
    """
    terms, const = _affine(expr)
    kept = tuple((name, c) for name, c in terms.items() if c != 0)
    return IndexExpr(kept, const, expr.loc)


def _affine(expr: Expr) -> tuple[dict[str, int], int]:
    if isinstance(expr, Name):
        return {expr.name: 1}, 0
    if isinstance(expr, Number) and expr.is_int:
        return {}, int(expr.value)
    if isinstance(expr, Unary):
        terms, const = _affine(expr.operand)
        return {n: -c for n, c in terms.items()}, -const
    if isinstance(expr, Binary) and expr.op in "+-":
        lt, lc = _affine(expr.lhs)
        rt, rc = _affine(expr.rhs)
        sign = 1 if expr.op == "+" else -1
        for name, c in rt.items():
            lt[name] = lt.get(name, 0) + sign * c
        return lt, lc + sign * rc
    if isinstance(expr, Binary) and expr.op == "*":
        lt, lc = _affine(expr.lhs)
        rt, rc = _affine(expr.rhs)
        if lt and rt:
            raise _IndexFormError
        terms, const, factor = (lt, lc, rc) if not rt else (rt, rc, lc)
        return {n: c * factor for n, c in terms.items()}, const * factor
    raise _IndexFormError


@v_args(meta=True)
class _ToAst(Transformer):
    """Build `ast_nodes` dataclasses from lark's parse tree."""

    def start(self, meta: Any, defs: list[TcDef]) -> tuple[TcDef, ...]:
        """`start`: the tuple of the source's definitions."""
        return tuple(defs)

    def tc_def(self, meta: Any, children: list[Any]) -> TcDef:
        """`tc_def`: a `TcDef` of its params, outputs and statements, located at its name."""
        name, params, outputs, *statements = children
        return TcDef(str(name), params, outputs, tuple(statements), _loc(name))

    def params(self, meta: Any, children: list[Any]) -> tuple[Param, ...]:
        """`params`: the tuple of input `Param`s (empty for `()`)."""
        return tuple(p for p in children if p is not None)

    def param(self, meta: Any, children: list[Any]) -> Param:
        """`param`: a `Param` whose dims are ints or size symbols, located at its name."""
        dtype, *sizes, name = children
        sizes = [s for s in sizes if s is not None]
        dims = tuple(int(s) if s.type == "INT" else str(s) for s in sizes)
        return Param(str(dtype), dims, str(name), _loc(name), tuple(_loc(s) for s in sizes))

    def size(self, meta: Any, children: list[Token]) -> Token:
        """`size`: the dim's `NAME` or `INT` token."""
        return children[0]

    def outputs(self, meta: Any, children: list[tuple[str, Loc]]) -> tuple[tuple[str, Loc], ...]:
        """`outputs`: the tuple of `(name, loc)` of the declared outputs."""
        return tuple(children)

    def output(self, meta: Any, children: list[Token]) -> tuple[str, Loc]:
        """`output`: the output's `(name, loc)`."""
        return str(children[0]), _loc(children[0])

    def lhs_index(self, meta: Any, children: list[Token]) -> tuple[str, Loc]:
        """`lhs_index`: the left-hand side index's `(name, loc)`."""
        return str(children[0]), _loc(children[0])

    def statement(self, meta: Any, children: list[Any]) -> Statement:
        """`statement`: a `Statement` (no where clause: no ranges), located at its tensor and its operator."""
        name, *maybe_indices, op, rhs, where = children
        indices = tuple(i for i in maybe_indices if i is not None)
        return Statement(str(name), indices, str(op), rhs, where or (), _loc(name), _loc(op))

    def where_clause(self, meta: Any, children: list[Range]) -> tuple[Range, ...]:
        """`where_clause`: the tuple of its `Range`s."""
        return tuple(children)

    def range(self, meta: Any, children: list[Any]) -> Range:
        """`range`: a `Range` `index in lo:hi`, located at the index."""
        name, lo, hi = children
        return Range(str(name), lo, hi, _loc(name))

    def _binary(self, op: str, meta: Any, children: list[Expr]) -> Binary:
        lhs, rhs = children
        return Binary(op, lhs, rhs, _loc(meta))

    def add(self, meta: Any, children: list[Expr]) -> Binary:
        """`sum "+" product`: a `Binary` `+`."""
        return self._binary("+", meta, children)

    def sub(self, meta: Any, children: list[Expr]) -> Binary:
        """`sum "-" product`: a `Binary` `-`."""
        return self._binary("-", meta, children)

    def mul(self, meta: Any, children: list[Expr]) -> Binary:
        """`product "*" unary`: a `Binary` `*`."""
        return self._binary("*", meta, children)

    def div(self, meta: Any, children: list[Expr]) -> Binary:
        """`product "/" unary`: a `Binary` `/`."""
        return self._binary("/", meta, children)

    def neg(self, meta: Any, children: list[Expr]) -> Unary:
        """`"-" unary`: a `Unary` negation."""
        return Unary("-", children[0], _loc(meta))

    def int_lit(self, meta: Any, children: list[Token]) -> Number:
        """`INT`: an int `Number`."""
        return Number(float(int(children[0])), True, _loc(children[0]))

    def float_lit(self, meta: Any, children: list[Token]) -> Number:
        """`FLOAT`: a non-int `Number`."""
        return Number(float(children[0]), False, _loc(children[0]))

    def name(self, meta: Any, children: list[Token]) -> Name:
        """`NAME` in value position: a `Name`."""
        return Name(str(children[0]), _loc(children[0]))

    def apply(self, meta: Any, children: list[Any]) -> Access | Call:
        """`NAME(args)`: a `Call` of a built-in function, an `Access` when every argument is an affine subscript,
        else a `Call` of an unknown function (checks reject it)."""
        name, *maybe_args = children
        args = tuple(a for a in maybe_args if a is not None)
        if str(name) in FUNCTIONS:
            return Call(str(name), args, _loc(name))
        try:
            return Access(str(name), tuple(_as_index(a) for a in args), _loc(name))
        except _IndexFormError:
            # not subscripts: a call of a function we do not know (checks report it)
            return Call(str(name), args, _loc(name))


def _expected_words(expected: Any) -> str:
    parser = _parser()
    words = set()
    for term in expected or ():
        if term in _TERMINAL_WORDS:
            words.add(_TERMINAL_WORDS[term])
            continue
        try:
            pattern = parser.get_terminal(term).pattern
        except KeyError:
            words.add(term)
            continue
        words.add(repr(pattern.value) if pattern.type == "str" else term.lower())
    return ", ".join(sorted(words))


def _end_loc(source: str) -> Loc:
    lines = source.split("\n")
    return Loc(len(lines), len(lines[-1]) + 1)


def _syntax_error(err: lark.exceptions.LarkError, source: str, filename: str) -> TcError:
    """Turn any lark exception into a located one-line `TcError`."""
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        pos = err.pos_in_stream  # always set by UnexpectedCharacters; Optional only on the base class
        char = source[pos] if pos is not None and 0 <= pos < len(source) else "?"
        return TcError(f"syntax error: unexpected character {char!r}", err.line, err.column, filename)
    if isinstance(err, lark.exceptions.UnexpectedToken):
        token = err.token
        expected = _expected_words(err.expected)
        if token.type == "$END":
            loc = _end_loc(source)
            return TcError(f"syntax error: unexpected end of input; expected {expected}", loc.line, loc.col, filename)
        return TcError(
            f"syntax error: unexpected {str(token)!r}; expected {expected}", token.line, token.column, filename
        )
    if isinstance(err, lark.exceptions.UnexpectedEOF):
        loc = _end_loc(source)
        return TcError(
            f"syntax error: unexpected end of input; expected {_expected_words(err.expected)}", loc.line, loc.col, filename
        )
    return TcError(f"syntax error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", 1, 1, filename)


MAX_DEPTH = 200
"""Deepest expression nesting accepted; the tree walks downstream recurse once per level."""


def _check_depth(tree: lark.Tree, filename: str) -> None:
    """Reject expressions nested deeper than `MAX_DEPTH` (iteratively, without recursion)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            loc = _loc(node.meta)
            raise TcError(f"expression nested more than {MAX_DEPTH} levels deep", loc.line, loc.col, filename)
        stack += [(child, depth + 1) for child in node.children if isinstance(child, lark.Tree)]


def parse(source: str, filename: str = "<tc>") -> Program:
    """Parse TC source text.

    Args:
        source: one or more `def` blocks; `#` starts a comment.
        filename: the name used in error locations.

    Returns:
        the `Program` tree (no semantic checks yet: see `checks.check`).

    Raises:
        TcError: a syntax error, located at the offending character or token, or an
            expression nested more than `MAX_DEPTH` levels deep.
    """
    try:
        tree = _parser().parse(source)
    except lark.exceptions.LarkError as err:
        raise _syntax_error(err, source, filename) from None
    _check_depth(tree, filename)
    try:
        defs = _ToAst().transform(tree)
    except lark.exceptions.VisitError as err:  # a bug in _ToAst, not in the program
        raise err.orig_exc from None
    return Program(defs, filename)
