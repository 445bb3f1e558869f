"""The planner's cost model: the device it assumes (`DeviceModel`) and the estimated time
and resources of one block graph (`CostModel.estimate`).

A configuration must fit shared memory (inputs double-buffered when iterated, fp32
accumulators, passes/README.md; the sum of the tile sizes, which tb-plan-smem can always
reach; `kn-partition` double-checks estimates above 40% of the limit with it), keep the
register accumulators of matmuls within 192 fp32 per thread, and -- without a loop -- load
at most `stage_budget` bytes per block.  The estimated time of a kernel is
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
fewer blocks, longer loop tiles, fewer ops (`KernelPlan.tiebreak`).

The hardware limits (SMs, shared memory, threads and blocks per SM) come from
`target/device.py`; the rates and latencies below are this model's own, fitted to our kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mirage_xdsl.dialects import tiling
from mirage_xdsl.passes.conversion.kernel_plan import KernelPlan
from mirage_xdsl.passes.conversion.online_plan import online_chain_rows, online_chain_smem_bytes
from mirage_xdsl.passes.conversion.plan_group import BINARY_KINDS, UNARY_KINDS, elem_bytes, is_attention, numel
from mirage_xdsl.passes.conversion.register_chain import ONLINE_CHAIN_WARPS, chain_shape_fits, chain_thr_layout
from mirage_xdsl.passes.cute.row_chains import MAX_TRIPS as ROW_CHAIN_MAX_ELEMENTS
from mirage_xdsl.passes.tb.plan_pipeline import (
    LONE_BLOCK_MAX_STAGES,
    WEIGHT_MAX_STAGES,
    WEIGHT_PREFETCH_BYTES,
    choose_stages,
    choose_weight_stages,
    is_wide_lone_block,
)
from mirage_xdsl.target import SM90


def _pad(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


def _round16(nbytes: int) -> int:
    return (nbytes + 15) // 16 * 16


ROW_CHAIN_KINDS = (*UNARY_KINDS, *BINARY_KINDS, "reduction", "reduction_max", "rms_norm")
"""The kn ops cute-row-chains can keep in registers: elementwise ops, whole-row sums and
maxima (passes/cute/row_chains.py), and rms_norm over the last dim, which convert-tb-to-cute
lowers to those."""

ROW_CHAIN_VECTOR_BYTES = 16
"""Bytes each thread of a row chain loads at once (`mx::load_row`: one 16-byte vector)."""

ROW_CHAIN_BYTES_PER_THREAD = 32
"""Bytes of streamed rows (inputs read once, not broadcast rows such as a norm's weight) each
thread of a row chain loads, split among those rows: the loads in flight per SM are what
bounds these kernels, and the registers they take bound the blocks per SM.  H200,
2026-11-26, 4096 x 4096 rows, 8 / 16 elements per thread (µs): softmax fp16 27.1 / 23.8,
layernorm fp16 30.6 / 27.5, rmsnorm fp16 22.6 / 20.3 (one streamed row: 32 bytes wins);
add + rmsnorm fp16 35.9 / 42.1 (two streamed rows: 16 bytes each); layernorm fp32 53.6 /
56.1 (8 elements); softmax fp32 with 4 elements (1024 threads) 61.7 where 8 took 41.3."""


def row_chain_threads(plan: KernelPlan, max_threads: int, num_sms: int) -> int | None:
    """The threads per block with which cute-row-chains will keep all of `plan`'s work in
    registers, or None if it will not (`row_chain_length`).  Each thread then owns
    `C / threads` consecutive elements: at least one 16-byte vector,
    `ROW_CHAIN_BYTES_PER_THREAD` of streamed rows when the grid has a block per SM, more (at
    most `ROW_CHAIN_MAX_ELEMENTS`) when a row needs more than `max_threads` threads, fewer
    when the block would have under 128 threads."""
    row = row_chain_length(plan)
    if row is None:
        return None
    length, elem = row
    group = plan.group
    streamed = sum(
        1
        for n in plan.needed
        if group.nodes[n].kind == "input" and plan.tiles[n][-1] == length and numel(group.nodes[n].shape) > length
    )
    # a grid that leaves SMs idle gains from more threads per row, not more bytes per thread
    # (nTrans: 8 rows, 512 threads each)
    wanted = ROW_CHAIN_BYTES_PER_THREAD // max(1, streamed) if math.prod(plan.grid) >= num_sms else 0
    per_thread = max(ROW_CHAIN_VECTOR_BYTES, wanted) // elem
    while length // per_thread > max_threads and per_thread < ROW_CHAIN_MAX_ELEMENTS:
        per_thread *= 2
    while length // per_thread < 128 and per_thread > 1:
        per_thread //= 2
    threads = length // per_thread
    if length % per_thread or threads % 32 or threads > max_threads or per_thread > ROW_CHAIN_MAX_ELEMENTS:
        return None
    return threads


def row_chain_length(plan: KernelPlan) -> tuple[int, int] | None:
    """(C, the smallest element size in bytes) when cute-row-chains will keep all of `plan`'s
    work in registers, else None: a loop-free, unsplit plan whose computed values are all
    tiles of one row ([1, ..., 1, C] or a per-row scalar) made by elementwise ops and
    sums/maxima over the whole row (the pass's rules, passes/cute/row_chains.py, predicted on
    the plan)."""
    if plan.split > 1 or plan.forloop_range > 1:
        return None
    group = plan.group
    computed = [n for n in plan.needed if n not in plan.skipped and group.nodes[n].kind != "input"]
    length, smallest = 0, 16
    for n in computed:
        node = group.nodes[n]
        if node.kind not in ROW_CHAIN_KINDS:
            return None
        rows = [plan.tiles[n]]
        if node.kind in ("reduction", "reduction_max"):
            if node.props["dim"] != len(node.shape) - 1 or node.props.get("size", 1) != 1:
                return None
            rows.append(plan.tiles[node.args[0]])
        for t in rows:
            if any(d != 1 for d in t[:-1]) or (t[-1] > 1 and length and t[-1] != length):
                return None
            if t[-1] > 1:
                length = t[-1]
        smallest = min(smallest, elem_bytes(node.dtype))
    return (length, smallest) if length else None


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
    max_threads_per_sm: int = SM90.max_threads_per_sm
    max_threads_per_block: int = SM90.max_threads_per_block
    max_blocks_per_sm: int = SM90.max_blocks_per_sm
    max_blocks: int = 4096  # Mirage's MAX_NUM_THREADBLOCKS_PER_KERNEL
    max_accum_per_thread: int = 192  # fp32 register accumulator elements (mirage-notes 3.5)
    hbm_bytes_per_us: float = 4.0e6  # ~4 TB/s achievable
    l2_bytes_per_us: float = 1.0e7
    flops_per_us: float = 2.0e8  # fp16 mma.sync rate our kernels reach (a guess well below the ~660 TFLOP/s peak)
    library_gemm_flops_per_us: float = 6.0e8
    """fp16 rate of a library GEMM (cuBLAS through CuPy) on large shapes: torch.bmm reached 740
    TFLOP/s on 4 x 4096^3 on an H100 (2026-11-25), about 600 at smaller sizes."""
    library_call_us: float = 50.0
    """Fixed cost of one library GEMM in a compiled graph: CuPy's cuBLAS call cannot be captured
    into a CUDA graph (runtime/executable.py `CAPTURE_UNSAFE_OPS`), so the graph runs as
    captured segments with an eager host launch between them.  On an H200 (2026-11-26) a GELU
    MLP at batch 1 whose down projection was such a call took 126 µs against 58 for torch's
    CUDA graph of the same two GEMMs."""
    hopper_gemm_flops_per_us: float = 5.0e8
    """fp16/bf16 rate of our sm_90a GEMM (`cute.hopper_gemm`): 590-690 TFLOP/s for square GEMMs
    of 2048-16384 and 300 at 1024 on an H200 (2026-11-26, mirage-bench --contractions)."""
    hopper_launch_us: float = 4.0
    """Launch and tail of that persistent-grid kernel inside a captured CUDA graph."""
    library_bf16_traffic: float = 4.0
    """bf16 operands reach the library GEMM through fp32 copies (CuPy has no bfloat16;
    runtime/library_ops.py): every operand byte is read, written and read again as fp32,
    about 4x the bytes of the fp16 call."""
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
    smem_ops_per_warp_ns: float = 1.25
    """Element-ops per ns per resident warp of an SM for elementwise and reduction ops that
    walk shared-memory tiles (each thread loads, computes and stores one element after
    another, latency-bound, and waits at a barrier after each op).  Fitted to two matmul-free
    kernels over 4096 x 4096 fp16 on an H200 (2026-11-26) against this model without the term:
    a layernorm with 2-row tiles at 128 threads (8 warps per SM, 7 ops) 133 µs measured vs
    38.8 estimated, a softmax with 1-row tiles at 128 threads (36 warps, 5 ops) 40.8 vs 27.5.
    Row chains (`row_chain_threads`) keep their values in registers and pay none of it, nor
    do split-K combine kernels (small tiles of partials: with the term, gqa's combine moved to
    another grid and gqa took 8.5 / 32.5 µs at batch 1 / 8 against 8.2 / 30.6 without it,
    H200, 2026-11-26).  Grids of at most one block per SM pay it too: a row sum over 16 x
    1024 x 4096 fp16 planned as 128 blocks walking 32 loop tiles took 106 µs where the
    2048-block plan it then beat on the estimate took 56."""
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
    """Also plan split-K kernels that combine their partials themselves (`tb.grid_sum`: the
    last block of each split group sums them) instead of in a second kernel."""
    online_softmax: bool = False
    """Plan a max over the loop axis that the loop reads (`exp(x - max)`) as a running max
    with rescaled accumulators (`online_softmax`) -- one kernel instead of a partition.  Off
    by default: without a split of the loop axis, its one block per row group lost to the
    partitioned plan on an H200 (stable decode attention at mha's shapes, 2026-11-26: 77.8
    against 30.4 us), and a split needs a combine that rescales by the partial maxima."""
    auto_online_softmax: bool = True
    """Without `online_softmax`, still plan a group whose loop reads a max over the loop axis
    (attention's `exp(s - max)`) as an online softmax when nothing else can fuse it, keeping
    only the plans the flash-attention register chain lowers (`keeps_p_in_registers`, 4
    warps of 16 or 32 query rows, `register_chain.online_chain_fits`) whose unsplit grid fills the
    SMs (balance >= `min_balance`, no recomputed matmul): the one condition under which the
    loop axis needs no split, which online softmax cannot do (decode attention keeps its
    partitioned flash-decoding plans).  Prefill attention becomes one FlashAttention-2
    kernel (Dao 2023)."""
    online_chain_flops_per_us: float = 4.5e8
    online_chain_smem_bytes_per_us: float = 5.4e7
    """An online chain's compute time is its MMA flops at `online_chain_flops_per_us` (over the
    MMA hiding of 2-block chains) plus its shared-memory operand reads
    (`online_plan.online_chain_smem_bytes`) at `online_chain_smem_bytes_per_us`: a warp of
    16 rows reads every key and value fragment for 16 rows only, and those reads, not the
    MMAs, separate its tilings.  Both fitted to the prefill suite on an H200 (2026-11-26,
    8 heads, d = 128, fp16, benchmarks/results/prefill-h200-2026-11-26.md): 4096 tokens,
    64 rows x 64 keys 286 us, 128 x 32 256 us, 64 x 32 301 us (estimates 285 / 258 / 328);
    1024 tokens, 64 x 64 28.8 us, 64 x 32 34.8 (estimates 32 / 44)."""
    online_k_tiles: tuple[int, ...] = (64, 32)
    """Key tiles (loop tiles) of online-softmax plans instead of `k_tiles`: the scores of a
    tile stay in registers (`register_chain.ONLINE_CHAIN_MAX_REGS`), so 32-row warps take
    32 keys per iteration and 16-row warps 64, as FlashAttention-2's head-dim-128 kernels."""
    online_rowwise_k_tiles: tuple[int, ...] = (4096, 2048, 1024, 512, 256)
    """Loop tiles of matmul-free online-softmax plans (a running max over rows too long for
    one tile: cross-entropy's 32768-wide logits): their tiles live in shared memory, not in
    MMA registers, so they take tiles as wide as `k_tiles` allows and more -- each iteration
    pays `iter_latency_us`, and 32 KiB-wide rows in 64-element tiles would pay it 512 times."""
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


class CostModel:
    """Estimates of one `KernelPlan` on a `DeviceModel` (see the module docstring)."""

    def __init__(self, device: DeviceModel):
        self.device = device

    def block_threads(self, plan: KernelPlan) -> int:
        """Threads per block: Mirage's 128; for matmul-free plans whose work is one register
        row chain (`row_chain_threads`), the thread count that chain needs; else up to
        `wide_block_threads` for matmul-free plans whose grid leaves most SMs idle (nTrans: 8
        rows, one block each), so each thread of their elementwise/reduction phases handles
        fewer elements (the phases are latency-bound: each thread's share is a chain of
        shared-memory loads)."""
        dev = self.device
        if online_chain_rows(plan):
            return 32 * ONLINE_CHAIN_WARPS
        if any(plan.group.nodes[n].kind == "matmul" for n in plan.needed):
            return dev.threads_per_block
        chain = row_chain_threads(plan, dev.max_threads_per_block, dev.num_sms)
        if chain is not None:
            return chain
        if math.prod(plan.grid) * 4 > dev.num_sms:
            return dev.threads_per_block
        return dev.wide_block_threads

    def keeps_p_in_registers(self, plan: KernelPlan) -> bool:
        """Whether convert-tb-to-cute will keep this attention plan's P in registers
        (`cute.mma_chain`, predicted before the lowering sees the threadblock graph: a warp row
        per 16 query rows and whole k16 steps of keys per warp, register_chain.chain_thr_layout)
        with at most `register_chain_max_rows` query rows per block, the tiles the 2-block
        rule was measured on; taller chains keep the 4-block rule."""
        if not is_attention(plan.group):
            return False
        if plan.online is not None:
            return online_chain_rows(plan) > 0 and plan.threads == self.block_threads(plan)
        matmuls = [n for n in plan.needed if plan.group.nodes[n].kind == "matmul" and n not in plan.skipped]
        if not matmuls:
            return False
        rows, keys = plan.tiles[matmuls[0]][-2:]
        warps = self.block_threads(plan) // 32
        fits = chain_shape_fits(rows, keys, chain_thr_layout(rows, warps), warps)
        return fits and rows <= self.device.register_chain_max_rows

    @staticmethod
    def _smem_element_ops(plan: KernelPlan) -> int:
        """Elements one block's elementwise and reduction ops walk in shared memory (a
        reduction walks its input tile; skipped and input nodes walk nothing)."""
        group = plan.group
        total = 0
        for n in plan.needed:
            node = group.nodes[n]
            if n in plan.skipped or node.kind in ("input", "matmul"):
                continue
            walked = plan.tiles[node.args[0]] if node.kind in ("reduction", "reduction_max") else plan.tiles[n]
            total += numel(walked)
        return total

    def is_wide_lone_block(self, plan: KernelPlan) -> bool:
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
        lone = dev.lone_block_stages if self.is_wide_lone_block(plan) else 2
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

    def estimate(self, plan: KernelPlan, has_loop: bool) -> bool:
        """Whether `plan` fits the device (shared memory, register accumulators, the
        no-loop stage budget, 16 bytes per thread, one resident block); if so, write its
        estimates into it: `smem` (bytes), `blocks`, `loaded_bytes`, `unique_bytes`, `flops`,
        `cost_us` (the module docstring's formula, µs), `balance`, `redundancy`, `tiebreak`.
        `has_loop`: whether some loop axis of the group is legal (a loop-free plan of such a
        group must then stay within `stage_budget`)."""
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
        online_chain = plan.online is not None and self.keeps_p_in_registers(plan)
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
            if online_chain and (ph[n] == "loop" or reduces_loop):
                # a flash register chain: scores, maxima, P and the accumulators stay in
                # registers through the loop (tb-schedule's tb.in_registers / tb.accum_in_reg)
                if node.kind == "matmul":
                    a, b = node.args
                    m, k, nn = plan.tiles[a][-2], plan.tiles[a][-1], plan.tiles[b][-1]
                    flops += blocks * 2 * m * k * nn * R
                    mma_flops += blocks * 2 * _pad(m, 16) * _pad(k, 16) * _pad(nn, 8) * R
                    ideal_flops += 2 * numel(node.shape) * group.nodes[a].shape[-1]
                continue
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
        elif self.is_wide_lone_block(plan):
            ring_tiles = self._lone_block_stages(plan, loop_stage, smem) - 1
        in_flight = min(blocks, dev.num_sms * occ) * (unique_stage_iter * ring_tiles if R > 1 else unique_stage)
        bandwidth = min(dev.hbm_bytes_per_us, in_flight / dev.mem_latency_us)
        iter_latency = dev.iter_latency_us / ring_tiles
        # MMA throughput needs several resident warps per SM to hide its latencies
        # (counted in 128-thread blocks)
        resident = min(occ, max(1.0, blocks / dev.num_sms)) * plan.threads / dev.threads_per_block
        full_rate = dev.register_chain_blocks_for_full_mma_rate if self.keeps_p_in_registers(plan) else dev.blocks_for_full_mma_rate
        hiding = min(1.0, resident / full_rate)
        mma_us = mma_flops / (dev.flops_per_us * hiding)
        if online_chain:
            mma_us = mma_flops / (dev.online_chain_flops_per_us * hiding)
            mma_us += online_chain_smem_bytes(plan) / dev.online_chain_smem_bytes_per_us
        roof = max(unique_dram / bandwidth, loaded / dev.l2_bytes_per_us, mma_us)
        passes_us = 0.0
        # a row chain's block is one load, shuffles and one store: the other resident blocks
        # of its SM hide its latency, wave after wave (H200, 2026-11-26: layernorm over 4096 x
        # 4096 fp16, 4096 one-row blocks, 4 per SM: 30.8 µs measured, 38.8 estimated with a
        # block latency per wave)
        chained = not mma_flops and row_chain_threads(plan, dev.max_threads_per_block, dev.num_sms) is not None
        combine = any(n.kind == "input" and isinstance(n.ext, tuple) and n.ext[:1] == ("partial",) for n in group.nodes)
        if not mma_flops and not combine and not chained:
            warps = min(occ, max(1.0, blocks / dev.num_sms)) * plan.threads / 32
            passes_us = self._smem_element_ops(plan) * blocks / dev.num_sms / (warps * dev.smem_ops_per_warp_ns * 1e3)
        cost = (
            dev.launch_us
            + roof / balance
            + passes_us
            + (R * iter_latency + dev.block_latency_us) * (1 + (waves - 1) / occ if chained else waves)
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
            -self._shortest_input_row(plan) if unique > SM90.l2_bytes else 0,
            -kt if R > 1 else 0,
            n_ops,
        )
        return True

    @staticmethod
    def _shortest_input_row(plan: KernelPlan) -> int:
        """Bytes of the shortest contiguous run of any input tile (its last dim when that dim
        is cut, else the whole tensor row): among plans the estimate cannot tell apart, longer
        runs stream better from DRAM (a sum over dim 0 of [16, 1024, 4096] tied 32-column
        tiles, 64-byte runs, with 1024-column ones: 68.3 / 42.4 µs on an H200, 2026-11-26).
        The tie-break asks for it only when the group's bytes exceed the L2 (`SM90.l2_bytes`):
        below that, tiles are shaped by the other criteria (a megakernel's per-op kernels keep
        the column tiles whose consumers read one producer tile each)."""
        runs = [
            plan.tiles[n][-1] * elem_bytes(plan.group.nodes[n].dtype)
            for n in plan.needed
            if plan.group.nodes[n].kind == "input" and n not in plan.skipped and plan.tiles[n]
        ]
        return min(runs, default=0)
