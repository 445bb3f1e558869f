"""`tb-decompose-accumulators`: reduce every accumulator to an elementwise one + post-loop ops.

Rules of Mirage's graph rebuild (mirage-notes 3.0), with `n` = the accumulated tile's last
dim and `R` = the graph's `forloop_range`:

| original                 | rewritten as                                                          |
|--------------------------|-----------------------------------------------------------------------|
| `red_ld_sum(x)`          | `nored(x)` -> `reduction(last)`                                       |
| `red_ld_mean(x)`         | `nored(x)` -> `reduction(last)` -> `mul_scalar(1/(n*R))` (Mirage: unimplemented) |
| `red_ld_rms(x)`          | `square(x)` -> `mul_scalar(1/(n*R))` -> `nored` -> `reduction(last)` -> `sqrt` (fp32 statistic) |
| `red_ld_rms(x)`, 16-bit  | `square(x)` -> `nored` in f32 -> `reduction(last)` -> `mul_scalar(1/(n*R))` -> `sqrt` rounding to 16 bits |
| `redtox_ld_sum(x)`       | `nored(x)` -> `reduction_to_dimx(last)` (strided groups, mirage-notes 1.7) |
| `red_ld_sum_rescale(x,s)`| `nored_rescale(x, s)` -> `reduction(last)`                            |
| `tb.rms_norm(x)`         | `square` -> `mul_scalar(1/n)` -> `reduction(last)` -> `sqrt` -> `div(x, .)` |

Afterwards only `nored`, `nored_rescale` and `max` accumulators remain, and no `tb.rms_norm`.
A `tb.grid_sum` of a decomposed accumulator stays below the reductions, which shrink the
partial each split block writes and the last block reads (`reduce_partials`, the default):
`grid_sum(red_ld_sum(x))` -> `grid_sum(reduction(nored(x)))`, 16x64 -> 16x1 fp32 for the
rmsnorm sum of squares at bs8 (every grid-sum plan of rmsnorm bs8 1.7-4.9 µs faster on an
H200, bs1 within 0.1-0.4 µs, measured 2026-11-24).  With
`reduce_partials=false` it moves above the linear post-loop ops (`reduction`,
`reduction_to_dimx`, `mul_scalar`) and reads the `nored` accumulator itself:
`reduction(grid_sum(nored(x)))`.  Either way it moves above a `mul_scalar`.
Ops before the accumulator stay in the loop (their tiles are not `after_accum`); the
accumulator's result and everything computed from it are `after_accum` (the op constructors
derive the types).  An fp32 `red_ld_rms` scales before accumulating, as Mirage does, so that
partial sums stay in range; a 16-bit one accumulates its squares in fp32 and scales after the
sum (`rms_accumulator_ops`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects import tb
from mirage_xdsl.dialects.common.precision import is_half
from mirage_xdsl.dialects.kn import CustomizedOp, element_type_of, shape_of

PASS_NAME = "tb-decompose-accumulators"
KEPT_KINDS = ("nored", "nored_rescale", "max")
"""Accumulator kinds that remain after this pass (Mirage asserts exactly these, mirage-notes 3.0)."""


def _graph_params(op: Operation) -> tuple[int, int]:
    """(forloop_range, reduction_dimx) of the `kn.customized` holding `op`."""
    graph = op.parent_op()
    if not isinstance(graph, CustomizedOp):
        op.emit_error(
            f"{PASS_NAME}: {op.name} is not directly inside a kn.customized; run on verified IR",
            PassFailedException(f"{PASS_NAME}: {op.name} outside kn.customized"),
        )
    return graph.num_iterations, graph.dimx


def accumulator_ops(op: tb.ForloopAccumOp) -> list[Operation]:
    """Replacement ops of one accumulator, in program order (last op's result replaces it)."""
    kind = op.accum_kind
    x: SSAValue = op.input
    rank = len(shape_of(x))
    last = rank - 1
    n = shape_of(x)[last]
    iterations, dimx = _graph_params(op)
    wide = element_type_of(op.result)  # f32 for a 16-bit input's sum kept wide (kn-widen-sums)
    if kind == "red_ld_sum":
        acc = tb.ForloopAccumOp(x, "nored", element_type=wide)
        return [acc, tb.ReductionOp(acc.result, last)]
    if kind == "red_ld_mean":
        acc = tb.ForloopAccumOp(x, "nored", element_type=wide)
        red = tb.ReductionOp(acc.result, last)
        return [acc, red, tb.MulScalarOp(red.result, 1.0 / (n * iterations))]
    if kind == "red_ld_rms":
        return rms_accumulator_ops(x, op.result, n * iterations)
    if kind == "redtox_ld_sum":
        acc = tb.ForloopAccumOp(x, "nored", element_type=wide)
        return [acc, tb.ReductionToDimxOp(acc.result, last, dimx)]
    if kind == "red_ld_sum_rescale":
        assert op.rescale is not None  # the verifier requires it for this kind
        acc = tb.ForloopAccumOp(x, "nored_rescale", dimx, rescale=op.rescale, element_type=wide)
        return [acc, tb.ReductionOp(acc.result, last)]
    raise AssertionError(f"accumulator kind {kind} needs no decomposition")


def rms_accumulator_ops(x: SSAValue, result: SSAValue, count: int) -> list[Operation]:
    """`red_ld_rms(x)` over `count` = n x iterations elements per row, as ops whose last one
    gives `result`'s type.

    A 16-bit statistic is summed in fp32: square(x) -> `nored` f32 -> reduction -> mul_scalar(1 /
    count) -> sqrt, the sqrt rounding to the 16-bit type (a rounding tb unary op).  Mirage
    scales each square by 1 / count before a 16-bit sum instead, which keeps that sum in range
    but flushes the scaled squares of small values to fp16 subnormals or zero (an fp16 rms of
    values up to 4e-3, squares ~1e-5 scaled by 1/128: 11 % off, fuzz seed 19 graph 3278).  An
    fp32 statistic keeps Mirage's order."""
    square = tb.SquareOp(x)
    if not is_half(element_type_of(result)):
        scaled = tb.MulScalarOp(square.result, 1.0 / count)
        acc = tb.ForloopAccumOp(scaled.result, "nored", element_type=element_type_of(result))
        red = tb.ReductionOp(acc.result, len(shape_of(x)) - 1)
        return [square, scaled, acc, red, tb.SqrtOp(red.result)]
    acc = tb.ForloopAccumOp(square.result, "nored", element_type=f32)
    red = tb.ReductionOp(acc.result, len(shape_of(x)) - 1)
    mean = tb.MulScalarOp(red.result, 1.0 / count)
    return [square, acc, red, mean, tb.SqrtOp(mean.result, result.type)]


def rms_norm_ops(op: tb.RmsNormOp) -> list[Operation]:
    """`tb.rms_norm(x)` -> square, reduction(last), mul_scalar(1/n), sqrt, div(x, .).

    The sum comes before the 1/n: the squares are stored in the tile's type, and scaled by
    1/n first small ones underflow in fp16 (rms_norm of values near 1e-3 lost 9 %, fuzz seed
    13 graph 8340); the reduction sums in fp32 and the scale joins its epilogue."""
    x: SSAValue = op.input
    last = len(shape_of(x)) - 1
    square = tb.SquareOp(x)
    red = tb.ReductionOp(square.result, last)
    scaled = tb.MulScalarOp(red.result, 1.0 / shape_of(x)[last])
    sqrt = tb.SqrtOp(scaled.result)
    return [square, red, scaled, sqrt, tb.DivOp(x, sqrt.result)]


class DecomposeAccumulator(RewritePattern):
    """Rewrite a reducing accumulator (anything but nored / nored_rescale / max)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tb.ForloopAccumOp, rewriter: PatternRewriter) -> None:
        """Replace a reducing `tb.forloop_accum` by the ops of `accumulator_ops`: a `nored` (or
        `nored_rescale`) accumulator followed by the reduction and scaling after the loop
        (`red_ld_rms`: `rms_accumulator_ops`)."""
        if op.accum_kind in KEPT_KINDS:
            return
        rewriter.replace(op, accumulator_ops(op))


LINEAR_POST_OPS = tb.PARTIAL_LINEAR_OPS
"""Post-loop ops that commute with a sum over blocks (they are linear in their operand)."""

SHAPE_PRESERVING_POST_OPS = (tb.MulScalarOp,)
"""The linear post-loop ops a grid sum still moves above with `reduce_partials`."""


@dataclass
class HoistGridSum(RewritePattern):
    """`grid_sum(f(a))` -> `f(grid_sum(a))` for a linear `f` of `over` used once: after
    decomposition a grid sum then reads the `nored` accumulator itself (or, without the
    reductions in `over`, the reduced partial)."""

    over: tuple[type[tb.TbUnaryOp | tb.TbReductionBase], ...] = LINEAR_POST_OPS  # ops with one `input` operand

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tb.GridSumOp, rewriter: PatternRewriter) -> None:
        """Move `op` above its single-use producer of type `over`: grid_sum(f(a)) becomes f(grid_sum(a))."""
        producer = op.input.owner
        if not isinstance(producer, self.over) or not op.input.has_one_use():
            return
        summed = tb.GridSumOp(producer.input, op.grid_axis)
        moved = producer.clone()
        moved.operands = [summed.result]
        rewriter.insert(summed, InsertPoint.before(producer))
        rewriter.replace(op, [moved])
        rewriter.erase(producer)


class DecomposeTbRmsNorm(RewritePattern):
    """Rewrite `tb.rms_norm`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: tb.RmsNormOp, rewriter: PatternRewriter) -> None:
        """Replace `op` by the ops of `rms_norm_ops` (square, row sum, mul_scalar(1/n), sqrt, div)."""
        rewriter.replace(op, rms_norm_ops(op))


@dataclass(frozen=True)
class DecomposeAccumulatorsPass(ModulePass):
    """Leave only `nored`, `nored_rescale` and `max` accumulators, and no `tb.rms_norm`.

    `reduce_partials`: reduce a split block's accumulator before its grid sum (see above)."""

    name = PASS_NAME
    reduce_partials: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Decompose accumulators and `tb.rms_norm`, and hoist grid sums (over `SHAPE_PRESERVING_POST_OPS`
        with `reduce_partials`, else over `LINEAR_POST_OPS`), everywhere in `op`; no dead-code removal.

        Raises:
            Nothing.
        """
        PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [
                    DecomposeAccumulator(),
                    DecomposeTbRmsNorm(),
                    HoistGridSum(SHAPE_PRESERVING_POST_OPS if self.reduce_partials else LINEAR_POST_OPS),
                ],
                dce_enabled=False,
            ),
            apply_recursively=False,
        ).rewrite_module(op)
