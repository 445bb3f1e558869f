"""`kn-plan-workspace`: place the kernel graph's intermediate tensors in one device workspace.

Mirage's `plan_dtensor_memory` (mirage-notes 3.4) bump-allocates every DTensor that is
neither a graph input nor a graph output (`addr = cur; cur = round_up(cur + bytes, 128)`),
never reusing memory.  We keep its 128-byte alignment and its choice of tensors but reuse
memory between intermediates whose lifetimes do not overlap:

* lifetime of a result = `[index of its op, index of its last user]` in the function's
  program order (inclusive: an op's operands and results never share memory); the users of
  an aliased `kn.reshape` of it (a view of its buffer, kn-alias-reshape) count as its users,
  and the view itself gets no buffer;
* size = `physical_num_elems(shape, kn.strides) * sizeof(T)` rounded up to 128 bytes (row
  padding included, so 16-byte chunked copies of the last row stay inside the buffer);
* placement: largest first (ties: earlier definition first), each at the best-fitting
  (smallest sufficient) 128-aligned gap among the already placed tensors whose lifetimes
  overlap, else on top of them.

A `kn.customized` with `tb.grid_sum` ops also gets a scratch buffer for its blocks' fp32
partials (`grid_sum_scratch_bytes`), live only while it runs: `kn.grid_sum_scratch_offset`.

Writes (passes/README.md): `kn.workspace_offset = array<i64>` (bytes per result, -1 = graph
output) on every kn op (and `contraction.contract`) with an intermediate result, and `kn.workspace_size = i64` (bytes) on
the function.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.cute.decode_attention import DecodeAttentionOp
from mirage_xdsl.dialects.cute.hopper_attention import HopperAttentionOp
from mirage_xdsl.dialects.kn.reshape_op import output_view_of
from mirage_xdsl.dialects.tiling import row_major_strides
from mirage_xdsl.passes.tb.layout_math import elem_bytes_of, physical_num_elems, round_up

ALIGNMENT = 128
"""Byte alignment of every workspace buffer (Mirage `plan_dtensor_memory`)."""


@dataclass(frozen=True)
class Buffer:
    """An intermediate tensor: `size` bytes alive over program points `[start, end]`."""

    size: int
    start: int
    end: int


def overlaps(a: Buffer, b: Buffer) -> bool:
    """Whether two lifetimes share a program point."""
    return a.start <= b.end and b.start <= a.end


def plan(buffers: Sequence[Buffer], alignment: int = ALIGNMENT) -> tuple[list[int], int]:
    """Byte offsets of `buffers` and the workspace size (greedy best-fit, module docstring).

    Buffers with overlapping lifetimes never overlap in memory; offsets are multiples of
    `alignment`.
    """
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i].size, buffers[i].start, i))
    offsets = [0] * len(buffers)
    placed: list[int] = []
    total = 0
    for i in order:
        buf = buffers[i]
        size = round_up(buf.size, alignment)
        busy = sorted((offsets[j], offsets[j] + round_up(buffers[j].size, alignment)) for j in placed if overlaps(buf, buffers[j]))
        best: tuple[int, int] | None = None  # (gap size, offset)
        cursor = 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= size and (best is None or gap < best[0]):
                best = (gap, cursor)
            cursor = max(cursor, hi)
        offsets[i] = best[1] if best is not None else cursor
        placed.append(i)
        total = max(total, offsets[i] + size)
    return offsets, total


def _strides_of(op: Operation, index: int, value: SSAValue) -> tuple[int, ...]:
    recorded = op.attributes.get(kn.STRIDES_ATTR)
    if isinstance(recorded, ArrayAttr) and index < len(recorded.data):
        entry = recorded.data[index]
        if isinstance(entry, DenseArrayBase):
            return kn.ints(entry)
    return row_major_strides(kn.shape_of(value))


GRID_SUM_SCRATCH_ATTR = kn.GRID_SUM_SCRATCH_ATTR
WORKSPACE_DIALECTS = ("kn", "contraction")
"""Ops whose intermediate results get workspace: kernel-level ops and `contraction.contract`
(kn-partition's lone matmuls for the sm_90a GEMM; convert-contraction-to-hopper keeps the
offsets); so do `cute.hopper_attention` and `cute.decode_attention` (kn-partition's attention
groups for sm_90a), the latter also its splits' partials (`scratch_bytes`, live while it runs,
at its `scratch_offset`)."""


def grid_sum_scratch_bytes(op: Operation) -> int:
    """Bytes of fp32 partials a `kn.customized` with `tb.grid_sum` ops writes: one slot per
    block holding every grid-summed tile (0 without grid sums).  The CUDA printer lays the
    slots out the same way (codegen/grid_sum_printer.py, `grid_sum`)."""
    if not isinstance(op, kn.CustomizedOp) or op.grid_sum_axis is None:
        return 0
    per_block = sum(math.prod(kn.shape_of(g.results[0])) for g in op.body.block.ops if g.name == "tb.grid_sum")
    return math.prod(op.grid) * per_block * 4


def scratch_bytes(op: Operation) -> int:
    """Bytes of scratch `op` needs while it runs: a grid-summing kernel's partials
    (`grid_sum_scratch_bytes`) or a split `cute.decode_attention`'s partial rows."""
    if isinstance(op, DecodeAttentionOp):
        return op.scratch_bytes()
    return grid_sum_scratch_bytes(op)


def set_scratch_offset(op: Operation, offset: int) -> None:
    """Record where `op`'s scratch lies in the workspace: `kn.grid_sum_scratch_offset` on a
    kernel, the `scratch_offset` property of a `cute.decode_attention`."""
    if isinstance(op, DecodeAttentionOp):
        op.properties["scratch_offset"] = IntegerAttr(offset, i64)
    else:
        op.attributes[GRID_SUM_SCRATCH_ATTR] = IntegerAttr(offset, i64)


def plan_function(func: FuncOp) -> None:
    """Plan the workspace of one kernel-graph function and annotate it."""
    ops = list(func.body.block.ops)
    position = {op: i for i, op in enumerate(ops)}
    outputs = {v for op in ops if isinstance(op, ReturnOp) for v in op.arguments}
    buffers: list[Buffer] = []
    owners: list[tuple[Operation, int]] = []
    for i, op in enumerate(ops):
        if op.dialect_name() not in WORKSPACE_DIALECTS and not isinstance(op, HopperAttentionOp | DecodeAttentionOp):
            continue
        if kn.ALIAS_ATTR in op.attributes:
            continue  # an aliased kn.reshape: a view of its input's buffer (kn-alias-reshape)
        for r, res in enumerate(op.results):
            if res in outputs or not hasattr(res.type, "get_shape") or output_view_of(res) is not None:
                continue  # a graph output's buffer (directly or through a kn.output_view reshape)
            nbytes = elem_bytes_of(kn.element_type_of(res))
            size = physical_num_elems(kn.shape_of(res), _strides_of(op, r, res), nbytes) * nbytes
            last = max((position[_top_level(u, func)] for u in _readers(res)), default=i)
            buffers.append(Buffer(size, i, last))
            owners.append((op, r))
        if scratch := scratch_bytes(op):
            buffers.append(Buffer(scratch, i, i))  # live while the kernel runs
            owners.append((op, -1))
    offsets, total = plan(buffers)
    per_op: dict[Operation, list[int]] = {}
    for (op, r), offset in zip(owners, offsets):
        if r < 0:
            set_scratch_offset(op, offset)
            continue
        per_op.setdefault(op, [-1] * len(op.results))[r] = offset
    for op, values in per_op.items():
        op.attributes["kn.workspace_offset"] = DenseArrayBase.from_list(i64, values)
    func.attributes["kn.workspace_size"] = IntegerAttr(total, i64)


def _readers(value: SSAValue) -> list[Operation]:
    """The ops reading `value`'s buffer: its users, and through an aliased `kn.reshape` (a
    view of the buffer, kn-alias-reshape) the readers of the view."""
    out: list[Operation] = []
    for use in value.uses:
        user = use.operation
        out.append(user)
        if kn.ALIAS_ATTR in user.attributes and user.name == "kn.reshape":
            out += _readers(user.results[0])
    return out


def _top_level(op: Operation, func: FuncOp) -> Operation:
    """The op of `func`'s body that is or contains `op`."""
    block = func.body.block
    while op.parent_block() is not block:
        parent = op.parent_op()
        assert parent is not None, "a use outside the function"
        op = parent
    return op


@dataclass(frozen=True)
class PlanWorkspacePass(ModulePass):
    """Assign workspace offsets to intermediates, reusing memory across disjoint lifetimes."""

    name = "kn-plan-workspace"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Plan the workspace of every func with a body in `op` (`plan_function`): byte offsets on the ops, byte size on the func.

        Raises:
            Nothing.
        """
        for func in [f for f in op.walk() if isinstance(f, FuncOp) and f.body.blocks]:
            plan_function(func)
