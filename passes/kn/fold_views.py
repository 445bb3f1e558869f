"""`kn-fold-views`: `kn.chunk` and `kn.concat` around fused kernels become strided views.

A chunk of a tensor is a view of it (the same strides, an element offset along `dim`), and a
concat is one buffer written through views into disjoint boxes (`dialects/views.py`).  So,
instead of library copies before and after the kernels (`runtime/library_ops.py`):

* A `kn.customized` input that is result `i` of `kn.chunk %X {dim = d}` (part size `p`): the
  kernel reads `%X` itself; every `tb.input` of that input gets `view_offset` (`i * p` along
  `d`, added to a view it already has) and `view_shape` (the chunk's shape, or its view's).
* `kn.concat %a, %b {dim = d}` where `%a` and `%b` are results of one `kn.customized`: the
  kernel gets one result of the concat's shape; the `tb.output` ops of `%a` store into it at
  their offsets, those of `%b` at `+ size_a` along `d` (`result_index` and `view_offset` on
  every `tb.output`); a result that other ops still read is kept (its outputs store twice).

Both are repeated until nothing changes (a chunk of a chunk, a concat of concats); a chunk whose
results are all folded is erased.  Anything else -- a concat of two kernels' results, of a
function argument, a chunk read by a library op -- stays as it is, a library copy.
`kn-fuse` runs this pass after `kn-partition`, which groups the ops a concat joins
(`kn_partition._components`).  Kernels whose results already carry the transpiler's per-result
attributes (`kn.strides`, `kn.workspace_offset`) are left alone: run it before `mirage-transpile`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, Block, OpResult, SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import kn, tb

PLANNED_ATTRS = ("kn.strides", "kn.workspace_offset", "kn.innermost")
"""Per-result attributes of the transpiler's passes; a kernel carrying one is not rewritten."""


def _planned(op: kn.CustomizedOp) -> bool:
    return any(a in op.attributes for a in PLANNED_ATTRS)


def _chunk_view(value: SSAValue) -> tuple[SSAValue, tuple[int, ...], tuple[int, ...]] | None:
    """(the chunked tensor, the element offset of `value` in it, `value`'s shape) when `value`
    is a `kn.chunk` result, else None."""
    if not isinstance(value, OpResult) or not isinstance(value.op, kn.ChunkOp):
        return None
    chunk = value.op
    shape = kn.shape_of(value)
    offset = [0] * len(shape)
    dim = chunk.dim.value.data
    offset[dim] = value.index * shape[dim]
    return chunk.input, tuple(offset), shape


def fold_chunk_inputs(op: kn.CustomizedOp) -> bool:
    """Make the tb.input ops of `op`'s chunk-result inputs read views of the chunked tensors
    (module docstring); True when something changed."""
    block = op.body.block
    changed = False
    for i in reversed(range(len(op.inputs))):
        view = _chunk_view(op.inputs[i])
        arg = block.args[i]
        if view is None or not all(isinstance(u.operation, tb.InputOp) for u in arg.uses):
            continue
        source, offset, shape = view
        inputs = list(op.inputs)
        if source in inputs:
            src_arg = block.args[inputs.index(source)]
        else:
            src_arg = block.insert_arg(source.type, len(block.args))
            src_arg.name_hint = arg.name_hint
            inputs.append(source)
        for use in list(arg.uses):
            load = use.operation
            assert isinstance(load, tb.InputOp)
            inner = load.view_offsets
            load.properties["view_offset"] = kn.int_array([a + b for a, b in zip(offset, inner)])
            load.properties["view_shape"] = kn.int_array(load.view_dims if load.view_shape is not None else shape)
            load.operands = [src_arg]
        del inputs[i]
        block.erase_arg(arg)
        op.operands = inputs
        changed = True
    return changed


def fold_concat(concat: kn.ConcatOp) -> bool:
    """Fold `concat` into the kernel producing both operands (module docstring); True when done."""
    lhs, rhs = concat.lhs, concat.rhs
    if not (isinstance(lhs, OpResult) and isinstance(rhs, OpResult) and lhs.op is rhs.op):
        return False
    op = lhs.op
    if not isinstance(op, kn.CustomizedOp) or _planned(op):
        return False
    dim = concat.dim.value.data
    shift = [0] * len(kn.shape_of(lhs))
    shift[dim] = kn.shape_of(lhs)[dim]
    keep = [r for r in op.results if any(u.operation is not concat for u in r.uses)]
    new_index = {r.index: k for k, r in enumerate(keep)}
    target = len(keep)
    for out, r, offset in op.output_slots():
        assert isinstance(out, tb.OutputOp)
        parts = [s for s, v in ((None, lhs), (shift, rhs)) if v.index == r]
        stores = [(new_index[r], offset)] if r in new_index else []
        stores += [(target, tuple(o + (s[d] if s else 0) for d, o in enumerate(offset))) for s in parts]
        for k, (index, off) in enumerate(stores):
            store = out if k == 0 else out.clone()
            if k:
                block = out.parent_block()
                assert block is not None
                block.insert_op_after(store, out)
            store.properties["result_index"] = IntegerAttr(index, i64)
            store.properties["view_offset"] = kn.int_array(off)
    new = _rebuild(op, [r.type for r in keep] + [concat.result.type])
    for old, res in zip(keep, new.results):
        old.replace_all_uses_with(res)
        res.name_hint = old.name_hint
    concat.result.replace_all_uses_with(new.results[-1])
    new.results[-1].name_hint = concat.result.name_hint
    concat.detach()
    concat.erase()
    op.detach()
    op.erase()
    return True


def _rebuild(op: kn.CustomizedOp, out_types: list[Attribute]) -> kn.CustomizedOp:
    """`op` with other result types, its region moved over, inserted before it."""
    region = op.detach_region(op.body)
    new = kn.CustomizedOp(
        list(op.inputs), out_types, region, grid_dim=op.grid, block_dim=op.block, forloop_range=op.num_iterations, reduction_dimx=op.dimx
    )
    new.attributes.update(op.attributes)
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(new, op)
    return new


def fold_function(block: Block) -> int:
    """Fold every chunk input and concat of `block` (a function body) until nothing changes;
    return how many rewrites were made."""
    count = 0
    changed = True
    while changed:
        changed = False
        for op in list(block.ops):
            if isinstance(op, kn.CustomizedOp) and not _planned(op) and fold_chunk_inputs(op):
                changed = True
                count += 1
            elif isinstance(op, kn.ConcatOp) and fold_concat(op):
                changed = True
                count += 1
        for op in list(block.ops):
            if isinstance(op, kn.ChunkOp) and all(not r.uses for r in op.results):
                op.detach()
                op.erase()
    return count


@dataclass(frozen=True)
class KnFoldViewsPass(ModulePass):
    """Turn chunk inputs and concat outputs of fused kernels into views (module docstring)."""

    name = "kn-fold-views"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Fold views in every function of `op`, in place (`fold_function`).

        Raises:
            Nothing.
        """
        for func in [f for f in op.walk() if isinstance(f, FuncOp) and f.body.blocks]:
            fold_function(func.body.block)

