"""Global-memory footprints of the threadblocks of a `cute.kernel`: which box of each DTensor
one block reads and writes.

A `cute.copy_g2s` of block (x, y, z) in iteration `it` reads the tile of `tile.dims` elements
starting at linear element `view_offset + x*bo[0] + y*bo[1] + z*bo[2] + it*iter_stride`
(dialects/cute/ops.py); a `cute.copy_s2g` writes the tile at `view_offset + x*bo[0] + y*bo[1] + z*bo[2]`.
The linear start is split into coordinates with the DTensor's strides (largest stride first;
dims of size 1 stay at 0), and the iterations a copy runs (`[iter_offset, iterations)` inside
the loop, `iter_offset` alone for a prologue load) widen the box to their bounding box.  A
start that does not split exactly (an overlapping or unusual layout) gives the whole tensor:
footprints may only over-approximate, which adds dependencies and never drops one.

Blocks are numbered linearly, x fastest: `b = x + gx * (y + gy * z)` (the `blocks` of
`mpk.task`).  The late finisher (`cute.grid_sum` with `partner_trips`) shifts its splits'
loads by `gs_k0` and makes blocks wait on each other: `kernel_accesses` rejects it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import TensorType
from xdsl.ir import SSAValue

from mirage_xdsl.dialects import cute

Box = tuple[tuple[int, int], ...]


class FootprintError(ValueError):
    """A kernel whose blocks' footprints cannot be derived (the message names the kernel)."""


@dataclass(frozen=True)
class Access:
    """One global tile access of one block: kernel parameter `param` (its index among the
    kernel's block arguments: outputs first, then inputs), the box, and whether it writes."""

    param: int
    box: Box
    write: bool


def block_coords(b: int, grid: Sequence[int]) -> tuple[int, int, int]:
    """(x, y, z) of linear block `b` (x fastest)."""
    gx, gy = grid[0], grid[1]
    return b % gx, (b // gx) % gy, b // (gx * gy)


def split_offset(offset: int, shape: Sequence[int], strides: Sequence[int]) -> tuple[int, ...] | None:
    """Coordinates of linear element `offset` (None: it does not split within the shape)."""
    coords = [0] * len(shape)
    rest = offset
    for d in sorted((d for d in range(len(shape)) if shape[d] > 1), key=lambda d: -strides[d]):
        if strides[d] <= 0:
            return None
        coords[d], rest = divmod(rest, strides[d])
    if rest != 0 or any(not 0 <= c < max(s, 1) for c, s in zip(coords, shape)):
        return None
    return tuple(coords)


def _copy_box(
    op: cute.CopyG2SOp | cute.CopyS2GOp, xyz: tuple[int, int, int], shape: Sequence[int], strides: Sequence[int], iterations: int
) -> Box:
    full = tuple((0, s) for s in shape)
    bo = cute.dense_ints(op.block_offset)
    base = op.view_elems + sum(c * o for c, o in zip(xyz, bo))
    first = last = 0
    step = 0
    if isinstance(op, cute.CopyG2SOp):
        step = op.iter_stride.value.data
        shift = op.iter_offset.value.data
        if op.iter is not None:
            first, last = shift, max(shift, iterations - 1)
        else:
            first = last = shift
    lo = split_offset(base + first * step, shape, strides)
    hi = split_offset(base + last * step, shape, strides)
    if lo is None or hi is None:
        return full
    dims = op.tile.dims
    return tuple(
        (max(0, min(a, b)), min(s, max(a, b) + t)) for a, b, t, s in zip(lo, hi, dims, shape)
    )


def kernel_accesses(kernel: cute.KernelOp) -> list[list[Access]]:
    """Per linear block of `kernel`, its global accesses (one per copy op, in body order).

    Raises:
        FootprintError: a late-finisher kernel (its blocks wait on each other)."""
    gs = next((o for o in kernel.walk() if isinstance(o, cute.GridSumOp)), None)
    if gs is not None and gs.partner_trip_count is not None:
        raise FootprintError(
            f"{kernel.kernel_name.data}: a late-finisher grid sum (partner_trips) makes blocks wait on each other; "
            "rule: megakernel tasks never wait inside a task; fix: compile without late-finisher"
        )
    params = list(kernel.body.block.args)
    index: dict[SSAValue, int] = {a: i for i, a in enumerate(params)}
    copies: list[tuple[cute.CopyG2SOp | cute.CopyS2GOp, int]] = []
    for op in kernel.walk():
        if isinstance(op, cute.CopyG2SOp):
            copies.append((op, index[op.src]))
        elif isinstance(op, cute.CopyS2GOp):
            copies.append((op, index[op.dst]))
    shapes = [_shape(a) for a in params]
    grid = kernel.grid
    out: list[list[Access]] = []
    for b in range(math.prod(grid)):
        xyz = block_coords(b, grid)
        accesses = []
        for op, p in copies:
            box = _copy_box(op, xyz, shapes[p], kernel.strides_of(p), kernel.iterations)
            accesses.append(Access(p, box, isinstance(op, cute.CopyS2GOp)))
        out.append(accesses)
    return out


def _shape(value: SSAValue) -> tuple[int, ...]:
    typ = value.type
    assert isinstance(typ, TensorType)
    return tuple(typ.get_shape())


def box_elems(box: Box) -> int:
    """Elements of a box."""
    return math.prod(hi - lo for lo, hi in box)


def union(boxes: Sequence[Box]) -> Box:
    """The bounding box of boxes of one rank."""
    return tuple((min(b[d][0] for b in boxes), max(b[d][1] for b in boxes)) for d in range(len(boxes[0])))
