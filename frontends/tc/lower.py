"""Lower a checked TC definition to a kernel graph (`kn` ops) through the builder API.

Every lowered value is a kernel-graph tensor whose dims are labelled with the statement's
index names (`None` for a size-1 dim kept by a reduction).  The lowering uses no reshape,
transpose or slice, so two operands combine only when they have the same rank and agree dim
by dim (equal names, or a size-1 dim that broadcasts).  Mapping:

  * `C(i, j) +=! A(i, k) * B(k, j)` (and the batched form with equal leading indices)
    -> `kn.matmul`;
  * `+ - * /` of tensors -> `kn.add/sub/mul/div`; `tensor * c`, `tensor / c`, `-tensor`
    -> `kn.mul_scalar`; `tensor + c`, `tensor - c`, `c + tensor` -> `kn.add_scalar`,
    `c - tensor` -> `kn.add_scalar(kn.mul_scalar(tensor, -1), c)`; `exp log sqrt` ->
    `kn.exp/log/sqrt`;
    `tanh(x)` -> `sigmoid(2x) - sigmoid(-2x)`; `fmax(x, 0)` -> `kn.relu`, `fmax(x, c)`
    -> `kn.clamp(c, inf)`, `fmin(x, c)` -> `kn.clamp(-inf, c)`, `fmax(x, y)` ->
    `relu(x - y) + y`, `fmin(x, y)` -> `x - relu(x - y)`;
  * `+=!` over reduction indices -> one `kn.reduction` (sum to size 1) per index, `max=!`
    -> `kn.reduction_max`, `min=!` -> `-kn.reduction_max(-x)`; the
    reduced dim stays as a size-1 dim, so an output of lower rank than its statement's
    iteration space is returned with those size-1 dims (same element order as TC's shape);
  * `+=` (no `!`) after an earlier assignment adds the new sum to the old value; `*=`,
    `max=`, `min=` without reduction indices combine elementwise likewise.

A constant subscript 0 on a size-1 dim (`S(n, 0)` for `float(N, 1) S`) broadcasts.
Anything else (product reductions, transposes, rank changes, affine subscripts,
partial ranges, a constant divided by a tensor, constant right-hand sides) raises a
`TcError` "not supported yet: ..." located at the construct.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from mirage_xdsl.frontends.builder import DTensor, GraphBuildError, KNGraph, new_kernel_graph
from mirage_xdsl.frontends.tc.ast_nodes import Access, Binary, Call, Expr, IndexExpr, Loc, Name, Number, Statement, Unary
from mirage_xdsl.frontends.tc.checked_def import BoundDef, CheckedDef, StatementInfo
from mirage_xdsl.frontends.tc.checks import accesses, bind_sizes
from mirage_xdsl.frontends.tc.errors import TcError

__all__ = ["lower"]

Axes = tuple[str | None, ...]


@dataclass(frozen=True)
class _Value:
    """A kn tensor whose dim `p` is indexed by `axes[p]` (None: a kept size-1 dim)."""

    tensor: DTensor
    axes: Axes


@dataclass(frozen=True)
class _Stored:
    """The current kn tensor of a TC tensor; `layout[p]` is the TC dim held by kn dim `p`."""

    tensor: DTensor
    layout: tuple[int | None, ...]


Operand = _Value | float


def lower(checked: CheckedDef, sizes: Mapping[str, int]) -> ModuleOp:
    """Build the kernel graph of a checked definition for concrete sizes.

    Args:
        checked: the result of `checks.check`.
        sizes: `{symbol: int}` for every size symbol.

    Returns:
        a verified `builtin.module` with one `func.func` named after the definition: one
        argument per input (row-major, the TC shape) and one result per output, in the
        declared order (reduced outputs keep size-1 dims, see the module docstring).

    Raises:
        TcError: bad sizes (see `checks.bind_sizes`) or a construct kn cannot express yet,
            located at that construct.
    """
    bound = bind_sizes(checked, sizes)
    graph = new_kernel_graph(checked.tree.name)
    stored = _inputs(graph, bound)
    for index, stmt in enumerate(checked.tree.statements):
        try:
            stored[stmt.tensor] = _StatementLowering(graph, bound, index, stored).run()
        except GraphBuildError as err:  # a shape rule our own checks should have caught
            raise checked.error(f"cannot lower '{stmt.tensor}' to a kernel graph: {err}", stmt.loc) from None
    for name, _ in checked.tree.outputs:
        graph.mark_output(stored[name].tensor)
    return graph.module


def _inputs(graph: KNGraph, bound: BoundDef) -> dict[str, _Stored]:
    stored = {}
    for param in bound.checked.tree.params:
        shape = bound.shapes[param.name]
        try:
            tensor = graph.new_input(shape, dtype=bound.checked.inputs[param.name].dtype, name=param.name)
        except GraphBuildError as err:
            raise bound.checked.error(f"not supported yet: input '{param.name}': {err}", param.loc) from None
        stored[param.name] = _Stored(tensor, tuple(range(len(shape))))
    return stored


class _StatementLowering:
    """Lowers statement `index` of a bound definition into `graph`."""

    def __init__(self, graph: KNGraph, bound: BoundDef, index: int, stored: dict[str, _Stored]):
        self.graph = graph
        self.bound = bound
        self.stmt: Statement = bound.checked.tree.statements[index]
        self.info: StatementInfo = bound.checked.statements[index]
        self.ranges = bound.ranges[index]
        self.stored = stored

    def unsupported(self, what: str, loc: Loc) -> TcError:
        """A `TcError` "not supported yet: `what`" located at `loc` (returned, not raised).

        Raises:
            nothing.
        """
        return self.bound.checked.error(f"not supported yet: {what}", loc)

    # ---- the statement
    def run(self) -> _Stored:
        """The statement's new value of its tensor."""
        self.check_expressible()
        value = self.reduced_rhs()
        if self.stmt.reduction_base and not self.stmt.initialises:
            value = self.combine_with_old(value)
        return _Stored(value.tensor, self.layout(value))

    def check_expressible(self) -> None:
        """Check that kn can express the statement before any op is built.

        Raises:
            TcError: a reduction other than sum, max or min, an index only on the left-hand side, or an
                access `check_access` rejects.
        """
        stmt, info = self.stmt, self.info
        if info.reductions and stmt.reduction_base not in ("+", "max", "min"):
            raise self.unsupported(
                f"'{stmt.op}' reduction over '{info.reductions[0]}' (kn has sum, max and min reductions)", stmt.op_loc
            )
        for index, loc in stmt.indices:
            if not any(index in ix.names for a in accesses(stmt.rhs) for ix in a.indices):
                raise self.unsupported(
                    f"index '{index}' of '{stmt.tensor}' only on the left-hand side (kn cannot broadcast to a new dim)",
                    loc,
                )
        for access in accesses(stmt.rhs):
            self.check_access(access)

    def check_access(self, access: Access) -> None:
        """Check that an access reads whole dims by plain indices (a `0` subscript on a size-1 dim broadcasts).

        Raises:
            TcError: an affine subscript, an index repeated within the access, or an index whose range
                is not the whole dim (kn has no slicing).
        """
        shape = self.bound.shapes[access.tensor]
        names = [ix.plain_name for ix in access.indices]
        for dim, (ix, name) in enumerate(zip(access.indices, names)):
            if _is_broadcast_subscript(ix, shape[dim]):
                continue
            if name is None:
                raise self.unsupported(f"affine subscript '{ix}' of '{access.tensor}' (kn has no slicing)", ix.loc)
            if names.count(name) > 1:
                raise self.unsupported(f"index '{name}' repeated in one access of '{access.tensor}'", ix.loc)
            if self.ranges[name] != (0, shape[dim]):
                lo, hi = self.ranges[name]
                raise self.unsupported(
                    f"index '{name}' ranges over {lo}:{hi} but dim {dim} of '{access.tensor}' has size {shape[dim]} "
                    "(kn has no slicing)",
                    ix.loc,
                )

    def reduced_rhs(self) -> _Value:
        """The right-hand side summed over the reduction indices (a GEMM when it is one)."""
        rhs = self.stmt.rhs
        base = self.stmt.reduction_base or "+"
        if isinstance(rhs, Binary) and rhs.op == "*" and base == "+":
            lhs_value, rhs_value = self.expr(rhs.lhs), self.expr(rhs.rhs)
            product = self.matmul(lhs_value, rhs_value)
            if product is not None:
                return product
            value = self.binary("*", lhs_value, rhs_value, rhs.loc)
        else:
            value = self.expr(rhs)
        if not isinstance(value, _Value):
            raise self.unsupported(
                f"the right-hand side of '{self.stmt.tensor}' is the constant {value} (kn cannot create tensors)",
                rhs.loc,
            )
        for index in self.info.reductions:
            pos = value.axes.index(index)
            axes = tuple(None if p == pos else a for p, a in enumerate(value.axes))
            value = _Value(self.reduce(base, value.tensor, pos), axes)
        return value

    def reduce(self, base: str, x: DTensor, dim: int) -> DTensor:
        """`x` reduced over `dim` to size 1 by `+` (kn.reduction), `max` (kn.reduction_max) or
        `min` (`-max(-x)`)."""
        if base == "+":
            return self.graph.reduction(x, dim)
        if base == "max":
            return self.graph.reduction_max(x, dim)
        return self.graph.mul_scalar(self.graph.reduction_max(self.graph.mul_scalar(x, -1.0), dim), -1.0)

    def matmul(self, a: Operand, b: Operand) -> _Value | None:
        """`kn.matmul` when `a * b` summed over the one reduction index is a (batched) GEMM."""
        if not (isinstance(a, _Value) and isinstance(b, _Value)) or len(self.info.reductions) != 1:
            return None
        (k,) = self.info.reductions
        for left, right in ((a, b), (b, a)):
            if _is_gemm(left.axes, right.axes, k):
                axes = (*left.axes[:-1], right.axes[-1])
                return _Value(self.graph.matmul(left.tensor, right.tensor), axes)
        return None

    def combine_with_old(self, value: _Value) -> _Value:
        """`old OP value` for an accumulating operator without `!` (`+=`, `*=`, `max=`, `min=`)."""
        stmt = self.stmt
        old = self.access_value(stmt.tensor, tuple(i for i, _ in stmt.indices))
        base = stmt.reduction_base
        if base == "+":
            return self.binary("+", old, value, stmt.op_loc)  # type: ignore[return-value]
        if base == "*":
            return self.binary("*", old, value, stmt.op_loc)  # type: ignore[return-value]
        return self.extremum(base == "max", old, value, stmt.op_loc)  # type: ignore[return-value]

    def layout(self, value: _Value) -> tuple[int | None, ...]:
        """TC dim per kn dim of the result; its named dims must come in left-hand side order."""
        lhs = self.info.lhs
        names = tuple(a for a in value.axes if a is not None)
        if names != lhs:
            raise self.unsupported(
                f"the result's dims come out indexed ({', '.join(names)}) but '{self.stmt.tensor}' is indexed "
                f"({', '.join(lhs)}) (kn has no transpose)",
                self.stmt.loc,
            )
        return tuple(None if a is None else lhs.index(a) for a in value.axes)

    # ---- expressions
    def expr(self, expr: Expr) -> Operand:
        """Lower an expression: a kn value for tensors, a float for constants and size symbols (their sizes).

        Raises:
            TcError: a construct kn cannot express yet (see `binary`).
        """
        if isinstance(expr, Number):
            return expr.value
        if isinstance(expr, Name):
            return float(self.bound.sizes[expr.name])
        if isinstance(expr, Access):
            return self.access_value(expr.tensor, tuple(ix.plain_name for ix in expr.indices))
        if isinstance(expr, Unary):
            return self.negate(self.expr(expr.operand))
        if isinstance(expr, Call):
            return self.call(expr)
        return self.binary(expr.op, self.expr(expr.lhs), self.expr(expr.rhs), expr.loc)

    def access_value(self, tensor: str, names: tuple[str | None, ...]) -> _Value:
        """The tensor's value with its dims named by the access's indices (None: size 1)."""
        stored = self.stored[tensor]
        return _Value(stored.tensor, tuple(None if d is None else names[d] for d in stored.layout))

    def negate(self, x: Operand) -> Operand:
        """`-x`: `kn.mul_scalar(x, -1)` for a tensor, the negated float for a constant."""
        if isinstance(x, _Value):
            return _Value(self.graph.mul_scalar(x.tensor, -1.0), x.axes)
        return -x

    def call(self, call: Call) -> Operand:
        """Lower a function call: folded for constant arguments, else the kn ops of the module docstring's mapping.

        Raises:
            TcError: tensor operands of `fmax`/`fmin` that do not line up (see `binary`).
        """
        args = [self.expr(a) for a in call.args]
        scalars = [a for a in args if not isinstance(a, _Value)]
        if len(scalars) == len(args):
            return _fold_call(call.func, scalars)
        if call.func in ("fmax", "max", "fmin", "min"):
            return self.extremum(call.func.endswith("max"), args[0], args[1], call.loc)
        (x,) = args
        assert isinstance(x, _Value)
        if call.func == "tanh":
            # kn has no tanh: tanh(x) = 2 sigmoid(2x) - 1 = sigmoid(2x) - sigmoid(-2x)
            up = self.graph.sigmoid(self.graph.mul_scalar(x.tensor, 2.0))
            down = self.graph.sigmoid(self.graph.mul_scalar(x.tensor, -2.0))
            return _Value(self.graph.sub(up, down), x.axes)
        unary = {"exp": self.graph.exp, "log": self.graph.log, "sqrt": self.graph.sqrt}[call.func]
        return _Value(unary(x.tensor), x.axes)

    def extremum(self, is_max: bool, a: Operand, b: Operand, loc: Loc) -> Operand:
        """max/min of two operands with the ops kn has (relu, clamp, add, sub)."""
        if not isinstance(a, _Value):
            a, b = b, a
        assert isinstance(a, _Value)
        if not isinstance(b, _Value):
            if is_max:
                tensor = self.graph.relu(a.tensor) if b == 0 else self.graph.clamp(a.tensor, b, math.inf)
            else:
                tensor = self.graph.clamp(a.tensor, -math.inf, b)
            return _Value(tensor, a.axes)
        diff = self.binary("-", a, b, loc)
        assert isinstance(diff, _Value)
        excess = _Value(self.graph.relu(diff.tensor), diff.axes)
        # max(a, b) = b + relu(a - b); min(a, b) = a - relu(a - b)
        return self.binary("+", excess, b, loc) if is_max else self.binary("-", a, excess, loc)

    def binary(self, op: str, a: Operand, b: Operand, loc: Loc) -> Operand:
        """`a op b` (`+ - * /`): a kn elementwise op of two tensors, a scalar op, or a folded constant.

        Raises:
            TcError: tensor operands that do not line up dim by dim, or a scalar operation kn has no op
                for (see `with_scalar_right` and `with_scalar_left`).
        """
        if isinstance(a, _Value) and isinstance(b, _Value):
            axes = self.aligned(a.axes, b.axes, loc)
            fn = {"+": self.graph.add, "-": self.graph.sub, "*": self.graph.mul, "/": self.graph.div}[op]
            return _Value(fn(a.tensor, b.tensor), axes)
        if isinstance(a, _Value):
            assert not isinstance(b, _Value)  # both tensors is handled above
            return self.with_scalar_right(op, a, float(b), loc)
        if isinstance(b, _Value):
            return self.with_scalar_left(op, float(a), b, loc)
        return _fold_binary(op, a, b)

    def with_scalar_right(self, op: str, a: _Value, c: float, loc: Loc) -> _Value:
        """`a op c` for a tensor `a`: `a` itself for `+ 0`, `- 0`, `* 1` and `/ 1`, else `kn.mul_scalar`
        for `*` and `/`, `kn.add_scalar` for `+` and `-` (e.g. a normalisation's epsilon).

        Raises:
            TcError: division by the constant 0.
        """
        if op in "+-" and c == 0 or op in "*/" and c == 1:
            return a
        if op in "+-":
            return _Value(self.graph.add_scalar(a.tensor, c if op == "+" else -c), a.axes)
        if op == "*" or c != 0:
            return _Value(self.graph.mul_scalar(a.tensor, c if op == "*" else 1.0 / c), a.axes)
        raise self.unsupported("division of a tensor by the constant 0", loc)

    def with_scalar_left(self, op: str, c: float, b: _Value, loc: Loc) -> _Value:
        """`c op b` for a tensor `b`: `+` and `*` as `b op c`, `c - b` as `kn.mul_scalar(b, -1)`
        then (c != 0) `kn.add_scalar(., c)`.

        Raises:
            TcError: dividing a constant by a tensor (kn has no reciprocal).
        """
        if op in "+*":
            return self.with_scalar_right(op, b, c, loc)
        if op == "-":
            negated = _Value(self.graph.mul_scalar(b.tensor, -1.0), b.axes)
            return self.with_scalar_right("+", negated, c, loc)
        raise self.unsupported(f"dividing the constant {c:g} by a tensor (kn has no reciprocal)", loc)

    def aligned(self, a: Axes, b: Axes, loc: Loc) -> Axes:
        """The broadcast axes of two operands, which must line up dim by dim."""
        if len(a) != len(b):
            raise self.unsupported(
                f"combining a rank-{len(a)} operand with a rank-{len(b)} operand "
                "(kn broadcasts equal ranks only and has no reshape)",
                loc,
            )
        merged = []
        for x, y in zip(a, b):
            if x is not None and y is not None and x != y:
                raise self.unsupported(
                    f"operands indexed ({_axes_text(a)}) and ({_axes_text(b)}) do not line up (kn has no transpose)",
                    loc,
                )
            merged.append(x if x is not None else y)
        names = [m for m in merged if m is not None]
        if len(set(names)) != len(names):
            raise self.unsupported(
                f"operands indexed ({_axes_text(a)}) and ({_axes_text(b)}) do not line up (kn has no transpose)", loc
            )
        return tuple(merged)


def _is_broadcast_subscript(ix: IndexExpr, size: int) -> bool:
    """`T(n, 0)` on a size-1 dim: the dim broadcasts like a dim kept by a reduction."""
    return not ix.terms and ix.const == 0 and size == 1


def _is_gemm(left: Axes, right: Axes, k: str) -> bool:
    """`left @ right` contracts `k`: `(..., i, k) x (..., k, j)` with equal batch axes."""
    if len(left) != len(right) or len(left) < 2:
        return False
    if left[-1] != k or right[-2] != k or k in (*left[:-1], right[-1], *right[:-2]):
        return False
    if left[:-2] != right[:-2]:
        return False
    return left[-2] is None or left[-2] != right[-1]


def _axes_text(axes: Axes) -> str:
    return ", ".join(a or "1" for a in axes)


def _fold_call(func: str, args: list[float]) -> float:
    values = [np.float64(a) for a in args]  # numpy float64: IEEE inf/nan instead of exceptions
    with np.errstate(all="ignore"):
        fns = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh}
        if func in fns:
            return float(fns[func](values[0]))
        return float(np.maximum(*values) if func.endswith("max") else np.minimum(*values))


def _fold_binary(op: str, a: float, b: float) -> float:
    x, y = np.float64(a), np.float64(b)
    with np.errstate(all="ignore"):
        return float({"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op](x, y))
