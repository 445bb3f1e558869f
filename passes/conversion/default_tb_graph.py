"""Default threadblock graphs for fused kernel-graph groups: auto-tiling and auto-mapping.

`kn-partition` hands a group of basic kn ops (a convex sub-graph) to `plan_group`, which
chooses the block graph(s) of one fused kernel -- or of two, for split-K -- from the shapes and
a device model, and `emit_kernel` builds the `kn.customized` ops.  Seed 001 calls these two
steps auto-tiling (which tiles, which for-loop) and auto-mapping (which grid axes, imaps and
omaps); mirage-notes 1.4-1.7 define the block-graph semantics used here.

Model
-----
1. **Axes.**  Every dim of every value of the group gets an axis by unification (einsum-like):
   elementwise ops keep their operand's axes (broadcast size-1 dims have none), a matmul ties
   `lhs[-1]` to `rhs[-2]` (the contracted axis), batch dims to batch dims.  An axis is
   *reduced* if a matmul contracts it or a `kn.reduction` sums it; *whole* if it must stay
   entire in every tile (normalised by `kn.rms_norm`, the target dim of a strided reduction,
   two dims of one tensor); *parallel* otherwise.  Parallel axes present in every output can
   be partitioned by the grid; reduced, non-whole axes can be walked by the for-loop.
2. **Phases** for a loop axis L (mirage-notes 1.4): an input with L is iterated
   (`forloop_dim`), others are loaded once (`pre`).  An op reducing L (matmul contracting L,
   reduction over L) runs in the loop and its result is accumulated (`nored`, `red_ld_sum`,
   `redtox_ld_sum`, or `red_ld_rms` for `sqrt(sum(x^2/n))`), which puts it *after* the loop
   (`post`).  Elementwise ops inherit their operands' phase; mixing an in-loop value with an
   accumulated one is illegal (that is why `kn-simplify` moves divisions across matmuls);
   loop-invariant values used after the loop are carried over by a `nored` (one iteration) or
   `max` accumulator (the max of equal values is the value).  Without a loop axis
   (`forloop_range` 1) every op runs in the loop body and the outputs pass through `nored`.
3. **Split-K** (flash decoding): if the grid over the parallel axes is too small, the loop axis
   is also split across S blocks.  Kernel 1 stops at the accumulators and writes each block's
   partial sums side by side along a free dim (omap); the combine kernel sums the S partials
   with a strided reduction (`kn.reduction` size = partial width, i.e. `sum_todimx`,
   mirage-notes 1.7) and runs the post-loop ops.  The combine kernel is planned by the same
   search (without a further split).  Beyond Mirage, a split-K plan may instead stay ONE
   kernel (`DeviceModel.grid_sum`, not for attention): every accumulator is followed by a
   `tb.grid_sum` over the split grid axis, the post-loop ops read the sums, and the last
   block of each split group stores (outputs map the split axis to -1).
4. **Search and cost.**  All grid factorisations of the parallel axes (batch dims of matmuls
   fully split, matmul N tiles multiples of 8, M tiles of 16; at most Mirage's 4096 blocks,
   `LARGE_GRID_BLOCKS` when no plan fits that), loop tiles `k_tiles` (256,
   128, 64; on the H200, 256-wide K tiles beat 128 and 64 for rmsnorm_linear and gated_mlp
   in GPU runs of our kernels on 2026-11-22) and split factors are enumerated.  A
   configuration must fit shared memory (inputs double-buffered when iterated, fp32
   accumulators, passes/README.md; the sum of the tile sizes, which tb-plan-smem can always
   reach; `kn-partition` double-checks estimates above 40% of the limit with it), keep the register
   accumulators of matmuls within 192 fp32 per thread, and -- without a loop -- load at most
   `stage_budget` bytes per block.  The estimated time of a kernel is
      launch + max(HBM bytes / BW, L2 bytes / L2 BW, MMA FLOPs / (rate * hiding)) / balance
      + waves * (iterations * exposed latency + block latency)
   with BW = min(HBM bandwidth, DRAM bytes in flight / latency) (Little's law: one pipeline
   stage of the non-replicated input tiles per resident block, N - 1 for wide lone blocks
   with the N-stage ring tb-plan-pipeline will build for them (at most 4) and for loops that
   stream full-speed `kn.weight` tiles with the ring it builds for those (at most 6), whose
   exposed latency per iteration is 1 / (N - 1)), balance = blocks / (SMs *
   ceil(blocks / SMs)) (wave quantisation), hiding = resident warps per SM / 16 (at most 1;
   / 8 for attention plans whose P convert-tb-to-cute keeps in registers, `cute.mma_chain`)
   and MMA FLOPs counted on m16n8k16-padded tiles.  Ties go to better balance, then about 4
   blocks per SM (measured best for gated_mlp and rmsnorm_linear), N tiles multiples of 16,
   fewer blocks, longer loop tiles, fewer ops.  Split-K is only tried
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
import functools
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, StringAttr, TensorType, f64, i64
from xdsl.ir import Attribute, Block, Operation, SSAValue

from mirage_xdsl.dialects import kn, tb, tiling
from mirage_xdsl.passes.conversion.register_chain import chain_shape_fits, chain_thr_layout
from mirage_xdsl.passes.tb.plan_pipeline import (
    LONE_BLOCK_MAX_STAGES,
    WEIGHT_MAX_STAGES,
    WEIGHT_PREFETCH_BYTES,
    choose_stages,
    choose_weight_stages,
    is_wide_lone_block,
)
from mirage_xdsl.target import MAX_FORLOOP_RANGE, SM90

UNARY_KINDS = ("exp", "square", "sqrt", "silu", "sigmoid", "gelu", "relu", "log", "clamp", "mul_scalar")
BINARY_KINDS = ("add", "sub", "mul", "div", "pow")
FUSIBLE_KINDS = (*UNARY_KINDS, *BINARY_KINDS, "matmul", "reduction", "reduction_max", "rms_norm")

TB_UNARY = tb.UNARY_BY_KIND
TB_BINARY = tb.BINARY_BY_KIND

TEMPLATE_ATTR = "kn.template"
SMEM_ATTR = "kn.smem_estimate"
COST_ATTR = "kn.cost_estimate_us"


@dataclass(frozen=True)
class DeviceModel:
    """What the planner assumes about the GPU (H200 by default; docs/h200-device-facts.md)."""

    num_sms: int = SM90.num_sms
    smem_per_block: int = SM90.smem_per_block_optin
    smem_per_sm: int = SM90.smem_per_sm
    threads_per_block: int = 128  # Mirage's block_dim (128, 1, 1)
    wide_block_threads: int = 512  # for matmul-free plans with a grid of < num_sms / 4 blocks
    lone_matmul_block_threads: int = 512
    """Threads of the extra candidate that every unsplit, looped, non-attention matmul plan
    with at most one block per SM gets: a block alone on its SM must hide the MMA and load
    latencies with its own warps (sliced K spreads every tile's k-steps over them).  H200,
    gated_mlp with 128 blocks of 32 W1/W2 columns, 128-row K tiles, 4 cp.async stages:
    128 threads 22.5 us, 256 20.4, 384 21.6, 512 19.9 / 19.9 / 20.1 (three runs), 1024 25.9
    (measured 2026-11-25)."""
    lone_block_stages: int = LONE_BLOCK_MAX_STAGES
    """tb-plan-pipeline's ring depth for wide lone-block graphs (`plan_pipeline.is_wide_lone_block`),
    which the estimate counts: `lone_block_stages - 1` tiles in flight, and that share of a
    double buffer's exposed load latency per iteration.  Set by kn-partition's option
    `lone-block-max-stages`, which mirage-transpile also forwards to tb-plan-pipeline."""
    weight_stages: int = WEIGHT_MAX_STAGES
    weight_prefetch_bytes: int = WEIGHT_PREFETCH_BYTES
    """tb-plan-pipeline's `weight-max-stages` and `weight-prefetch-bytes`: the ring of a plan
    whose for-loop streams `kn.weight` tiles, which the estimate counts (`stages - 1` tiles in
    flight, that share of a double buffer's exposed load latency per iteration) as it does
    the lone blocks' ring."""
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    max_blocks: int = 4096  # Mirage's MAX_NUM_THREADBLOCKS_PER_KERNEL
    max_accum_per_thread: int = 192  # fp32 register accumulator elements (mirage-notes 3.5)
    hbm_bytes_per_us: float = 4.0e6  # ~4 TB/s achievable
    l2_bytes_per_us: float = 1.0e7
    flops_per_us: float = 2.0e8  # fp16 mma.sync rate our kernels reach (a guess well below the ~660 TFLOP/s peak)
    library_gemm_flops_per_us: float = 6.0e8
    """fp16 rate of a library GEMM (cuBLAS through CuPy) on large shapes: torch.bmm reached 740
    TFLOP/s on 4 x 4096^3 on an H100 (2026-11-25), about 600 at smaller sizes."""
    library_call_us: float = 5.0
    """Fixed cost of one library call in a compiled graph: an eager launch from the host that a
    CUDA graph of the generated kernels cannot capture (runtime/library_ops.py)."""
    blocks_for_full_mma_rate: int = 4  # resident 128-thread blocks per SM that hide MMA latency
    register_chain_blocks_for_full_mma_rate: int = 2
    """The same for attention plans lowered to `cute.mma_chain` (P in registers,
    passes/conversion/register_chain.py): each warp runs two dependent MMA chains per iteration without
    a shared-memory round trip in between, so half the resident blocks hide the latency.  On
    the H200 the 128-key tiles that need 84 KB of shared memory (2 blocks per SM) became the
    fastest plans with the chain: gqa bs8 35.1 us (was rank 12) vs 40.1 for rank 0's 64-key
    tiles, gqa bs1 9.1 vs 10.0, mqa 13.0 vs 14.1 (measured 2026-11-22)."""
    register_chain_max_rows: int = 32
    """Query rows per block up to which `register_chain_blocks_for_full_mma_rate` applies.
    H200, the attention plan ranks measured with chains of 16-64 query rows
    (2026-11-22), rank 0 with 16 / 32 / 64:
    gqa bs1 9.0 / 9.4 / 9.4 us, gqa bs8 35.0 / 32.0 / 32.6, mha 14.3 (all), mqa 12.9 / 11.8 /
    11.8."""
    launch_us: float = 1.5  # per kernel, incl. the drain/ramp between dependent kernels
    iter_latency_us: float = 0.25  # exposed per for-loop iteration (double-buffered loads)
    mem_latency_us: float = 0.5  # global-load latency under load (Little's law)
    block_latency_us: float = 1.0  # first load + epilogue store of a block
    max_lift_penalty_us: float = 0.5  # a `max` accumulator carrying an invariant value
    k_tiles: tuple[int, ...] = (256, 128, 64)
    stage_budget: int = 64 * 1024  # bytes one block may load at once without a for-loop
    min_bytes_per_block: int = 128 * 16  # each thread of a (non-single) block loads >= 16 B
    max_split: int = 64
    min_balance: float = 0.9  # split-K only when the best unsplit grid fills fewer SM slots
    always_try_split: bool = True
    """Also enumerate split-K plans when an unsplit grid fills the SMs (they compete on
    estimated time; on the H200 the cheapest plan of this wider search was never slower than
    the narrower search's in the plan-rank sweeps of 2026-11-22)."""
    grid_sum: bool = True
    online_softmax: bool = False
    """Plan a max over the loop axis that the loop reads (`exp(x - max)`) as a running max
    with rescaled accumulators (`online_softmax`) -- one kernel instead of a partition.  Off
    by default: without a split of the loop axis, its one block per row group lost to the
    partitioned plan on an H200 (stable decode attention at mha's shapes, 2026-11-26: 77.8
    against 30.4 us), and a split needs a combine that rescales by the partial maxima."""
    """Also plan split-K kernels that combine their partials themselves (`tb.grid_sum`: the
    last block of each split group sums them) instead of in a second kernel."""
    grid_sum_us: float = 0.8
    grid_sum_us_per_split: float = 0.1
    """Added latency of an in-kernel combine (`grid_sum_us + S * grid_sum_us_per_split` for S
    split blocks per group): the arrival atomics on one counter, then the last block's loads
    of S partials and its epilogue.  H200, against the same kernels without the combine:
    rmsnorm_linear S = 4..16 +1.0-1.7 us, gqa S = 16 +2.4 us, S = 32 +5.5 us
    (measured 2026-11-22)."""
    grid_sum_max_k_tile: int = 64
    """Grid-sum plans walk K in tiles of at most this many rows: on the H200 the same grids ran
    faster with more, shorter iterations -- rmsnorm_linear 96 x 4: 256-row tiles 18.1 us,
    128-row 16.5; 96 x 8: 19.5 / 16.9 / 16.2 (256 / 128 / 64); gated_mlp 64 x 4: 128-row 20.9,
    64-row 20.6 (a sweep of 24 plan ranks, 2026-11-22).  64 rather than 128: the
    rank-0 plans measured 17.4 -> 16.6 us (rmsnorm bs1), 21.7 -> 21.3 (bs8), 22.4 -> 21.6
    (gated_mlp), and the fastest plans of all three use 64-row tiles (2026-11-22)."""
    unpipelined_split_penalty_us: float = 1.0
    """Per wave, for split-K / flash-decoding plans without a for-loop (R = 1): each block loads
    its whole tile before computing, nothing overlaps the load (H200: such attention plans
    took 17-42 µs where the pipelined ones took 11-18, 2026-11-22)."""
    narrow_row_bytes: int = 16
    narrow_row_penalty: float = 1.7
    """Input tiles whose rows are contiguous runs of at most `narrow_row_bytes` (8 fp16
    columns) stream this much slower than wider ones (gated_mlp: 8-column tiles 37 us,
    16-column 26 us; H200, 2026-11-22)."""
    short_row_bytes: int = 32
    short_row_penalty: float = 1.05
    """Rows of at most `short_row_bytes` (16 fp16 columns) stream slower than rows of 128-256
    bytes (membench: 62-65 % vs 74-76 % of the copy bandwidth, a ratio of about 1.18); kept
    mild so that, with little shared memory, 16-column tiles with a long for-loop still beat
    8-column ones (which stream 1.4x slower still, `narrow_row_penalty`)."""
    odd_row_penalty: float = 1.25
    """Rows that are not a power-of-two number of bytes (e.g. 96 fp16 columns) stream this
    much slower (rmsnorm_linear on the H200: split-K kernels with 96- and 48-column W tiles
    17.0 / 18.6 us, 64- and 128-column 14.5-14.6 us; unsplit, 24-column tiles 22.7 us where
    16-column ones take 18.3; 2026-11-22)."""

    def row_penalty(self, row_bytes: int) -> float:
        """How much slower than wide rows a tile with `row_bytes`-byte rows streams."""
        if row_bytes <= self.narrow_row_bytes:
            return self.narrow_row_penalty
        if row_bytes <= self.short_row_bytes:
            return self.short_row_penalty
        return self.odd_row_penalty if row_bytes & (row_bytes - 1) else 1.0


# ---------------------------------------------------------------------------------------
# Abstract group


@dataclass(eq=False)
class Node:
    """One value of a group: a group input (`kind == "input"`, `ext` = the outside value) or
    the result of a basic kn op (`kind` = the op name without `kn.`)."""

    idx: int
    kind: str
    shape: tuple[int, ...]
    dtype: Attribute
    args: tuple[int, ...] = ()
    props: dict[str, Any] = field(default_factory=dict)
    ext: Any = None
    name: str | None = None
    weight: bool = False
    """a group input read from a function argument marked `kn.weight` (`kn.is_weight`)"""


@dataclass
class Group:
    """A convex sub-graph of basic kn ops in topological order, with its outputs."""

    nodes: list[Node] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    records: tuple[str, ...] = ()

    def add(
        self,
        kind: str,
        shape: Sequence[int],
        dtype: Attribute,
        args: Sequence[int] = (),
        props: dict[str, Any] | None = None,
        ext: Any = None,
        name: str | None = None,
        weight: bool = False,
    ) -> int:
        node = Node(len(self.nodes), kind, tuple(shape), dtype, tuple(args), dict(props or {}), ext, name, weight)
        self.nodes.append(node)
        return node.idx

    def users(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {n.idx: [] for n in self.nodes}
        for n in self.nodes:
            for a in n.args:
                out[a].append(n.idx)
        return out

    def kinds(self) -> list[str]:
        return [n.kind for n in self.nodes if n.kind != "input"]


def elem_bytes(dtype: Attribute) -> int:
    width: int | None = getattr(dtype, "bitwidth", None)
    if width is None:
        width = int(getattr(getattr(dtype, "width", None), "data", 32))
    return max(1, width // 8)


def _pad(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def _round16(nbytes: int) -> int:
    return (nbytes + 15) // 16 * 16


def fusible_op(op: Operation) -> bool:
    """A kn op the planner can place in a block graph."""
    if op.dialect_name() != "kn" or len(op.results) != 1 or op.regions:
        return False
    kind = op.name[3:]
    if kind not in FUSIBLE_KINDS:
        return False
    if not all(isinstance(v.type, TensorType) for v in (*op.operands, *op.results)):
        return False
    if isinstance(op, kn.RmsNormOp) and len(kn.ints(op.normalized_shape)) != 1:
        return False  # tb.rms_norm normalises the last dim only
    return True


def _props_of(op: Operation) -> dict[str, Any]:
    if isinstance(op, kn.ClampOp):
        return {"min": op.min_value.value.data, "max": op.max_value.value.data}
    if isinstance(op, kn.MulScalarOp):
        return {"scalar": op.scalar.value.data}
    if isinstance(op, kn.ReductionOp):
        return {"dim": op.dim.value.data, "size": op.size.value.data}
    if isinstance(op, kn.ReductionMaxOp):
        return {"dim": op.dim.value.data, "size": 1}
    if isinstance(op, kn.RmsNormOp):
        return {"normalized": len(kn.ints(op.normalized_shape))}
    return {}


def group_from_ops(ops: Sequence[Operation]) -> tuple[Group, list[SSAValue]]:
    """The abstract group of `ops` (in block order) and the SSA values its outputs replace
    (results used by an op outside the group, in program order)."""
    opset = set(ops)
    group = Group()
    index: dict[SSAValue, int] = {}
    records: list[str] = []
    for op in ops:
        args = []
        for v in op.operands:
            if v not in index:
                index[v] = group.add(
                    "input", kn.shape_of(v), kn.element_type_of(v), ext=v, name=v.name_hint, weight=kn.is_weight(v)
                )
            args.append(index[v])
        res = op.results[0]
        index[res] = group.add(op.name[3:], kn.shape_of(res), kn.element_type_of(res), args, _props_of(op))
        rec = op.attributes.get("kn.composite")
        if isinstance(rec, StringAttr):
            records.append(rec.data)
    out_values: list[SSAValue] = []
    for op in ops:
        res = op.results[0]
        if any(use.operation not in opset for use in res.uses):
            group.outputs.append(index[res])
            out_values.append(res)
    group.records = tuple(records)
    return group, out_values


# ---------------------------------------------------------------------------------------
# Axis analysis


@dataclass
class AxisInfo:
    axes: dict[int, tuple[int | None, ...]]  # node -> axis per dim (None: a size-1 dim)
    extent: dict[int, int]
    whole: set[int]
    reduced: set[int]
    reduce_axis: dict[int, int]  # node -> the axis it sums over (matmul contraction, reduction dim)
    roles: dict[int, set[str]]  # axis -> {"m", "n", "batch"}

    def parallel(self) -> list[int]:
        return sorted(a for a in self.extent if a not in self.reduced and a not in self.whole)

    def loopable(self) -> list[int]:
        return sorted(a for a in self.reduced if a not in self.whole)

    def dim_of(self, node: int, axis: int) -> int | None:
        for d, a in enumerate(self.axes[node]):
            if a == axis:
                return d
        return None


def analyse_axes(group: Group) -> AxisInfo | None:
    """Unify the dims of the group's values into axes (None if the shapes are inconsistent)."""
    parent: dict[tuple[int, int], tuple[int, int]] = {}

    def find(k: tuple[int, int]) -> tuple[int, int]:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    def union(a: tuple[int, int], b: tuple[int, int]) -> None:
        if a in parent and b in parent:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)

    for n in group.nodes:
        for d, s in enumerate(n.shape):
            if s > 1:
                parent[(n.idx, d)] = (n.idx, d)
    whole_keys: set[tuple[int, int]] = set()
    reduce_keys: dict[int, tuple[int, int]] = {}
    role_keys: list[tuple[tuple[int, int], str]] = []
    for n in group.nodes:
        k = n.kind
        if k == "input":
            continue
        args = [group.nodes[a] for a in n.args]
        rank = len(n.shape)
        if k in UNARY_KINDS or k == "rms_norm":
            for d in range(rank):
                union((n.idx, d), (args[0].idx, d))
            if k == "rms_norm":
                for d in range(rank - n.props["normalized"], rank):
                    whole_keys.add((n.idx, d))
        elif k in BINARY_KINDS:
            for a in args:
                if len(a.shape) != rank:
                    return None
                for d in range(rank):
                    if a.shape[d] == n.shape[d]:
                        union((n.idx, d), (a.idx, d))
        elif k == "matmul":
            a, b = args
            for d in range(rank - 2):
                union((n.idx, d), (a.idx, d))
                union((n.idx, d), (b.idx, d))
                role_keys.append(((n.idx, d), "batch"))
            union((n.idx, rank - 2), (a.idx, rank - 2))
            union((n.idx, rank - 1), (b.idx, rank - 1))
            union((a.idx, rank - 1), (b.idx, rank - 2))
            role_keys += [((n.idx, rank - 2), "m"), ((n.idx, rank - 1), "n")]
            if a.shape[-1] > 1:
                reduce_keys[n.idx] = (a.idx, rank - 1)
        elif k in ("reduction", "reduction_max"):
            (a,) = args
            dim, size = n.props["dim"], n.props["size"]
            for d in range(rank):
                if d != dim:
                    union((n.idx, d), (a.idx, d))
            if a.shape[dim] > 1:
                reduce_keys[n.idx] = (a.idx, dim)
            if size > 1:
                whole_keys.add((n.idx, dim))
        else:
            return None
    extent: dict[int, int] = {}
    axes: dict[int, tuple[int | None, ...]] = {}
    ids: dict[tuple[int, int], int] = {}
    whole: set[int] = set()
    for n in group.nodes:
        row: list[int | None] = []
        for d, s in enumerate(n.shape):
            if s <= 1:
                row.append(None)
                continue
            root = find((n.idx, d))
            axis_id = ids.setdefault(root, len(ids))
            if extent.setdefault(axis_id, s) != s:
                return None
            row.append(axis_id)
        if len(set(x for x in row if x is not None)) != sum(x is not None for x in row):
            whole.update(x for x in row if x is not None and row.count(x) > 1)
        axes[n.idx] = tuple(row)
    for key in whole_keys:
        if key in parent:
            whole.add(ids[find(key)])
    reduce_axis = {n: ids[find(key)] for n, key in reduce_keys.items()}
    roles: dict[int, set[str]] = {}
    for key, role in role_keys:
        if key in parent:
            roles.setdefault(ids[find(key)], set()).add(role)
    return AxisInfo(axes, extent, whole, set(reduce_axis.values()), reduce_axis, roles)


@dataclass(frozen=True)
class OnlineSoftmax:
    """Maxima over the loop axis computed while the loop runs (the online softmax of
    Milakov & Gimelshein 2018, FlashAttention's running max): `maxima` are the
    `reduction_max` nodes kept in the loop as a running `tb.reduction_max`; `rescaled` maps
    every accumulated node (a sum or a matmul contracting the loop axis) whose input is
    scaled by `exp(-max)` to its max node -- its for-loop accumulator is rescaled by
    `exp(old max - new max)` each iteration, so after the loop it holds exactly the sum
    with the final max."""

    maxima: frozenset[int]
    rescaled: dict[int, int]


def online_softmax(group: Group, ax: AxisInfo, loop_axis: int) -> OnlineSoftmax | None:
    """The online softmax of `group` for a loop over `loop_axis`, or None if the group has
    no max over that axis or uses one in a way rescaled accumulators cannot express.

    Accepted, per max `m = reduction_max(s)` over the loop axis (its last dim, `s` free of
    any max): `x - m` only under `exp` (`e = exp(x - m)` is scaled by `exp(-m)`); a scaled
    value times / divided by an unscaled one, `mul_scalar`, sums of two values scaled by the
    same max, a sum over another dim, a matmul with the scaled value on the left: scaled;
    a sum over the loop axis or a matmul contracting it: accumulated with rescaling.  Values
    after the loop (accumulator results, the max itself) are used freely."""
    maxima = {
        n.idx
        for n in group.nodes
        if n.kind == "reduction_max" and ax.reduce_axis.get(n.idx) == loop_axis and n.props["dim"] == len(n.shape) - 1
    }
    if not maxima:
        return None
    state: dict[int, tuple[str, int]] = {}  # node -> ("max" | "shifted" | "scaled" | "post", max node)
    rescaled: dict[int, int] = {}
    for n in group.nodes:
        if n.kind == "input":
            continue
        marks = [state.get(a) for a in n.args]
        kinds = [mk[0] if mk is not None else None for mk in marks]
        in_loop = [mk for mk in marks if mk is not None and mk[0] != "post"]
        reduces_loop = ax.reduce_axis.get(n.idx) == loop_axis
        if n.idx in maxima:
            if any(kinds):
                return None
            state[n.idx] = ("max", n.idx)
            continue
        if "post" in kinds:
            # after the loop: accumulator results and the final maxima (lifted) only
            if "shifted" in kinds or "scaled" in kinds:
                return None
            state[n.idx] = ("post", -1)
            continue
        if not in_loop:
            if reduces_loop:
                state[n.idx] = ("post", -1)
            continue
        owners = {mk[1] for mk in in_loop}
        if len(owners) != 1:
            return None
        (m,) = owners
        mark = _online_rule(n, kinds, reduces_loop)
        if mark is None:
            return None
        if mark == "rescaled":
            rescaled[n.idx] = m
            state[n.idx] = ("post", -1)
        else:
            state[n.idx] = (mark, m)
    if any(state.get(o, ("post", -1))[0] in ("shifted", "scaled") for o in group.outputs):
        return None  # a loop value as an output: the final max is not known in the loop
    return OnlineSoftmax(frozenset(maxima), rescaled)


def _online_rule(n: Node, kinds: Sequence[str | None], reduces_loop: bool) -> str | None:
    """What node `n` is in an online softmax given its operands' marks (None: independent
    of the max): "shifted" (`x - m`), "scaled" (by `exp(-m)`), "rescaled" (accumulated over
    the loop axis with rescaling), or None if the rescaling cannot express it."""
    k, kinds = n.kind, list(kinds)
    if k == "sub" and kinds == [None, "max"]:
        return "shifted"
    if k == "exp" and kinds == ["shifted"]:
        return "scaled"
    if "max" in kinds or "shifted" in kinds:
        return None
    if reduces_loop:
        ok = (k == "reduction" and n.props["size"] == 1) or (k == "matmul" and kinds == ["scaled", None])
        return "rescaled" if ok else None
    if k == "mul_scalar" or (k == "reduction" and n.props["size"] == 1):
        return "scaled"
    if (k == "mul" and kinds in (["scaled", None], [None, "scaled"])) or (k == "div" and kinds == ["scaled", None]):
        return "scaled"
    if (k in ("add", "sub") and kinds == ["scaled", "scaled"]) or (k == "matmul" and kinds == ["scaled", None]):
        return "scaled"
    return None


def compute_phases(
    group: Group, ax: AxisInfo, loop_axis: int | None, online: OnlineSoftmax | None = None
) -> dict[int, str] | None:
    """`pre` / `loop` / `post` per node for `loop_axis` (None: no loop), or None if illegal.
    With `online`, its maxima run in the loop (a running max) instead of after it."""
    ph: dict[int, str] = {}
    running = online.maxima if online is not None else frozenset()
    for n in group.nodes:
        if n.kind == "input":
            ph[n.idx] = "loop" if loop_axis is not None and loop_axis in ax.axes[n.idx] else "pre"
            continue
        ps = {ph[a] for a in n.args if a not in running}
        if any(a in running for a in n.args) and "post" not in ps:
            ps.add("loop")  # after the loop a running max is read as its final value (lifted)
        if n.idx in running:
            ph[n.idx] = "loop"
        elif loop_axis is not None and ax.reduce_axis.get(n.idx) == loop_axis:
            if "post" in ps:
                return None
            ph[n.idx] = "post"
        elif "post" in ps and "loop" in ps:
            return None
        elif "post" in ps:
            ph[n.idx] = "post"
        elif "loop" in ps:
            ph[n.idx] = "loop"
        else:
            ph[n.idx] = "pre"
    if loop_axis is not None and any(ph[o] == "loop" for o in group.outputs):
        return None
    return ph


def phases_for(group: Group, ax: AxisInfo, loop_axis: int | None, online: bool = False) -> dict[int, str] | None:
    """`compute_phases`, or -- with `online`, where a max over the loop axis is read inside
    the loop (the softmax's `exp(x - max)`) -- the phases with that max running in the loop
    (`online_softmax`); None if neither is legal."""
    ph = compute_phases(group, ax, loop_axis)
    if ph is not None or loop_axis is None or not online:
        return ph
    running = online_softmax(group, ax, loop_axis)
    return compute_phases(group, ax, loop_axis, running) if running is not None else None


# ---------------------------------------------------------------------------------------
# Plans


@dataclass
class KernelPlan:
    """One block graph: the chosen tiling/mapping of (part of) a group, and its estimates."""

    group: Group
    ax: AxisInfo
    phase: dict[int, str]
    loop_axis: int | None
    forloop_range: int
    split: int
    grid: tuple[int, int, int]
    grid_axes: tuple[int | None, int | None, int | None]
    tiles: dict[int, tuple[int, ...]]
    needed: list[int]
    outputs: list[tuple[int, tuple[int, int, int]]]  # (node, omap)
    rms: dict[int, int]  # sqrt node -> x node, emitted as red_ld_rms(x)
    skipped: set[int]
    dimx: int
    smem: int = 0
    cost_us: float = 0.0
    blocks: int = 0
    loaded_bytes: int = 0
    unique_bytes: int = 0
    flops: int = 0
    balance: float = 0.0
    redundancy: float = 1.0  # matmul FLOPs of all blocks / FLOPs of the group computed once
    tiebreak: tuple = ()
    template: str = ""
    threads: int = 128  # block_dim.x
    grid_sum: bool = False  # split-K combined in this kernel (tb.grid_sum) instead of a second one

    @property
    def store_grid(self) -> tuple[int, int, int]:
        """The grid as the outputs see it: with a grid sum, the split axis stores once."""
        if not self.grid_sum:
            return self.grid
        return tuple(1 if a == self.loop_axis and self.split > 1 else g for g, a in zip(self.grid, self.grid_axes))  # type: ignore[return-value]

    @functools.cached_property
    def online(self) -> OnlineSoftmax | None:
        """The online softmax of this plan: set when a max over the loop axis runs in the
        loop (phase `loop` for a node reducing the loop axis)."""
        L = self.loop_axis
        if L is None or not any(self.phase[n] == "loop" and self.ax.reduce_axis.get(n) == L for n in self.phase):
            return None
        return online_softmax(self.group, self.ax, L)

    def imap_fdim(self, node: int) -> tuple[tuple[int, int, int], int]:
        axes = self.ax.axes[node]
        imap = []
        for g, a in zip(self.grid, self.grid_axes):
            d = self.ax.dim_of(node, a) if (g > 1 and a is not None) else None
            imap.append(-1 if d is None else d)
        fdim = -1
        if self.loop_axis is not None and self.loop_axis in axes:
            fdim = axes.index(self.loop_axis)
        return tuple(imap), fdim  # type: ignore[return-value]

    def describe(self) -> str:
        return (
            f"{self.template}: grid {self.grid}, forloop {self.forloop_range}, blocks {self.blocks}, "
            f"smem {self.smem} B, est {self.cost_us:.2f} us"
        )


@dataclass
class FusionPlan:
    """One or two kernels (split-K) computing a group; `partials` are kernel 1's outputs."""

    kernels: list[KernelPlan]
    cost_us: float
    tiebreak: tuple = ()


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


def _rms_shortcuts(group: Group, ax: AxisInfo, ph: dict[int, str], loop_axis: int) -> dict[int, int]:
    """sqrt nodes computing `sqrt(sum_L(x^2 * 1/ext(L)))` over the last dim -> x (red_ld_rms)."""
    users = group.users()
    out: dict[int, int] = {}
    for n in group.nodes:
        if n.kind != "sqrt":
            continue
        r = group.nodes[n.args[0]]
        if r.kind != "reduction" or r.props["size"] != 1 or ax.reduce_axis.get(r.idx) != loop_axis:
            continue
        ms = group.nodes[r.args[0]]
        if ms.kind != "mul_scalar" or r.props["dim"] != len(ms.shape) - 1:
            continue
        sq = group.nodes[ms.args[0]]
        if sq.kind != "square":
            continue
        if abs(ms.props["scalar"] * ax.extent[loop_axis] - 1.0) > 1e-9:
            continue
        if any(len(users[v]) != 1 or v in group.outputs for v in (r.idx, ms.idx, sq.idx)):
            continue
        out[n.idx] = sq.args[0]
    return out


def _reads_any(group: Group, node: int, targets: set[int]) -> bool:
    """Whether `node` is or (transitively) reads one of `targets`."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n in targets:
            return True
        if n not in seen:
            seen.add(n)
            stack.extend(group.nodes[n].args)
    return False


def _tile(ax: AxisInfo, node: int, factor: dict[int, int]) -> tuple[int, ...]:
    return tuple(1 if a is None else ax.extent[a] // factor.get(a, 1) for a in ax.axes[node])


def is_attention(group: Group) -> bool:
    """Whether `group` is an attention (softmax(Q K^T) V) block."""
    kinds = group.kinds()
    return "softmax_matmul" in group.records or ("exp" in kinds and kinds.count("matmul") >= 2)


def _template(group: Group, plan: KernelPlan, role: str) -> str:
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

    def __init__(self, device: DeviceModel = DeviceModel()):
        self.device = device

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
        online = self.device.online_softmax
        has_loop = any(phases_for(group, ax, L, online) is not None for L in ax.loopable())
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
                    fills = fills or (k.balance >= self.device.min_balance and k.redundancy <= 1.01)
                    found.append(fp)
        found.sort(key=lambda fp: (fp.cost_us, fp.tiebreak))
        if not found and self.device.max_blocks < LARGE_GRID_BLOCKS:
            # no plan within Mirage's block count: a grid of more, smaller tiles (an
            # elementwise op over [8, 4096, 4096] needs 32K-element tiles in 4096 blocks)
            return Planner(replace(self.device, max_blocks=LARGE_GRID_BLOCKS)).candidates(group, allow_split)
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
        # split-K combines partials by summing them: an axis a max reduces cannot be split
        max_reduced = any(group.nodes[n].kind == "reduction_max" for n in full_frontier)
        if allow_split and L is not None and not max_reduced:
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
                ktiles = sorted({k for k in dev.k_tiles if per % k == 0} | ({per} if per <= max(dev.k_tiles) else set()))
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
        for S in splits:
            if S == 1:
                yield 1, [], False
                continue
            for f in self._frontiers(group, full_frontier):
                yield S, f, False
            if (
                self.device.grid_sum
                and not is_attention(group)
                and all(_reads_any(group, o, set(full_frontier)) for o in group.outputs)
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
        # grid axes: partitioned parallel axes in the order of the first output's dims, then split
        first = group.outputs[0] if group.outputs else None

        def position(a: int) -> tuple[int, int]:
            d = ax.dim_of(first, a) if first is not None else None
            return (99 if d is None else d, a)

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
        rms = _rms_shortcuts(group, ax, ph, L) if (L is not None and S == 1) else {}
        skipped: set[int] = set()
        for s in rms:
            r = group.nodes[s].args[0]
            ms = group.nodes[r].args[0]
            skipped |= {r, ms}
            sq = group.nodes[ms].args[0]
            skipped.add(sq)
        tiles = {n: _tile(ax, n, tfactor) for n in needed}
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
                if gaxis == L and S > 1:
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
        plan.threads = self._threads(plan)
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
        if not self._estimate(plan, has_loop):
            return None
        plan.template = _template(group, plan, "main")
        return plan

    def _is_wide_lone_block(self, plan: KernelPlan) -> bool:
        """Whether tb-plan-pipeline will give this plan its deeper ring (`lone_block_stages`)."""
        return is_wide_lone_block(math.prod(plan.grid), plan.threads, self.device.num_sms)

    def _lone_block_stages(self, plan: KernelPlan, loop_stage: int, smem: int) -> int:
        """The ring tb-plan-pipeline will build for a wide lone block: its own choice
        (`plan_pipeline.choose_stages`: the fewest stages that keep 64 KiB in flight per SM, at
        most `lone_block_stages`) on this plan's estimates -- `loop_stage` bytes per stage and
        `smem` with double buffers, one more loop tile per extra stage.  gated_mlp's 256-row K
        tiles (34 KiB per stage) get 3 stages, not the cap of 4."""
        dev = self.device
        cap = max(2, min(dev.lone_block_stages, plan.forloop_range))
        choice = choose_stages(
            loop_stage,
            lambda n: smem + (n - 2) * loop_stage,
            math.prod(plan.grid),
            plan.threads,
            cap,
            dev.smem_per_block,
            num_sms=dev.num_sms,
        )
        return choice.stages

    def _weight_stages(self, plan: KernelPlan, weight_stage: int, loop_stage: int, smem: int) -> int:
        """The ring tb-plan-pipeline will build for a plan whose for-loop streams `kn.weight`
        tiles (`weight_stage` bytes of its `loop_stage` per stage): its own choice
        (`plan_pipeline.choose_weight_stages`: the fewest stages whose prologues prefetch
        `weight_prefetch_bytes` over the grid in one wave) on this plan's estimates, `smem`
        with double buffers and one more loop tile per extra stage."""
        dev = self.device
        lone = dev.lone_block_stages if self._is_wide_lone_block(plan) else 2
        cap = max(2, min(max(lone, dev.weight_stages), plan.forloop_range))
        return choose_weight_stages(
            weight_stage,
            lambda n: smem + (n - 2) * loop_stage,
            math.prod(plan.grid),
            plan.threads,
            cap,
            dev.smem_per_block,
            dev.weight_prefetch_bytes,
            dev.num_sms,
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
        if self._estimate(wide, has_loop):
            yield wide

    def keeps_p_in_registers(self, plan: KernelPlan) -> bool:
        """Whether convert-tb-to-cute will keep this attention plan's P in registers
        (`cute.mma_chain`, predicted before the lowering sees the threadblock graph: a warp row
        per 16 query rows and whole k16 steps of keys per warp, register_chain.chain_thr_layout)
        with at most `register_chain_max_rows` query rows per block, the tiles the 2-block
        rule was measured on; taller chains keep the 4-block rule."""
        if not is_attention(plan.group):
            return False
        matmuls = [n for n in plan.needed if plan.group.nodes[n].kind == "matmul" and n not in plan.skipped]
        if not matmuls:
            return False
        rows, keys = plan.tiles[matmuls[0]][-2:]
        warps = self._threads(plan) // 32
        fits = chain_shape_fits(rows, keys, chain_thr_layout(rows, warps), warps)
        return fits and rows <= self.device.register_chain_max_rows

    def _threads(self, plan: KernelPlan) -> int:
        """Threads per block: Mirage's 128, or up to `wide_block_threads` for matmul-free plans
        whose grid leaves most SMs idle (nTrans: 8 rows, one block each), so each thread of
        their elementwise/reduction phases handles fewer elements (the phases are
        latency-bound: each thread's share is a chain of shared-memory loads)."""
        dev = self.device
        if any(plan.group.nodes[n].kind == "matmul" for n in plan.needed):
            return dev.threads_per_block
        if math.prod(plan.grid) * 4 > dev.num_sms:
            return dev.threads_per_block
        return dev.wide_block_threads

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

    # ---- estimates
    def _estimate(self, plan: KernelPlan, has_loop: bool) -> bool:
        dev = self.device
        group, ax, ph, R = plan.group, plan.ax, plan.phase, plan.forloop_range
        users = group.users()
        needed = set(plan.needed)
        out_nodes = {o for o, _ in plan.outputs}
        blocks = math.prod(plan.grid)
        smem = 128
        regs = 0.0
        loaded = 0
        unique = 0
        flops = 0
        ideal_flops = 0
        mma_flops = 0
        stage = 0
        loop_stage = 0  # bytes per stage of the inputs the for-loop iterates (tb-plan-pipeline's ring)
        weight_stage = 0  # the part of loop_stage read from `kn.weight` arguments
        unique_stage = 0.0
        unique_stage_iter = 0.0
        unique_dram = 0.0  # unique bytes, narrow-row input tiles weighted by narrow_row_penalty
        lifts_max = 0
        align_penalty = 0
        for n in plan.needed:
            node = group.nodes[n]
            eb = elem_bytes(node.dtype)
            t = plan.tiles[n]
            if n in plan.skipped:
                continue
            if node.kind == "input":
                imap, fdim = plan.imap_fdim(n)
                b = numel(t) * eb
                smem += _round16(b * (2 if fdim >= 0 and R > 1 else 1))
                loaded += blocks * b * (R if fdim >= 0 else 1)
                unique += numel(node.shape) * eb
                row = t[-1] * eb
                slow = dev.row_penalty(row) if t[-1] < node.shape[-1] else 1.0
                unique_dram += numel(node.shape) * eb * slow
                stage += b
                if fdim >= 0 and R > 1:
                    loop_stage += b
                    # the weight ring is counted only for tiles whose rows stream at full
                    # speed: rmsnorm bs8's 16-column W tiles with 6 stages took 23.6 µs on
                    # the H200 where the estimate with the ring said 17.8
                    weight_stage += b if node.weight and slow == 1.0 else 0
                # DRAM bytes in flight: a tile replicated along a grid axis comes from L2
                replication = math.prod(g for g, m in zip(plan.grid, imap) if g > 1 and m < 0)
                unique_stage += b / replication
                if fdim >= 0:
                    unique_stage_iter += b / replication
                continue
            reduces_loop = plan.loop_axis is not None and ax.reduce_axis.get(n) == plan.loop_axis
            if n in plan.rms:
                x = plan.rms[n]
                smem += _round16(numel(plan.tiles[x]) * 4) + _round16(numel(t) * eb)
            elif reduces_loop and node.kind == "matmul":
                smem += _round16(numel(t) * 4)
                regs += numel(t) / plan.threads
            elif reduces_loop:
                smem += _round16(numel(plan.tiles[node.args[0]]) * 4) + _round16(numel(t) * eb)
            else:
                fused = (
                    len(users[n]) == 1
                    and group.nodes[users[n][0]].kind in UNARY_KINDS
                    and users[n][0] in needed
                    and n not in out_nodes
                )
                if not fused:
                    smem += _round16(numel(t) * eb)
            if node.kind == "matmul":
                a, b = node.args
                ta, tb_ = plan.tiles[a], plan.tiles[b]
                m, k, nn = ta[-2], ta[-1], tb_[-1]
                times = R if ph[n] == "loop" or reduces_loop else 1
                flops += blocks * 2 * m * k * nn * times
                # tensor-core work: M padded to 16, N to 8, K to 16 (mma.sync m16n8k16)
                mma_flops += blocks * 2 * _pad(m, 16) * _pad(k, 16) * _pad(nn, 8) * times
                ideal_flops += 2 * numel(node.shape) * group.nodes[a].shape[-1]
                full_n = node.shape[-1]
                if nn % 16 and nn != full_n:
                    align_penalty += 1
        # lifted invariant values (pre values used after the loop or stored)
        lifted: set[int] = set()
        for n in plan.needed:
            if n in plan.skipped or group.nodes[n].kind == "input":
                continue
            if ph[n] == "post":
                lifted |= {a for a in group.nodes[n].args if ph[a] == "pre"}
        lifted |= {o for o in out_nodes if ph[o] != "post"}
        for n in lifted:
            smem += _round16(numel(plan.tiles[n]) * 4)
            if R > 1:
                lifts_max += 1
        for o, omap in plan.outputs:
            out_bytes = numel(tiling.output_dtensor_shape(plan.tiles[o], plan.store_grid, omap)) * elem_bytes(group.nodes[o].dtype)
            unique += out_bytes
            unique_dram += out_bytes
        summed = 0  # fp32 elements of the grid-summed tiles per block
        if plan.grid_sum:
            summed = sum(numel(plan.tiles[n]) for n in plan.needed if ax.reduce_axis.get(n) == plan.loop_axis)
            smem += _round16(summed * 4) + 16
        if smem > dev.smem_per_block:
            return False
        if regs > dev.max_accum_per_thread:
            return False
        if plan.loop_axis is None and has_loop and stage > dev.stage_budget:
            return False
        if blocks > 1 and loaded < blocks * dev.min_bytes_per_block:
            return False  # too little work per block: at least one 16-byte chunk per thread
        occ = min(
            dev.max_threads_per_sm // plan.threads,
            dev.max_blocks_per_sm,
            dev.smem_per_sm // (smem + 1024),
        )
        if occ < 1:
            return False
        waves = math.ceil(blocks / (dev.num_sms * occ))
        # wave quantisation: SMs with one block more than others finish last
        balance = blocks / (dev.num_sms * math.ceil(blocks / dev.num_sms))
        # Little's law: the bytes in flight (the pipeline stages in flight per resident
        # block: one, or tb-plan-pipeline's deeper ring for wide lone blocks) / latency
        # a ring of N stages keeps N - 1 tiles in flight and leaves 1 / (N - 1) of a double
        # buffer's load latency exposed per iteration
        ring_tiles = 1
        if weight_stage:
            ring_tiles = self._weight_stages(plan, weight_stage, loop_stage, smem) - 1
        elif self._is_wide_lone_block(plan):
            ring_tiles = self._lone_block_stages(plan, loop_stage, smem) - 1
        in_flight = min(blocks, dev.num_sms * occ) * (unique_stage_iter * ring_tiles if R > 1 else unique_stage)
        bandwidth = min(dev.hbm_bytes_per_us, in_flight / dev.mem_latency_us)
        iter_latency = dev.iter_latency_us / ring_tiles
        # MMA throughput needs several resident warps per SM to hide its latencies
        # (counted in 128-thread blocks)
        resident = min(occ, max(1.0, blocks / dev.num_sms)) * plan.threads / dev.threads_per_block
        full_rate = dev.register_chain_blocks_for_full_mma_rate if self.keeps_p_in_registers(plan) else dev.blocks_for_full_mma_rate
        hiding = min(1.0, resident / full_rate)
        roof = max(unique_dram / bandwidth, loaded / dev.l2_bytes_per_us, mma_flops / (dev.flops_per_us * hiding))
        cost = (
            dev.launch_us
            + roof / balance
            + waves * (R * iter_latency + dev.block_latency_us)
            + (waves * dev.unpipelined_split_penalty_us if R == 1 and plan.split > 1 else 0.0)
            + lifts_max * dev.max_lift_penalty_us
            # grid sum: every block's partials to L2 and back, then the last block's epilogue
            + (
                (2 * blocks * summed * 4) / dev.l2_bytes_per_us + dev.grid_sum_us + plan.split * dev.grid_sum_us_per_split
                if plan.grid_sum
                else 0.0
            )
        )
        plan.smem, plan.blocks, plan.loaded_bytes, plan.unique_bytes, plan.flops = smem, blocks, loaded, unique, flops
        plan.cost_us = round(cost, 3)
        kt = 0
        if plan.loop_axis is not None:
            kt = ax.extent[plan.loop_axis] // plan.split // R
        n_ops = len(plan.needed) - len(plan.skipped) + len(lifted) + len(plan.outputs)
        plan.balance = balance
        plan.redundancy = flops / ideal_flops if ideal_flops else 1.0
        per_sm = blocks / dev.num_sms * plan.threads / dev.threads_per_block
        plan.tiebreak = (
            -round(balance, 2),
            round(abs(per_sm - dev.blocks_for_full_mma_rate), 1),
            align_penalty,
            blocks,
            -kt if R > 1 else 0,
            n_ops,
        )
        return True

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


def combine_group(group: Group, ph: dict[int, str], frontier: Sequence[int], dims: Sequence[int], split: int) -> Group:
    """The second kernel of a split-K plan: sum the partials of every accumulator (strided
    `kn.reduction` over the dim they were concatenated along), then run the post-loop ops
    (and the loop-invariant ops they need, recomputed from the original inputs).  Partial j
    is the input with `ext = ("partial", j)`."""
    g2 = Group(records=group.records)
    mapping: dict[int, int] = {}
    for j, (f, d) in enumerate(zip(frontier, dims)):
        node = group.nodes[f]
        pshape = list(node.shape)
        pshape[d] *= split
        p = g2.add("input", pshape, node.dtype, ext=("partial", j), name=f"partial{j}")
        mapping[f] = g2.add("reduction", node.shape, node.dtype, (p,), {"dim": d, "size": node.shape[d]})

    def need(n: int) -> int:
        if n in mapping:
            return mapping[n]
        node = group.nodes[n]
        if node.kind == "input":
            mapping[n] = g2.add("input", node.shape, node.dtype, ext=node.ext, name=node.name)
        else:
            args = tuple(need(a) for a in node.args)
            mapping[n] = g2.add(node.kind, node.shape, node.dtype, args, node.props)
        return mapping[n]

    for node in group.nodes:
        if ph[node.idx] == "post":
            need(node.idx)
    g2.outputs = [need(o) for o in group.outputs]
    return g2


# ---------------------------------------------------------------------------------------
# Emission


def emit_kernel(plan: KernelPlan, ext_value: Callable[[Any], SSAValue]) -> kn.CustomizedOp:
    """Build the `kn.customized` op of `plan`; `ext_value` maps a group input's `ext` to the
    SSA value it reads.  Results follow `plan.outputs`."""
    group, ax, ph = plan.group, plan.ax, plan.phase
    R, dimx = plan.forloop_range, plan.dimx
    inputs = [n for n in plan.needed if group.nodes[n].kind == "input"]
    ext_vals = [ext_value(group.nodes[n].ext) for n in inputs]
    block = Block(arg_types=[v.type for v in ext_vals])
    ops: list[Operation] = []
    val: dict[int, SSAValue] = {}
    lifted: dict[int, SSAValue] = {}

    def add(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    def lift(n: int) -> SSAValue:
        if n not in lifted:
            lifted[n] = add(tb.ForloopAccumOp(val[n], "nored" if R == 1 else "max", dimx))
        return lifted[n]

    split_axis = next((i for i, a in enumerate(plan.grid_axes) if a == plan.loop_axis and plan.grid[i] > 1), -1)
    summed: dict[int, SSAValue] = {}
    rescale: dict[int, SSAValue] = {}  # online max node -> exp(old max - new max) of this iteration

    def after_loop(n: int) -> SSAValue:
        """`n` as the post-loop ops read it: grid-summed if it is a split accumulator."""
        if plan.grid_sum and ax.reduce_axis.get(n) == plan.loop_axis:
            if n not in summed:
                summed[n] = add(tb.GridSumOp(val[n], split_axis))
            return summed[n]
        return val[n] if ph[n] == "post" else lift(n)

    for arg, n, ev in zip(block.args, inputs, ext_vals):
        if ev.name_hint:
            arg.name_hint = ev.name_hint.lower()
        node = group.nodes[n]
        imap, fdim = plan.imap_fdim(n)
        tile = tiling.input_tile_shape(node.shape, plan.grid, imap, fdim, R)
        val[n] = add(tb.InputOp(arg, imap, fdim, tile))
    for n in plan.needed:
        node = group.nodes[n]
        if node.kind == "input" or n in plan.skipped:
            continue
        k = node.kind
        if n in plan.rms:
            val[n] = add(tb.ForloopAccumOp(val[plan.rms[n]], "red_ld_rms", dimx))
            continue
        online = plan.online
        if online is not None and n in online.maxima:
            d = node.props["dim"]
            running = tb.ReductionMaxOp(val[node.args[0]], d)
            ops.append(running)
            val[n] = running.max
            rescale[n] = add(tb.ExpOp(running.diff))  # exp(old max - new max)
            continue
        if online is not None and n in online.rescaled:
            r = rescale[online.rescaled[n]]
            x = val[node.args[0]]
            if k == "matmul":
                val[n] = add(tb.ForloopAccumOp(add(tb.MatmulOp(x, val[node.args[1]])), "nored_rescale", dimx, r))
            elif node.props["dim"] == len(node.shape) - 1:
                val[n] = add(tb.ForloopAccumOp(x, "red_ld_sum_rescale", dimx, r))
            else:
                val[n] = add(tb.ForloopAccumOp(add(tb.ReductionOp(x, node.props["dim"])), "nored_rescale", dimx, r))
            continue
        if plan.loop_axis is not None and ax.reduce_axis.get(n) == plan.loop_axis:
            if k == "matmul":
                mm = add(tb.MatmulOp(val[node.args[0]], val[node.args[1]]))
                val[n] = add(tb.ForloopAccumOp(mm, "nored", dimx))
                continue
            x = val[node.args[0]]
            d, size = node.props["dim"], node.props["size"]
            last = d == len(node.shape) - 1
            if k == "reduction_max":
                # each iteration's tile max, then the running max over the iterations
                val[n] = add(tb.ForloopAccumOp(add(tb.ReduceMaxOp(x, d)), "max", dimx))
            elif size == 1 and last:
                val[n] = add(tb.ForloopAccumOp(x, "red_ld_sum", dimx))
            elif size == 1:
                val[n] = add(tb.ForloopAccumOp(add(tb.ReductionOp(x, d)), "nored", dimx))
            elif last:
                val[n] = add(tb.ForloopAccumOp(x, "redtox_ld_sum", dimx))
            else:
                val[n] = add(tb.ForloopAccumOp(add(tb.ReductionToDimxOp(x, d, dimx)), "nored", dimx))
            continue
        if ph[n] == "post":
            xs = [after_loop(a) for a in node.args]
        else:
            xs = [val[a] for a in node.args]
        if k in TB_UNARY:
            val[n] = add(TB_UNARY[k](xs[0]))
        elif k == "clamp":
            val[n] = add(tb.ClampOp(xs[0], node.props["min"], node.props["max"]))
        elif k == "mul_scalar":
            val[n] = add(tb.MulScalarOp(xs[0], node.props["scalar"]))
        elif k in TB_BINARY:
            val[n] = add(TB_BINARY[k](xs[0], xs[1]))
        elif k == "matmul":
            val[n] = add(tb.MatmulOp(xs[0], xs[1]))
        elif k == "reduction":
            d, size = node.props["dim"], node.props["size"]
            val[n] = add(tb.ReductionOp(xs[0], d) if size == 1 else tb.ReductionToDimxOp(xs[0], d, dimx))
        elif k == "reduction_max":
            val[n] = add(tb.ReduceMaxOp(xs[0], node.props["dim"]))
        elif k == "rms_norm":
            val[n] = add(tb.RmsNormOp(xs[0]))
        else:  # pragma: no cover - fusible_op() admits nothing else
            raise AssertionError(f"cannot place kn.{k} in a block graph")
    out_types = []
    for o, omap in plan.outputs:
        v = after_loop(o)
        ops.append(tb.OutputOp(v, omap))
        shape = tiling.output_dtensor_shape(kn.shape_of(v), plan.store_grid, omap)
        out_types.append(TensorType(group.nodes[o].dtype, shape))
    block.add_ops(ops)
    op = kn.CustomizedOp(
        ext_vals,
        out_types,
        block,
        grid_dim=plan.grid,
        block_dim=(plan.threads, 1, 1),
        forloop_range=R,
        reduction_dimx=dimx,
    )
    op.attributes[TEMPLATE_ATTR] = StringAttr(plan.template)
    op.attributes[SMEM_ATTR] = IntegerAttr(plan.smem, i64)
    op.attributes[COST_ATTR] = FloatAttr(plan.cost_us, f64)
    return op
