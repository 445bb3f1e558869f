"""`tb.causal_mask`: the causal mask on a tile, with the map from tile to global indices.

`tb.causal_mask %s {offset = N, grid_dims = array<i64: gr, gc>, forloop_dims = array<i64: lr, lc>}`
keeps element (i, j) of the tile's last two dims where its global row I and column J satisfy
`J <= I + N` (`dialects/common/mask_base.py`) and sets the rest to -inf.  The tile does not
know where it sits in the kernel's tensor, so the op
says it, per masked dim (row, column), as a `tb.input` says it of a loaded tile
(mirage-notes 1.4): `grid_dims` the grid axis (0 = x, 1 = y, 2 = z) that partitions that dim
(-1: none) and `forloop_dims` 1 if the for-loop walks it (0: not).  With the tile extent t
of the dim and R = the graph's `forloop_range`, block b of that grid axis owns the slab
`b * t * (R if walked else 1)` and iteration `it` its `it * t` part (the tiling of
`reference/block_graph._tile_input`), so

    I = b_row * t_row * (R if forloop_dims[0] else 1) + (it * t_row if forloop_dims[0] else 0) + i

and likewise J.  kn-partition's `build_tb_graph` derives both arrays from the plan's axes.
A tile after the loop (`after_accum`) has no iteration: its `forloop_dims` must be 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import DenseArrayBase
from xdsl.ir import SSAValue
from xdsl.irdl import irdl_op_definition, prop_def

from mirage_xdsl.dialects.common.checks import fail, shape_of
from mirage_xdsl.dialects.common.mask_base import CausalMaskOpBase
from mirage_xdsl.dialects.kn.tensors import int_array, ints
from mirage_xdsl.dialects.tb.stensor import STensorType, TbOp, after_accum


@irdl_op_definition
class CausalMaskOp(TbOp, CausalMaskOpBase[STensorType]):
    """The causal mask of a tile at its global position (module docstring)."""

    name = "tb.causal_mask"
    grid_dims = prop_def(DenseArrayBase)
    forloop_dims = prop_def(DenseArrayBase)

    def __init__(self, input: SSAValue, offset: int, grid_dims: Sequence[int], forloop_dims: Sequence[int]):
        super().__init__(input, offset, grid_dims=int_array(grid_dims), forloop_dims=int_array(forloop_dims))

    @property
    def grid_axes(self) -> tuple[int, int]:
        """(row, column) grid axis, -1 where none partitions the dim."""
        g = ints(self.grid_dims)
        return g[0], g[1]

    @property
    def walked(self) -> tuple[bool, bool]:
        """(row, column): whether the for-loop walks the dim."""
        f = ints(self.forloop_dims)
        return bool(f[0]), bool(f[1])

    def index_origin(self, forloop_range: int) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int]]:
        """(row, column) origins of the tile in global indices, each as the elements added per
        unit of (blockIdx.x, blockIdx.y, blockIdx.z, iteration): the formula of the module
        docstring for a graph of `forloop_range` iterations."""
        shape = shape_of(self.input)
        out = []
        for tile, g, walked in zip(shape[-2:], self.grid_axes, self.walked):
            per_block = tile * (forloop_range if walked else 1)
            coef = [0, 0, 0, tile if walked else 0]
            if g >= 0:
                coef[g] = per_block
            out.append((coef[0], coef[1], coef[2], coef[3]))
        return out[0], out[1]

    def verify_(self) -> None:
        """Check the base rules, two entries per index array, grid axes in -1..2, loop flags
        0/1, distinct grid axes, and no loop flag after the loop.

        Raises:
            KnVerifyError: a rule is broken.
        """
        super().verify_()
        g, f = ints(self.grid_dims), ints(self.forloop_dims)
        if len(g) != 2 or len(f) != 2:
            raise fail(self, "grid_dims and forloop_dims need two entries each (row, column)")
        if any(x not in (-1, 0, 1, 2) for x in g) or (g[0] >= 0 and g[0] == g[1]):
            raise fail(self, f"grid_dims {g}: each entry a distinct grid axis 0..2 or -1 (none)")
        if any(x not in (0, 1) for x in f):
            raise fail(self, f"forloop_dims {f}: each entry 0 or 1")
        if after_accum(self.input) and any(f):
            raise fail(self, "a tile after the loop (after_accum) has no iteration: forloop_dims must be 0")
