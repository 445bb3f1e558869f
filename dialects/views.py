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


def reshape_strides(shape: Sequence[int], strides: Sequence[int], new_shape: Sequence[int]) -> tuple[int, ...] | None:
    """Element strides under which a tensor of `shape` and `strides` reads as `new_shape` in
    row-major order without a copy (a view), or None when no strides do.

    numpy's no-copy reshape rule (`_attempt_nocopy_reshape` in numpy/core/src/multiarray/
    shape.c, re-derived here): split both shapes into the shortest groups of equal element
    count; a group of old dims can be re-split only if it is contiguous among itself
    (`stride[d] == stride[d + 1] * shape[d + 1]` inside the group), and the new dims of the
    group then take row-major strides from the group's innermost stride.  Dims of size 1 get
    the stride the row-major rule gives them (any stride reads the same elements).

    Example: shape (1, 4096), strides (6144, 1) -> (8, 4, 128) gives (512, 128, 1); shape
    (8, 128), strides (1, 8) (column-major) -> (1024,) gives None.
    """
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out = [0] * len(new_shape)
    new = [d for d, n in enumerate(new_shape) if n != 1]
    i = j = 0
    while i < len(old) and j < len(new):
        i2, j2 = i + 1, j + 1
        np_old, np_new = old[i][0], new_shape[new[j]]
        while np_old != np_new:
            if np_old < np_new:
                np_old *= old[i2][0]
                i2 += 1
            else:
                np_new *= new_shape[new[j2]]
                j2 += 1
        for k in range(i, i2 - 1):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        stride = old[i2 - 1][1]
        for k in reversed(range(j, j2)):
            out[new[k]] = stride
            stride *= new_shape[new[k]]
        i, j = i2, j2
    if i != len(old) or j != len(new):
        return None
    # size-1 dims: the stride of the next dim out times its size (row-major), 1 at the end
    nxt = 1
    for d in reversed(range(len(new_shape))):
        if new_shape[d] == 1:
            out[d] = nxt
        else:
            nxt = out[d] * new_shape[d]
    return tuple(out)


def offset_range_box(shape: Sequence[int], strides: Sequence[int], first: int, last: int) -> tuple[tuple[int, int], ...]:
    """A box of a tensor of `shape` and `strides` holding every element whose buffer offset
    lies in [`first`, `last`] (elements): the dims, outermost stride first, where the two ends'
    coordinates agree stay fixed, the first dim where they differ spans both ends, the dims
    inside it span their whole size.  The whole tensor when an end is no element of it (an
    overlapping or padded layout): the box may only over-approximate.
    """
    full = tuple((0, n) for n in shape)
    order = sorted((d for d in range(len(shape)) if shape[d] > 1), key=lambda d: -strides[d])
    ends = []
    for off in (first, last):
        coords = [0] * len(shape)
        rest = off
        for d in order:
            if strides[d] <= 0:
                return full
            coords[d], rest = divmod(rest, strides[d])
            if coords[d] >= shape[d]:
                return full
        if rest != 0:
            return full
        ends.append(coords)
    lo, hi = ends
    box = [(0, n) for n in shape]
    for d in order:
        if lo[d] == hi[d]:
            box[d] = (lo[d], lo[d] + 1)
            continue
        box[d] = (min(lo[d], hi[d]), max(lo[d], hi[d]) + 1)
        break
    return tuple(box)
