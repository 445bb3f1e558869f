"""Default threadblock graphs for fused kernel-graph groups: the planner.

`kn-partition` hands a group of basic kn ops (a convex sub-graph, `plan_group.Group`) to
`Planner.plan`, which chooses the block graph(s) of one fused kernel -- or of two, for
split-K -- from the shapes and a device model, and `build_tb_graph.emit_kernel` builds the
`kn.customized` ops.  Seed 001 calls these two steps auto-tiling (which tiles, which
for-loop) and auto-mapping (which grid axes, imaps and omaps); mirage-notes 1.4-1.7 define
the block-graph semantics used here.  The planner is split by concept:

| module | concept |
|---|---|
| `plan_group.py` | the abstract group (values, ops by index) built from kn ops |
| `plan_analysis.py` | axes, for-loop phases, online softmax |
| `kernel_plan.py` | the plan records (`KernelPlan`, `FusionPlan`) |
| `plan_cost.py` | the estimate of one plan (on `target/cost_model.py`'s device model) |
| `online_plan.py` | online-softmax attention plans that lower to a flash register chain |
| `default_tb_graph.py` | this module: enumeration and choice of plans |
| `split_combine.py` | the combine kernel of a split-K plan: summed and rescaled (flash decoding) partials |
| `build_tb_graph.py` | the `kn.customized` op of a plan |

Model
-----
1. **Axes and phases** (`plan_analysis`): every dim of every value gets an axis by
   unification; parallel axes present in every output can be partitioned by the grid,
   reduced, non-whole axes can be walked by the for-loop, and each loop axis fixes which op
   runs before, in or after the loop.
2. **Split-K** (flash decoding): if the grid over the parallel axes is too small, the loop axis
   is also split across S blocks.  Kernel 1 stops at the accumulators and writes each block's
   partial sums side by side along a free dim (omap); the combine kernel sums the S partials
   with a strided reduction (`kn.reduction` size = partial width, i.e. `sum_todimx`,
   mirage-notes 1.7) and runs the post-loop ops.  A loop axis that a max reduces is split
   where the combine can take the max of the partial maxima (`split_combine.py`): a max pass
   alone, or an online softmax whose partials are single rows (decode attention with one
   query per KV head), whose combine also rescales every partial sum by exp(m_s - max m).  The combine kernel is planned by the same
   search (without a further split).  Beyond Mirage, a split-K plan may instead stay ONE
   kernel (`DeviceModel.grid_sum`, not for attention): every accumulator is followed by a
   `tb.grid_sum` over the split grid axis, the post-loop ops read the sums, and the last
   block of each split group stores (outputs map the split axis to -1).
3. **Search.**  All grid factorisations of the parallel axes (batch dims of matmuls
   fully split, matmul N tiles multiples of 8, M tiles of 16; at most Mirage's 4096 blocks,
   `LARGE_GRID_BLOCKS` when no plan fits that), loop tiles `k_tiles` (256,
   128, 64; on the H200, 256-wide K tiles beat 128 and 64 for rmsnorm_linear and gated_mlp
   in GPU runs of our kernels on 2026-11-22; a matmul-free plan whose loop axis is shorter
   than all of them also takes its divisors, so the loop still pipelines) and split factors
   are enumerated; each
   configuration that fits is costed by `plan_cost.CostModel.estimate` and the plans are
   ranked by estimated time, then its tie-break.  Split-K is only tried
   when no unsplit grid reaches a balance of 0.9 without recomputing matmuls (attention, whose
   only cheap parallel axes are batch and query rows); split and unsplit candidates then
   compete on estimated time.

Templates (names recorded on the customized op as `kn.template`): `matmul_row_stats`
(rmsnorm_linear), `multi_matmul_shared_operand` (gated_mlp, lora), `flash_decoding` +
`split_reduce` (gqa, mha, mqa), `rowwise` (ntrans), `matmul_epilogue`, `split_k`.  They are
outcomes of the one search above, not separate code paths.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mirage_xdsl.dialects import tiling
from mirage_xdsl.passes.conversion.kernel_plan import FusionPlan, KernelPlan
from mirage_xdsl.passes.conversion.plan_analysis import AxisInfo, analyse_axes, phases_for, rms_shortcuts, tile_of
from mirage_xdsl.passes.conversion.plan_cost import CostModel
from mirage_xdsl.passes.conversion.plan_group import Group, is_attention, reads_any
from mirage_xdsl.passes.conversion.split_combine import combine_group, holds_maxima, max_partial_dim
from mirage_xdsl.passes.tb.plan_pipeline import is_wide_lone_block
from mirage_xdsl.target import MAX_FORLOOP_RANGE
from mirage_xdsl.target.cost_model import DeviceModel


def _prime_factors(n: int) -> dict[int, int]:
    """Prime factorisation of `n` >= 1 as {prime: exponent}, by trial division up to sqrt(n)
    (46,341 steps at most for n < 2^31: a tensor dim is bounded by MAX_TENSOR_ELEMENTS)."""
    factors: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            factors[p] = factors.get(p, 0) + 1
            n //= p
        p += 1 if p == 2 else 2
    if n > 1:
        factors[n] = factors.get(n, 0) + 1
    return factors


def _divisors(n: int) -> list[int]:
    """All divisors of `n` >= 1, ascending, built from its prime factorisation (trial division
    over every candidate up to n took a minute for a 2^31-row tensor)."""
    divisors = [1]
    for prime, exponent in _prime_factors(n).items():
        divisors = [d * prime**k for d in divisors for k in range(exponent + 1)]
    return sorted(divisors)


def _grid_factors(ext: int, roles: set[str], max_blocks: int) -> list[int]:
    """Block counts the grid may cut an axis of extent `ext` into: all of it for a batch axis,
    else the divisors up to `max_blocks` that leave matmul N tiles a multiple of 8 and M
    tiles a multiple of 16."""
    if "batch" in roles:
        return [ext]
    out = []
    for g in _divisors(ext):
        if g > max_blocks:
            break
        t = ext // g
        if g > 1 and "n" in roles and t % 8:
            continue
        if g > 1 and "m" in roles and t % 16:
            continue
        out.append(g)
    return out


def _template(group: Group, plan: KernelPlan, role: str) -> str:
    """The `kn.template` name of `plan` (`role`: "main" or "combine"); see the module docstring."""
    if role == "combine":
        return "split_reduce"
    kinds = group.kinds()
    n_mm = kinds.count("matmul")
    attention = is_attention(group)
    if plan.split > 1:
        return ("flash_decoding" if attention else "split_k") + ("_grid_sum" if plan.grid_sum else "")
    if attention:
        return "attention"
    if n_mm == 0:
        return "rowwise"
    if "rms_norm_matmul" in group.records or plan.rms or (
        plan.loop_axis is not None
        and any(group.nodes[n].kind == "reduction" and plan.ax.reduce_axis.get(n) == plan.loop_axis for n in plan.needed)
    ):
        return "matmul_row_stats"
    if n_mm >= 2:
        uses: dict[int, int] = {}
        for n in group.nodes:
            if n.kind == "matmul":
                for a in set(n.args):
                    uses[a] = uses.get(a, 0) + 1
        if any(c >= 2 for c in uses.values()):
            return "multi_matmul_shared_operand"
    return "matmul_epilogue"


LARGE_GRID_BLOCKS = 65535
"""The block count a group may use when no plan stays within `DeviceModel.max_blocks`
(Mirage's 4096): CUDA's limit of grid y and z (CUDA C++ Programming Guide, Table 21), so any
axis may take the whole grid.  Without it an elementwise op or a GEMM over a large tensor
(prefill attention's [8, 4096, 4096] scores) had no plan and stayed a library call."""


class Planner:
    """Enumerates and costs block-graph configurations for groups (see the module docstring)."""

    def __init__(self, device: DeviceModel | None = None):
        self.device = device if device is not None else DeviceModel()
        self.cost = CostModel(self.device)

    # ---- public
    def plan(
        self,
        group: Group,
        allow_split: bool = True,
        accept: Callable[[FusionPlan], bool] | None = None,
        rank: int = 0,
    ) -> FusionPlan | None:
        """The cheapest plan of `group` (None if none is legal); with `accept`, the cheapest
        plan that `accept` admits (e.g. one the real shared-memory planner fits).  `rank` > 0
        takes the rank-th admitted plan in cost order instead (the last one if there are
        fewer): the tuning candidates that `mirage-bench` profiles."""
        chosen: FusionPlan | None = None
        seen = 0
        for fp in self.candidates(group, allow_split):
            if accept is not None and not accept(fp):
                continue
            chosen = fp
            if seen == rank:
                break
            seen += 1
        return chosen

    def candidates(self, group: Group, allow_split: bool = True) -> list[FusionPlan]:
        """Every legal plan of `group`, cheapest first."""
        ax = analyse_axes(group)
        if ax is None:
            return []
        found: list[FusionPlan] = []
        loops: list[int | None] = [None, *ax.loopable()]
        online = self.device.online_softmax or self.device.auto_online_softmax
        has_loop = any(phases_for(group, ax, L, self.device.online_softmax) is not None for L in ax.loopable())
        combine_cache: dict[Any, FusionPlan | None] = {}
        # split-K only where no unsplit grid fills the SMs without recomputing matmuls
        fills = False
        for split in (False, True):
            if split and (not allow_split or (fills and not self.device.always_try_split)):
                break
            for L in loops:
                ph = phases_for(group, ax, L, online)
                if ph is None or (split and L is None):
                    continue
                for fp in self._configs(group, ax, L, ph, split, has_loop, combine_cache):
                    k = fp.kernels[0]
                    if not self.device.online_softmax and k.online is not None and not self._auto_online(k):
                        continue
                    fills = fills or (k.balance >= self.device.min_balance and k.redundancy <= 1.01)
                    found.append(fp)
        found.sort(key=lambda fp: (fp.cost_us, fp.tiebreak))
        if not found and self.device.max_blocks < LARGE_GRID_BLOCKS:
            # no plan within Mirage's block count: a grid of more, smaller tiles (an
            # elementwise op over [8, 4096, 4096] needs 32K-element tiles in 4096 blocks)
            return Planner(dataclasses.replace(self.device, max_blocks=LARGE_GRID_BLOCKS)).candidates(group, allow_split)
        return found

    # ---- enumeration
    def _configs(
        self,
        group: Group,
        ax: AxisInfo,
        L: int | None,
        ph: dict[int, str],
        allow_split: bool,
        has_loop: bool,
        combine_cache: dict[Any, FusionPlan | None],
    ) -> Iterator[FusionPlan]:
        dev = self.device
        parallel = ax.parallel()
        full_frontier = [n.idx for n in group.nodes if L is not None and ax.reduce_axis.get(n.idx) == L]
        splits = [1]
        # split-K combines partials by summing them; an axis a max reduces is split only where
        # the combine can take the max of the partial maxima (and rescale the sums a running
        # max scales, as flash decoding does): `max_partial_dim`
        if allow_split and L is not None and (
            not holds_maxima(group, full_frontier) or max_partial_dim(group, ax, L, ph, full_frontier) is not None
        ):
            splits = []
            s = 2
            while s <= dev.max_split and ax.extent[L] % s == 0 and ax.extent[L] // s >= min(dev.k_tiles):
                splits.append(s)
                s *= 2
        for S, frontier, gsum in self._split_options(group, splits, full_frontier):
            out_nodes = frontier if S > 1 and not gsum else group.outputs
            gridable = [a for a in parallel if all(a in ax.axes[o] for o in out_nodes)]
            forced = [a for a in ax.extent if "batch" in ax.roles.get(a, set())]
            if any(a not in gridable for a in forced):
                continue
            choices = [_grid_factors(ax.extent[a], ax.roles.get(a, set()), dev.max_blocks) for a in gridable]
            if L is None:
                ktiles: list[int] = [1]
            else:
                per = ax.extent[L] // S
                k_tiles = dev.k_tiles
                if any(ph[n] == "loop" and ax.reduce_axis.get(n) == L for n in ph):  # a running max
                    matmul_free = all(n.kind != "matmul" for n in group.nodes)
                    k_tiles = dev.online_rowwise_k_tiles if matmul_free else dev.online_k_tiles
                ktiles = sorted({k for k in k_tiles if per % k == 0} | ({per} if per <= max(k_tiles) else set()))
                if per < min(k_tiles) and all(n.kind != "matmul" for n in group.nodes):
                    # a loop axis shorter than every loop tile still pipelines its rows: a sum
                    # over dim 0 of [16, 1024, 4096] fp32 walking 16 one-row tiles took 70.4 µs
                    # on an H200 where loading the 16 rows at once took 92.7 (2026-11-26)
                    ktiles = sorted(set(ktiles) | set(_divisors(per)))
                if gsum:
                    ktiles = [k for k in ktiles if k <= dev.grid_sum_max_k_tile]
            for combo in itertools.product(*choices):
                factor = {a: g for a, g in zip(gridable, combo) if g > 1}
                if len(factor) + (1 if S > 1 else 0) > 3:
                    continue
                blocks = math.prod(factor.values()) * S
                if blocks > dev.max_blocks:
                    continue
                for kt in ktiles:
                    plan = self._kernel(group, ax, L, ph, factor, S, kt, has_loop, frontier, gsum)
                    if plan is None:
                        continue
                    if S == 1 or gsum:
                        for variant in self._with_lone_block_variant(plan, has_loop):
                            yield FusionPlan([variant], variant.cost_us, variant.tiebreak)
                        continue
                    combine = self._combine(group, ph, plan, frontier, combine_cache)
                    if combine is None:
                        continue
                    cost = plan.cost_us + combine.cost_us
                    yield FusionPlan([plan, *combine.kernels], cost, plan.tiebreak + combine.tiebreak)

    def _split_options(
        self, group: Group, splits: Sequence[int], full_frontier: list[int]
    ) -> Iterator[tuple[int, list[int], bool]]:
        """(split, what kernel 1 accumulates, combined in-kernel by grid sums?) to enumerate:
        unsplit; per split factor the two-kernel plans of each frontier and, if every output
        depends on a loop reduction (only the last block of a group stores), the one-kernel
        grid-sum plan -- not for attention: on the H200 gqa's grid-sum flash decoding took
        13.1 us where kernel 1 + the combine kernel took 10.6 (2026-11-22), and still lost with P in registers
        and batched partial loads: best grid-sum / two-kernel plan of 24 ranks, gqa bs1 11.9 /
        8.9 us, gqa bs8 38.5 / 32.2, mha 16.0 / 14.1, mqa 16.4 / 11.9 (2026-11-22)."""
        maxima = holds_maxima(group, full_frontier)
        for S in splits:
            if S == 1:
                yield 1, [], False
                continue
            for f in [full_frontier] if maxima else self._frontiers(group, full_frontier):
                yield S, f, False
            if (
                self.device.grid_sum
                and not maxima  # tb.grid_sum adds partials: maxima need the max combine
                and not is_attention(group)
                and all(reads_any(group, o, set(full_frontier)) for o in group.outputs)
            ):
                yield S, full_frontier, True

    def _kernel(
        self,
        group: Group,
        ax: AxisInfo,
        L: int | None,
        ph: dict[int, str],
        factor: dict[int, int],
        S: int,
        kt: int,
        has_loop: bool,
        frontier: Sequence[int] = (),
        grid_sum: bool = False,
    ) -> KernelPlan | None:
        # grid axes: partitioned parallel axes in the order of the first output's dims, then
        # split; elementwise groups innermost dim first, so that consecutive blocks (blockIdx.x
        # fastest) stream neighbouring memory of row-major tensors (rotary's token blocks on
        # blockIdx.x read 256-byte runs 16 KB apart)
        first = group.outputs[0] if group.outputs else None
        inner_first = all(n.kind not in ("matmul", "reduction", "reduction_max", "rms_norm") for n in group.nodes)

        def position(a: int) -> tuple[int, int]:
            d = ax.dim_of(first, a) if first is not None else None
            return (99 if d is None else -d if inner_first else d, a)

        order = sorted(factor, key=position)
        gaxes: list[int | None] = list(order)
        grid = [factor[a] for a in order]
        if S > 1:
            assert L is not None
            gaxes.append(L)
            grid.append(S)
        while len(grid) < 3:
            grid.append(1)
            gaxes.append(None)
        R = 1 if L is None else ax.extent[L] // S // kt
        if R > MAX_FORLOOP_RANGE:
            return None  # the kn.customized verifier would reject the loop (target/device.py)
        tfactor = dict(factor)
        if L is not None:
            tfactor[L] = S * R
        # which nodes this kernel computes
        if S > 1 and not grid_sum:
            needed_set: set[int] = set()
            stack = list(frontier)
            while stack:
                n = stack.pop()
                if n in needed_set:
                    continue
                needed_set.add(n)
                stack.extend(group.nodes[n].args)
            needed = sorted(needed_set)
            out_nodes = list(frontier)
        else:
            needed = [n.idx for n in group.nodes]
            out_nodes = list(group.outputs)
        rms = rms_shortcuts(group, ax, ph, L) if (L is not None and S == 1) else {}
        skipped: set[int] = set()
        for s in rms:
            r = group.nodes[s].args[0]
            ms = group.nodes[r].args[0]
            skipped |= {r, ms}
            sq = group.nodes[ms].args[0]
            skipped.add(sq)
        tiles = {n: tile_of(ax, n, tfactor) for n in needed}
        # strided reductions share one reduction_dimx
        dimxs = {group.nodes[n].props["size"] for n in needed if group.nodes[n].kind == "reduction" and group.nodes[n].props["size"] > 1}
        if len(dimxs) > 1:
            return None
        dimx = dimxs.pop() if dimxs else 64
        for n in needed:
            node = group.nodes[n]
            if node.kind == "matmul":
                for a in node.args:
                    if any(d != 1 for d in tiles[a][:-2]):
                        return None
            if node.kind == "reduction" and node.props["size"] > 1:
                d = node.props["dim"]
                if tiles[node.args[0]][d] % node.props["size"]:
                    return None
        # outputs and omaps
        max_dim = None  # where kernel 1 stores the partials of a split holding maxima
        if S > 1 and not grid_sum and holds_maxima(group, frontier):
            assert L is not None
            max_dim = max_partial_dim(group, ax, L, ph, frontier)
            if max_dim is None:
                return None
        outputs: list[tuple[int, tuple[int, int, int]]] = []
        for o in out_nodes:
            omap = []
            used: set[int] = set()
            for g, gaxis in zip(grid, gaxes):
                if g == 1:
                    omap.append(-1)
                    continue
                if gaxis == L and S > 1 and grid_sum:
                    omap.append(-1)  # the last block of each split group stores
                    continue
                out_dim: int | None
                if gaxis == L and S > 1 and max_dim is not None:
                    out_dim = len(group.nodes[o].shape) + max_dim  # (`combine_group`)
                elif gaxis == L and S > 1:
                    out_dim = self._partial_dim(ax, o, factor)
                else:
                    out_dim = ax.dim_of(o, gaxis) if gaxis is not None else None
                if out_dim is None or out_dim in used:
                    return None
                used.add(out_dim)
                omap.append(out_dim)
            outputs.append((o, tuple(omap)))  # type: ignore[arg-type]
        plan = KernelPlan(
            group, ax, ph, L, R, S, tuple(grid), tuple(gaxes), tiles, needed, outputs, rms, skipped, dimx  # type: ignore[arg-type]
        )
        plan.grid_sum = grid_sum
        plan.threads = self.cost.block_threads(plan)
        # input tiles must agree with Mirage's tiling rule
        for n in needed:
            node = group.nodes[n]
            if node.kind != "input":
                continue
            imap, fdim = plan.imap_fdim(n)
            try:
                t = tiling.input_tile_shape(node.shape, plan.grid, imap, fdim, R)
            except tiling.ShapeError:
                return None
            if t != tiles[n]:
                return None
        if not self.cost.estimate(plan, has_loop):
            return None
        plan.template = _template(group, plan, "main")
        return plan

    def _auto_online(self, plan: KernelPlan) -> bool:
        """Whether an online-softmax plan that was not asked for (`DeviceModel.auto_online_softmax`)
        is kept: a flash register chain (`CostModel.keeps_p_in_registers`), a matmul-free
        plan (one pass over rows too long for a tile, instead of a max pass and a sum pass)
        or kernel 1 of a split (flash decoding: one pass over K and V where the partitioned
        plan wrote the scores and read them three times), without recomputing a matmul; the
        unsplit ones only where their grid fills the SMs (a split is what adds blocks where it
        does not: the estimate decides between the splits and the partitioned plans)."""
        dev = self.device
        matmul_free = all(plan.group.nodes[n].kind != "matmul" for n in plan.needed)
        return (
            dev.auto_online_softmax
            and (matmul_free or plan.split > 1 or self.cost.keeps_p_in_registers(plan))
            and (plan.balance >= dev.min_balance or plan.split > 1)
            and plan.redundancy <= 1.01
        )

    @staticmethod
    def _loop_work_is_matmuls(plan: KernelPlan) -> bool:
        """Whether the for-loop body computes matmuls only (at least one).  Elementwise or
        reduction work on the iterated tiles (rms_norm's sum of squares) slows lone blocks
        down far more than the estimate says -- H200, 512 threads, 96 blocks of 64 W columns:
        rms_norm(X) @ W 24.2 us, X @ W alone 17.8 (2026-11-25) -- so such
        plans get no wide lone-block variant."""
        if plan.rms:
            return False
        loop = [
            n
            for n in plan.needed
            if n not in plan.skipped
            and plan.group.nodes[n].kind != "input"
            and (plan.phase[n] == "loop" or plan.ax.reduce_axis.get(n) == plan.loop_axis)
        ]
        return bool(loop) and all(plan.group.nodes[n].kind == "matmul" for n in loop)

    def _with_lone_block_variant(self, plan: KernelPlan, has_loop: bool) -> Iterator[KernelPlan]:
        """`plan`, then -- for an unsplit, looped, non-attention matmul plan whose blocks each
        have an SM to themselves -- the same plan with `lone_matmul_block_threads` threads
        (costed again: more warps hide more MMA latency)."""
        yield plan
        dev = self.device
        lone = (
            plan.split == 1
            and plan.forloop_range > 1
            and is_wide_lone_block(math.prod(plan.grid), dev.lone_matmul_block_threads, dev.num_sms)
            and not is_attention(plan.group)
            and self._loop_work_is_matmuls(plan)
            and plan.threads < dev.lone_matmul_block_threads
        )
        if not lone:
            return
        wide = dataclasses.replace(plan, threads=dev.lone_matmul_block_threads)
        if self.cost.estimate(wide, has_loop):
            yield wide

    @staticmethod
    def _frontiers(group: Group, full: list[int]) -> list[list[int]]:
        """What kernel 1 of a split-K plan accumulates: every op reducing the loop axis, or
        only the matmuls when the other reductions read group inputs alone (rms_norm's sum of
        squares): the combine kernel then recomputes those from the inputs, and kernel 1's
        partials keep the matmul's N axis, so the grid can tile N with wide tiles."""
        out = [full]
        matmuls = [n for n in full if group.nodes[n].kind == "matmul"]
        if matmuls and len(matmuls) < len(full):

            def reads_matmul(n: int) -> bool:
                return any(group.nodes[a].kind == "matmul" or reads_matmul(a) for a in group.nodes[n].args)

            if not any(reads_matmul(n) for n in full if n not in matmuls):
                out.append(matmuls)
        return out

    @staticmethod
    def _partial_dim(ax: AxisInfo, node: int, factor: dict[int, int]) -> int | None:
        """The dim along which kernel 1 concatenates the split blocks' partials of `node`:
        the last dim that no grid axis partitions."""
        axes = ax.axes[node]
        for d in range(len(axes) - 1, -1, -1):
            a = axes[d]
            if a is None or a not in factor:
                return d
        return None

    # ---- split-K combine kernel
    def _combine(
        self,
        group: Group,
        ph: dict[int, str],
        k1: KernelPlan,
        frontier: list[int],
        cache: dict[Any, FusionPlan | None],
    ) -> FusionPlan | None:
        dims = []
        for _, omap in k1.outputs:
            split_axis = [i for i, a in enumerate(k1.grid_axes) if a == k1.loop_axis and k1.grid[i] > 1]
            dims.append(omap[split_axis[0]])
        key = (k1.loop_axis, k1.split, tuple(dims), tuple(frontier))
        if key in cache:
            return cache[key]
        g2 = combine_group(group, ph, frontier, dims, k1.split)
        plan = self.plan(g2, allow_split=False)
        if plan is not None:
            for k in plan.kernels:
                k.template = "split_reduce"
        cache[key] = plan
        return plan
