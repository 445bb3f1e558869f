"""The planner's cost model: the estimated time and resources of one block graph
(`CostModel.estimate`) on the device it assumes (`target/cost_model.py`'s `DeviceModel`).

A configuration must fit shared memory (inputs double-buffered when iterated, fp32
accumulators -- none for the sums tb-schedule keeps in registers, `CostModel.register_sums`
--, passes/README.md; the sum of the tile sizes, which tb-plan-smem can always reach;
`kn-partition` double-checks estimates above 40% of the limit with it), keep the
register accumulators of matmuls within 192 fp32 per thread, and -- without a loop -- load
at most `stage_budget` bytes per block.  The estimated time of a kernel is
   launch + max(HBM bytes / BW, L2 bytes / L2 BW, MMA FLOPs / (rate * hiding)) / balance
   + waves * (iterations * exposed latency + block latency)
with BW = min(HBM bandwidth, DRAM bytes in flight / latency) (Little's law: one pipeline
stage of the non-replicated input tiles per resident block, N - 1 for wide lone blocks
with the N-stage ring tb-plan-pipeline will build for them (at most 4) and for loops that
stream full-speed `kn.weight` tiles with the ring that prefetches 12 MiB (at most 6), whose
exposed latency per iteration is 1 / (N - 1)), balance = blocks / (SMs *
ceil(blocks / SMs)) (wave quantisation), hiding = resident warps per SM / 16 (at most 1;
/ 8 for attention plans whose P convert-tb-to-cute keeps in registers, `cute.mma_chain`)
and MMA FLOPs counted on m16n8k16-padded tiles.  A plan without a for-loop (one pass:
load, MMAs, store) takes instead max(MMA FLOPs / rate, waves * its deepest K chain *
the latency of one dependent MMA), and where its blocks run one per SM wave after wave,
nothing overlaps one block's loads with another's MMAs: the HBM and MMA terms add up.
Ties go to better balance, then about 4 blocks per SM (measured best for gated_mlp and
rmsnorm_linear), N tiles multiples of 16, fewer blocks, longer loop tiles, fewer ops
(`KernelPlan.tiebreak`).

The hardware limits (SMs, shared memory, threads and blocks per SM) come from
`target/device.py`; the rates and latencies from `target/cost_model.py`, fitted to our kernels.
"""

from __future__ import annotations

import math

from xdsl.ir import SSAValue

from mirage_xdsl.dialects import tiling
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.passes.conversion.kernel_plan import KernelPlan
from mirage_xdsl.passes.conversion.online_plan import online_chain_rows, online_chain_smem_bytes
from mirage_xdsl.passes.conversion.plan_group import BINARY_KINDS, UNARY_KINDS, Node, elem_bytes, is_attention, numel
from mirage_xdsl.passes.conversion.register_chain import ONLINE_CHAIN_WARPS, chain_shape_fits, chain_thr_layout
from mirage_xdsl.passes.cute.row_chains import MAX_TRIPS as ROW_CHAIN_MAX_ELEMENTS
from mirage_xdsl.passes.tb.plan_pipeline import choose_stages, is_wide_lone_block, prefetch_stages
from mirage_xdsl.target import ELEMENTWISE_ACCUM_MAX_REGS, SM90
from mirage_xdsl.target.cost_model import DeviceModel


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
56.1 (8 elements); softmax fp32 with 4 elements (1024 threads) 61.7 where 8 took 41.3.
Again once the launches asked only for the chains' shared memory (H200, 2026-11-27, 16 / 32 /
64 bytes, µs): layernorm fp16 30.7 / 27.6 / 38.0, fp32 51.6 / 44.8 / 58.1, rmsnorm fp32 45.4
/ 42.5 / 50.8, softmax fp32 52.5 / 40.6 / 50.7."""


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


def _last_dim_contiguous(node: Node) -> bool:
    """Whether the group input `node` (an outside SSA value) is stored with its last dim
    contiguous (stride 1), so that a tile's last dim is a contiguous run of memory; False for
    inputs made inside the planner (split-K partials), whose layout it chooses."""
    if not isinstance(node.ext, SSAValue):
        return False
    strides = dtensor_strides(node.ext)
    return not strides or strides[-1] == 1


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
        """Elements one block's elementwise and reduction ops walk in shared memory over the
        whole kernel (a reduction walks its input tile; an op of the for-loop body walks its
        tile once per iteration; skipped and input nodes walk nothing)."""
        group = plan.group
        total = 0
        for n in plan.needed:
            node = group.nodes[n]
            if n in plan.skipped or node.kind in ("input", "matmul"):
                continue
            walked = plan.tiles[node.args[0]] if node.kind in ("reduction", "reduction_max") else plan.tiles[n]
            total += numel(walked) * (plan.forloop_range if plan.phase[n] == "loop" else 1)
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
        """The ring the estimate counts for a plan whose for-loop streams `kn.weight` tiles
        (`weight_stage` bytes of its `loop_stage` per stage): `plan_pipeline.prefetch_stages`
        (the fewest stages whose prologues prefetch `weight_prefetch_bytes` over the grid in
        one wave; tb-plan-pipeline may build deeper) on this plan's estimates, `smem` with
        double buffers and one more loop tile per extra stage."""
        dev = self.device
        lone = dev.lone_block_stages if self.is_wide_lone_block(plan) else 2
        cap = max(2, min(max(lone, dev.weight_prefetch_stages), plan.forloop_range))
        return prefetch_stages(
            weight_stage,
            lambda n: smem + (n - 2) * loop_stage,
            math.prod(plan.grid),
            plan.threads,
            cap,
            dev.smem_per_block,
            dev.weight_prefetch_bytes,
            dev.num_sms,
        )

    def register_sums(self, plan: KernelPlan) -> set[int]:
        """The loop reductions of `plan` whose fp32 accumulators tb-schedule will keep in
        registers (passes/tb/schedule.py `register_accumulators`, predicted on the plan): a sum
        over the loop axis of a value made by an elementwise op that nothing else reads (a chain
        of two or more ops led by an elementwise op), at most `ELEMENTWISE_ACCUM_MAX_REGS` fp32
        per thread each, within `max_accum_per_thread` after the matmul accumulators.  Their
        accumulator and their operand's tile take no shared memory during the loop (the
        cross-entropy over [1024, 32768]: 24.8 KB estimated where tb-plan-smem packs 12.5)."""
        group, ax = plan.group, plan.ax
        if plan.loop_axis is None or plan.forloop_range <= 1:
            return set()
        users = group.users()
        outputs = {o for o, _ in plan.outputs}
        threads = max(plan.threads, 1)
        loop_sums = [n for n in plan.needed if n not in plan.skipped and ax.reduce_axis.get(n) == plan.loop_axis]
        total = sum(-(-numel(plan.tiles[n]) // threads) for n in loop_sums if group.nodes[n].kind == "matmul")
        kept: set[int] = set()
        for n in loop_sums:
            node = group.nodes[n]
            if node.kind != "reduction" or (plan.online is not None and n in plan.online.maxima):
                continue
            a = node.args[0]
            arg = group.nodes[a]
            chained = arg.kind in (*UNARY_KINDS, *BINARY_KINDS) and a not in plan.skipped and users[a] == [n] and a not in outputs
            regs = -(-numel(plan.tiles[a]) // threads)
            if chained and regs <= ELEMENTWISE_ACCUM_MAX_REGS and total + regs <= self.device.max_accum_per_thread:
                total += regs
                kept.add(n)
        return kept

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
        matmul_free = all(node.kind != "matmul" for node in group.nodes)
        reg_sums = self.register_sums(plan)
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
                slow = dram_slow = 1.0
                if t[-1] < node.shape[-1]:
                    streamed = matmul_free and _last_dim_contiguous(node)
                    tensor_bytes = numel(node.shape) * eb if streamed else 0
                    slow = dram_slow = dev.streamed_row_penalty(row, tensor_bytes)
                    if node.weight and not matmul_free and row <= dev.weight_run_bytes:
                        # the ring below still counts such tiles (`slow` stays the row penalty)
                        dram_slow = slow * dev.weight_run_penalty
                unique_dram += numel(node.shape) * eb * dram_slow
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
            elif reduces_loop and plan.online is not None and n in plan.online.maxima:
                # a running max (build_tb_graph's running tb.reduction_max): per row the max
                # so far and this iteration's correction, not a tile-wide fp32 accumulator
                smem += 2 * _round16(numel(t) * 4)
            elif n in reg_sums:
                # the accumulator in registers; the sum's tile after the loop
                smem += _round16(numel(t) * eb)
                regs += numel(plan.tiles[node.args[0]]) / plan.threads
            elif reduces_loop:
                smem += _round16(numel(plan.tiles[node.args[0]]) * 4) + _round16(numel(t) * eb)
            else:
                fused = len(users[n]) == 1 and n not in out_nodes and (
                    (group.nodes[users[n][0]].kind in UNARY_KINDS and users[n][0] in needed) or users[n][0] in reg_sums
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
        one_pass = R == 1 and mma_flops > 0 and not online_chain
        if one_pass:
            mma_us = max(mma_flops / dev.flops_per_us, waves * self._k_chain_steps(plan) * dev.mma_latency_us)
        if online_chain:
            mma_us = mma_flops / (dev.online_chain_flops_per_us * hiding)
            mma_us += online_chain_smem_bytes(plan) / dev.online_chain_smem_bytes_per_us
        roof = max(unique_dram / bandwidth, loaded / dev.l2_bytes_per_us, mma_us)
        if one_pass and waves > 1 and min(occ, blocks / dev.num_sms) <= 1:
            # one block per SM, wave after wave: nothing overlaps a block's loads with
            # another's MMAs (H200: Mirage's mha_bs8 graph 0 took 307 µs with its Q K^T as
            # 1024 such blocks of 133 KB, 198 with 4096 blocks of 35 KB)
            roof = max(unique_dram / bandwidth + mma_us, loaded / dev.l2_bytes_per_us)
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
    def _k_chain_steps(plan: KernelPlan) -> int:
        """The longest chain of dependent m16n8k16 steps one warp runs in a plan without a
        for-loop: the k16 steps of its deepest matmul (its K tile / 16) -- a block loads its
        tiles once and then runs its MMAs, each output fragment's steps one after another."""
        steps = [
            -(-plan.tiles[node.args[0]][-1] // 16)
            for n, node in enumerate(plan.group.nodes)
            if node.kind == "matmul" and n in plan.needed and n not in plan.skipped
        ]
        return max(steps, default=0)

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
