"""Reads through aliased `kn.reshape` views, seen as reads of the buffer's owner.

An aliased reshape (passes/kn/alias_reshape.py) is a view of its input's buffer with other
shape and strides; the tiles a consumer task reads of the view are elements of the
producer's tensor.  `owner_read` maps a box of the view to the box of the owning tensor
that holds every element of it: the buffer offsets of the box's first and last elements
(`sum(lo[d] * stride[d])`, `sum((hi[d] - 1) * stride[d])`, strides >= 0) and the box of the
owner between them (`dialects/views.offset_range_box`).  So a consumer tile waits for the
producer tiles covering the flat element range it reads -- for a row-major [1, 4096] read as
[8, 4, 128], the tile of head h waits for the producer tiles of columns [512 h, 512 h + 512).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.views import offset_range_box
from mirage_xdsl.passes.kn.alias_reshape import alias_of, alias_root

Box = tuple[tuple[int, int], ...]


def owner_read(value: SSAValue, box: Box) -> tuple[SSAValue, Box]:
    """(the tensor owning `value`'s buffer, the box of it that holds `box` of `value`);
    `(value, box)` itself when `value` is no aliased reshape (module docstring)."""
    if alias_of(value) is None:
        return value, box
    strides = kn.dtensor_strides(value)
    if any(hi <= lo for lo, hi in box) or any(s < 0 for s in strides):
        root = alias_root(value)
        return root, tuple((0, n) for n in kn.shape_of(root))
    first = sum(lo * s for (lo, _), s in zip(box, strides))
    last = sum((hi - 1) * s for (_, hi), s in zip(box, strides))
    root = alias_root(value)
    return root, offset_range_box(kn.shape_of(root), kn.dtensor_strides(root), first, last)
