"""Causal key-tile skipping as IR: the attributes `cute-causal-skip` writes and the CUDA
printer reads (passes/cute/causal_skip.py says when a kernel qualifies).

A flash kernel whose online `cute.mma_chain` masks its scores causally (query row I keeps
key column J where `J <= I + offset`) walks key tiles of `BK` columns, iteration `it`
holding columns `[it BK, it BK + BK)`, for a block of `BM` query rows starting at
`row0 = cx bx + cy by + cz bz` (the chain's `mask_rows`, blockIdx (bx, by, bz)).  Key tile
`it` holds a kept element iff `it BK <= row0 + BM - 1 + offset`, and every element of it is
kept iff `it BK + BK - 1 <= row0 + offset`.  Both bounds are `BlockBound`s, linear in
blockIdx:

* `CAUSAL_TRIPS` (`array<i64: cx, cy, cz, add, tile>`) on the `cute.for`: the loop runs
  `min(R, ceil((cx bx + cy by + cz bz + add) / tile))` iterations, with `add = BM + offset`
  and `tile = BK` -- the key tiles past the diagonal are never loaded nor computed
  (FlashAttention-2, Dao 2023, section 3.1.1: "for causal masking ... skip the computation
  of blocks where all elements are masked").
* `MASK_FROM` (`array<i64: cx, cy, cz, add, tile>`) on the masked `cute.mma_chain`:
  iterations `it < floor((cx bx + cy by + cz bz + add) / tile)`, `add = offset + 1`, lie
  fully below the diagonal and run the chain without the per-element mask.
* `HEAVY_FIRST` (`i64`, a grid axis) on the `cute.kernel`: with G the grid's extent on that
  axis and H = ceil(G / 2) (`heavy_first_half`), block index b < H runs the rows of block
  `G - 1 - b` and b >= H those of block `b - H`: the heavier half of the query blocks is
  dispatched first, heaviest first, then the lighter half lightest first, so the j-th
  block of the second half (weight ~ j) lands beside the j-th of the first (weight ~ G - 1 -
  j) when the hardware hands out the second half over the SMs in the order of the first.
  On an H200 (2026-11-26, experiments/causal_order.py, the suite's 8 x 4096^2 x 128 causal
  prefill, 256 blocks of which two fit an SM) this order took 167.4 us, the plain reversal
  (b -> G - 1 - b) 198.4 and the natural order 205.0
  (benchmarks/results/prefill-causal-h200-2026-11-26-b.md).

A skipped tile contributes nothing: its scores are all -inf, so the running max, the
rescale factor (exp(0) = 1) and P (exp(-inf) = 0) are as if it were never read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr
from xdsl.ir import Operation

from mirage_xdsl.dialects.cute.attrs import dense, dense_ints

CAUSAL_TRIPS = "cute.causal_trips"
MASK_FROM = "cute.mask_from"
HEAVY_FIRST = "cute.heavy_first"


@dataclass(frozen=True)
class BlockBound:
    """`(cx bx + cy by + cz bz + add) / tile` rounded up (`ceil`) or down, for blockIdx
    (bx, by, bz); all terms are non-negative, `tile > 0`."""

    coefs: tuple[int, int, int]
    add: int
    tile: int

    def numerator(self, block: Sequence[int]) -> int:
        """`cx bx + cy by + cz bz + add` for one block index."""
        return sum(c * b for c, b in zip(self.coefs, block)) + self.add

    def ceil(self, block: Sequence[int]) -> int:
        """The bound rounded up, for one block index."""
        return -(-self.numerator(block) // self.tile)

    def floor(self, block: Sequence[int]) -> int:
        """The bound rounded down, for one block index."""
        return self.numerator(block) // self.tile

    def attr(self) -> DenseArrayBase:
        """As `array<i64: cx, cy, cz, add, tile>`."""
        return dense([*self.coefs, self.add, self.tile])


def read_bound(op: Operation, name: str) -> BlockBound | None:
    """The `BlockBound` attribute `name` of `op`, or None when absent.

    Raises:
        ValueError: the attribute is not five integers with non-negative terms and a tile > 0.
    """
    attr = op.attributes.get(name)
    if attr is None:
        return None
    vals = dense_ints(attr) if isinstance(attr, DenseArrayBase) else ()
    if len(vals) != 5 or any(v < 0 for v in vals) or vals[4] <= 0:
        raise ValueError(f"{op.name}: {name} must be array<i64: cx, cy, cz, add, tile> with terms >= 0 and tile > 0")
    return BlockBound((vals[0], vals[1], vals[2]), vals[3], vals[4])


def heavy_first_half(extent: int) -> int:
    """H = ceil(extent / 2): the blocks `HEAVY_FIRST` runs heaviest first."""
    return (extent + 1) // 2


def heavy_first_block(b: int, extent: int) -> int:
    """The query block that block index `b` of a `HEAVY_FIRST` axis of `extent` blocks runs."""
    h = heavy_first_half(extent)
    return extent - 1 - b if b < h else b - h


def heavy_first_axis(kernel: Operation) -> int | None:
    """The grid axis whose block order `HEAVY_FIRST` reverses, or None."""
    attr = kernel.attributes.get(HEAVY_FIRST)
    return attr.value.data if isinstance(attr, IntegerAttr) else None
