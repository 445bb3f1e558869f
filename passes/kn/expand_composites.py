"""`kn-expand-composites` and `kn-recognize-composites`: composite expansion and its inverse.

Step 1 of graph-kernel fusion (seed 001, "Composite Expansion") opens composite operators
into basic ones so that later passes can optimise across their boundaries:

    kn.rms_norm(x)  ->  square, mul_scalar(1/n), reduction (one per normalized dim), sqrt, div

(the op list of `kn-decompose-rms-norm`, reused here).  `kn.rms_norm` is the only composite
of the kn dialect; softmax has no op of its own (Mirage writes it as exp / reduction / div).
Once the rms statistic is a separate value, `kn-simplify` can move the division across a
following matmul (`(X / r) @ W -> (X @ W) / r`), which is what the rmsnorm_linear kernel needs.

`kn-recognize-composites` runs after simplification and goes the other way where the fused
form is better, and records the patterns the partitioner cares about:

* an expanded rms norm over the LAST dim whose division is still applied to its own source,
  i.e. was not moved across a matmul (`div(x, sqrt(reduction(mul_scalar(square(x), 1/n))))`
  with single-use intermediates), is folded back into `kn.rms_norm(x)`: inside a block graph
  it becomes one `tb.rms_norm` instead of five ops (the row-wise kernels of ntrans);
* a softmax `div(exp(a), reduction(exp(a), d))` gets the record `kn.composite = "softmax"`;
* the simplified attention form `div(matmul(exp(a), V), reduction(exp(a), last))` gets
  `kn.composite = "softmax_matmul"` (flash-decoding candidate);
* `div(matmul(x, W), sqrt(reduction(mul_scalar(square(x), 1/n), last)))` gets
  `kn.composite = "rms_norm_matmul"` (matmul with a row statistic).

Records are discardable string attributes on the op that completes the pattern; `kn-partition`
uses them to name the template of the kernel it builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from mirage_xdsl.dialects import kn
from mirage_xdsl.passes.kn.decompose_rms_norm import rms_norm_ops

COMPOSITE_ATTR = "kn.composite"
"""Discardable string attribute recording a recognised composite pattern."""


OpT = TypeVar("OpT", bound=Operation)

class ExpandRmsNorm(RewritePattern):
    """`kn.rms_norm(x)` -> square, mul_scalar(1/n), reductions, sqrt, div."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kn.RmsNormOp, rewriter: PatternRewriter) -> None:
        """Replace `op` by square, mul_scalar(1/n), one size-1 reduction per normalized dim, sqrt and
        div (`rms_norm_ops`; n = the product of `normalized_shape`): x / sqrt(sum(x^2) / n), the
        RMSNorm of Zhang & Sennrich 2019 without weight or epsilon, as `kn.rms_norm` defines it.
        """
        rewriter.replace(op, rms_norm_ops(op.input, kn.ints(op.normalized_shape)))


def _owner(value: SSAValue, cls: type[OpT]) -> OpT | None:
    op = value.owner
    return op if isinstance(op, cls) else None


def _uses(value: SSAValue) -> int:
    return len(list(value.uses))


def rms_statistic(q: SSAValue) -> tuple[SSAValue, list[Operation]] | None:
    """If `q = sqrt(reduction(mul_scalar(square(x), 1/n), last dim))` (n = x's last dim),
    return `(x, [sqrt, reduction, mul_scalar, square])`, else None."""
    sqrt = _owner(q, kn.SqrtOp)
    if sqrt is None:
        return None
    red = _owner(sqrt.input, kn.ReductionOp)
    if red is None or red.size.value.data != 1:
        return None
    scaled = _owner(red.input, kn.MulScalarOp)
    if scaled is None:
        return None
    square = _owner(scaled.input, kn.SquareOp)
    if square is None:
        return None
    x = square.input
    shape = kn.shape_of(x)
    if red.dim.value.data != len(shape) - 1:
        return None
    if abs(scaled.scalar.value.data * shape[-1] - 1.0) > 1e-12:
        return None
    return x, [sqrt, red, scaled, square]


def softmax_denominator(z: SSAValue) -> tuple[SSAValue, int] | None:
    """If `z = reduction(e, d)` (size 1) with `e = exp(a)`, return `(e, d)`."""
    red = _owner(z, kn.ReductionOp)
    if red is None or red.size.value.data != 1 or _owner(red.input, kn.ExpOp) is None:
        return None
    return red.input, red.dim.value.data


class RecognizeComposites(RewritePattern):
    """Fold un-moved rms norms back into `kn.rms_norm`; record softmax-like patterns."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: kn.DivOp, rewriter: PatternRewriter) -> None:
        """Classify a `kn.div` (skipped once it has `kn.composite`).

        x / rms(x) whose statistic ops have no other user is folded back into `kn.rms_norm(x)`;
        matmul(x, w) / rms(x) is marked "rms_norm_matmul"; e / sum(e) with e = exp(a) is marked
        "softmax", and matmul(e, v) / sum(e) over e's last dim "softmax_matmul".
        """
        if COMPOSITE_ATTR in op.attributes:
            return
        stat = rms_statistic(op.rhs)
        if stat is not None:
            x, chain = stat
            if x is op.lhs and all(_uses(o.results[0]) == 1 for o in chain):
                rewriter.replace(op, kn.RmsNormOp(x, [kn.shape_of(x)[-1]]))
                for dead in chain:
                    rewriter.erase(dead)
                return
            mm = _owner(op.lhs, kn.MatmulOp)
            if mm is not None and mm.lhs is x:
                op.attributes[COMPOSITE_ATTR] = StringAttr("rms_norm_matmul")
                rewriter.notify_op_modified(op)
            return
        den = softmax_denominator(op.rhs)
        if den is None:
            return
        e, dim = den
        if op.lhs is e:
            op.attributes[COMPOSITE_ATTR] = StringAttr("softmax")
            rewriter.notify_op_modified(op)
            return
        mm = _owner(op.lhs, kn.MatmulOp)
        if mm is not None and mm.lhs is e and dim == len(kn.shape_of(e)) - 1:
            op.attributes[COMPOSITE_ATTR] = StringAttr("softmax_matmul")
            rewriter.notify_op_modified(op)


@dataclass(frozen=True)
class KnExpandCompositesPass(ModulePass):
    """Expand composite kn ops (`kn.rms_norm`) into basic kn ops."""

    name = "kn-expand-composites"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Expand every `kn.rms_norm` in `op` (`ExpandRmsNorm`, one walk).

        Raises:
            Nothing.
        """
        PatternRewriteWalker(ExpandRmsNorm(), apply_recursively=False).rewrite_module(op)


@dataclass(frozen=True)
class KnRecognizeCompositesPass(ModulePass):
    """Re-fold rms norms that stayed row-local into `kn.rms_norm`; record softmax / attention /
    rms-matmul patterns as `kn.composite` attributes."""

    name = "kn-recognize-composites"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Apply `RecognizeComposites` to every `kn.div` in `op` (one walk).

        Raises:
            Nothing.
        """
        PatternRewriteWalker(RecognizeComposites(), apply_recursively=False).rewrite_module(op)

