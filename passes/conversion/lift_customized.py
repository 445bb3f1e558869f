"""`kn-lift-customized`: raise a saved threadblock graph back to the kernel-level ops it computes.

A muGraph saved by Mirage's search fixes one threadblock plan per `kn.customized` kernel (its
grid, for-loop, tiles).  Our own planner (kn-fuse) often finds a faster plan for the same
computation, e.g. Mirage's single-kernel gated MLP walks K in 64 iterations of 64 x 32 weight
tiles on 128 blocks, where kn-partition splits K over the whole GPU.  This pass rewrites each
kernel whose block graph it can describe exactly as kn ops on whole tensors; kn-fuse then plans
them like any plain graph.  A kernel it cannot describe is left as it is (its plan is run as
saved), so the pass never changes what a graph computes.  By default a graph (function) is
lifted only when all its kernels are: beside a saved kernel our planner's share was sometimes
slower (option `partial`).  `mirage-transpile` lifts only the kernels the muGraph reader marked
`kn.saved_plan` (a plan Mirage's search found); a threadblock graph written by hand is compiled
as written unless this pass is run on it explicitly.

How a tile is described (`Lifted`): every tile value is a slice of a whole-tensor kn value.  Per
dim a `Split` says how the whole dim is cut: by one grid axis into slabs (outermost), by the
for-loop within a slab, and the tile extent innermost -- exactly `tb.input`'s tiling rule
(reference/block_graph.py).  A tile may also be one iteration's term of a sum over the loop
(`partial`: a matmul whose K the loop walks, a reduction over a loop-cut dim); the loop's
accumulator turns it into the whole value.  Rules (anything else is not lifted):

* elementwise ops need equal splits, or an operand of whole extent 1 that broadcasts; a
  partial term passes only through linear ops (`mul_scalar`, sums of two partials, a product or
  quotient with a loop-invariant value);
* a matmul needs K cut alike in both operands and not by a grid axis (blocks never sum each
  other's terms);
* a reduction (`tb.reduction`, `tb.reduction_to_dimx`) sums each grid slab of its dim apart
  (the blocks' results stay apart); a sum over a loop-cut dim is a partial term; `tb.rms_norm`
  needs its dim whole in every tile;
* `tb.forloop_accum` `nored`, `red_ld_sum`, `red_ld_mean`, `red_ld_rms` and `redtox_ld_sum`:
  a partial term becomes its sum; a loop-cut dim folds (each slab's tiles summed elementwise:
  a strided `kn.reduction` within each slab, `kn.reshape` around it when a grid axis cuts the
  dim); a loop-invariant tile is multiplied by the trip count;
* `tb.output`: every grid axis of more than one block cuts the dim its `output_map` names.

Not lifted: rescale and max accumulators (online softmax), `tb.reduction_max`, `tb.reduce_max`,
`tb.grid_sum`, `tb.causal_mask`, `tb.concat`, inputs with a view, outputs at an offset.

Option `lift=false` of `mirage-transpile` keeps every saved plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.utils.exceptions import VerifyException

from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.dialects.common.checks import shape_of

NUM_GRID_AXES = 3


class NotLiftable(Exception):
    """A block graph outside the rules of the module docstring (the message names the op and rule)."""


@dataclass(frozen=True)
class Split:
    """How one whole dim is cut into the tile a block sees in an iteration: `grid_axis` cuts it
    into slabs (None = not cut by the grid), `loop` walks each slab in tiles, `tile` elements."""

    grid_axis: int | None
    loop: bool
    tile: int

    def whole(self, grid: Sequence[int], iters: int) -> int:
        """The whole dim's extent (elements)."""
        slabs = grid[self.grid_axis] if self.grid_axis is not None else 1
        return slabs * (iters if self.loop else 1) * self.tile

    @property
    def is_whole_one(self) -> bool:
        """Whether the whole dim has extent 1 (it broadcasts)."""
        return self.grid_axis is None and not self.loop and self.tile == 1


@dataclass(frozen=True)
class Lifted:
    """A tile value as a slice of the whole kn value `value`, cut per dim by `splits`; `partial`:
    the tile is one iteration's term of a sum over the for-loop."""

    value: SSAValue
    splits: tuple[Split, ...]
    partial: bool = False

    @property
    def loop_invariant(self) -> bool:
        """Whether the tile is the same in every iteration."""
        return not self.partial and not any(s.loop for s in self.splits)


UNARY: dict[type[Operation], type[kn.KnUnaryOp]] = {
    tb.ExpOp: kn.ExpOp,
    tb.SquareOp: kn.SquareOp,
    tb.SqrtOp: kn.SqrtOp,
    tb.SiluOp: kn.SiluOp,
    tb.SigmoidOp: kn.SigmoidOp,
    tb.GeluOp: kn.GeluOp,
    tb.ReluOp: kn.ReluOp,
    tb.LogOp: kn.LogOp,
}
BINARY: dict[type[Operation], type[kn.KnBinaryOp]] = {
    tb.AddOp: kn.AddOp,
    tb.SubOp: kn.SubOp,
    tb.MulOp: kn.MulOp,
    tb.DivOp: kn.DivOp,
    tb.PowOp: kn.PowOp,
}


class _Lifter:
    """Lift the block graph of one `kn.customized`; `ops` collects the kn ops built, in order."""

    def __init__(self, graph: kn.CustomizedOp):
        self.graph = graph
        self.grid = graph.grid
        self.iters = graph.num_iterations
        self.ops: list[Operation] = []
        self.env: dict[SSAValue, Lifted] = {}

    def fail(self, op: Operation, rule: str) -> NotLiftable:
        """The `NotLiftable` (not raised) for `op` outside `rule`: `<op name>: <rule>`."""
        return NotLiftable(f"{op.name}: {rule}")

    def emit(self, op: Operation) -> SSAValue:
        """Append the built kn op `op` to `ops` and return its (first) result."""
        self.ops.append(op)
        return op.results[0]

    # ---- the block graph, op by op
    def run(self) -> list[SSAValue]:
        """The kn values of the kernel's results, in order.

        Raises:
            NotLiftable: an op or map outside the rules.
        """
        block = self.graph.body.block
        outputs: list[SSAValue | None] = [None] * len(self.graph.results)
        for op in block.ops:
            if isinstance(op, tb.OutputOp):
                continue
            if len(op.results) != 1:
                raise self.fail(op, "ops with several results are not lifted")
            self.env[op.results[0]] = self.lift_op(op)
        for out, index, offset in self.graph.output_slots():
            if any(offset) or outputs[index] is not None:
                raise self.fail(out, "outputs written at an offset or in parts are not lifted")
            assert isinstance(out, tb.OutputOp)
            outputs[index] = self.lift_output(out, index)
        if any(v is None for v in outputs):
            raise NotLiftable("kn.customized: a result no tb.output writes")
        return [v for v in outputs if v is not None]

    def lift_op(self, op: Operation) -> Lifted:
        """The lifted form of tb op `op` from those of its operands (`env`), by the rules of its kind.

        Raises:
            NotLiftable: an op without a kernel-level form, or outside the rules of its kind.
        """
        if isinstance(op, tb.InputOp):
            return self.lift_input(op)
        args = [self.env[v] for v in op.operands]
        if isinstance(op, tb.TbUnaryOp) and op.is_rounding():
            raise self.fail(op, "kn's unary ops keep their type: an f32 tile rounded to 16 bits has no kernel-level form")
        if type(op) in UNARY:
            return self.elementwise(op, args[0], lambda x: UNARY[type(op)](x))
        if isinstance(op, tb.MulScalarOp):
            return self.linear(args[0], lambda x: kn.MulScalarOp(x, op.scalar.value.data))
        if isinstance(op, tb.ClampOp):
            return self.elementwise(op, args[0], lambda x: kn.ClampOp(x, op.min_value.value.data, op.max_value.value.data))
        if isinstance(op, tb.AddScalarOp):
            return self.elementwise(op, args[0], lambda x: kn.AddScalarOp(x, op.scalar.value.data))
        if isinstance(op, tb.MatmulOp):
            return self.matmul(op, args[0], args[1])
        if type(op) in BINARY:
            return self.binary(op, args[0], args[1])
        if isinstance(op, tb.ReductionOp):
            return self.reduce(op, args[0], op.reduce_dim, 1)
        if isinstance(op, tb.ReductionToDimxOp):
            return self.reduce(op, args[0], op.reduce_dim, shape_of(op.result)[op.reduce_dim])
        if isinstance(op, tb.RmsNormOp):
            return self.rms_norm(op, args[0])
        if isinstance(op, tb.ForloopAccumOp):
            return self.accumulate(op, args[0])
        raise self.fail(op, "no kernel-level form for this op")

    def lift_input(self, op: tb.InputOp) -> Lifted:
        """A `tb.input` as the kernel operand it reads, cut per dim by the grid axis (of more than one
        block) that its `imap` maps to the dim, by the loop on `fdim` (more than one iteration) and
        into the tile's extent.

        Raises:
            NotLiftable: an input with a view, an operand that is not an argument of the kernel, or
                tiles that do not cut the operand's shape evenly.
        """
        if op.view_offset is not None:
            raise self.fail(op, "inputs with a view are not lifted")
        source = op.dtensor
        if not isinstance(source, BlockArgument) or source.owner is not self.graph.body.block:
            raise self.fail(op, "the operand is not an argument of the kernel")
        value = self.graph.operands[source.index]
        imap, fdim, tile = op.imap, op.fdim, shape_of(op.result)
        splits = []
        for d, t in enumerate(tile):
            axes = [a for a in range(NUM_GRID_AXES) if self.grid[a] > 1 and imap[a] == d]
            splits.append(Split(axes[0] if axes else None, d == fdim and self.iters > 1, t))
        lifted = Lifted(value, tuple(splits))
        self.check_shape(op, lifted)
        return lifted

    # ---- elementwise
    def elementwise(self, op: Operation, x: Lifted, build: Callable[[SSAValue], Operation]) -> Lifted:
        """The kn op `build` (non-linear) on `x`'s value, cut like `x`.

        Raises:
            NotLiftable: `x` is one iteration's term of a sum over the loop (`partial`).
        """
        if x.partial:
            raise self.fail(op, "a non-linear op on one iteration's term of a sum")
        return replace(x, value=self.emit(build(x.value)))

    def linear(self, x: Lifted, build: Callable[[SSAValue], Operation]) -> Lifted:
        """The kn op `build` (linear: a partial term stays one) on `x`'s value, cut like `x`."""
        return replace(x, value=self.emit(build(x.value)))

    def binary(self, op: Operation, a: Lifted, b: Lifted) -> Lifted:
        """The kn form of binary tb op `op` on `a`, `b`: per dim the common cut, or the other
        operand's where one has whole extent 1 (it broadcasts); partial when either operand is.

        Raises:
            NotLiftable: the operands cut a dim differently, two partial terms are combined other than
                by add / sub, or a partial term and another operand `x` other than as `partial * x`,
                `x * partial` or `partial / x` with `x` loop-invariant.
        """
        splits = []
        for sa, sb in zip(a.splits, b.splits):
            if sa == sb or sb.is_whole_one:
                splits.append(sa)
            elif sa.is_whole_one:
                splits.append(sb)
            else:
                raise self.fail(op, "operands cut a dim differently (only a whole extent of 1 broadcasts)")
        partial = a.partial or b.partial
        if a.partial and b.partial:
            if not isinstance(op, (tb.AddOp, tb.SubOp)):
                raise self.fail(op, "a product of two terms of sums over the loop")
        elif partial:
            other = b if a.partial else a
            linear = isinstance(op, tb.MulOp) or (isinstance(op, tb.DivOp) and a.partial)
            if not linear or not other.loop_invariant:
                raise self.fail(op, "a term of a sum over the loop combined non-linearly")
        value = self.emit(BINARY[type(op)](a.value, b.value))
        return Lifted(value, tuple(splits), partial)

    def matmul(self, op: Operation, a: Lifted, b: Lifted) -> Lifted:
        """`kn.matmul` of `a` and `b`, cut like `a` in its batch dims and M and like `b` in N; partial
        (one iteration's term of the sum over K) when the loop cuts K.

        Raises:
            NotLiftable: a partial operand, K cut differently in the operands or by a grid axis, or a
                batch dim cut differently.
        """
        if a.partial or b.partial:
            raise self.fail(op, "a matmul of a term of a sum over the loop")
        *batch_a, m, ka = a.splits
        *batch_b, kb, n = b.splits
        if ka != kb:
            raise self.fail(op, "the operands cut K differently")
        if ka.grid_axis is not None:
            raise self.fail(op, "K is cut by a grid axis (each block holds a partial product)")
        if batch_a != batch_b:
            raise self.fail(op, "the operands cut a batch dim differently")
        value = self.emit(kn.MatmulOp(a.value, b.value))
        return Lifted(value, (*batch_a, m, n), ka.loop)

    # ---- reductions
    def reduce(self, op: Operation, x: Lifted, dim: int, size: int) -> Lifted:
        """A sum of `dim` down to `size` elements (strided groups) within each tile.  Each grid
        slab of the dim is summed on its own (the blocks' results stay apart); over a loop-cut dim
        the tile's sum is one iteration's term of the slab's sum."""
        split = x.splits[dim]
        if split.loop and size != 1:
            raise self.fail(op, f"a strided sum over dim {dim}, which the loop cuts")
        return replace(self.slab_sum(x, dim, size), partial=x.partial or split.loop)

    def rms_norm(self, op: tb.RmsNormOp, x: Lifted) -> Lifted:
        """`kn.rms_norm` of `x` over its last dim (whole in every tile), cut like `x`.

        Raises:
            NotLiftable: `x` is partial, or the grid or the loop cuts its last dim.
        """
        last = x.splits[-1]
        if x.partial or last.grid_axis is not None or last.loop:
            raise self.fail(op, "the normalised dim must be whole in every tile")
        return replace(x, value=self.emit(kn.RmsNormOp(x.value, [last.tile])))

    # ---- the for-loop
    def accumulate(self, op: tb.ForloopAccumOp, x: Lifted) -> Lifted:
        """The whole value of `tb.forloop_accum` `op` on `x`: the loop's sum (`nored`), that of the
        last dim's sums (`red_ld_sum`; `red_ld_mean` divided by tile extent x iterations,
        `red_ld_rms` the square root of such a mean of squares), or the loop's sum of strided
        groups of the last dim down to the result's extent (`redtox_ld_sum`).

        Raises:
            NotLiftable: another accumulator kind (rescale, max), or a tile outside the sums' rules.
        """
        kind = op.accum_kind
        if kind == "nored":
            return self.loop_sum(op, x)
        if kind in ("red_ld_sum", "red_ld_mean"):
            total = self.loop_sum(op, self.reduce(op, x, len(x.splits) - 1, 1))
            if kind == "red_ld_sum":
                return total
            return self.linear(total, lambda v: kn.MulScalarOp(v, 1.0 / (x.splits[-1].tile * self.iters)))
        if kind == "red_ld_rms":
            squares = self.elementwise(op, x, kn.SquareOp)
            total = self.loop_sum(op, self.reduce(op, squares, len(x.splits) - 1, 1))
            mean = self.linear(total, lambda v: kn.MulScalarOp(v, 1.0 / (x.splits[-1].tile * self.iters)))
            return self.elementwise(op, mean, kn.SqrtOp)
        if kind == "redtox_ld_sum":
            return self.strided_loop_sum(op, x, shape_of(op.result)[-1])
        raise self.fail(op, f"accumulator kind '{kind}' has no kernel-level form")

    def loop_sum(self, op: Operation, x: Lifted) -> Lifted:
        """The sum over the loop's iterations of the tile `x`."""
        if x.partial:
            return replace(x, partial=False)
        cut = [d for d, s in enumerate(x.splits) if s.loop]
        if not cut:
            if self.iters == 1:
                return x
            return self.linear(x, lambda v: kn.MulScalarOp(v, float(self.iters)))
        if len(cut) > 1:
            raise self.fail(op, "the loop cuts several dims of one tile")
        return self.slab_sum(x, cut[0], x.splits[cut[0]].tile)

    def strided_loop_sum(self, op: Operation, x: Lifted, size: int) -> Lifted:
        """`redtox_ld_sum`: strided groups of the last dim down to `size`, summed over iterations."""
        last = len(x.splits) - 1
        split = x.splits[last]
        others_cut = any(s.loop for s in x.splits[:last])
        if others_cut or (split.loop and (x.partial or split.tile % size)):
            raise self.fail(op, "a strided sum whose groups do not line up with the loop's tiles")
        if split.loop:
            return self.slab_sum(x, last, size)
        summed = self.slab_sum(x, last, size) if x.partial else self.loop_sum(op, self.slab_sum(x, last, size))
        return replace(summed, partial=False)

    def slab_sum(self, x: Lifted, dim: int, size: int) -> Lifted:
        """Strided sum of each grid slab of `dim` down to `size` elements (the loop's tiles of a
        slab summed elementwise when `size` is the tile extent); `partial` is kept."""
        split = x.splits[dim]
        shape = list(shape_of(x.value))
        slabs = self.grid[split.grid_axis] if split.grid_axis is not None else 1
        value = x.value
        if shape[dim] // slabs == size:
            pass
        elif slabs > 1:
            value = self.emit(kn.ReshapeOp(value, shape[:dim] + [slabs, shape[dim] // slabs] + shape[dim + 1 :]))
            value = self.emit(kn.ReductionOp(value, dim + 1, size))
            value = self.emit(kn.ReshapeOp(value, shape[:dim] + [slabs * size] + shape[dim + 1 :]))
        else:
            value = self.emit(kn.ReductionOp(value, dim, size))
        splits = list(x.splits)
        splits[dim] = Split(split.grid_axis, False, size)
        return Lifted(value, tuple(splits), x.partial)

    # ---- outputs
    def lift_output(self, out: tb.OutputOp, index: int) -> SSAValue:
        """The kn value that `tb.output` `out` stores as result `index` of the kernel.

        Raises:
            NotLiftable: the stored tile changes with the loop's iteration, a grid axis of more than
                one block stores no dim of the tile or another dim than the one it cuts, or the lifted
                value's type differs from the result's.
        """
        x = self.env[out.operands[0]]
        if x.partial or any(s.loop for s in x.splits):
            raise self.fail(out, "the stored tile changes with the loop's iteration")
        omap = out.omap
        for a in range(NUM_GRID_AXES):
            if self.grid[a] > 1 and not 0 <= omap[a] < len(x.splits):
                raise self.fail(out, f"grid axis {'xyz'[a]} stores no dim of its own")
        for d, s in enumerate(x.splits):
            axes = [a for a in range(NUM_GRID_AXES) if self.grid[a] > 1 and omap[a] == d]
            if s.grid_axis != (axes[0] if axes else None):
                raise self.fail(out, f"dim {d} is stored by other blocks than the ones that cut it")
        if x.value.type != self.graph.results[index].type:
            raise self.fail(out, f"the lifted value has type {x.value.type}, the result {self.graph.results[index].type}")
        return x.value

    def check_shape(self, op: Operation, x: Lifted) -> None:
        """Check that the cut of `x` tiles its whole value exactly (`Split.whole` per dim).

        Raises:
            NotLiftable: `op`'s tiles do not cut the whole value's shape evenly.
        """
        whole = tuple(s.whole(self.grid, self.iters) for s in x.splits)
        if whole != tuple(shape_of(x.value)):
            raise self.fail(op, f"tiles {shape_of(op.results[0])} do not cut {list(shape_of(x.value))} evenly")


def lift(graph: kn.CustomizedOp) -> tuple[list[Operation], list[SSAValue]]:
    """The kn ops that compute `graph`'s results from its operands, and those results.

    Raises:
        NotLiftable: the block graph is outside the module docstring's rules.
    """
    lifter = _Lifter(graph)
    try:
        results = lifter.run()
        for op in lifter.ops:
            op.verify()
    except (NotLiftable, VerifyException, ValueError):
        for op in reversed(lifter.ops):
            op.erase(safe_erase=False)
        raise
    return lifter.ops, results


def _try_lift(graph: kn.CustomizedOp) -> tuple[list[Operation], list[SSAValue]] | None:
    """`lift(graph)`, or None where the block graph is outside the rules."""
    try:
        return lift(graph)
    except (NotLiftable, VerifyException, ValueError):
        return None


def lift_customized(module: ModuleOp, partial: bool = False, saved_only: bool = False) -> int:
    """Replace the liftable `kn.customized` kernels of `module` by their kn ops, in the graphs
    (functions) where every kernel lifts, or wherever one does with `partial`; with `saved_only`
    only kernels read from a saved muGraph (`kn.SAVED_PLAN_ATTR`) count.  The number replaced."""
    graphs: dict[Operation | None, list[kn.CustomizedOp]] = {}
    for op in module.walk():
        if isinstance(op, kn.CustomizedOp):
            graphs.setdefault(op.parent_op(), []).append(op)
    lifted = 0
    for kernels in graphs.values():
        if saved_only:
            kernels = [k for k in kernels if kn.SAVED_PLAN_ATTR in k.attributes]
        forms = {k: form for k in kernels if (form := _try_lift(k)) is not None}
        if not forms or (len(forms) < len(kernels) and not partial):
            for ops, _ in forms.values():  # built but not used: drop them and their uses
                for op in reversed(ops):
                    op.erase(safe_erase=False)
            continue
        for graph, (ops, results) in forms.items():
            Rewriter.insert_op(ops, InsertPoint.before(graph))
            for old, new in zip(graph.results, results):
                old.replace_all_uses_with(new)
            Rewriter.erase_op(graph)
            lifted += 1
    return lifted


@dataclass(frozen=True)
class KnLiftCustomizedPass(ModulePass):
    """Raise the `kn.customized` kernels whose block graphs have an exact kernel-level form to
    kn ops, in each graph where all of them do (`partial`: wherever one does)."""

    name = "kn-lift-customized"

    partial: bool = False
    """Also lift the liftable kernels of a graph whose other kernels keep their saved plans.  Off
    by default: the planner then sees saved kernels beside its own and, on an H200, made Mirage's
    saved MHA batch-8 candidates whose split-key kernel stays up to 1.8x slower (geometric mean
    over all such saved candidates 0.91x the time)."""
    saved_only: bool = False
    """Only kernels read from a saved muGraph (`kn.saved_plan`, what `mirage-transpile` lifts);
    off: every kernel, hand-written ones too."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Lift in place (`lift_customized`); kernels outside the rules are kept.

        Raises:
            Nothing.
        """
        lift_customized(op, self.partial, self.saved_only)
