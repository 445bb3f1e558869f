"""Typed syntax tree of a Tensor Comprehensions program, with 1-based source locations.

A program holds one or more definitions:

    def name(float(N, D) I, float(D, M) W) -> (O) {
        O(n, m) +=! I(n, d) * W(d, m)
    }

Expressions are `Number`, `Name` (a size symbol used as a value), `Access` (a tensor read
`T(i, j + 1)` with affine `IndexExpr` subscripts), `Call` (a built-in function), `Unary`
(negation) and `Binary` (`+ - * /`).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Access",
    "Binary",
    "Call",
    "Expr",
    "IndexExpr",
    "Loc",
    "Name",
    "Number",
    "Param",
    "Program",
    "Range",
    "Statement",
    "TcDef",
    "Unary",
    "REDUCTION_OPS",
]

REDUCTION_OPS = ("+", "*", "min", "max")
"""Base operators of the accumulating assignments `+=`, `*=`, `min=`, `max=` (and `!` forms)."""


@dataclass(frozen=True)
class Loc:
    """A 1-based (line, column) source position."""

    line: int
    col: int


@dataclass(frozen=True)
class IndexExpr:
    """An affine subscript `sum(coeff * index) + const`, e.g. `i`, `i + 1`, `i + j`, `2`."""

    terms: tuple[tuple[str, int], ...]
    const: int
    loc: Loc

    @property
    def plain_name(self) -> str | None:
        """The index name when the subscript is just one index (`i`), else None."""
        if self.const == 0 and len(self.terms) == 1 and self.terms[0][1] == 1:
            return self.terms[0][0]
        return None

    @property
    def names(self) -> tuple[str, ...]:
        """The index names used, in order."""
        return tuple(name for name, _ in self.terms)

    def __str__(self) -> str:
        parts = [name if c == 1 else f"{c}*{name}" for name, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


@dataclass(frozen=True)
class Number:
    """A literal; `is_int` when written without a decimal point or exponent."""

    value: float
    is_int: bool
    loc: Loc


@dataclass(frozen=True)
class Name:
    """A bare identifier in a value position (valid only for a size symbol such as `D`)."""

    name: str
    loc: Loc


@dataclass(frozen=True)
class Access:
    """A tensor read `tensor(indices...)`."""

    tensor: str
    indices: tuple[IndexExpr, ...]
    loc: Loc


@dataclass(frozen=True)
class Call:
    """A function application `func(args...)`; `func` may be unknown (checks reject it)."""

    func: str
    args: tuple[Expr, ...]
    loc: Loc


@dataclass(frozen=True)
class Unary:
    """Negation `-operand`."""

    op: str
    operand: Expr
    loc: Loc


@dataclass(frozen=True)
class Binary:
    """`lhs op rhs` with op one of `+ - * /`."""

    op: str
    lhs: Expr
    rhs: Expr
    loc: Loc


Expr = Number | Name | Access | Call | Unary | Binary


@dataclass(frozen=True)
class Range:
    """A `where index in lo:hi` clause entry (`lo` inclusive, `hi` exclusive)."""

    index: str
    lo: Expr
    hi: Expr
    loc: Loc


@dataclass(frozen=True)
class Statement:
    """`tensor(indices) op rhs [where ranges]`.

    `op` is the assignment operator's text: `=`, `+=`, `*=`, `min=`, `max=` or a `!` form.
    """

    tensor: str
    indices: tuple[tuple[str, Loc], ...]
    op: str
    rhs: Expr
    ranges: tuple[Range, ...]
    loc: Loc
    op_loc: Loc

    @property
    def reduction_base(self) -> str | None:
        """`+`, `*`, `min` or `max` for an accumulating operator, None for `=`."""
        base = self.op.rstrip("!").removesuffix("=")
        return base or None

    @property
    def initialises(self) -> bool:
        """True for the `!` forms, which first set the output to the operator's identity."""
        return self.op.endswith("!")


@dataclass(frozen=True)
class Param:
    """An input parameter `dtype(dims...) name`; a dim is a size symbol or an int literal."""

    dtype: str
    dims: tuple[str | int, ...]
    name: str
    loc: Loc
    dim_locs: tuple[Loc, ...]


@dataclass(frozen=True)
class TcDef:
    """`def name(params) -> (outputs) { statements }`."""

    name: str
    params: tuple[Param, ...]
    outputs: tuple[tuple[str, Loc], ...]
    statements: tuple[Statement, ...]
    loc: Loc


@dataclass(frozen=True)
class Program:
    """All definitions of one source, in order."""

    defs: tuple[TcDef, ...]
    filename: str
