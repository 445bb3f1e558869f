"""`tb-plan-pipeline`: how many stages deep every cp.async-pipelined input is loaded.

Decode workloads stream their weights from HBM; a block that keeps only one tile in flight
(a double buffer) leaves the memory system idle most of the time. With `N` stages the
prologue issues the loads of iterations `0 .. N-2` and iteration `it` issues the load of
`it + N - 1` into the buffer read in iteration `it - 1` (freed by the barrier that ends every
iteration), so `N - 1` tiles per pipelined input are in flight while one is computed on.

Model (per `kn.customized`; every pipelined input of a graph gets the SAME count, they
share one ring index and one cp.async group per iteration):

* `tile` = bytes per stage of all pipelined inputs together (their shared tiles);
* `smem(N)` = the shared-memory plan with `N` buffers per pipelined input (tb-plan-smem's
  packing, online heuristics only: an upper bound of the final plan);
* blocks resident per SM `B(N) = min(ceil(#blocks / num-sms), sm-smem // (smem(N) + 1 KiB),
  2048 // threads, 32)`;
* bytes in flight per SM `F(N) = (N - 1) * tile * B(N)`.

`N` ranges over `2 .. min(max-stages, forloop_range)` (`lone-block-max-stages` instead of
`max-stages` for a graph of at least 256 threads whose blocks each have an SM to themselves)
with `smem(N) <= smem-limit`; the choice maximises `min(F(N), inflight-bytes)` (default
64 KiB, enough to cover HBM latency on H100/H200), the fewest stages among ties (more buffers
would only cost shared memory).

A graph that streams a `kn.weight` input loads its ring prologue before the PDL wait, while
the previous grid finishes (codegen/weight_prefetch.py).  It gets the deepest ring that keeps
the whole grid resident in one wave (`B(N) >= ceil(#blocks / num-sms)`), at most
`weight-max-stages` (8), or `lone-block-max-stages` for a wide lone-block graph
(`choose_weight_stages`).  On an H200 every further stage up to the wave limit was faster or
equal (2026-11-28, one sweep of forced depths 3-8): rmsnorm bs1 (384 blocks, 8 KiB W tiles)
13.8 / 13.2 / 12.7 / 12.5 / 12.5 / 12.4 µs at 3-8 stages; bs8 15.2 / 14.9 / 14.6 / 14.3 / 14.1 at
3-7 and 17.5 at 8 (two waves); gated_mlp (256 blocks, 16 KiB) 17.8 / 17.2 / 16.7 / 16.5 at 3-6 and
25.4 at 7 (two waves).  The wide lone blocks of the LoRA programs (128 blocks of 512 threads,
16-24 KiB tiles) were fastest at 4: LoRA r16 15.5 / 14.5 / 15.8 / 16.0 µs at 3-6.
The planner's estimate counts a shallower ring (`prefetch_stages`, kn-partition's
`CostModel._weight_stages`), see its docstring.
Option `stages=N` forces `N` (clamped to `2 .. min(8, forloop_range)`); tb-plan-smem still
removes stages when the plan does not fit.

Writes (passes/README.md): `tb.stages = i64` on every `tb.pipelined` input. Runs after
tb-schedule and tb-plan-swizzle (it packs shared memory with the swizzle alignments) and
before tb-plan-smem, which reads `tb.stages` (default 2 when absent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import BlockArgument, Operation
from xdsl.passes import ModulePass

from mirage_xdsl.dialects.kn import CustomizedOp, is_weight
from mirage_xdsl.dialects.tb import InputOp
from mirage_xdsl.passes.conversion.register_chain import IN_REGISTERS
from mirage_xdsl.passes.tb.plan_smem import SM90_SMEM_LIMIT, PlanSmemPass
from mirage_xdsl.passes.tb.schedule import schedule_of
from mirage_xdsl.target import SM90
from mirage_xdsl.target.cost_model import LONE_BLOCK_MAX_STAGES, WEIGHT_MAX_STAGES, WEIGHT_PREFETCH_BYTES

PASS_NAME = "tb-plan-pipeline"
MAX_STAGES = 8
"""Hard cap: `cp.async.wait_group N - 1` and the ring index stay small."""
NUM_SMS = SM90.num_sms
SM_SMEM_BYTES = SM90.smem_per_sm
SMEM_PER_BLOCK_RESERVED = SM90.smem_reserved_per_block
MAX_THREADS_PER_SM = SM90.max_threads_per_sm
MAX_BLOCKS_PER_SM = SM90.max_blocks_per_sm
INFLIGHT_BYTES = 65536


@dataclass(frozen=True)
class PipelineChoice:
    """The ring depth chosen for a graph's pipelined inputs: `stages` buffers each, the block's
    `smem_size` (bytes) at that depth, the `blocks_per_sm` it allows, and the bytes in flight per
    SM, (stages - 1) x the pipelined tile bytes x blocks per SM.
    """
    stages: int
    smem_size: int
    blocks_per_sm: int
    inflight_bytes: int  # per SM


def blocks_per_sm(num_blocks: int, threads: int, smem_size: int, num_sms: int = NUM_SMS, sm_smem: int = SM_SMEM_BYTES) -> int:
    """Blocks of one kernel resident per SM: the grid's share, shared memory, threads."""
    share = -(-num_blocks // num_sms)
    by_smem = sm_smem // (smem_size + SMEM_PER_BLOCK_RESERVED)
    by_threads = MAX_THREADS_PER_SM // max(threads, 1)
    return max(1, min(share, by_smem, by_threads, MAX_BLOCKS_PER_SM))


def choose_stages(
    tile_bytes: int,
    smem_of: Callable[[int], int],
    num_blocks: int,
    threads: int,
    max_stages: int,
    smem_limit: int,
    target: int = INFLIGHT_BYTES,
    num_sms: int = NUM_SMS,
) -> PipelineChoice:
    """The stage count of the module docstring's model (at least 2)."""
    best: PipelineChoice | None = None
    for n in range(2, max(2, max_stages) + 1):
        size = smem_of(n)
        if size > smem_limit and n > 2:
            break
        bps = blocks_per_sm(num_blocks, threads, size, num_sms)
        choice = PipelineChoice(n, size, bps, (n - 1) * tile_bytes * bps)
        if best is None or min(choice.inflight_bytes, target) > min(best.inflight_bytes, target):
            best = choice
        if choice.inflight_bytes >= target:
            break
    assert best is not None
    return best


DEFAULT_MAX_STAGES = 2
LONE_BLOCK_MIN_THREADS = 256


def is_wide_lone_block(num_blocks: int, threads: int, num_sms: int = NUM_SMS) -> bool:
    """A graph of at least `LONE_BLOCK_MIN_THREADS` threads per block and at most one block
    per SM: no other block on its SM overlaps its loads with compute, so its own ring must
    keep HBM busy (kn-partition's wide lone-block plans, `DeviceModel.lone_matmul_block_threads`)."""
    return threads >= LONE_BLOCK_MIN_THREADS and num_blocks <= num_sms




def weight_streams(graph: CustomizedOp, pipelined: list[Operation]) -> list[Operation]:
    """The pipelined `tb.input`s of `graph` that read an argument of the enclosing function
    marked `kn.weight` (dialects/kn/tensors.py `is_weight`)."""
    return [
        op
        for op in pipelined
        if isinstance(op, InputOp)
        and isinstance(op.dtensor, BlockArgument)
        and is_weight(graph.operands[op.dtensor.index])
    ]


def one_wave_depths(
    smem_of: Callable[[int], int], num_blocks: int, threads: int, max_stages: int, smem_limit: int, num_sms: int = NUM_SMS
) -> list[int]:
    """The ring depths `2 .. max_stages` whose blocks fit `smem_limit` and keep the whole grid
    resident in one wave (at least ceil(blocks / SMs) blocks per SM), shallowest first; [2]
    when none does."""
    wave = -(-num_blocks // num_sms)
    depths = []
    for n in range(2, max(2, max_stages) + 1):
        size = smem_of(n)
        if size > smem_limit or blocks_per_sm(num_blocks, threads, size, num_sms) < wave:
            break
        depths.append(n)
    return depths or [2]


def choose_weight_stages(
    smem_of: Callable[[int], int], num_blocks: int, threads: int, max_stages: int, smem_limit: int, num_sms: int = NUM_SMS
) -> int:
    """Stages of a graph that streams weights (the module docstring's rule): the deepest ring of
    at most `max_stages` that keeps the grid in one wave (`one_wave_depths`), at least 2."""
    return one_wave_depths(smem_of, num_blocks, threads, max_stages, smem_limit, num_sms)[-1]


def prefetch_stages(
    weight_tile_bytes: int,
    smem_of: Callable[[int], int],
    num_blocks: int,
    threads: int,
    max_stages: int,
    smem_limit: int,
    target: int = WEIGHT_PREFETCH_BYTES,
    num_sms: int = NUM_SMS,
) -> int:
    """The ring kn-partition's estimate counts for a weight-streaming plan: the fewest stages
    whose ring prologues ((N - 1) weight tiles per block) prefetch `target` bytes over the grid,
    among the depths that keep the grid in one wave; else the deepest such depth (at least 2).
    Shallower than `choose_weight_stages` builds on purpose: counting every stage the builder
    adds re-planned programs to worse plans (EXPERIMENTS, 2026-11-27: LoRA r64 25.3 -> 32.1 µs,
    GELU MLP bs1 45.7 -> 48 µs on an H200)."""
    depths = one_wave_depths(smem_of, num_blocks, threads, max_stages, smem_limit, num_sms)
    for n in depths:
        if (n - 1) * weight_tile_bytes * num_blocks >= target:
            return n
    return depths[-1]


@dataclass(frozen=True)
class PlanPipelinePass(ModulePass):
    """Write `tb.stages` on every pipelined input (the module docstring's model)."""

    name = "tb-plan-pipeline"

    stages: int = 0
    """Force this many stages (0 = choose automatically)."""
    max_stages: int = DEFAULT_MAX_STAGES
    """Deepest ring the automatic choice may use.  Default 2 (double buffering): on an H200
    (2026-11-22, same session A/B)
    the automatic deeper rings were slower on every shared workload they changed, e.g.
    rmsnorm_bs1 graph_2 30.5 us with 2 stages vs 43.4 us with 6, gated_mlp graph_0 71 vs 93 us;
    raise it (`max-stages=8`) to experiment."""
    lone_block_max_stages: int = LONE_BLOCK_MAX_STAGES
    """Deepest automatic ring of a wide lone-block graph (`is_wide_lone_block`).  H200,
    gated_mlp on 128 blocks of 512 threads (128-row K tiles, 18 KiB per stage): 2 stages
    25.1-25.4 us, 3 20.5-20.9, 4 19.9-20.1, 5 20.2, 6 21.9-22.0 (2026-11-25)."""
    weight_max_stages: int = WEIGHT_MAX_STAGES
    """Deepest automatic ring of a graph that streams a `kn.weight` input and is not a wide lone
    block: `choose_weight_stages` takes the deepest depth up to it that keeps one wave (the
    module docstring's sweep)."""
    inflight_bytes: int = INFLIGHT_BYTES
    smem_limit: int = SM90_SMEM_LIMIT
    num_sms: int = NUM_SMS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Plan the ring depth of every `kn.customized` in `op` (`plan_graph`).

        Raises:
            Nothing.
        """
        for graph in op.walk():
            if isinstance(graph, CustomizedOp):
                self.plan_graph(graph)

    def plan_graph(self, graph: CustomizedOp) -> PipelineChoice | None:
        """Choose and write `tb.stages` on the pipelined inputs of `graph`; None if it has none.

        The depth is `stages` when forced (at least 2, at most the loop length and `MAX_STAGES`),
        `choose_weight_stages` when an input streams a `kn.weight`, else `choose_stages` (the
        in-flight bytes model), each capped by the loop length and the lone-block / weight caps; the
        shared memory of a depth comes from a heuristic `PlanSmemPass.pack` (no CP-SAT).
        """
        ops, recs, stages, levels = schedule_of(graph)
        pipelined = {i for i, o in enumerate(ops) if "tb.pipelined" in o.attributes}
        if not pipelined:
            return None
        in_reg = {i for i, o in enumerate(ops) if "tb.accum_in_reg" in o.attributes or IN_REGISTERS in o.attributes}
        threads = graph.block[0] * graph.block[1] * graph.block[2]
        num_blocks = graph.grid[0] * graph.grid[1] * graph.grid[2]
        # a forced depth is bounded only by the hardware-independent cap and the loop length
        lone = is_wide_lone_block(num_blocks, threads, self.num_sms)
        weights = weight_streams(graph, [ops[i] for i in pipelined])
        limit = self.lone_block_max_stages if lone else self.weight_max_stages if weights else self.max_stages
        limit = MAX_STAGES if self.stages > 0 else min(limit, MAX_STAGES)
        cap = max(2, min(limit, graph.num_iterations))
        packer = PlanSmemPass(time_limit_ms=0, smem_limit=self.smem_limit, use_cpsat=False)

        def smem_of(n: int) -> int:
            return packer.pack(ops, recs, stages, levels, in_reg, pipelined, {i: n for i in pipelined}).size

        tile = sum(recs[i].result_bytes[0] for i in pipelined)
        if self.stages > 0:
            n = max(2, min(self.stages, cap))
        elif weights:
            n = choose_weight_stages(smem_of, num_blocks, threads, cap, self.smem_limit, self.num_sms)
        else:
            n = 0
        if n:
            size = smem_of(n)
            bps = blocks_per_sm(num_blocks, threads, size, self.num_sms)
            choice = PipelineChoice(n, size, bps, (n - 1) * tile * bps)
        else:
            choice = choose_stages(
                tile, smem_of, num_blocks, threads, cap, self.smem_limit, self.inflight_bytes, self.num_sms
            )
        for i in pipelined:
            ops[i].attributes["tb.stages"] = IntegerAttr(choice.stages, i64)
        return choice
