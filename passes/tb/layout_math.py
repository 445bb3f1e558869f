"""Layout arithmetic shared by the layout passes, the workspace planner and the printer.

Rules from mirage-notes 3.3 (`calc_tensor_strides`) and the storage-precision section of
passes/README.md (accumulator tiles are stored in fp32 whatever their element type).
Strides and element counts are in elements; dims are indexed outermost-first.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Attribute, OpResult, SSAValue

CHUNK_BYTES = 16
"""Every innermost "row" starts on a 16-byte boundary (cp.async, uint128 copies, ldmatrix)."""

ACCUMULATOR_ELEM_BYTES = 4
"""Accumulator tiles are kept in fp32 (passes/README.md, "Storage precision")."""


def stores_fp32(value: SSAValue) -> bool:
    """True when `value` is an accumulator tile kept in fp32: a `tb.forloop_accum` result of a
    graph whose for-loop runs more than once, the `tb.grid_sum` of one, or a reduction (or
    `mul_scalar`) of one whose only users are grid sums (a partial shrunk before it is
    summed).  With `forloop_range = 1` nothing accumulates, so the tile keeps its element
    type (exact), and Mirage's plans sized for fp16 still fit (rmsnorm_bs1 graph 14 copies
    whole 2x4096 rows into its accumulators)."""
    from mirage_xdsl.dialects import kn, tb

    if isinstance(value, OpResult) and isinstance(value.op, tb.GridSumOp):
        return stores_fp32(value.op.input)  # the sum of fp32 partials stays fp32
    if (
        isinstance(value, OpResult)
        and isinstance(value.op, tb.PARTIAL_LINEAR_OPS)
        and value.uses
        and all(isinstance(use.operation, tb.GridSumOp) for use in value.uses)
    ):
        return stores_fp32(value.op.operands[0])  # a partial reduced before it is summed
    if not (isinstance(value, OpResult) and isinstance(value.op, tb.ForloopAccumOp)):
        return False
    graph = value.op.parent_op()
    return not isinstance(graph, kn.CustomizedOp) or graph.num_iterations > 1


def storage_elem_bytes(value: SSAValue) -> int:
    """Bytes per stored element of a tile: 4 for fp32 accumulators, else its element type's."""
    if stores_fp32(value):
        return ACCUMULATOR_ELEM_BYTES
    return elem_bytes_of(value.type.get_element_type())  # type: ignore[attr-defined]


def round_up(value: int, multiple: int) -> int:
    """Smallest multiple of `multiple` that is >= `value` (`multiple` >= 1)."""
    return (value + multiple - 1) // multiple * multiple


def elem_bytes_of(element_type: Attribute) -> int:
    """Bytes per element of a builtin element type (f16/bf16 2, f32 4, f64 8, i8 1 ...).

    Raises:
        ValueError: the type has no bit width (not a scalar number type).
    """
    width = getattr(element_type, "bitwidth", None)
    if not isinstance(width, int) or width <= 0:
        raise ValueError(f"element type {element_type} has no bit width")
    return max(1, width // 8)


def alignment_elems(elem_bytes: int) -> int:
    """`A = max(16 / sizeof(T), 1)`: elements per 16-byte chunk (8 for fp16, 4 for fp32)."""
    return max(CHUNK_BYTES // elem_bytes, 1)


def dim_order(rank: int, innermost: int) -> list[int]:
    """Physical order of the dims, fastest first: `[innermost, N-1, ..., 0]` without repeating
    the innermost dim (mirage-notes 3.3)."""
    if not 0 <= innermost < rank:
        raise ValueError(f"innermost dim {innermost} is not a dim of a rank-{rank} tensor")
    return [innermost] + [d for d in range(rank - 1, -1, -1) if d != innermost]


def calc_tensor_strides(shape: Sequence[int], innermost: int, elem_bytes: int) -> tuple[tuple[int, ...], int]:
    """Strides and number of physical elements of a tensor laid out with `innermost` fastest.

    Walk `dim_order(...)` with `cur = 1`: `stride[d] = cur`; a dim of size 1 leaves `cur`
    unchanged; the FIRST dim of size != 1 multiplies `cur` by its size rounded up to a
    16-byte multiple, later dims by their size.  `num_phy_elems = cur`, or one 16-byte
    chunk for a single-element tensor (mirage-notes 3.3, Mirage `calc_tensor_strides`).

    Examples (fp16): `[2,24]` inner 1 -> `([24,1], 48)`; `[2,1]` inner 1 -> `([1,1], 8)`;
    `[15,15]` inner 1 -> `([16,1], 240)`.

    Raises:
        ValueError: `innermost` is not a dim of `shape`.
    """
    align = alignment_elems(elem_bytes)
    strides = [0] * len(shape)
    cur = 1
    padded = False
    for d in dim_order(len(shape), innermost):
        strides[d] = cur
        if shape[d] != 1:
            cur *= shape[d] if padded else round_up(shape[d], align)
            padded = True
    numel = 1
    for size in shape:
        numel *= size
    return tuple(strides), (align if numel == 1 else cur)


def physical_num_elems(shape: Sequence[int], strides: Sequence[int], elem_bytes: int) -> int:
    """Elements a buffer with these (possibly user-given) strides must hold.

    For strides made by `calc_tensor_strides` this equals its `num_phy_elems`: the span of
    every dim is `stride * size`, where the unit-stride dim of size != 1 counts its 16-byte
    padding (so chunked copies of the last row stay inside the buffer); at least one chunk.
    """
    align = alignment_elems(elem_bytes)
    span = 1
    for size, stride in zip(shape, strides):
        extent = round_up(size, align) if stride == 1 and size != 1 else size
        span = max(span, stride * extent)
    return max(span, align)


def innermost_of_strides(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Innermost dim of a tensor with given strides: the LAST dim whose stride is 1
    (Mirage's rule for KN inputs/outputs, mirage-notes 3.2); without a unit stride, the dim
    with the smallest stride (last one on ties) - the most contiguous one."""
    unit = [d for d, s in enumerate(strides) if s == 1]
    if unit:
        return unit[-1]
    smallest = min(strides)
    return max(d for d, s in enumerate(strides) if s == smallest)
