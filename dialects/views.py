"""Strided views of DTensors: the box rules of `tb.input` / `tb.output` views.

A view is a box of a DTensor: `offset` (the element index of its first element, per dim) and
`shape`, read or written with the DTensor's own strides, so it starts at element
`sum(offset[d] * stride[d])` of the buffer.  A `kn.chunk` result is such a view of its input
(offset = chunk index * part size along `dim`); a `kn.concat` result is assembled from its
operands stored through views into disjoint boxes of one buffer.  Not a Mirage concept: Mirage
runs chunk and concat as kernel-level ops (mirage-notes 1.3).
"""

from __future__ import annotations

from collections.abc import Sequence

from mirage_xdsl.dialects.tiling import ShapeError


def box_error(dims: Sequence[int], offset: Sequence[int], shape: Sequence[int]) -> str | None:
    """Why the box (`offset`, `shape`) is not inside a tensor of `dims`, or None.

    Example: dims (4, 8), offset (0, 4), shape (4, 4) is the second half of the last dim.
    """
    if len(offset) != len(dims) or len(shape) != len(dims):
        return f"a view of a rank-{len(dims)} tensor needs {len(dims)} offsets and sizes, got {len(offset)} and {len(shape)}"
    for d, (n, o, s) in enumerate(zip(dims, offset, shape)):
        if o < 0 or s < 1 or o + s > n:
            return f"view dim {d}: elements [{o}, {o + s}) are not inside [0, {n})"
    return None


def check_cover(dims: Sequence[int], boxes: Sequence[tuple[Sequence[int], Sequence[int]]]) -> None:
    """Check that `boxes` ((offset, shape) pairs) are inside `dims`, pairwise disjoint and cover
    every element: each element of the tensor is written exactly once.

    Raises:
        ShapeError: a box outside the tensor, two boxes that overlap, or elements no box covers.
    """
    total = 0
    for i, (off, shp) in enumerate(boxes):
        if (err := box_error(dims, off, shp)) is not None:
            raise ShapeError(err)
        for j in range(i):
            o2, s2 = boxes[j]
            if all(a < b + m and b < a + n for a, n, b, m in zip(off, shp, o2, s2)):
                raise ShapeError(f"views at offsets {tuple(o2)} and {tuple(off)} overlap")
        n_box = 1
        for s in shp:
            n_box *= s
        total += n_box
    n_all = 1
    for d in dims:
        n_all *= d
    if total != n_all:
        raise ShapeError(f"the views cover {total} of the {n_all} elements of a tensor of shape {tuple(dims)}")


def element_offset(offset: Sequence[int], strides: Sequence[int]) -> int:
    """Element index of a view's first element in a buffer with `strides` (elements)."""
    return sum(o * s for o, s in zip(offset, strides))
