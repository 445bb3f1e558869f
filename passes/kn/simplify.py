"""`kn-simplify`: common-subexpression elimination and algebraic simplification of kernel graphs.

The rewrites are the ones that make Mirage's fused kernels possible (mirage-notes 2.3-2.4):
a factor that is constant along the contracted dimension of a matmul commutes with it, so an
elementwise scaling can be moved from the (large) matmul operand to the matmul result, after
the for-loop of a fused kernel.

| pattern | rewrite | condition |
|---|---|---|
| `matmul(div(X, r), W)` | `div(matmul(X, W), r)` | `r` broadcasts into `X` and `r.shape[-1] == 1` (constant along the contracted dim) |
| `matmul(mul(X, r), W)`, `matmul(mul(r, X), W)` | `mul(matmul(X, W), r)` | same |
| `matmul(A, div(W, c))`, `matmul(A, mul(W, c))` | `div/mul(matmul(A, W), c)` | `c` broadcasts into `W`, `c.shape[-2] == 1` |
| `matmul(mul_scalar(X, s), W)`, `matmul(A, mul_scalar(W, s))` | `mul_scalar(matmul(., .), s)` | - |
| `mul_scalar(mul_scalar(x, a), b)` | `mul_scalar(x, a*b)` | - |
| `mul_scalar(x, 1.0)` | `x` | - |
| `add_scalar(add_scalar(x, a), b)` | `add_scalar(x, a+b)` | - |
| `add_scalar(x, 0.0)` | `x` | - |

Special cases: `rms_norm(X) @ W = (X / rms(X)) @ W -> (X @ W) / rms(X)` (the rmsnorm_linear
kernel: the rms statistic becomes a `red_ld_rms` accumulator beside the matmul; kn-widen-sums
then keeps the product `X @ W` in f32, as it is rms(X) times the result) and
`(exp(a) / sum(exp(a))) @ V -> (exp(a) @ V) / sum(exp(a))` (flash-decoding attention: numerator
and denominator are both sums over the KV dim, so they can be split across blocks).

The moved factor is rewritten only when the scaled operand has no other use (otherwise the
scaling would be computed twice), except for a row statistic of the scaled tensor itself
(`x / sqrt(sum(x^2) / n)`: one RMSNorm feeding the Q, K and V projections, or a gate and an up
projection): after the fixpoint, `SplitSharedRowScale` gives every matmul reading it its own
copy of the statistic and of the scaling, each moved past its matmul (no CSE follows), so each
consumer kernel sums the squares beside its loop instead of waiting for a one-block kernel;
kn-partition merges the copies that land in one kernel.  CSE merges kn ops with equal names, operands and
properties (`kn.customized` is never merged); dead pure kn ops are erased.  The rewrites are
exact in real arithmetic; in floating point they reorder roundings only (the reference
executor agrees to ~1e-15 in float64).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from mirage_xdsl.dialects import kn, tiling


def _single_use(value: SSAValue) -> bool:
    return len(list(value.uses)) == 1


def _broadcasts_into(factor: SSAValue, target: SSAValue) -> bool:
    """`factor` broadcasts into `target`'s shape without enlarging it."""
    try:
        return tiling.broadcast_shape(kn.shape_of(target), kn.shape_of(factor)) == kn.shape_of(target)
    except tiling.ShapeError:
        return False


def _factor(op: Operation, dim: int) -> tuple[SSAValue, SSAValue] | None:
    """`(x, f)` if `op` is `x / f`, `x * f` or `f * x` with `f` constant along x's dim `dim`
    (-1: a row factor, as rms_norm's 1 / rms; -2: a column factor)."""
    if isinstance(op, kn.DivOp):
        pairs = [(op.lhs, op.rhs)]
    elif isinstance(op, kn.MulOp):
        pairs = [(op.lhs, op.rhs), (op.rhs, op.lhs)]
    else:
        return None
    for x, f in pairs:
        if len(kn.shape_of(f)) >= -dim and kn.shape_of(f)[dim] == 1 and _broadcasts_into(f, x):
            return x, f
    return None


class MoveScaleAcrossMatmul(RewritePattern):
    """Move a mul/div by a factor constant along the contracted dim (or a mul_scalar) from a
    matmul operand to the matmul result."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kn.MatmulOp, rewriter: PatternRewriter) -> None:
        """Rewrite matmul(f(x), w) with a single-use scaling f of one operand as f applied to matmul(x, w).

        f is a mul_scalar, or a mul/div by a factor of size 1 along the contracted dim (a row factor
        of the lhs, a column factor of the rhs) that still broadcasts into the matmul's result.
        """
        for side in ("lhs", "rhs"):
            operand = op.lhs if side == "lhs" else op.rhs
            producer = operand.owner
            if not isinstance(producer, Operation) or not _single_use(operand):
                continue
            if isinstance(producer, kn.MulScalarOp):
                lhs, rhs = (producer.input, op.rhs) if side == "lhs" else (op.lhs, producer.input)
                mm = kn.MatmulOp(lhs, rhs)
                scaled = kn.MulScalarOp(mm.result, producer.scalar.value.data)
                rewriter.replace(op, [mm, scaled])
                rewriter.erase(producer)
                return
            match = _factor(producer, -1 if side == "lhs" else -2)
            if match is None:
                continue
            x, factor = match
            lhs, rhs = (x, op.rhs) if side == "lhs" else (op.lhs, x)
            mm = kn.MatmulOp(lhs, rhs)
            if not _broadcasts_into(factor, mm.result):
                continue
            assert isinstance(producer, (kn.MulOp, kn.DivOp))  # what _factor matches
            new = type(producer)(mm.result, factor)
            rewriter.replace(op, [mm, new])
            rewriter.erase(producer)
            return


_SCALAR_CHAINS: dict[type[Operation], tuple[float, Callable[[float, float], float]]] = {
    kn.MulScalarOp: (1.0, operator.mul),
    kn.AddScalarOp: (0.0, operator.add),
}
"""Scalar ops that fold along a chain: (their identity scalar, how two scalars combine)."""


class FoldScalarChain(RewritePattern):
    """`mul_scalar(mul_scalar(x, a), b) -> mul_scalar(x, a*b)`, `add_scalar(add_scalar(x, a), b)
    -> add_scalar(x, a+b)`; `mul_scalar(x, 1)` and `add_scalar(x, 0)` -> `x`."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        """Drop an identity scalar op; merge a scalar op of a single-use one of its kind into one."""
        rule = _SCALAR_CHAINS.get(type(op))
        if rule is None:
            return
        assert isinstance(op, kn.MulScalarOp | kn.AddScalarOp)
        identity, combine = rule
        scalar = op.scalar.value.data
        if scalar == identity:
            rewriter.replace(op, [], [op.input])
            return
        inner = op.input.owner
        if type(inner) is type(op) and _single_use(op.input):
            assert isinstance(inner, kn.MulScalarOp | kn.AddScalarOp)
            rewriter.replace(op, [type(op)(inner.input, combine(inner.scalar.value.data, scalar))])
            rewriter.erase(inner)


def _is_pure_kn(op: Operation) -> bool:
    return op.dialect_name() == "kn" and not isinstance(op, kn.CustomizedOp) and not op.regions


def cse_ops(ops: list[Operation]) -> list[Operation]:
    """Merge equal pure kn ops among `ops` (same name, operands, properties, result types; each
    later copy's uses go to the first, and it is erased); return the ops kept, in order."""
    seen: dict[tuple, Operation] = {}
    kept: list[Operation] = []
    for op in ops:
        key = (op.name, tuple(op.operands), tuple(sorted(op.properties.items())), tuple(r.type for r in op.results))
        prev = seen.get(key) if _is_pure_kn(op) else None
        if prev is None:
            if _is_pure_kn(op):
                seen[key] = op
            kept.append(op)
            continue
        for old, new in zip(op.results, prev.results):
            old.replace_all_uses_with(new)
        op.detach()
        op.erase()
    return kept


def cse_block(block: Block) -> int:
    """Merge equal pure kn ops of `block` (`cse_ops`); return how many were removed."""
    ops = list(block.ops)
    return len(ops) - len(cse_ops(ops))


def dce_block(block: Block) -> int:
    """Erase pure kn ops whose results are unused; return how many."""
    removed = 0
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.ops)):
            if _is_pure_kn(op) and all(not list(r.uses) for r in op.results):
                op.detach()
                op.erase()
                removed += 1
                changed = True
    return removed


def _row_statistic_chain(factor: SSAValue, x: SSAValue) -> list[Operation] | None:
    """The ops computing `factor` from `x` alone, in program order, if `factor` is a row
    statistic of `x`: a chain of single-input elementwise ops and size-1 reductions over x's
    last dim that starts at `x` (rms_norm's `sqrt(sum(x^2 / n))`, a mean, a norm); else None."""
    chain: list[Operation] = []
    value = factor
    while value is not x:
        op = value.owner
        if isinstance(op, kn.ReductionOp):
            if op.size.value.data != 1 or op.dim.value.data != len(kn.shape_of(op.input)) - 1:
                return None
            value = op.input
        elif isinstance(op, (kn.SquareOp, kn.SqrtOp, kn.MulScalarOp, kn.ExpOp, kn.SiluOp, kn.GeluOp)):
            value = op.input
        else:
            return None
        chain.append(op)
    return chain[::-1] if chain else None


class SplitSharedRowScale(RewritePattern):
    """Give every matmul reading `x / r(x)` (or `x * r(x)`), with `r` a row statistic of `x`
    over the contracted dim, its own copy of the scaling and of the statistic's ops, so that
    `MoveScaleAcrossMatmul` moves each copy past its matmul.

    A shared normalisation (one RMSNorm feeding the Q, K and V projections, or a gate and an up
    projection) otherwise stays a separate value that every consumer kernel waits for: a
    one-block kernel (or megakernel task) between the producer of `x` and the projections.
    Each consumer kernel reads all of `x`'s row over its loop anyway, so its copy of the
    statistic is a register sum beside the matmul (the rmsnorm_linear kernel, Mirage's
    rms-norm + matmul fusion), merged across split-K blocks by the same grid sum: no extra
    global memory traffic, one dependency level fewer."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kn.DivOp | kn.MulOp, rewriter: PatternRewriter) -> None:
        """Clone `op` and its statistic chain for each matmul use after the first (every use must
        be a matmul's lhs; a kn.mul's factor may be either operand)."""
        uses = list(op.result.uses)
        if len(uses) < 2 or any(not isinstance(u.operation, kn.MatmulOp) or u.index != 0 for u in uses):
            return
        match = _factor(op, -1)
        if match is None:
            return
        x, factor = match
        chain = _row_statistic_chain(factor, x)
        if chain is None:
            return
        for use in uses[1:]:
            mapping: dict[SSAValue, SSAValue] = {}
            clones: list[Operation] = []
            for c in [*chain, op]:
                clone = c.clone(value_mapper=dict(mapping))
                for old, new in zip(c.results, clone.results):
                    mapping[old] = new
                clones.append(clone)
            rewriter.insert(clones, InsertPoint.before(op))
            use.operation.operands[use.index] = clones[-1].results[0]


def _split_row_scales(module: ModuleOp) -> bool:
    """Run `SplitSharedRowScale` and then move the copies across their matmuls (no CSE after:
    it would merge the copies back).  Returns whether anything changed."""
    split = PatternRewriteWalker(SplitSharedRowScale(), apply_recursively=False).rewrite_module(module)
    if split:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([MoveScaleAcrossMatmul(), FoldScalarChain()]), apply_recursively=True
        ).rewrite_module(module)
    return split


def simplify_module(module: ModuleOp, split_row_scales: bool = True) -> None:
    """Run CSE, the algebraic rewrites and DCE on every kernel graph of `module` to a fixpoint,
    then (`split_row_scales`) give each matmul its own copy of a shared row scaling
    (`SplitSharedRowScale`)."""
    funcs = [op for op in module.walk() if isinstance(op, FuncOp) and op.body.blocks]
    for _ in range(8):
        for func in funcs:
            cse_block(func.body.block)
        walker = PatternRewriteWalker(
            GreedyRewritePatternApplier([MoveScaleAcrossMatmul(), FoldScalarChain()]),
            apply_recursively=True,
        )
        changed = walker.rewrite_module(module)
        for func in funcs:
            dce_block(func.body.block)
        if not changed:
            break
    if split_row_scales and _split_row_scales(module):
        for func in funcs:
            dce_block(func.body.block)


@dataclass(frozen=True)
class KnSimplifyPass(ModulePass):
    """CSE + algebraic simplification of kernel graphs (see the module docstring)."""

    name = "kn-simplify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Simplify every kernel graph of `op` in place (`simplify_module`: CSE, rewrites, DCE, at most 8 rounds).

        Raises:
            Nothing.
        """
        simplify_module(op)
