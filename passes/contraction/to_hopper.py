"""`convert-contraction-to-hopper`: every `contraction.contract` -> one `cute.hopper_gemm`.

    mirage-opt einsum.mlir -p 'convert-contraction-to-hopper{group-m=-1 stages=0 tile-n=0 epilogue=tma_store}'

The sm_90a path for large contractions (issue #31 item 3): the contraction is viewed as a
batched GEMM over its strided operands (`gemm_view`), and this pass decides the kernel's
schedule and writes it as attributes of `cute.hopper_gemm` (dialects/cute/hopper_gemm.py),
which the CUDA printer only prints:

- tile: BM = 128 (two consumer warpgroups of m64 wgmma each; 64 and one consumer when
  m <= 64), BN one of wgmma's N extents 256, 128, 64 (`choose_tile_n`: the least padded
  work over the persistent grid's rounds, the widest on ties; 192 on request, `tile-n`), BK = 64 (one 128-byte
  swizzle row); a skinny GEMM (64 < m <= `SKINNY_ROWS`, weight streaming) takes the BM,
  BN and K split whose busiest block moves the fewest bytes (`skinny_tile`);
- schedule: ping-pong (each consumer takes whole 128 x BN tiles in turn, BN <= 128, so one
  consumer's epilogue overlaps the other's mainloop) when the tiles outnumber the SMs and
  each has 16-32 k-tiles (`wants_pingpong`), else cooperative (the two consumers share each
  tile);
- split-K (skinny GEMMs whose tiles alone leave SMs idle, e.g. a down projection of 32
  tiles): S units per tile add fp32 partial tiles through the function's workspace
  (appended to `kn.workspace_size`, offset in `scratch_offset`) and per-tile arrival
  counters; the tile's last unit runs the epilogue;
- stream-K, on request only (option `stream-k=1`): the tiles x k-tiles iterations cut into one
  equal contiguous range per SM; the blocks sharing a tile add partials like split-K units
  (`stream_k` slabs per tile, `stream_slabs`).  Correct, but slower than the tiled sweeps on
  the skinny GEMMs it was built for (H200, 2026-11-27, TFLOP/s: an MLP's 128 x 12288 x 4096
  first projection 403 tiled on 96 SMs vs 318 streamed over 132, its down projection 377 vs
  300, 256 x 4096 x 4096 445 vs 313), most likely (not measured) because its blocks read W
  at 132 different k offsets at once where the tiled sweep's blocks all read the same k-tile
  rows;
- stages: the deepest ring of (BM + BN) x BK stage buffers that fits the 227 KiB opt-in
  shared memory of sm_90 (CUDA C++ Programming Guide, "Technical Specifications per Compute
  Capability"), at most `MAX_STAGES` (`SKINNY_MAX_STAGES` for a skinny GEMM);
- grid: min(tiles, SMs) persistent blocks (132 SMs: H100 SXM / H200 datasheets);
- group_m (the L2 rasterisation, seed 004 Task 4b's L2 blocking applied to the block
  order): the power of two g <= the m-tile count minimising the bytes of the operand panels
  one wave of `grid` tiles touches, g A panels (BM x K) plus ceil(grid / g) B panels (K x BN);
  group_m = 1 is the plain row-major block order;
- ELWISE_MUL (seed 004's `LastType`): the factor D (the result's type and layout) is the
  GEMM's third operand; every consumer multiplies its accumulators by D's elements (loaded
  from global memory, fp32 math) before any of the stores below;
- epilogue: `tma_store` (a 64 x BN staging tile per consumer written in registers' order
  and stored by TMA, asynchronously, while the next tile's mainloop runs; it costs one
  ring stage of shared memory) when n and C's strides are multiples of 8 elements (16-byte
  TMA strides and rows), `store16` (16-byte direct stores) under ping-pong with that
  alignment, else `store4` (4-byte stores from the accumulators); option `epilogue=`
  overrides it.

Options override the decisions: `group-m` (>= 1), `stages` (>= 2), `tile-n` (64/128/256),
`epilogue` (store4 / store16 / tma_store), `split-k` (1: none; S: S units per tile),
`pingpong=1` (the two consumers take whole 128 x BN tiles in turn, BN <= 128, so one's
epilogue overlaps the other's mainloop), `stream-k` (1: a stream-K sweep; 0 / -1:
none); `cluster=2` runs CTA pairs that share the B tile
through TMA multicast, halving B's L2 reads -- correct, but no faster than without on an
H200 (2026-11-28, TFLOP/s, default / pair: `bshd,hdn` 605 / 605, 4096^3 625 / 587, bmm_nt
8 x 1024^3 546 / 423 in 128 x 256 tiles, an MLP's 128 x 12288 x 4096 first projection 409 /
386 as pairs of 64 x 192 tiles: the pair refills a ring buffer only when both CTAs freed it), so
off; with `share-a=1` the pair takes neighbouring n-blocks and shares the A tile instead
(cuBLAS's 1 x 2 clusters), and pairs also run under ping-pong -- again slower than the
unpaired schedules (bmm_nt 8 x 1024^3 fp16: ping-pong 517-525, ping-pong pairs sharing B / A
459-474 / 436-463, 256 x 128 tiles 439-467, their pairs sharing A 437-459), so off;
`tile-m` (64 / 128 / 256) sets BM: 256 x 128 cooperative tiles (two m64 slabs per
consumer, the tile cuBLAS picks for 8 x 1024^3) measured 502-514 against the ping-pong
default's 546-548 there, and 626 / 605 against 625 / 605 at 4096^3 / `bshd,hdn`.
After the pass each touched function carries `kn.workspace_size` (0 unless kn-plan-workspace
set it: the GEMM needs no workspace of its own), which also tells the driver that the
transpiler pipeline has run; the contraction's `kn.workspace_offset` and `kn.strides` (an
intermediate result's place and layout, mirage-transpile) move to the new op.  A contraction
made from a `kn.matmul` (kn-partition `hopper-gemm`) first re-reads its tensors' strides from
the IR (`matmul_contract.resync`: the layout passes may have recorded them since).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import BFloat16Type, Float16Type, IntegerAttr, ModuleOp, TensorType, i64
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects.contraction.config import LastType
from mirage_xdsl.dialects.contraction.ops import ContractOp
from mirage_xdsl.dialects.cute.hopper_gemm import BK, EPILOGUES, TILE_N, HopperGemmOp, stream_slabs
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.passes.contraction.gemm_view import GemmView, gemm_view
from mirage_xdsl.passes.conversion.matmul_contract import resync
from mirage_xdsl.target import SM90

KEPT_ATTRS = ("kn.workspace_offset", "kn.strides")
"""Attributes of the contraction that the `cute.hopper_gemm` keeps (kn-plan-workspace's place
of an intermediate result and its recorded layout)."""
MAX_STAGES = 6
"""Deepest ring considered: with BN = 128, 6 stages already keep 6 x 32 KiB in flight."""
SKINNY_MAX_STAGES = 8
"""Deepest ring of a skinny GEMM (`skinny_tile`): it streams its weights, so more stages keep
more of them in flight.  H200, 2026-11-28, an MLP's down projection in 128 x 64 tiles split in
two (TFLOP/s, 6 / 8 stages, two runs): 128 x 4096 x 12288 fp16 354.5 / 360.4 and 360.1 / 362.1,
bf16 372.0 / 383.7 and 370.4 / 380.5, 128 x 4096 x 11008 fp16 351.2 / 360.8."""
BARRIER_BYTES = 1024 + 256
"""Shared memory beside the ring: alignment slack to 1024 B (128-B swizzle) + mbarriers."""


@dataclass(frozen=True)
class HopperSchedule:
    """The decisions of `plan_schedule` (see the module docstring)."""

    tile: tuple[int, int, int]
    stages: int
    consumers: int
    group_m: int
    grid: int
    epilogue: str
    cluster: int = 1
    split: int = 1
    pingpong: bool = False
    stream: int = 0
    """Stream-K partial slabs per tile (0: not stream-K; `stream_slabs`)."""
    share_a: bool = False
    """CTA pairs (cluster 2) of neighbouring n-blocks sharing A instead of B."""


def _panel_bytes(g: int, grid: int, a_panel: int, b_panel: int) -> int:
    return g * a_panel + math.ceil(grid / g) * b_panel


POW2_TILE_N = tuple(t for t in TILE_N if t & (t - 1) == 0)
"""The widths `choose_tile_n` and `skinny_tile` pick from; 192 only on request (`tile-n=192`):
as 64 x 192 tiles for the 128-row MLPs' first projections (128 blocks streaming instead of 96
of 128 x 128) it was no faster on an H200 (2026-11-27: GELU MLP bs128 fp16 75.2 / 74.9 us
against 74.8 / 75.4, SwiGLU 108.4 / 105.9 against 102.3 / 102.0)."""

MIN_ROUND_FILL = 0.9
"""`choose_tile_n` keeps the widest tile while its grid fills at least this share of the SM
rounds: a narrower tile re-reads more operand bytes per output, (1/BM + 1/BN) x K x 2 per
output element, so it only pays when the wide tile leaves many SMs idle in its last round."""


def _fill(view: GemmView, bm: int, bn: int, num_sms: int = SM90.num_sms) -> float:
    """The share of the persistent grid's SM rounds that `bm` x `bn` tiles keep busy."""
    tiles = math.ceil(view.m / bm) * math.ceil(view.n / bn) * view.batch
    return tiles / (math.ceil(tiles / num_sms) * num_sms)


def choose_tile_n(view: GemmView, bm: int, num_sms: int = SM90.num_sms) -> int:
    """BN: the widest of wgmma's 256, 128, 64 (at most n, rounded up to 64) whose persistent
    grid fills >= `MIN_ROUND_FILL` of its rounds, fill = tiles / (ceil(tiles / SMs) x SMs)
    (wave quantisation); if none does, the one with the best fill.  E.g. 2048 x 1024 outputs
    on 132 SMs: BN 256 gives 64 tiles (fill 0.48), BN 128 128 tiles (fill 0.97): 128.

    Raises:
        Nothing.
    """
    candidates = sorted((t for t in POW2_TILE_N if t <= max(view.n, TILE_N[0])), reverse=True)

    def fill(bn: int) -> float:
        return _fill(view, bm, bn, num_sms)

    for bn in candidates:
        if fill(bn) >= MIN_ROUND_FILL:
            return bn
    return max(candidates, key=fill)


PINGPONG_MIN_KTILES = 16
PINGPONG_MAX_KTILES = 32
"""The k-tiles per tile for which `wants_pingpong` picks the ping-pong schedule: the epilogue it
hides is a share of about 1 / k-tiles of a tile's time."""


def _tiles(view: GemmView, sched: HopperSchedule) -> int:
    """Output tiles of the GEMM under `sched`: m-tiles x n-tiles x batches."""
    bm, bn, _ = sched.tile
    return math.ceil(view.m / bm) * math.ceil(view.n / bn) * view.batch


def wants_factor_by_tma(sched: HopperSchedule, tiles: int, has_mul: bool) -> bool:
    """Whether the ELWISE_MUL factor comes by TMA into the staging tiles (`mul_tma`): with a
    `tma_store` epilogue, whole tiles per block (no split- or stream-K) and one tile per block.
    A block with one tile waits on its factor's global loads with nothing behind them (H200,
    2026-11-28: the suite's SwiGLU MLP at batch 128, whose gated projection runs 96 one-tile
    blocks, 103.0 -> 101.8 µs fp16 and 98.5 -> 93.0 bf16); across a persistent sweep the
    L2-prefetched loads were as fast or faster (`bshd,hdn` with the factor, 512 tiles on 132
    blocks: 582-595 TFLOP/s against 570-573 by TMA).

    Raises:
        Nothing.
    """
    return has_mul and sched.epilogue == "tma_store" and sched.split == 1 and not sched.stream and tiles <= sched.grid


def wants_pingpong(view: GemmView, bn: int, num_sms: int = SM90.num_sms) -> bool:
    """Whether `plan_schedule` picks the ping-pong schedule by itself: 128 x `bn` tiles
    (`bn` <= 128) of `PINGPONG_MIN_KTILES` .. `PINGPONG_MAX_KTILES` k-tiles, more of them than
    SMs, so that most blocks hold two tiles or more and each consumer's epilogue can overlap
    the other's mainloop.  H200, cooperative (128 x 256) / ping-pong (128 x 128) TFLOP/s, one process
    (2026-11-27): 8 x 1024^3 batched GEMM 443 / 513 (A B^T) and 447 / 511 (A B); 2048^3 547 /
    576; 4096^3 615 / 621; 16384 x 4096 x 4096 (`bshd,hdn`) 615 / 628; 4 x 4096^3 621 / 620.
    Where it lost: one tile per block (1024^3, 64 tiles: 299 / 269; 2048 x 1024 x 4096, 128
    tiles: 645 / 557 -- one consumer alone does not keep the tensor cores busy) and two k-tiles
    (K = 128: 224 / 211).  From 64 k-tiles on the gain is gone: a second run gave 4096^3 614 /
    633 but 16384 x 4096 x 4096 620 / 609, 4 x 4096^3 616 / 608, 8192^3 645 / 634, 16384^3 664 /
    638.  With 16-byte stores from the registers instead of the TMA-store staging tiles (which
    ping-pong does not need to overlap its stores; one more ring stage fits): 8 x 1024^3 505
    (A B^T) and 518 (A B), 2048^3 587.

    Raises:
        Nothing.
    """
    tiles = math.ceil(view.m / 128) * math.ceil(view.n / bn) * view.batch
    ktiles = math.ceil(view.k / BK)
    return bn <= 128 and PINGPONG_MIN_KTILES <= ktiles <= PINGPONG_MAX_KTILES and tiles > num_sms


SKINNY_ROWS = 256
"""At most this many rows (M) make a GEMM *skinny*: it streams the weights B once (an MLP at
batch 128-256), and `skinny_tile` sizes its tiles by the bytes each block loads."""

SPLITS = (1, 2, 4, 8)
"""K splits `skinny_tile` considers; each unit keeps at least `MIN_SPLIT_KTILES` k-tiles."""
MIN_SPLIT_KTILES = 8
"""Fewest k-tiles of a split-K unit: its ring fills and drains once per unit."""
PARTIAL_BYTE_COST = 4
"""Cost of one byte of split-K partial tiles in pipelined operand bytes: the partials are
stored, fenced, counted and re-read outside the TMA ring, so nothing overlaps them.  Fitted on
an H200 to a 128-row MLP's two projections: the first (128 x 12288 x 4096) is fastest
unsplit in 128 x 128 tiles (36 us against 53-56 us for the splits in two of 128 x 256 or
128 x 128 tiles, which the plain byte count would prefer), the down projection
(128 x 4096 x 12288) in 128 x 64 tiles split in two (35 us; 38 us split in four, 41 us
unsplit in 64 x 64 tiles)."""


def skinny_tile(view: GemmView, num_sms: int = SM90.num_sms, elem_bytes: int = 2) -> tuple[int, int, int]:
    """(BM, BN, split) of a skinny GEMM: the tile and K split whose busiest block moves the
    fewest bytes, ties to no split, then the larger BM (two consumer warpgroups), then the
    larger BN.  A skinny GEMM's blocks stream their panels at a rate set by the loads each
    keeps in flight, so the busiest block's bytes, not the tile count, set the time:
    rounds x (BM + BN) x 64 x `elem_bytes` per k-tile of a unit, plus, when split, its fp32
    partial tile stored and the last unit's reads of all the partials (BM x BN x 4 x
    (1 + split)), each byte weighted `PARTIAL_BYTE_COST`.  E.g. 128 x 12288 x 4096 (an MLP's
    first projection): 128 x 128 tiles, one round of 96 blocks, no split; 128 x 4096 x 12288
    (its down projection): 64 tiles of 128 x 64, each cut into 2 units of 96 k-tiles (128
    units, one round).

    Raises:
        Nothing.
    """
    ktiles = math.ceil(view.k / BK)

    def cost(option: tuple[int, int, int]) -> tuple[float, int, int, int]:
        bm, bn, split = option
        units = math.ceil(view.m / bm) * math.ceil(view.n / bn) * view.batch * split
        rounds = math.ceil(units / num_sms)
        loads = (bm + bn) * BK * elem_bytes * math.ceil(ktiles / split)
        partials = PARTIAL_BYTE_COST * bm * bn * 4 * (1 + split) if split > 1 else 0
        return rounds * (loads + partials), split, -bm, -bn

    options = [
        (bm, bn, split)
        for bm in (64, 128)
        for bn in POW2_TILE_N
        if bn <= max(view.n, TILE_N[0])
        for split in SPLITS
        if split == 1 or ktiles >= split * MIN_SPLIT_KTILES
    ]
    return min(options, key=cost)


def plan_schedule(
    view: GemmView,
    elem_bytes: int = 2,
    *,
    group_m: int = -1,
    stages: int = 0,
    tile_n: int = 0,
    epilogue: str = "",
    cluster: int = 1,
    split_k: int = 0,
    pingpong: int = -1,
    stream_k: int = -1,
    tile_m: int = 0,
    share_a: int = 0,
) -> HopperSchedule:
    """Choose tile, stages, grid, L2 group and epilogue for `view` (module docstring).

    Args:
        view: the GEMM; elem_bytes: bytes per element (2).
        group_m, stages, tile_n, epilogue, split_k: overrides (-1 / 0 / 0 / "" / 0: decide).
        cluster: 2 runs CTA pairs sharing B by TMA multicast (needs an even m-block count and an
            even group_m, so that both tiles of a pair have one n-block); 1: no clusters.
        pingpong: 1 gives the two consumers whole 128 x BN tiles in turn (BN <= 128: a wider
            choice becomes 128; needs m > 64, no split); 0: the cooperative
            schedule; -1: `wants_pingpong` decides (never for skinny GEMMs, split-K or
            clusters).
        stream_k: 1 runs a stream-K sweep over all SMs (no ping-pong, cluster or split; the tile
            `skinny_tile` or `choose_tile_n` picks); 0 and -1: never (measured slower, module docstring).
        share_a: 1 (with cluster=2) pairs neighbouring n-blocks of one m-block, which share
            the A tile by multicast instead of B (needs an even n-block count); 0: B.
        tile_m: BM override: 64 (one consumer), 128 (two), 256 (two consumers of two m64 slabs
            each: cooperative, BN <= 128, no split- or stream-K); 0: decide.

    Raises:
        ValueError: an override out of range (message names it).
    """
    if tile_m not in (0, 64, 128, 256):
        raise ValueError(f"tile-m={tile_m} must be 64, 128 or 256 (or 0: decide)")
    consumers = (1 if tile_m == 64 else 2) if tile_m else (1 if view.m <= 64 else 2)
    bm = tile_m or 64 * consumers
    tall = bm == 256
    if tall and (tile_n > 128 or pingpong == 1 or split_k > 1 or stream_k == 1):
        raise ValueError("tile-m=256 needs tile-n <= 128, the cooperative schedule (pingpong=0), no split-k and no stream-k")
    bn = tile_n or choose_tile_n(view, bm)
    bn = min(bn, 128) if tall else bn
    split = 1
    skinny = not tile_n and not tile_m and 64 < view.m <= SKINNY_ROWS and cluster == 1
    if pingpong == -1:
        auto = consumers == 2 and not tall and cluster == 1 and not skinny and split_k <= 1 and stream_k != 1 and tile_n <= 128
        pingpong = int(auto and wants_pingpong(view, min(bn, 128)))
    if pingpong and (consumers != 2 or split_k > 1 or tile_n > 128):
        raise ValueError(f"pingpong=1 needs m > 64 (two consumers; m = {view.m}), no split-k and tile-n <= 128")
    streams_weights = bool(skinny and not pingpong)  # the skinny tile and ring below
    if pingpong:
        bn = min(bn, 128)
    elif skinny:
        bm, bn, split = skinny_tile(view)
        consumers = bm // 64
    stream = stream_k == 1
    split = 1 if stream else split
    if stream and (pingpong or cluster != 1 or split_k > 1):
        raise ValueError("stream-k=1 needs no ping-pong, cluster=1 and no split-k")
    if split_k:
        if not 1 <= split_k <= math.ceil(view.k / BK) or (split_k > 1 and cluster != 1):
            raise ValueError(f"split-k={split_k} must be in 1..{math.ceil(view.k / BK)} (the k-tiles) and needs cluster=1")
        split = split_k
    if bn not in TILE_N:
        raise ValueError(f"tile-n={bn} is not one of {TILE_N}")
    aligned = view.n % 8 == 0 and all(s % 8 == 0 for s in view.out_strides)
    # ping-pong overlaps a tile's stores with the other consumer's mainloop itself (`wants_pingpong`)
    epilogue = epilogue or (("store16" if pingpong else "tma_store") if aligned else "store4")
    if epilogue not in EPILOGUES or (epilogue != "store4" and not aligned):
        raise ValueError(
            f"epilogue={epilogue} must be one of {sorted(EPILOGUES)}; store16/tma_store need n and the output "
            "strides to be multiples of 8 elements"
        )
    stage_bytes = (bm + bn) * BK * elem_bytes
    staging = bm * bn * elem_bytes * (consumers if pingpong else 1) if epilogue == "tma_store" else 0
    fit = (SM90.smem_per_block_optin - BARRIER_BYTES - staging) // stage_bytes
    if stages and not 2 <= stages <= fit:
        raise ValueError(f"stages={stages} must be in 2..{fit} for a {bm}x{bn}x{BK} tile")
    stages = stages or min(fit, SKINNY_MAX_STAGES if streams_weights else MAX_STAGES)
    mtiles, ntiles = math.ceil(view.m / bm), math.ceil(view.n / bn)
    grid = min(mtiles * ntiles * view.batch * split, SM90.num_sms)
    slabs = 0
    if stream:
        ktiles = math.ceil(view.k / BK)
        grid = min(SM90.num_sms, mtiles * ntiles * view.batch * ktiles)
        slabs = stream_slabs(mtiles * ntiles * view.batch, ktiles, grid)
    if group_m == -1:
        a_panel, b_panel = bm * view.k * elem_bytes, bn * view.k * elem_bytes
        pairs_m = cluster == 2 and not share_a  # a B-sharing pair's two m-blocks sit in one group
        choices = [1 << i for i in range(mtiles.bit_length()) if (1 << i) <= mtiles and (not pairs_m or i > 0)] or [2]
        group_m = min(choices, key=lambda g: (_panel_bytes(g, grid, a_panel, b_panel), g))
    elif group_m < 1:
        raise ValueError(f"group-m={group_m} must be >= 1 (or -1: decide)")
    if cluster not in (1, 2):
        raise ValueError(f"cluster={cluster} must be 1 or 2")
    if share_a and (cluster != 2 or ntiles % 2):
        raise ValueError(f"share-a=1 needs cluster=2 and an even n-tile count (got cluster={cluster}, {ntiles} n-tiles)")
    if cluster == 2 and not share_a:
        if mtiles % 2 or group_m % 2:
            raise ValueError(
                f"cluster=2 needs an even m-tile count and an even group-m (got {mtiles} and {group_m}): the two CTAs of "
                "a cluster share one n-block"
            )
    if cluster == 2:
        grid = 2 * min(math.ceil(mtiles * ntiles * view.batch / 2), SM90.num_sms // 2)
    return HopperSchedule(
        (bm, bn, BK), stages, consumers, group_m, grid, epilogue, cluster, split, bool(pingpong), slabs, bool(share_a)
    )


SCRATCH_ALIGN = 256
"""Byte alignment of a split GEMM's partial tiles in the workspace (cudaMalloc's alignment)."""


def _claim_scratch(fn: Operation | None, sched: HopperSchedule, view: GemmView) -> int:
    """Append the split-K / stream-K partial tiles of `sched` to the function's workspace (`kn.workspace_size`
    grows) and return their byte offset."""
    if not isinstance(fn, func.FuncOp):
        raise ValueError("a split-K GEMM must sit in a func.func (its partial tiles live in the function's workspace)")
    bm, bn, _ = sched.tile
    tiles = math.ceil(view.m / bm) * math.ceil(view.n / bn) * view.batch
    size = fn.attributes.get("kn.workspace_size")
    offset = size.value.data if isinstance(size, IntegerAttr) else 0
    offset = -(-offset // SCRATCH_ALIGN) * SCRATCH_ALIGN
    slabs = sched.stream or sched.split
    fn.attributes["kn.workspace_size"] = IntegerAttr(offset + slabs * tiles * bm * bn * 4, i64)
    return offset


@dataclass(frozen=True)
class ConvertContractionToHopperPass(ModulePass):
    """Lower every `contraction.contract` to a `cute.hopper_gemm` (module docstring).

    Raises:
        PassFailedException: the contraction is not FP16/BF16, or has no GEMM view
            (`gemm_view`'s message, the op named), or an option is out of range.
    """

    name = "convert-contraction-to-hopper"
    group_m: int = -1
    stages: int = 0
    tile_n: int = 0
    epilogue: str = ""
    cluster: int = 1
    split_k: int = 0
    pingpong: int = -1
    stream_k: int = -1
    """1: a stream-K sweep (module docstring: measured slower than the tiled sweeps, so never
    chosen by itself); 0 / -1: none."""
    tile_m: int = 0
    """BM: 64, 128 or 256 (two m64 slabs per consumer); 0: decide (`plan_schedule`)."""
    share_a: int = 0
    """1: CTA pairs (`cluster=2`) share the A tile instead of B (`plan_schedule`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Replace each contraction.contract with a `cute.hopper_gemm` named `<func>_hopper_gemm_<i>`.

        The GEMM view (m, n, k, batches, strides) comes from `gemm_view`, the tile, stages,
        consumers, group-m, grid and cluster from `plan_schedule` with this pass's options; the
        enclosing func gets `kn.workspace_size = 0`.

        An ELWISE_MUL contraction's factor D becomes the GEMM's third operand (the epilogue
        multiplies the fp32 accumulators by D's tile before the store); its `activation`
        functions become the GEMM's (applied to the accumulators before D).

        Raises:
            PassFailedException: the result is not f16/bf16, an ELWISE_MUL factor whose strides
                are not the output's, or `gemm_view`/`plan_schedule` rejected the op (their
                message, the op named).
        """
        count = 0
        for contract in [o for o in op.walk() if isinstance(o, ContractOp)]:
            result_type = contract.result.type
            assert isinstance(result_type, TensorType)
            if not isinstance(result_type.element_type, Float16Type | BFloat16Type):
                raise PassFailedException(f"{self.name}: {contract.name}: the sm_90 GEMM takes f16 or bf16 tensors")
            try:
                resync(contract)
            except ValueError as err:
                raise PassFailedException(f"{self.name}: {contract.name}: {err}") from err
            config = contract.config()
            if contract.mul is not None and dtensor_strides(contract.mul) != dtensor_strides(contract.result):
                raise PassFailedException(
                    f"{self.name}: {contract.name}: the ELWISE_MUL factor's strides {dtensor_strides(contract.mul)} differ from "
                    f"the output's {dtensor_strides(contract.result)}; the GEMM reads the factor with the output's strides: "
                    "store the factor in the output's layout"
                )
            try:
                view = gemm_view(config)
                sched = plan_schedule(
                    view,
                    group_m=self.group_m,
                    stages=self.stages,
                    tile_n=self.tile_n,
                    epilogue=self.epilogue,
                    cluster=self.cluster,
                    split_k=self.split_k,
                    pingpong=self.pingpong,
                    stream_k=self.stream_k,
                    tile_m=self.tile_m,
                    share_a=self.share_a,
                )
            except ValueError as err:
                raise PassFailedException(f"{self.name}: {contract.name}: {err}") from err
            fn = contract.parent_op()
            fname = fn.sym_name.data if isinstance(fn, func.FuncOp) else "graph"
            try:
                scratch = _claim_scratch(fn, sched, view) if sched.split > 1 or sched.stream else 0
            except ValueError as err:
                raise PassFailedException(f"{self.name}: {contract.name}: {err}") from err
            new = HopperGemmOp(
                contract.lhs,
                contract.rhs,
                result_type,
                kernel_name=f"{fname}_hopper_gemm_{count}",
                gemm=(view.m, view.n, view.k, view.batch_inner, view.batch_outer),
                a_strides=view.a_strides,
                b_strides=view.b_strides,
                out_strides=view.out_strides,
                tile=sched.tile,
                stages=sched.stages,
                consumers=sched.consumers,
                group_m=sched.group_m,
                grid=sched.grid,
                trans_b=view.trans_b,
                epilogue=sched.epilogue,
                cluster=sched.cluster,
                mul=contract.mul if config.prim_last is LastType.ELWISE_MUL else None,
                activation=contract.activation_fns,
                split_k=sched.split,
                scratch_offset=scratch,
                pingpong=sched.pingpong,
                stream_k=sched.stream,
                mul_tma=wants_factor_by_tma(sched, _tiles(view, sched), config.prim_last is LastType.ELWISE_MUL),
                share_a=sched.share_a,
            )
            parent = contract.parent_block()
            assert parent is not None
            for key in KEPT_ATTRS:
                if key in contract.attributes:
                    new.attributes[key] = contract.attributes[key]
            parent.insert_op_before(new, contract)
            if contract.result.name_hint:
                new.result.name_hint = contract.result.name_hint
            contract.result.replace_all_uses_with(new.result)
            parent.erase_op(contract)
            if isinstance(fn, func.FuncOp) and "kn.workspace_size" not in fn.attributes:
                fn.attributes["kn.workspace_size"] = IntegerAttr(0, i64)
            count += 1
