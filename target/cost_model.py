"""The planner's device model: the rates, latencies and calibrations kn-partition's cost model
(`passes/conversion/plan_cost.py`) assumes, each with where it was measured, and the ring
depths tb-plan-pipeline builds (which the estimate counts).

The hardware limits these build on (SMs, shared memory, threads and blocks per SM, L2) are
in `device.py`; everything here is a tuning choice or a fitted rate of our own kernels, not a
hardware fact.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirage_xdsl.target.device import SM90

LONE_BLOCK_MAX_STAGES = 4
"""tb-plan-pipeline's ring depth for wide lone blocks (`plan_pipeline.is_wide_lone_block`): H200,
gated_mlp on 128 blocks of 512 threads, 2 stages 25.1-25.4 µs, 4 stages 19.9-20.1 (2026-11-22).
It caps lone blocks that stream `kn.weight` too: the suite's LoRA r16 (128 blocks of 512
threads, 24 KiB per stage) took 15.5 / 14.5 / 15.8 / 16.0 µs at 3 / 4 / 5 / 6 stages (2026-11-28)."""
WEIGHT_MAX_STAGES = 8
"""tb-plan-pipeline's deepest ring of a weight-streaming graph that is not a wide lone block; it
takes the deepest depth that keeps the grid in one wave (`plan_pipeline.choose_weight_stages`,
whose docstring has the H200 sweep it rests on)."""
WEIGHT_PREFETCH_MAX_STAGES = 6
"""The deepest ring kn-partition's estimate counts for a weight-streaming plan
(`plan_pipeline.prefetch_stages`)."""
WEIGHT_PREFETCH_BYTES = 12 * 2**20
"""The ring-prologue bytes (loaded before the PDL wait) the estimate credits a weight-streaming
grid with: about 3 µs of HBM at 4 TB/s, the time from the previous grid's last loop end to this grid's
release in a per-block `%globaltimer` timeline of back-to-back launches on an H200 (2026-11-25)."""


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
    `lone-block-max-stages`, which mirage-transpile (its tuning point) also forwards to tb-plan-pipeline."""
    weight_prefetch_stages: int = WEIGHT_PREFETCH_MAX_STAGES
    weight_prefetch_bytes: int = WEIGHT_PREFETCH_BYTES
    """The ring the estimate counts for a plan whose for-loop streams `kn.weight` tiles
    (`plan_pipeline.prefetch_stages`: the fewest stages, at most `weight_prefetch_stages`, whose
    prologues prefetch `weight_prefetch_bytes`; `stages - 1` tiles in flight, that share of a
    double buffer's exposed load latency per iteration), as it counts the lone blocks' ring.
    tb-plan-pipeline builds a deeper ring where one wave allows; the estimate leaves those
    stages out (see `prefetch_stages`)."""
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
    hopper_attention_flops_per_us: float = 4.5e8
    """fp16/bf16 MMA rate of our sm_90a flash-attention kernel (`cute.hopper_attention`, both
    products) with 64-key tiles when its blocks fill the SMs: 8 heads x 4096 tokens x head dim
    128 on an H200 (2026-11-26) ran at 456 TFLOP/s (fp16, two blocks of one consumer warpgroup
    per SM)."""
    hopper_attention_wide_flops_per_us: float = 5.3e8
    """The same with 128-key tiles and two consumers per block: 525-550 TFLOP/s on that
    problem, 560-573 at 8192 tokens (H200, fp16, 2026-11-27)."""
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
    2048-block plan it then beat on the estimate took 56.  An op of a for-loop's body walks
    its tile once per iteration (`CostModel._smem_element_ops`): the cross-entropy over
    [1024, 32768] fp16 chose 4-row blocks at 2 per SM without that (130.8 µs on an H200,
    2026-11-27) where the one-row blocks it now picks took 81.1."""
    mma_latency_us: float = 0.014
    """Latency of one dependent `mma.sync.m16n8k16` (f16 operands, f32 accumulators) in a warp's
    chain, the cost of a one-pass block's MMAs (`CostModel._k_chain_steps`): 25 SM cycles per
    step in a chain of 256-4096 on one warp of an H200, 14.2 ns per step at the 1747 MHz the SM
    ran during a 65536-step chain (2026-11-28, experiments/mma_latency.py).  With it the LoRA
    example's default became 128 blocks of 32 columns (3.4 -> 3.2 µs) and Mirage's saved mha_bs8
    graphs 0 / 1 / 32 / 33 left one-per-SM Q K^T blocks of 133 KB for 4096 blocks of 35 KB
    (307 -> 198, 350 -> 239, 263 -> 154, 237 -> 129 µs)."""
    launch_us: float = 1.5  # per kernel, incl. the drain/ramp between dependent kernels
    iter_latency_us: float = 0.25  # exposed per for-loop iteration (double-buffered loads)
    mem_latency_us: float = 0.5  # global-load latency under load (Little's law)
    block_latency_us: float = 1.0  # first load + epilogue store of a block
    max_lift_penalty_us: float = 0.5  # a `max` accumulator carrying an invariant value
    k_tiles: tuple[int, ...] = (256, 128, 64)
    stage_budget: int = 64 * 1024  # bytes one block may load at once without a for-loop
    min_bytes_per_block: int = 128 * 16  # each thread of a (non-single) block loads >= 16 B
    max_split: int = 256
    """Most splits of a loop axis (split-K, flash decoding's key chunks): 64 left grouped-query
    decode over 32768 keys with 32 query rows per head 128 blocks of 512 keys, fewer than the
    SMs; with 256 allowed it takes 512 blocks of 128 keys, 25.3 -> 23.4 µs on an H200
    (2026-11-26), and no other suite program or example candidate changes its plan."""
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
    against 30.4 us); `auto_online_softmax` keeps the online plans that won."""
    auto_online_softmax: bool = True
    """Without `online_softmax`, still plan a group whose loop reads a max over the loop axis
    (attention's `exp(s - max)`, cross-entropy's log-sum-exp) as an online softmax, keeping
    the plans whose grid fills the SMs (balance >= `min_balance`, no recomputed matmul) among:
    those the flash-attention register chain lowers (`keeps_p_in_registers`, 4 warps of 16 or
    32 query rows, `register_chain.online_chain_fits`): prefill attention becomes one
    FlashAttention-2 kernel (Dao 2023); matmul-free ones (one pass over rows too long for a
    tile); and split ones whose partials are single rows (flash decoding, decode attention
    with one query per KV head: kernel 1 per chunk of keys, a combine rescaling by the partial
    maxima, `split_combine.py`).  On an H200 (2026-11-26) the split made decode attention over
    32 heads of 1024 keys 20.5 -> 11.3 µs and of 32768 keys 187.5 -> 171.8."""
    online_chain_flops_per_us: float = 4.5e8
    online_chain_smem_bytes_per_us: float = 5.4e7
    """An online chain's compute time is its MMA flops at `online_chain_flops_per_us` (over the
    MMA hiding of 2-block chains) plus its shared-memory operand reads
    (`online_plan.online_chain_smem_bytes`) at `online_chain_smem_bytes_per_us`: a warp of
    16 rows reads every key and value fragment for 16 rows only, and those reads, not the
    MMAs, separate its tilings.  Both fitted to the prefill suite on an H200 (2026-11-26,
    8 heads, d = 128, fp16; the chain is the prefill kernel of targets other than sm_90): 4096 tokens,
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

    streamed_row_penalties: tuple[tuple[int, float], ...] = ((64, 1.45), (128, 1.2))
    """(run bytes, penalty), shortest first: a tensor larger than the L2 (`SM90.l2_bytes`),
    streamed once, whose tiles cut its contiguous rows into runs of at most that many bytes
    streams this much slower than with runs of 256 B or more; the neighbouring runs of a DRAM
    page are read by other blocks at other times and the L2 no longer holds them (H200,
    2026-11-26, a sum over dim 1 of [16, 1024, 4096] fp32 with the grid cutting the 4096
    columns: 64-byte runs 90-100 µs, 128-byte 69-84, 256-512-byte 67-68; over dim 0 of the
    same shape in fp16, 64-byte runs 68.3 µs against 42.4 for 2048-byte ones).  Measured on
    matmul-free plans and charged to them only (a matmul's weight stream pays the milder
    `weight_run_penalty`).  Tensors that fit the L2 keep `row_penalty` alone."""

    weight_run_bytes: int = 64
    weight_run_penalty: float = 1.1
    """A matmul's `kn.weight` operand whose tiles cut its rows into contiguous runs of at most
    `weight_run_bytes` streams this much slower than with longer runs (on top of
    `row_penalty`): weights are read once per call, so the neighbouring runs of a DRAM page
    come back from DRAM, not the L2.  H200, gated_mlp ([4096, 4096] fp16 W1, W2; 2026-11-26):
    split-K grid-sum plans of 256 blocks with 32-column W tiles (64-byte runs) 19.2 µs, with
    64-column tiles 17.4 (1.10x).  With this penalty the defaults moved to 128-byte runs
    (H200, 2026-11-26, before / after in one process): gated_mlp 18.1 -> 16.8 µs, GELU MLP
    at batch 1 53.2 -> 45.6, SwiGLU MLP at batch 16 79.0 -> 65.4, a decoder layer's
    per-kernel graph 130.3 -> 118.5 and its megakernel 148.1 -> 128.8."""

    def row_penalty(self, row_bytes: int) -> float:
        """How much slower than wide rows a tile with `row_bytes`-byte rows streams."""
        if row_bytes <= self.narrow_row_bytes:
            return self.narrow_row_penalty
        if row_bytes <= self.short_row_bytes:
            return self.short_row_penalty
        return self.odd_row_penalty if row_bytes & (row_bytes - 1) else 1.0

    def streamed_row_penalty(self, row_bytes: int, tensor_bytes: int) -> float:
        """`row_penalty`, raised to `streamed_row_penalties` for a tensor of `tensor_bytes`
        larger than the L2 read in contiguous runs of `row_bytes` (0: not such a stream)."""
        penalty = self.row_penalty(row_bytes)
        if tensor_bytes > SM90.l2_bytes:
            for limit, streamed in self.streamed_row_penalties:
                if row_bytes <= limit:
                    return max(penalty, streamed)
        return penalty
