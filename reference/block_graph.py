"""The reference execution of a `kn.customized` threadblock graph in numpy (float64).

Threadblock execution model (one block, all blocks at once here):

* `tb.input` with `forloop_dim = -1` is loaded once; other inputs load iteration `it`'s tile:
  block `b` along grid axis `a` owns the contiguous slab `b*t .. (b+1)*t` of dim
  `input_map[a]` and the loop walks that slab in `forloop_range` tiles.
* Ops are classified by their result types, not by their position in the block (later passes
  reorder ops and add discardable attributes such as `tb.chain`, `tb.stage`, `tb.strides`;
  those are ignored): an op with an `after_accum` result runs once after the loop, a
  `tb.forloop_accum` folds its input every iteration, every other op runs every iteration
  (ops that only depend on loop-invariant values are hoisted and run once, which is
  equivalent because they are pure).  Within each phase ops run in block (SSA) order.
* Accumulators (`R` = forloop_range, `n` = the input's last dim): `nored` sum;
  `red_ld_sum` sum then last-dim sum; `red_ld_mean` that divided by `n*R`; `red_ld_rms`
  `sqrt(sum x^2 / (n*R))`; `redtox_ld_sum` strided groups of the last dim down to the
  result's last dim, summed over iterations; `nored_rescale` `acc = acc * rescale + x`
  (acc starts at 0, rescale broadcast with numpy rules); `red_ld_sum_rescale` the same then a
  last-dim sum; `max` elementwise running max starting at -inf (Mirage starts at the dtype's
  lowest finite value; the two only differ if every input is below it).
* `tb.reduction_max` keeps a per-block running max `old` (initialised to -inf before the
  first call) across calls (i.e. iterations): `new = max(old, max_d x)`, `diff = old - new`,
  `old = new`.  The first call therefore yields `diff = -inf` and `exp(diff) = 0`, which is
  what the online-softmax rescale accumulators expect (`acc = 0 * 0 + x`).
* `tb.grid_sum` sums the tiles of the blocks along its grid axis (a split group); the
  outputs are then scattered as if that axis had one block (the last block stores).
* `tb.causal_mask` sets to -inf the elements whose global column exceeds their global row +
  `offset` (the block's grid position and the iteration give the tile's place,
  dialects/tb/mask_ops.py);
* `tb.reduction` sums a dim to 1, `tb.reduce_max` takes its max (no state across calls);
  `tb.reduction_to_dimx` sums STRIDED groups of a dim down to the graph's `reduction_dimx`
  (read off the result type); `tb.rms_norm` normalises the last dim without epsilon;
  `tb.output` scatters every block's tile into the concatenated DTensor per `output_map`.

Floating-point exceptions (overflow in exp, log of negatives, 0/0) follow IEEE semantics
(inf/nan) without numpy warnings, as a GPU would.

Errors: every problem raises `ReferenceExecutionError` (a `ValueError`): unknown function name
or ambiguous module, wrong number of inputs or an input whose shape differs from the
argument's, an op the executor does not know, or IR that breaks a tiling rule (non-divisible
maps, an output map missing a grid axis > 1, a computed shape that contradicts the IR type).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mirage_xdsl.reference.numpy_ops import (
    BINARY,
    NUM_BLOCK_AXES,
    UNARY,
    ReferenceExecutionError,
    apply_unary,
    check_shape,
    int_prop,
    rms_normalize,
    round_to_storage,
    strided_sum,
    value_shape,
)


def _tile_input(x: np.ndarray, grid: Sequence[int], imap: Sequence[int], fdim: int, iters: int) -> np.ndarray:
    """View of `x` as `[R|1, gx|1, gy|1, gz|1, *tile]`: entry `[it, bx, by, bz]` is the tile
    block (bx, by, bz) loads in iteration `it` (block axes of size 1 = replicated)."""
    axis_of: dict[int, int] = {}
    for a in range(NUM_BLOCK_AXES):
        if grid[a] > 1 and imap[a] >= 0:
            if not 0 <= imap[a] < x.ndim or imap[a] in axis_of:
                raise ReferenceExecutionError(f"tb.input: invalid input_map {tuple(imap)} for a rank-{x.ndim} tensor")
            axis_of[imap[a]] = a
    split_shape: list[int] = []
    grid_pos: dict[int, int] = {}
    loop_pos = None
    tile_pos: list[int] = []
    for d, n in enumerate(x.shape):
        if d in axis_of:
            g = grid[axis_of[d]]
            if n % g:
                raise ReferenceExecutionError(f"tb.input: dim {d} (size {n}) is not divisible by grid {g}")
            grid_pos[axis_of[d]] = len(split_shape)
            split_shape.append(g)
            n //= g
        if d == fdim:
            if n % iters:
                raise ReferenceExecutionError(
                    f"tb.input: dim {d} (size {n} per block) is not divisible by forloop_range {iters}"
                )
            loop_pos = len(split_shape)
            split_shape.append(iters)
            n //= iters
        tile_pos.append(len(split_shape))
        split_shape.append(n)
    y = x.reshape(split_shape)
    perm = ([loop_pos] if loop_pos is not None else []) + [grid_pos[a] for a in sorted(grid_pos)] + tile_pos
    # insert size-1 axes for a non-iterated input and the replicated grid axes (no copy)
    lead = [iters if loop_pos is not None else 1] + [grid[a] if a in grid_pos else 1 for a in range(3)]
    return y.transpose(perm).reshape(lead + [split_shape[p] for p in tile_pos])


def _scatter_output(op: Any, tile: np.ndarray, grid: Sequence[int], omap: Sequence[int]) -> np.ndarray:
    """Concatenate every block's tile (`[gx, gy, gz, *tile]`, broadcastable) into the DTensor."""
    rank = tile.ndim - NUM_BLOCK_AXES
    tile = np.broadcast_to(tile, tuple(grid) + tile.shape[NUM_BLOCK_AXES:])
    axis_for_dim: dict[int, int] = {}
    for a in range(NUM_BLOCK_AXES):
        if grid[a] > 1:
            m = omap[a]
            if not 0 <= m < rank:
                raise ReferenceExecutionError(
                    f"{op.name}: grid axis {'xyz'[a]} has {grid[a]} blocks but output_map {tuple(omap)} "
                    "gives it no output dim (blocks must write disjoint regions)"
                )
            if m in axis_for_dim:
                raise ReferenceExecutionError(f"{op.name}: output_map {tuple(omap)} maps two grid axes to dim {m}")
            axis_for_dim[m] = a
    perm = [a for a in range(NUM_BLOCK_AXES) if grid[a] == 1]
    out_shape = []
    for d in range(rank):
        n = tile.shape[NUM_BLOCK_AXES + d]
        if d in axis_for_dim:
            perm.append(axis_for_dim[d])
            n *= grid[axis_for_dim[d]]
        perm.append(NUM_BLOCK_AXES + d)
        out_shape.append(n)
    return tile.transpose(perm).reshape(out_shape)


class _Accumulator:
    """State of one `tb.forloop_accum` over the loop (arrays carry the block axes)."""

    def __init__(self, op: Any, iters: int):
        self.op = op
        self.kind = op.kind.data
        self.iters = iters
        self.acc: np.ndarray | None = None
        self.n = 1
        self.out_last = value_shape(op.result)[-1]

    def fold(self, x: np.ndarray, rescale: np.ndarray | None) -> None:
        """Fold one iteration's tile `x` (`[gx|1, gy|1, gz|1, *tile]`) into the state per the accumulator kind;
        `rescale` is the rescale tile of the `*_rescale` kinds (None otherwise).

        Raises:
            ReferenceExecutionError: the rescale tile does not broadcast against `x`, or the kind is unknown.
        """
        kind, acc = self.kind, self.acc
        self.n = x.shape[-1]
        if kind == "nored":
            self.acc = x if acc is None else acc + x
        elif kind in ("red_ld_sum", "red_ld_mean"):
            s = x.sum(axis=-1, keepdims=True)
            self.acc = s if acc is None else acc + s
        elif kind == "red_ld_rms":
            s = np.square(x).sum(axis=-1, keepdims=True)
            self.acc = s if acc is None else acc + s
        elif kind == "redtox_ld_sum":
            s = strided_sum(x, x.ndim - 1, self.out_last)
            self.acc = s if acc is None else acc + s
        elif kind in ("nored_rescale", "red_ld_sum_rescale"):
            assert rescale is not None
            if acc is None:
                acc = np.zeros_like(x)
            try:
                self.acc = acc * rescale + x
            except ValueError as err:
                raise ReferenceExecutionError(
                    f"{self.op.name} {kind}: rescale tile does not broadcast against the input ({err})"
                ) from None
        elif kind == "max":
            self.acc = x if acc is None else np.maximum(acc, x)
        else:
            raise ReferenceExecutionError(f"{self.op.name}: unknown accumulator kind '{kind}'")

    def result(self) -> np.ndarray:
        """The accumulated value after the loop (block axes kept): `red_ld_mean` divided by `n*R`, `red_ld_rms`
        `sqrt(acc / (n*R))`, `red_ld_sum_rescale` summed over the last dim, the other kinds as accumulated.
        """
        acc = self.acc
        assert acc is not None
        kind = self.kind
        if kind == "red_ld_mean":
            return acc / (self.n * self.iters)
        if kind == "red_ld_rms":
            return np.sqrt(acc / (self.n * self.iters))
        if kind == "red_ld_sum_rescale":
            return acc.sum(axis=-1, keepdims=True)
        return acc


def run_customized(kop: Any, kn_inputs: list[np.ndarray], storage_rounding: bool = False) -> list[np.ndarray]:
    """Run the `kn.customized` op `kop` for all blocks at once on its inputs `kn_inputs` (float64 arrays, one per
    operand); returns one array per result, shaped like it.  With `storage_rounding`, every computed tile (op and
    accumulator results, not the loaded input tiles) is rounded to its element type (`round_to_storage`).

    Raises:
        ReferenceExecutionError: a non-tb or unsupported op, a `tb.input` not loading a block argument, an invalid or
            non-divisible map, a computed tile shape that differs from the IR type, a `result_index` naming no result,
            or a result that no `tb.output` writes.
    """
    from mirage_xdsl.dialects.tb import STensorType

    grid = tuple(int(g) for g in kop.grid_dim.get_values())
    iters = int_prop(kop, "forloop_range")
    block = kop.body.block
    arg_index = {arg: i for i, arg in enumerate(block.args)}

    def is_after_accum(value: Any) -> bool:
        t = value.type
        return isinstance(t, STensorType) and t.is_after_accum

    # ---- classify ops by phase (never by position: passes reorder the block)
    invariant: set[Any] = set()  # values that do not change across iterations
    pre_ops: list[Any] = []
    loop_ops: list[Any] = []
    post_ops: list[Any] = []
    outputs: list[Any] = []
    loaders: dict[Any, np.ndarray] = {}
    for op in block.ops:
        name = op.name
        if not name.startswith("tb."):
            raise ReferenceExecutionError(f"unsupported operation '{name}' in a threadblock graph")
        if name == "tb.output":
            outputs.append(op)
            continue
        if name == "tb.input":
            src = op.operands[0]
            if src not in arg_index:
                raise ReferenceExecutionError("tb.input: the operand must be a block argument of the kn.customized")
            imap = tuple(int(v) for v in op.input_map.get_values())
            fdim = int_prop(op, "forloop_dim")
            tiles = _tile_input(_view_of(op, kn_inputs[arg_index[src]]), grid, imap, fdim, iters)
            check_shape(op, "tile", tiles.shape[1 + NUM_BLOCK_AXES :], value_shape(op.result))
            loaders[op.result] = tiles
            if fdim < 0:
                invariant.add(op.result)
                pre_ops.append(op)
            else:
                loop_ops.append(op)
            continue
        if name == "tb.forloop_accum":
            loop_ops.append(op)
            continue
        if any(is_after_accum(r) for r in op.results):
            post_ops.append(op)
            continue
        if name != "tb.reduction_max" and all(v in invariant for v in op.operands):
            invariant.update(op.results)
            pre_ops.append(op)
        else:
            loop_ops.append(op)

    env: dict[Any, np.ndarray] = {}
    accums: dict[Any, _Accumulator] = {}
    max_state: dict[Any, np.ndarray] = {}

    def run(op: Any, it: int) -> None:
        name = op.name
        if name == "tb.input":
            env[op.result] = loaders[op.result][it]
            return
        xs = [env[v] for v in op.operands]
        if name == "tb.forloop_accum":
            acc = accums.get(op)
            if acc is None:
                acc = accums[op] = _Accumulator(op, iters)
            acc.fold(xs[0], xs[1] if len(xs) > 1 else None)
            return
        results = [_causal_mask(op, xs[0], grid, iters, it)] if name == "tb.causal_mask" else _run_tb_op(op, xs, max_state)
        for res, arr in zip(op.results, results):
            check_shape(op, "tile", arr.shape[NUM_BLOCK_AXES:], value_shape(res))
            env[res] = round_to_storage(arr, res) if storage_rounding else arr

    for op in pre_ops:
        run(op, 0)
    for it in range(iters):
        for op in loop_ops:
            run(op, it)
    for op, acc in accums.items():
        env[op.result] = round_to_storage(acc.result(), op.result) if storage_rounding else acc.result()
        check_shape(op, "tile", env[op.result].shape[NUM_BLOCK_AXES:], value_shape(op.result))
    for op in post_ops:
        run(op, iters - 1)

    store_grid = kop.store_grid  # a tb.grid_sum axis stores once
    results: list[np.ndarray | None] = [None] * len(kop.results)
    for out_op, r, offset in kop.output_slots():
        if not 0 <= r < len(results):
            raise ReferenceExecutionError(f"tb.output: result_index {r} names no result of the kn.customized")
        omap = tuple(int(v) for v in out_op.output_map.get_values())
        part = _scatter_output(out_op, env[out_op.operands[0]], store_grid, omap)
        shape = value_shape(kop.results[r])
        if results[r] is None:
            results[r] = np.full(shape, np.nan, dtype=part.dtype)
        box = tuple(slice(o, o + n) for o, n in zip(offset, part.shape))
        results[r][box] = part  # type: ignore[index]
    if any(x is None for x in results):
        raise ReferenceExecutionError(f"kn.customized: {len(outputs)} tb.output ops leave a result unwritten")
    return results  # type: ignore[return-value]


def _causal_mask(op: Any, x: np.ndarray, grid: Sequence[int], iters: int, it: int) -> np.ndarray:
    """`tb.causal_mask` on every block's tile `x` ([gx|1, gy|1, gz|1, *tile]) in iteration
    `it`: element (i, j) kept where the global column J <= the global row I + offset
    (dialects/tb/mask_ops.py gives I and J), -inf elsewhere."""
    rank = x.ndim - NUM_BLOCK_AXES
    rows, cols = x.shape[-2:]
    (row_coef, col_coef) = op.index_origin(iters)

    def global_index(coef: Sequence[int], n: int, dim: int) -> np.ndarray:
        shape = [1] * (NUM_BLOCK_AXES + rank)
        shape[NUM_BLOCK_AXES + dim] = n
        idx = np.arange(n).reshape(shape) + coef[3] * it
        for a in range(NUM_BLOCK_AXES):
            if coef[a]:
                bshape = [1] * (NUM_BLOCK_AXES + rank)
                bshape[a] = grid[a]
                idx = idx + coef[a] * np.arange(grid[a]).reshape(bshape)
        return idx

    i = global_index(row_coef, rows, rank - 2)
    j = global_index(col_coef, cols, rank - 1)
    return np.where(j <= i + op.offset_value, x, -np.inf)


def _view_of(op: Any, array: np.ndarray) -> np.ndarray:
    """The box of `array` a `tb.input` reads (its `view_offset` / `view_shape`; all of it without)."""
    if op.view_offset is None:
        return array
    offset = [int(v) for v in op.view_offset.get_values()]
    shape = [int(v) for v in op.view_shape.get_values()]
    return array[tuple(slice(o, o + n) for o, n in zip(offset, shape))]


def _run_tb_op(op: Any, xs: list[np.ndarray], max_state: dict[Any, np.ndarray]) -> list[np.ndarray]:
    kind = op.name[3:]
    off = NUM_BLOCK_AXES
    if kind in UNARY or kind in ("clamp", "mul_scalar", "add_scalar"):
        return [apply_unary(op, kind, xs[0])]
    if kind in BINARY:
        return [BINARY[kind](xs[0], xs[1])]
    if kind == "matmul":
        return [np.matmul(xs[0], xs[1])]
    if kind == "reduction":
        return [xs[0].sum(axis=off + int_prop(op, "dim"), keepdims=True)]
    if kind == "reduce_max":
        return [xs[0].max(axis=off + int_prop(op, "dim"), keepdims=True)]
    if kind == "reduction_to_dimx":
        d = int_prop(op, "dim")
        return [strided_sum(xs[0], off + d, value_shape(op.result)[d])]
    if kind == "reduction_max":
        x = xs[0]
        m = x.max(axis=off + int_prop(op, "dim"), keepdims=True)
        old = max_state.get(op)
        if old is None:
            old = np.full_like(m, -np.inf)
        new = np.maximum(old, m)
        max_state[op] = new
        return [new, old - new]
    if kind == "rms_norm":
        return [rms_normalize(xs[0], (-1,))]
    if kind == "grid_sum":
        # the group's partial tiles, summed; the block axis keeps size 1 (one block stores)
        return [xs[0].sum(axis=int_prop(op, "dim"), keepdims=True)]
    if kind == "concat":
        a, b = xs
        d = off + int_prop(op, "dim")
        lead = np.broadcast_shapes(a.shape[:off], b.shape[:off])
        a = np.broadcast_to(a, lead + a.shape[off:])
        b = np.broadcast_to(b, lead + b.shape[off:])
        return [np.concatenate([a, b], axis=d)]
    raise ReferenceExecutionError(f"unsupported threadblock op '{op.name}'")
