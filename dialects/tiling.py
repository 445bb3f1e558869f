"""Shape rules shared by the `kn`/`tb` verifiers, the muGraph importer and the executors.

All rules follow Mirage's `src/kernel/*.cc` and `src/threadblock/*.cc` (see
`docs/mirage-notes.md` sections 1.3-1.7).  Every function raises
`ShapeError` with a one-line message naming the rule that was broken.
"""

from __future__ import annotations

from collections.abc import Sequence

GRID_AXES = ("x", "y", "z")
MAX_TENSOR_DIMS = 4  # include/mirage/config.h
MAX_THREADS_PER_BLOCK = 1024  # CUDA C++ Programming Guide, Table 21
MAX_BLOCK_DIM = (1024, 1024, 64)  # per-axis block size limits (same table)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)  # per-axis grid size limits (same table)

ACCUMULATOR_KINDS = (
    "nored",
    "red_ld_sum",
    "red_ld_mean",
    "red_ld_rms",
    "redtox_ld_sum",
    "nored_rescale",
    "red_ld_sum_rescale",
    "max",
)
RESCALE_ACCUMULATORS = ("nored_rescale", "red_ld_sum_rescale")


class ShapeError(ValueError):
    """A tensor shape or map breaks one of Mirage's tiling rules."""


def launch_geometry_error(grid_dim: Sequence[int], block_dim: Sequence[int]) -> str | None:
    """Why a kernel launch geometry is illegal under CUDA's limits (CUDA C++ Programming
    Guide, Table 21: grid x < 2^31, y/z <= 65535; block x/y <= 1024, z <= 64, <= 1024
    threads), or None when it is legal.  Shared by `kn.customized` and `cute.kernel`."""
    grid, block = tuple(grid_dim), tuple(block_dim)
    if len(grid) != 3 or any(g < 1 for g in grid):
        return f"grid_dim must be 3 positive sizes (x, y, z), got {grid}"
    for axis, g, limit in zip(GRID_AXES, grid, MAX_GRID_DIM):
        if g > limit:
            return f"grid_dim.{axis} = {g} exceeds CUDA's limit of {limit}"
    if len(block) != 3 or any(b < 1 for b in block):
        return f"block_dim must be 3 positive sizes (x, y, z), got {block}"
    for axis, b, limit in zip(GRID_AXES, block, MAX_BLOCK_DIM):
        if b > limit:
            return f"block_dim.{axis} = {b} exceeds CUDA's limit of {limit}"
    threads = block[0] * block[1] * block[2]
    if threads > MAX_THREADS_PER_BLOCK:
        return f"block_dim {block} has {threads} threads, more than {MAX_THREADS_PER_BLOCK}"
    return None


def _check_map(name: str, mapping: Sequence[int], rank: int) -> None:
    if len(mapping) != 3:
        raise ShapeError(f"{name} must have 3 entries (x, y, z), got {len(mapping)}")
    used: dict[int, str] = {}
    hint = "use -1 to replicate" if name == "input_map" else "use -1 only for a grid axis of size 1"
    for axis, dim in zip(GRID_AXES, mapping):
        if dim < -1 or dim >= rank:
            raise ShapeError(f"{name}.{axis} = {dim} is not a dimension of a rank-{rank} tensor ({hint})")
        if dim >= 0:
            if dim in used:
                raise ShapeError(
                    f"{name} maps grid axes {used[dim]} and {axis} to the same tensor dim {dim}; "
                    "Mirage's offset arithmetic cannot compose them"
                )
            used[dim] = axis


def input_tile_shape(
    dtensor_shape: Sequence[int],
    grid_dim: Sequence[int],
    input_map: Sequence[int],
    forloop_dim: int,
    forloop_range: int,
) -> tuple[int, ...]:
    """Shape of the STensor one block loads per iteration (Mirage `TBInputOp` ctor).

    For every grid axis `a` with `grid_dim[a] > 1` and `input_map[a] = m >= 0` the tile's
    dim `m` is divided by `grid_dim[a]`; then dim `forloop_dim` (if >= 0) by `forloop_range`.
    A map entry for a grid axis of size 1 is ignored.

    Raises:
        ShapeError: a map entry names no dimension, two grid axes share a dimension, or a
            division leaves a remainder.
    """
    rank = len(dtensor_shape)
    _check_map("input_map", input_map, rank)
    tile = list(dtensor_shape)
    for axis, grid, dim in zip(GRID_AXES, grid_dim, input_map):
        if grid > 1 and dim >= 0:
            if tile[dim] % grid:
                raise ShapeError(
                    f"dim {dim} (size {tile[dim]}) is not divisible by grid_dim.{axis} = {grid}"
                )
            tile[dim] //= grid
    if forloop_dim < -1 or forloop_dim >= rank:
        raise ShapeError(f"forloop_dim = {forloop_dim} is not a dimension of a rank-{rank} tensor")
    if forloop_dim >= 0:
        if tile[forloop_dim] % forloop_range:
            raise ShapeError(
                f"tile dim {forloop_dim} (size {tile[forloop_dim]}) is not divisible by "
                f"forloop_range = {forloop_range}"
            )
        tile[forloop_dim] //= forloop_range
    return tuple(tile)


def output_dtensor_shape(
    stensor_shape: Sequence[int], grid_dim: Sequence[int], output_map: Sequence[int]
) -> tuple[int, ...]:
    """Shape of the DTensor that the blocks' output tiles are concatenated into (`TBOutputOp`).

    Every grid axis > 1 must have an `output_map` entry >= 0 (blocks write disjoint regions);
    that dim is multiplied by the grid size.

    Raises:
        ShapeError: a grid axis > 1 has no output_map entry, or the map is malformed.
    """
    rank = len(stensor_shape)
    _check_map("output_map", output_map, rank)
    shape = list(stensor_shape)
    for axis, grid, dim in zip(GRID_AXES, grid_dim, output_map):
        if grid > 1:
            if dim < 0:
                raise ShapeError(
                    f"grid_dim.{axis} = {grid} > 1 needs an output_map.{axis} entry >= 0 "
                    "so that blocks write disjoint regions"
                )
            shape[dim] *= grid
    return tuple(shape)


def broadcast_shape(lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, ...]:
    """Numpy broadcast of two equal-rank shapes (each dim equal, or one of them 1).

    Raises:
        ShapeError: ranks differ or a dim pair is neither equal nor contains a 1.
    """
    if len(lhs) != len(rhs):
        raise ShapeError(f"operand ranks differ ({len(lhs)} vs {len(rhs)}); Mirage broadcasts equal ranks only")
    out = []
    for d, (a, b) in enumerate(zip(lhs, rhs)):
        if a != b and a != 1 and b != 1:
            raise ShapeError(f"dim {d} cannot broadcast: {a} vs {b}")
        out.append(max(a, b))
    return tuple(out)


def matmul_shape(lhs: Sequence[int], rhs: Sequence[int], *, threadblock: bool) -> tuple[int, ...]:
    """Result shape of a (batched) matmul over the last two dims.

    Kernel level: leading (batch) dims must be equal.  Threadblock level: every leading dim
    must be 1 (Mirage `TBMatmulOp`).

    Raises:
        ShapeError: ranks differ, rank < 2, contraction dims differ, or leading dims break the rule.
    """
    if len(lhs) != len(rhs):
        raise ShapeError(f"operand ranks differ ({len(lhs)} vs {len(rhs)})")
    if len(lhs) < 2:
        raise ShapeError("matmul operands need rank >= 2")
    if lhs[-1] != rhs[-2]:
        raise ShapeError(f"contraction dims differ: lhs[-1] = {lhs[-1]} vs rhs[-2] = {rhs[-2]}")
    if threadblock:
        if any(d != 1 for d in (*lhs[:-2], *rhs[:-2])):
            raise ShapeError("threadblock matmul needs every leading dim to be 1")
    elif tuple(lhs[:-2]) != tuple(rhs[:-2]):
        raise ShapeError(f"batch dims differ: {tuple(lhs[:-2])} vs {tuple(rhs[:-2])}")
    return (*lhs[:-1], rhs[-1])


def reduction_shape(shape: Sequence[int], dim: int, size: int) -> tuple[int, ...]:
    """Shape after summing dim `dim` down to `size` elements (strided groups when size > 1).

    Raises:
        ShapeError: dim out of range, or the dim is not divisible by `size`.
    """
    if not 0 <= dim < len(shape):
        raise ShapeError(f"reduction dim {dim} is not a dimension of a rank-{len(shape)} tensor")
    if size < 1 or shape[dim] % size:
        raise ShapeError(f"dim {dim} (size {shape[dim]}) is not divisible by the reduced size {size}")
    out = list(shape)
    out[dim] = size
    return tuple(out)


def concat_shape(lhs: Sequence[int], rhs: Sequence[int], dim: int) -> tuple[int, ...]:
    """Shape of concatenating two tensors along `dim`; other dims must be equal.

    Raises:
        ShapeError: ranks differ, dim out of range or another dim differs.
    """
    if len(lhs) != len(rhs):
        raise ShapeError(f"operand ranks differ ({len(lhs)} vs {len(rhs)})")
    if not 0 <= dim < len(lhs):
        raise ShapeError(f"concat dim {dim} is not a dimension of a rank-{len(lhs)} tensor")
    for d, (a, b) in enumerate(zip(lhs, rhs)):
        if d != dim and a != b:
            raise ShapeError(f"dim {d} differs ({a} vs {b}); only the concat dim may differ")
    out = list(lhs)
    out[dim] = lhs[dim] + rhs[dim]
    return tuple(out)


def accumulator_shape(kind: str, shape: Sequence[int], reduction_dimx: int) -> tuple[int, ...]:
    """Shape of a forloop accumulator's result (mirage-notes 1.7).

    Raises:
        ShapeError: unknown kind, or the last dim is not divisible by `reduction_dimx`.
    """
    if kind not in ACCUMULATOR_KINDS:
        raise ShapeError(f"unknown accumulator kind '{kind}' (expected one of {', '.join(ACCUMULATOR_KINDS)})")
    last = len(shape) - 1
    if kind in ("red_ld_sum", "red_ld_mean", "red_ld_rms", "red_ld_sum_rescale"):
        return reduction_shape(shape, last, 1)
    if kind == "redtox_ld_sum":
        return reduction_shape(shape, last, reduction_dimx)
    return tuple(shape)


def row_major_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of a packed row-major tensor (outermost first)."""
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))
