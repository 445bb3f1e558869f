"""IR building: the `kn.customized` op of a chosen `KernelPlan`.

`emit_kernel` writes the threadblock graph the planner (`default_tb_graph.Planner`) chose:
`tb.input` ops with their imaps, forloop dims and tiles, the group's ops in their phases (an
op reducing the loop axis becomes a `tb.forloop_accum`: `nored` after a matmul or per-tile
reduction, `red_ld_sum`, `redtox_ld_sum`, `red_ld_rms`, or `max`; the online softmax's
running `tb.reduction_max` with `nored_rescale` / `red_ld_sum_rescale`), `tb.grid_sum` after
split accumulators of a grid-sum plan, and `tb.output` ops with their omaps; a `kn.causal_mask` becomes `tb.causal_mask` with the
grid axis and loop flag of its row and column axes (`mask_index_map`).  The op
carries the plan's template name and estimates (`kn.template`, `kn.smem_estimate` in bytes,
`kn.cost_estimate_us` in µs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr, TensorType, f64, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import Rewriter

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.passes.conversion.kernel_plan import KernelPlan

TB_UNARY = tb.UNARY_BY_KIND
TB_BINARY = tb.BINARY_BY_KIND

TEMPLATE_ATTR = "kn.template"
SMEM_ATTR = "kn.smem_estimate"
COST_ATTR = "kn.cost_estimate_us"


def mask_index_map(plan: KernelPlan, node: int, after_loop: bool) -> tuple[tuple[int, int], tuple[int, int]]:
    """(`grid_dims`, `forloop_dims`) of the `tb.causal_mask` of group node `node`
    (dialects/tb/mask_ops.py): per masked dim (row, column), the grid axis that partitions
    its axis (-1: none) and whether the for-loop walks it (never after the loop)."""
    axes = plan.ax.axes[node][-2:]
    grid_dims, loop_dims = [], []
    for a in axes:
        g = next((i for i, (n, ga) in enumerate(zip(plan.grid, plan.grid_axes)) if a is not None and ga == a and n > 1), -1)
        grid_dims.append(g)
        loop_dims.append(int(a is not None and not after_loop and a == plan.loop_axis and plan.forloop_range > 1))
    return (grid_dims[0], grid_dims[1]), (loop_dims[0], loop_dims[1])


def widened(value: SSAValue, dtype: Attribute) -> SSAValue:
    """`value` with element type `dtype` where its op derived a 16-bit type for a node that
    kn-widen-sums made f32 (a sum or accumulator of 16-bit tiles, an elementwise op reading an
    f32 operand first); the op's uses keep reading it (dialects/common/precision.py)."""
    typ = value.type
    if not isinstance(typ, tb.STensorType) or typ.element_type == dtype:
        return value
    return Rewriter.replace_value_with_new_type(value, tb.STensorType(typ.get_shape(), dtype, typ.is_after_accum))


def emit_kernel(plan: KernelPlan, ext_value: Callable[[Any], SSAValue]) -> kn.CustomizedOp:
    """Build the `kn.customized` op of `plan`; `ext_value` maps a group input's `ext` to the
    SSA value it reads.  Results follow `plan.outputs`."""
    group, ax, ph = plan.group, plan.ax, plan.phase
    R, dimx = plan.forloop_range, plan.dimx
    inputs = [n for n in plan.needed if group.nodes[n].kind == "input"]
    ext_vals = [ext_value(group.nodes[n].ext) for n in inputs]
    block = Block(arg_types=[v.type for v in ext_vals])
    ops: list[Operation] = []
    val: dict[int, SSAValue] = {}
    lifted: dict[int, SSAValue] = {}

    def add(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    def lift(n: int) -> SSAValue:
        if n not in lifted:
            lifted[n] = add(tb.ForloopAccumOp(val[n], "nored" if R == 1 else "max", dimx))
        return lifted[n]

    split_axis = next((i for i, a in enumerate(plan.grid_axes) if a == plan.loop_axis and plan.grid[i] > 1), -1)
    summed: dict[int, SSAValue] = {}
    rescale: dict[int, SSAValue] = {}  # online max node -> exp(old max - new max) of this iteration

    def after_loop(n: int) -> SSAValue:
        """`n` as the post-loop ops read it: grid-summed if it is a split accumulator."""
        if plan.grid_sum and ax.reduce_axis.get(n) == plan.loop_axis:
            if n not in summed:
                summed[n] = add(tb.GridSumOp(val[n], split_axis))
            return summed[n]
        return val[n] if ph[n] == "post" else lift(n)

    for arg, n, ev in zip(block.args, inputs, ext_vals):
        if ev.name_hint:
            arg.name_hint = ev.name_hint.lower()
        node = group.nodes[n]
        imap, fdim = plan.imap_fdim(n)
        tile = tiling.input_tile_shape(node.shape, plan.grid, imap, fdim, R)
        val[n] = add(tb.InputOp(arg, imap, fdim, tile))
    def place(n: int) -> None:
        node = group.nodes[n]
        k = node.kind
        if n in plan.rms:
            val[n] = add(tb.ForloopAccumOp(val[plan.rms[n]], "red_ld_rms", dimx))
            return
        online = plan.online
        if online is not None and n in online.maxima:
            d = node.props["dim"]
            running = tb.ReductionMaxOp(val[node.args[0]], d)
            ops.append(running)
            val[n] = running.max
            rescale[n] = add(tb.ExpOp(running.diff))  # exp(old max - new max)
            return
        if online is not None and n in online.rescaled:
            r = rescale[online.rescaled[n]]
            x = val[node.args[0]]
            if k == "matmul":
                val[n] = add(tb.ForloopAccumOp(add(tb.MatmulOp(x, val[node.args[1]])), "nored_rescale", dimx, r))
            elif node.props["dim"] == len(node.shape) - 1:
                val[n] = add(tb.ForloopAccumOp(x, "red_ld_sum_rescale", dimx, r))
            else:
                val[n] = add(tb.ForloopAccumOp(add(tb.ReductionOp(x, node.props["dim"])), "nored_rescale", dimx, r))
            return
        if plan.loop_axis is not None and ax.reduce_axis.get(n) == plan.loop_axis:
            if k == "matmul":
                mm = add(tb.MatmulOp(val[node.args[0]], val[node.args[1]]))
                val[n] = add(tb.ForloopAccumOp(mm, "nored", dimx))
                return
            x = val[node.args[0]]
            d, size = node.props["dim"], node.props["size"]
            last = d == len(node.shape) - 1
            if k == "reduction_max":
                # each iteration's tile max, then the running max over the iterations
                val[n] = add(tb.ForloopAccumOp(add(tb.ReduceMaxOp(x, d)), "max", dimx))
            elif size == 1 and last:
                val[n] = add(tb.ForloopAccumOp(x, "red_ld_sum", dimx))
            elif size == 1:
                val[n] = add(tb.ForloopAccumOp(add(tb.ReductionOp(x, d)), "nored", dimx))
            elif last:
                val[n] = add(tb.ForloopAccumOp(x, "redtox_ld_sum", dimx))
            else:
                val[n] = add(tb.ForloopAccumOp(add(tb.ReductionToDimxOp(x, d, dimx)), "nored", dimx))
            return
        if ph[n] == "post":
            xs = [after_loop(a) for a in node.args]
        else:
            xs = [val[a] for a in node.args]
        if k in TB_UNARY:
            val[n] = add(TB_UNARY[k](xs[0]))
        elif k == "clamp":
            val[n] = add(tb.ClampOp(xs[0], node.props["min"], node.props["max"]))
        elif k == "mul_scalar":
            val[n] = add(tb.MulScalarOp(xs[0], node.props["scalar"]))
        elif k == "add_scalar":
            val[n] = add(tb.AddScalarOp(xs[0], node.props["scalar"]))
        elif k in TB_BINARY:
            val[n] = add(TB_BINARY[k](xs[0], xs[1]))
        elif k == "matmul":
            val[n] = add(tb.MatmulOp(xs[0], xs[1]))
        elif k == "reduction":
            d, size = node.props["dim"], node.props["size"]
            val[n] = add(tb.ReductionOp(xs[0], d) if size == 1 else tb.ReductionToDimxOp(xs[0], d, dimx))
        elif k == "reduction_max":
            val[n] = add(tb.ReduceMaxOp(xs[0], node.props["dim"]))
        elif k == "rms_norm":
            val[n] = add(tb.RmsNormOp(xs[0]))
        elif k == "causal_mask":
            val[n] = add(tb.CausalMaskOp(xs[0], node.props["offset"], *mask_index_map(plan, n, ph[n] == "post")))
        else:  # pragma: no cover - fusible_op() admits nothing else
            raise AssertionError(f"cannot place kn.{k} in a block graph")

    for n in plan.needed:
        if group.nodes[n].kind == "input" or n in plan.skipped:
            continue
        place(n)
        val[n] = widened(val[n], group.nodes[n].dtype)
    out_types = []
    for o, omap in plan.outputs:
        v = after_loop(o)
        ops.append(tb.OutputOp(v, omap))
        shape = tiling.output_dtensor_shape(kn.shape_of(v), plan.store_grid, omap)
        out_types.append(TensorType(group.nodes[o].dtype, shape))
    block.add_ops(ops)
    op = kn.CustomizedOp(
        ext_vals,
        out_types,
        block,
        grid_dim=plan.grid,
        block_dim=(plan.threads, 1, 1),
        forloop_range=R,
        reduction_dimx=dimx,
    )
    op.attributes[TEMPLATE_ATTR] = StringAttr(plan.template)
    op.attributes[SMEM_ATTR] = IntegerAttr(plan.smem, i64)
    op.attributes[COST_ATTR] = FloatAttr(plan.cost_us, f64)
    return op
