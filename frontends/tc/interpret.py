"""A direct numpy evaluator of checked TC definitions: the oracle for `lower` tests.

Each statement is evaluated over its whole iteration space at once: the left-hand side
indices then the reduction indices become the axes of a broadcast grid, every access is a
numpy fancy index with its affine subscripts, and the reduction folds the trailing axes.
Arithmetic is float64 whatever the declared element type; IEEE inf/nan propagate silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from mirage_xdsl.frontends.tc.ast_nodes import Access, Call, Expr, Name, Number, Statement, Unary
from mirage_xdsl.frontends.tc.checked_def import BoundDef, CheckedDef
from mirage_xdsl.frontends.tc.checks import bind_sizes

__all__ = ["interpret"]

_UNARY = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh}
_BINARY_FUNCS = {"fmax": np.maximum, "max": np.maximum, "fmin": np.minimum, "min": np.minimum}
_FOLDS: dict[str, Callable[..., Any]] = {"+": np.sum, "*": np.prod, "max": np.max, "min": np.min}
_IDENTITY = {"+": 0.0, "*": 1.0, "max": -np.inf, "min": np.inf}
_COMBINE = {"+": np.add, "*": np.multiply, "max": np.maximum, "min": np.minimum}


def interpret(
    checked: CheckedDef, sizes: Mapping[str, int], inputs: Sequence[Any] | Mapping[str, Any]
) -> dict[str, np.ndarray]:
    """Evaluate a checked definition on numpy inputs.

    Args:
        checked: the result of `checks.check`.
        sizes: `{symbol: int}` for every size symbol.
        inputs: one array per parameter in order, or a mapping from parameter names; each
            of the parameter's shape for these sizes.

    Returns:
        `{output name: float64 array}` in the order the outputs are declared, with the TC
        shapes (no kept size-1 dims).

    Raises:
        TcError: bad sizes or out-of-bounds subscripts (from `checks.bind_sizes`), or inputs
            of the wrong number or shape (located at the definition or the parameter).
    """
    bound = bind_sizes(checked, sizes)
    env = _input_arrays(bound, inputs)
    for index, stmt in enumerate(checked.tree.statements):
        env[stmt.tensor] = _run_statement(bound, index, stmt, env)
    return {name: env[name] for name, _ in checked.tree.outputs}


def _input_arrays(bound: BoundDef, inputs: Sequence[Any] | Mapping[str, Any]) -> dict[str, np.ndarray]:
    tree = bound.checked.tree
    names = [p.name for p in tree.params]
    if isinstance(inputs, Mapping):
        if sorted(inputs) != sorted(names):
            raise bound.checked.error(f"inputs by name must be exactly {names}, got {sorted(inputs)}", tree.loc)
        inputs = [inputs[n] for n in names]
    if len(inputs) != len(names):
        raise bound.checked.error(f"'{tree.name}' takes {len(names)} inputs, got {len(inputs)}", tree.loc)
    env = {}
    for param, value in zip(tree.params, inputs):
        array = np.asarray(value, dtype=np.float64)
        if array.shape != bound.shapes[param.name]:
            raise bound.checked.error(
                f"input '{param.name}' must have shape {bound.shapes[param.name]}, got {array.shape}", param.loc
            )
        env[param.name] = array
    return env


def _run_statement(bound: BoundDef, index: int, stmt: Statement, env: dict[str, np.ndarray]) -> np.ndarray:
    info = bound.checked.statements[index]
    ranges = bound.ranges[index]
    axes = (*info.lhs, *info.reductions)
    grids = {name: _grid(ranges[name], axis, len(axes)) for axis, name in enumerate(axes)}
    full_shape = tuple(ranges[n][1] - ranges[n][0] for n in axes)
    with np.errstate(all="ignore"):
        value = np.broadcast_to(_eval(stmt.rhs, grids, env, bound.sizes, len(axes)), full_shape)
        base = stmt.reduction_base
        reduced_axes = tuple(range(len(info.lhs), len(axes)))
        if base is None:
            return np.array(value, dtype=np.float64)
        result = _FOLDS[base](value, axis=reduced_axes, initial=_IDENTITY[base]) if reduced_axes else value
        if not stmt.initialises:
            result = _COMBINE[base](env[stmt.tensor], result)
        return np.array(result, dtype=np.float64)


def _grid(bounds: tuple[int, int], axis: int, rank: int) -> np.ndarray:
    """`arange(lo, hi)` laid along `axis` of a rank-`rank` broadcast shape."""
    shape = [1] * rank
    shape[axis] = bounds[1] - bounds[0]
    return np.arange(bounds[0], bounds[1]).reshape(shape)


def _eval(expr: Expr, grids: dict[str, np.ndarray], env: dict[str, np.ndarray], sizes: dict[str, int], rank: int) -> Any:
    if isinstance(expr, Number):
        return expr.value
    if isinstance(expr, Name):
        return float(sizes[expr.name])
    if isinstance(expr, Access):
        subscripts = tuple(_subscript(ix.terms, ix.const, grids, rank) for ix in expr.indices)
        return env[expr.tensor][subscripts]
    if isinstance(expr, Unary):
        return -_eval(expr.operand, grids, env, sizes, rank)
    if isinstance(expr, Call):
        args = [_eval(a, grids, env, sizes, rank) for a in expr.args]
        fn = _UNARY.get(expr.func) or _BINARY_FUNCS[expr.func]
        return fn(*args)
    lhs = _eval(expr.lhs, grids, env, sizes, rank)
    rhs = _eval(expr.rhs, grids, env, sizes, rank)
    if expr.op == "/":
        return np.divide(np.float64(lhs), rhs)
    return {"+": np.add, "-": np.subtract, "*": np.multiply}[expr.op](lhs, rhs)


def _subscript(terms: tuple[tuple[str, int], ...], const: int, grids: dict[str, np.ndarray], rank: int) -> np.ndarray:
    index = np.full([1] * rank, const, dtype=np.int64)
    for name, coeff in terms:
        index = index + coeff * grids[name]
    return index
