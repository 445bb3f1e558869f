"""What the checks of a TC definition produce: symbolic sizes (`SizeExpr`, affine in the size
parameters), the element type and shape of every tensor (`TensorInfo`), the index ranges of
each statement (`StatementInfo`), the checked definition (`CheckedDef`) and the same with
concrete sizes (`BoundDef`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mirage_xdsl.frontends.tc.ast_nodes import Loc, TcDef
from mirage_xdsl.frontends.tc.errors import TcError

DTYPES = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64"}
"""TC element types and the kernel-graph dtype each stands for (`bfloat16` is ours)."""


@dataclass(frozen=True)
class SizeExpr:
    """An affine size `const + sum(coeff * symbol)` over the size symbols (`N`, `D + 1`, `4`)."""

    terms: tuple[tuple[str, int], ...] = ()
    const: int = 0

    @staticmethod
    def of(value: str | int) -> SizeExpr:
        """The size of one dim declaration: a symbol or an int literal.

        Raises:
            nothing.
        """
        return SizeExpr(((value, 1),), 0) if isinstance(value, str) else SizeExpr((), int(value))

    def combine(self, other: SizeExpr, sign: int) -> SizeExpr:
        """`self + sign * other` (sign is +1 or -1), normalised (sorted symbols, no zeros).

        Raises:
            nothing.
        """
        coeffs = dict(self.terms)
        for sym, c in other.terms:
            coeffs[sym] = coeffs.get(sym, 0) + sign * c
        terms = tuple(sorted((s, c) for s, c in coeffs.items() if c))
        return SizeExpr(terms, self.const + sign * other.const)

    def evaluate(self, sizes: Mapping[str, int]) -> int:
        """The int value for concrete `sizes`.

        Raises:
            KeyError: a symbol of the expression is missing from `sizes`.
        """
        return self.const + sum(c * sizes[s] for s, c in self.terms)

    def __str__(self) -> str:
        parts = [s if c == 1 else f"{c}*{s}" for s, c in self.terms]
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts).replace("+ -", "- ")


ZERO = SizeExpr()


@dataclass(frozen=True)
class TensorInfo:
    """Element type (a kernel-graph dtype name) and symbolic shape of an input or output."""

    dtype: str
    shape: tuple[SizeExpr, ...]


@dataclass(frozen=True)
class StatementInfo:
    """What checks learnt about one statement.

    Attributes:
        lhs: the left-hand side indices, in order.
        reductions: the indices only on the right-hand side, in order of appearance.
        ranges: `index -> (lo, hi)` (lo inclusive, hi exclusive) for every index used.
        dtype: element type of the statement's result.
    """

    lhs: tuple[str, ...]
    reductions: tuple[str, ...]
    ranges: dict[str, tuple[SizeExpr, SizeExpr]]
    dtype: str


@dataclass
class CheckedDef:
    """A definition that passed every check: its tree plus inferred types, shapes, ranges."""

    tree: TcDef
    filename: str
    inputs: dict[str, TensorInfo]
    outputs: dict[str, TensorInfo]
    statements: list[StatementInfo]
    symbols: dict[str, Loc]  # size symbol -> first declaration

    def error(self, message: str, loc: Loc) -> TcError:
        """A `TcError` located in this definition's source (returned, not raised).

        Raises:
            nothing.
        """
        return TcError(message, loc.line, loc.col, self.filename)


@dataclass
class BoundDef:
    """A `CheckedDef` with concrete sizes: int shapes and int ranges per statement."""

    checked: CheckedDef
    sizes: dict[str, int]
    shapes: dict[str, tuple[int, ...]]
    ranges: list[dict[str, tuple[int, int]]]
