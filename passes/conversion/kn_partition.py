"""`kn-partition`: cross-op aggregation and kernel partition of kernel graphs.

Steps 2 and 4 of graph-kernel fusion (seed 001): aggregate basic kn ops into the largest
groups that one fused kernel can compute, then split what cannot be fused, and turn every
group into `kn.customized` op(s) whose threadblock graphs come from the planner (`default_tb_graph`).

1. *Aggregation.*  The fusible kn ops (elementwise, matmul, reduction, last-dim rms_norm;
   see `plan_group.fusible_op`) of a function are split into connected components (the
   producers of a `kn.concat`'s operands count as connected: one kernel writes both parts of
   its result through views, `kn-fold-views`).  A
   component that `Planner.plan` can lower as a whole (legal phases, fits 227 KiB of shared
   memory and the register budget) becomes one group -- unless that plan recomputes a
   producer in every block (at least `CUT_MIN_REDUNDANCY` x the group's matmul FLOPs, e.g.
   LoRA's `X @ A` in each block of `X @ W + (X @ A) @ B`) and a cut in two after a producer,
   passing the second part few bytes (`CUT_MAX_INTERMEDIATE_SHARE`), is estimated within
   `CUT_GAIN` of it (`_cheaper_cut`; not with `allow-split=false`): then the two parts are
   groups.
2. *Partition.*  Otherwise the component is grown greedily in program order: each op joins
   the union of its producers' groups, or the largest single producer group, if the result
   is still convex (no path leaves and re-enters it) and plannable; else it starts a group,
   taking along the single-input elementwise ops that feed only it from a value materialised
   anyway (`_feeding_chain`: an RMSNorm's `square` / `mul_scalar` of a residual that the
   previous kernel writes go to the kernel that sums them).  Equal pure ops of one group
   are merged (kn-simplify's `cse_ops`: its per-matmul copies of a shared statistic).
3. *Lowering.*  Each group is replaced by the plan's kernels -- one `kn.customized`, or two
   for split-K (partials + combine; or one, whose split blocks meet in `tb.grid_sum`) -- carrying `kn.template`, `kn.smem_estimate` (bytes:
   the sum of the tile sizes) and `kn.cost_estimate_us`.  Plans estimated above 40% of the
   shared-memory limit are checked with `tb-plan-smem` itself (passes 1-9 of
   mirage-transpile on a scratch copy); the cheapest plan that it fits is taken.  A group
   that is an unplannable op stays as it is.  A group that is a lone `kn.matmul` (Mirage leaves every one to cuBLAS) is
   generated too unless a library GEMM is estimated cheaper (`library_gemm_us`: compute-bound
   shapes, where cuBLAS's wgmma kernels outrun our mma.sync ones); decode-shaped matmuls of a
   few rows stream their weights and belong in a generated kernel.  With `hopper-gemm` (the
   default) such a library matmul becomes a `contraction.contract` over its recorded strides
   instead when it has an sm_90 GEMM view (`matmul_contract.has_gemm_view`: fp16/bf16,
   rank 2..4, TMA-compatible strides), which mirage-transpile lowers to `cute.hopper_gemm`
   (the TMA + wgmma kernel, sm_90a only: pass `hopper-gemm=false` for other targets).  So
   does a group of compute-bound matmuls whose other ops are their epilogues (unary ops, then
   one `kn.mul` by a tensor of the result's type: `gemm_epilogue`), when the GEMMs' estimates
   sum below the group's best fused plan; and an attention group (`softmax(scale Q K) V`
   over at least 64 query rows) becomes one sm_90a flash-attention kernel,
   `cute.hopper_attention` (passes/conversion/flash_attention.py), and one over at most 16
   query rows per head one split-key decode kernel, `cute.decode_attention`
   (passes/conversion/decode_attention.py), when its estimate is below the group's best
   plan.  Ops of the function are then re-ordered topologically (stable).

Options: `smem-limit` (bytes per block), `num-sms`, `allow-split`, `k-tiles` (for-loop tile
candidates along the contracted dim), `candidate` (take the plan of this rank in estimated
cost order instead of the cheapest: 0 = cheapest; the tuning candidates `mirage-bench`
profiles), `always-split` (also enumerate split-K plans when an unsplit grid fills the SMs),
`grid-sum` (also enumerate split-K plans that combine their partials in the kernel with
`tb.grid_sum` instead of a second kernel), `per-op` (one kernel per fusible op, lone matmuls
included: a megakernel's tasks), `block-threads` (one thread count for every block; 0 =
the planner's), `lone-block-max-stages` (the ring depth that
tb-plan-pipeline's option of the same name gives wide lone blocks, which their estimate
counts; pass both passes the same value), `hopper-gemm` and `hopper-attention` (step 3) and `share-sms` (plan the
groups of one dependency level that stream graph inputs for their byte shares of the SMs:
`concurrent_sm_shares`, for a megakernel, whose workers run such kernels side by side).

Why one module of ~600 lines: aggregation, partition and lowering share one group
bookkeeping (the component walk, convexity, the plan cache of `Planner.plan` and the
feasibility checks) that the three steps update in turn; the planner, the cut rule's cost and
the library / sm_90a choices live in their own modules (plan_group, plan_cost, matmul_contract,
flash_attention, decode_attention).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import DiagnosticException

from mirage_xdsl.dialects import kn
from mirage_xdsl.dialects.kn.reshape_op import ReshapeOp
from mirage_xdsl.dialects.kn.tensors import is_weight
from mirage_xdsl.passes.conversion.build_tb_graph import emit_kernel
from mirage_xdsl.passes.conversion.decode_attention import decode_attention_us, fits_decode, lower_decode
from mirage_xdsl.passes.conversion.default_tb_graph import Planner
from mirage_xdsl.passes.conversion.flash_attention import fits_kernel, flash_attention_us, lower_attention, match_attention
from mirage_xdsl.passes.conversion.gemm_cost import compute_bound, hopper_gemm_us, library_gemm_us
from mirage_xdsl.passes.conversion.gemm_epilogue import factor_bytes, lower_chain, split_into_chains
from mirage_xdsl.passes.conversion.kernel_plan import FusionPlan
from mirage_xdsl.passes.conversion.plan_group import fusible_op, group_from_ops
from mirage_xdsl.passes.conversion.sm_shares import concurrent_sm_shares, value_bytes
from mirage_xdsl.passes.kn.simplify import cse_ops
from mirage_xdsl.passes.tb.plan_pipeline import LONE_BLOCK_MAX_STAGES
from mirage_xdsl.target import SM90
from mirage_xdsl.target.cost_model import DeviceModel
from mirage_xdsl.target.errors import SharedMemoryExceeded


def _producers(op: Operation, fusible: set[Operation]) -> list[Operation]:
    out = []
    for v in op.operands:
        owner = v.owner
        if isinstance(owner, Operation) and owner in fusible and owner not in out:
            out.append(owner)
    return out


def _feeding_chain(op: Operation, group_of: dict[Operation, int], fusible: set[Operation]) -> list[Operation]:
    """The single-input elementwise ops (program order) that feed `op` alone, back from `op`'s
    operand to a value that is materialised anyway (a graph input, or a result with a use
    outside the chain), all in one group; [] if there is no such chain.

    When `op` cannot join that group (a reduction over a whole row the group's blocks split,
    e.g. the `sum(h^2 / n)` of an RMSNorm after an O projection), greedy growth has already
    put the chain (`square`, `mul_scalar`) in the producer's kernel, which then writes `h^2`
    for `op`'s kernel to read back whole; moved to `op`'s group instead, the chain is
    recomputed from `h` where it is consumed (no intermediate written, and a matmul over `h`
    there keeps the statistic as a register sum beside its loop)."""
    if len(op.operands) != 1:
        return []
    chain: list[Operation] = []
    value = op.operands[0]
    while True:
        prod = value.owner
        if not isinstance(prod, Operation) or prod not in fusible or prod not in group_of or len(list(value.uses)) != 1:
            break
        if not isinstance(prod, (kn.KnUnaryOp, kn.MulScalarOp)):
            break
        chain.append(prod)
        value = prod.operands[0]
    if not chain or len({group_of[c] for c in chain}) != 1:
        return []
    if isinstance(value.owner, Operation) and len(list(value.uses)) < 2:
        return []  # the chain's source would be written only for it: no bytes saved
    return chain[::-1]


def _components(ops: list[Operation]) -> list[list[Operation]]:
    fusible = set(ops)
    parent = {op: op for op in ops}

    def find(x: Operation) -> Operation:
        while parent[x] is not x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for op in ops:
        for p in _producers(op, fusible):
            parent[find(p)] = find(op)
    # a concat of two fused results is written through views by their one kernel (kn-fold-views)
    block = ops[0].parent_block() if ops else None
    for concat in [o for o in block.ops if isinstance(o, kn.ConcatOp)] if block is not None else []:
        prods = _producers(concat, fusible)
        for p in prods[1:]:
            parent[find(p)] = find(prods[0])
    comps: dict[Operation, list[Operation]] = {}
    for op in ops:
        comps.setdefault(find(op), []).append(op)
    return list(comps.values())


def is_convex(members: set[Operation]) -> bool:
    """No path leaves `members` and re-enters it."""
    stack: list[Operation] = []
    seen: set[Operation] = set()
    for op in members:
        for r in op.results:
            for use in r.uses:
                if use.operation not in members:
                    stack.append(use.operation)
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        for r in op.results:
            for use in r.uses:
                user = use.operation
                if user in members:
                    return False
                stack.append(user)
    return True


def reorder_block(block: Block) -> None:
    """Stable topological order of `block`'s ops (the terminator stays last)."""
    ops = list(block.ops)
    terminator = ops[-1] if ops and ops[-1].has_trait(IsTerminator) else None
    body = [op for op in ops if op is not terminator]
    pos = {op: i for i, op in enumerate(body)}
    deps: dict[Operation, int] = {}
    users: dict[Operation, list[Operation]] = {op: [] for op in body}
    for op in body:
        n = 0
        for v in op.operands:
            owner = v.owner
            if isinstance(owner, Operation) and owner in pos:
                n += 1
                users[owner].append(op)
        deps[op] = n
    heap = [(pos[op], op_id, op) for op_id, op in enumerate(body) if deps[op] == 0]
    heapq.heapify(heap)
    ids = {op: i for i, op in enumerate(body)}
    order: list[Operation] = []
    while heap:
        _, _, op = heapq.heappop(heap)
        order.append(op)
        for u in users[op]:
            deps[u] -= 1
            if deps[u] == 0:
                heapq.heappush(heap, (pos[u], ids[u], u))
    if len(order) != len(body):
        raise ValueError("kn-partition: the kernel graph has a cycle after partitioning")
    for op in body:
        op.detach()
    if terminator is not None:
        block.insert_ops_before(order, terminator)
    else:
        block.add_ops(order)


@dataclass(frozen=True)
class PartitionOptions:
    """The options of `kn-partition`, shared by `kn-fuse`, which forwards them (module
    docstring)."""

    smem_limit: int = SM90.smem_per_block_optin
    num_sms: int = SM90.num_sms
    allow_split: bool = True
    k_tiles: tuple[int, ...] = (256, 128, 64)
    candidate: int = 0
    always_split: bool = True
    grid_sum: bool = True
    lone_block_max_stages: int = LONE_BLOCK_MAX_STAGES
    online_softmax: bool = False
    per_op: bool = False
    """One kernel per fusible op, lone matmuls included (no aggregation, no library GEMM):
    the per-op kernels a megakernel schedules as tasks (mirage-megakernel, issue #32)."""
    block_threads: int = 0
    """Threads of every block (0: the planner's choice, 128 or 512): a megakernel runs all of
    its tasks with one thread count."""
    hopper_gemm: bool = True
    """A lone matmul left to the library becomes a `contraction.contract` for the sm_90a GEMM
    when it has a GEMM view (module docstring, step 3); false for targets other than sm_90."""
    share_sms: bool = False
    """Plan each group for its share of the SMs among the groups that run concurrently with it
    (`concurrent_sm_shares`): a megakernel runs the kernels of one dependency level side by
    side (mirage-megakernel), a per-kernel launch one at a time."""
    hopper_attention: bool = True
    """With `hopper_gemm`, an attention group becomes one sm_90a flash-attention kernel
    (`cute.hopper_attention`) or split-key decode kernel (`cute.decode_attention`) where that is
    estimated faster than its best plan (module docstring, step 3); false keeps the generated
    (mma.sync) attention kernels."""

    def partition_options(self) -> dict[str, object]:
        """These options as keyword arguments of `KnPartitionPass` (kn-fuse forwards them)."""
        return {f.name: getattr(self, f.name) for f in fields(PartitionOptions)}


@dataclass(frozen=True)
class KnPartitionPass(ModulePass, PartitionOptions):
    """Aggregate fusible kn ops into groups and lower each into fused `kn.customized` kernels."""

    name = "kn-partition"

    def device(self) -> DeviceModel:
        """The planner's device model with this pass's limits and search switches applied."""
        threads = {}
        if self.block_threads:
            t = self.block_threads
            threads = {"threads_per_block": t, "wide_block_threads": t, "lone_matmul_block_threads": t, "max_threads_per_block": t}
        return replace(
            DeviceModel(),
            **threads,  # type: ignore[arg-type]
            smem_per_block=self.smem_limit,
            num_sms=self.num_sms,
            k_tiles=tuple(self.k_tiles),
            always_try_split=self.always_split,
            grid_sum=self.grid_sum,
            lone_block_stages=self.lone_block_max_stages,
            online_softmax=self.online_softmax,
        )

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Partition every function of `op` in place (`partition_function`).

        Raises:
            ValueError: the ops cannot be put back in a topological order (a cycle after
                partitioning; a bug of the grouping, which keeps groups convex).
        """
        planner = Planner(self.device())
        for func in [f for f in op.walk() if isinstance(f, FuncOp) and f.body.blocks]:
            partition_function(
                func,
                planner,
                self.allow_split,
                self.candidate,
                self.per_op,
                self.hopper_gemm,
                self.share_sms,
                hopper_attention=self.hopper_gemm and self.hopper_attention,
            )


def _plan(planner: Planner, ops: list[Operation], allow_split: bool, cache: dict, rank: int = 0) -> FusionPlan | None:
    """The plan of the group `ops`: the cheapest when partitioning decides (`rank` 0), the
    `rank`-th cheapest for the final lowering of a tuning candidate."""
    key = (frozenset(ops), rank)
    if key not in cache:
        group, _ = group_from_ops(ops)
        accept = (lambda fp: smem_fits(fp, planner.device.smem_per_block)) if VERIFY_SMEM else None
        cache[key] = planner.plan(group, allow_split, accept, rank) if group.outputs else None
    return cache[key]


VERIFY_SMEM = True
VERIFY_FRACTION = 0.4
"""Plans whose shared-memory estimate exceeds this fraction of the limit are checked with the
transpiler's own planner (the estimate is a sum of tile sizes; the real plan adds alignment
and fragmentation)."""


def smem_fits(plan: FusionPlan, limit: int) -> bool:
    """Whether `tb-plan-smem` (passes 1-9 of mirage-transpile) fits every kernel of `plan` in
    `limit` bytes; plans estimated well below the limit are accepted without running it."""
    if all(k.smem <= VERIFY_FRACTION * limit for k in plan.kernels):
        return True
    from xdsl.context import Context
    from xdsl.dialects.func import ReturnOp

    from mirage_xdsl.passes.pipeline import MirageTranspilePass

    group = plan.kernels[0].group
    inputs = [n for n in group.nodes if n.kind == "input"]
    block = Block(arg_types=[n.ext.type for n in inputs])
    remap = {n.ext: arg for n, arg in zip(inputs, block.args)}
    partials: list[SSAValue] = []

    def ext_value(ext):  # noqa: ANN001, ANN202
        if isinstance(ext, tuple) and ext and ext[0] == "partial":
            return partial_input(ext, partials, block.add_op)
        return remap[ext]

    for plan_k in plan.kernels:
        op = emit_kernel(plan_k, ext_value)
        block.add_op(op)
        partials = list(op.results)
    block.add_op(ReturnOp(*partials))
    func = FuncOp("smem_check", (list(block.arg_types), [v.type for v in partials]), Region(block))
    module = ModuleOp([func])
    try:
        MirageTranspilePass(fuse=False, to_cute=False, smem_limit=limit).apply(Context(), module)
    except SharedMemoryExceeded:
        return False
    except DiagnosticException:
        return True  # only a shared-memory verdict rejects the plan; other errors surface when it is built
    return True


CUT_MIN_REDUNDANCY = 1.5
"""Cuts are tried only for a one-kernel plan whose blocks do at least this multiple of the
group's own matmul FLOPs (`KernelPlan.redundancy`): what a cut saves is the recomputation."""
CUT_GAIN = 1.1
"""A cut of such a plan is kept unless its two kernels are estimated more than this multiple of
the one kernel's time.  Above 1: the estimate bills a recomputing kernel's re-reads of the
shared operand as L2 bandwidth, but its blocks read the same lines in lockstep, which costs
more -- H200, suite LoRA r64 (2026-11-27): the one kernel (128 blocks, each computing
`X @ A` with A [4096, 64]) estimated 17.2 µs, measured 25.1; cut after `X @ A`, estimated
18.6, measured 20.4."""


def _prefetch_overlap_us(tail: list[Operation], head_us: float, device: DeviceModel) -> float:
    """The share of the head kernel's time the tail kernel hides: a tail that streams `kn.weight`
    inputs loads its ring prologue (at most those inputs' bytes and `weight_prefetch_bytes`) before
    its PDL wait, while the head kernel still runs (passes/cute/weight_prefetch.py)."""
    weights = {v for o in tail for v in o.operands if is_weight(v)}
    nbytes = sum(map(value_bytes, weights))
    return min(head_us, min(nbytes, device.weight_prefetch_bytes) / device.hbm_bytes_per_us)


CUT_MAX_INTERMEDIATE_SHARE = 1 / 8
"""A cut must pass the second kernel few bytes: the head's results it reads at most this share
of the graph inputs it streams anyway (LoRA's `X @ A`, 2 KB, beside W's 32 MB; not attention's
score matrix beside K and V)."""


def _small_intermediate(head: set[Operation], tail: list[Operation]) -> bool:
    """Whether the values `head` passes to `tail` are small (`CUT_MAX_INTERMEDIATE_SHARE`)."""
    passed = {v for o in tail for v in o.operands if isinstance(v.owner, Operation) and v.owner in head}
    streamed = {v for o in tail for v in o.operands if not isinstance(v.owner, Operation)}
    return sum(map(value_bytes, passed)) <= CUT_MAX_INTERMEDIATE_SHARE * sum(map(value_bytes, streamed))


def _cheaper_cut(planner: Planner, comp: list[Operation], whole: FusionPlan, cache: dict) -> list[list[Operation]]:
    """`comp` as one group, or, when its one-kernel plan `whole` recomputes
    (`CUT_MIN_REDUNDANCY`), cut in two (`CUT_GAIN`): after an op that other members read, the op
    with its producers in `comp` as one kernel and the rest as a second one, estimated as the
    two kernels' times less what the second's weight prefetch hides of the first.  The cheapest
    such cut is kept."""
    if max(k.redundancy for k in whole.kernels) < CUT_MIN_REDUNDANCY:
        return [comp]
    members = set(comp)
    best: tuple[float, list[list[Operation]]] = (whole.cost_us * CUT_GAIN, [comp])
    for op in comp:
        if not any(use.operation in members for r in op.results for use in r.uses):
            continue
        head: set[Operation] = set()
        stack = [op]
        while stack:
            o = stack.pop()
            if o not in head:
                head.add(o)
                stack += _producers(o, members)
        tail = [o for o in comp if o not in head]
        head_ops = [o for o in comp if o in head]
        if not tail or not is_convex(set(tail)) or not _small_intermediate(head, tail):
            continue
        first, second = _plan(planner, head_ops, True, cache), _plan(planner, tail, True, cache)
        if first is None or second is None:
            continue
        cost = first.cost_us + second.cost_us - _prefetch_overlap_us(tail, first.cost_us, planner.device)
        if cost < best[0]:
            best = (cost, [head_ops, tail])
    return best[1]


def partition_function(
    func: FuncOp,
    planner: Planner,
    allow_split: bool = True,
    rank: int = 0,
    per_op: bool = False,
    hopper_gemm: bool = False,
    share_sms: bool = False,
    hopper_attention: bool = False,
) -> list[FusionPlan]:
    """Partition one kernel graph in place (groups chosen with the cheapest plans, then each
    lowered with its `rank`-th cheapest plan); return the applied plans.  `per_op`: every
    fusible op is a group of its own and a lone matmul becomes a kernel too; `hopper_gemm`: a
    lone matmul left to the library becomes a `contraction.contract` where it can
    (module docstring, step 3); `share_sms`: each group is lowered with the plan its share of
    the SMs among concurrent groups gets (`concurrent_sm_shares`); `hopper_attention`: an
    attention group may become a `cute.hopper_attention` (step 3)."""
    block = func.body.block
    fusible_ops = [o for o in block.ops if fusible_op(o)]
    fusible = set(fusible_ops)
    cache: dict = {}
    groups: list[list[Operation]] = []
    for comp in [[o] for o in fusible_ops] if per_op else _components(fusible_ops):
        # a component is connected through fusible ops only; a path through an op outside it
        # (a concat written through views) may leave and re-enter it, and as one kernel it
        # would then both feed and read that op (fuzz seed 1165 graph 131): built op by op
        whole = _plan(planner, comp, allow_split, cache) if is_convex(set(comp)) else None
        if whole is not None:
            groups += _cheaper_cut(planner, comp, whole, cache) if allow_split and not per_op else [comp]
            continue
        group_of: dict[Operation, int] = {}
        local: list[list[Operation]] = []
        for o in comp:
            prods = [group_of[p] for p in _producers(o, fusible) if p in group_of]
            prods = list(dict.fromkeys(prods))
            candidates: list[list[int]] = []
            if prods:
                candidates.append(prods)
                candidates += [[g] for g in sorted(prods, key=lambda g: -len(local[g]))] if len(prods) > 1 else []
            placed = False
            for gids in candidates:
                members = [m for g in gids for m in local[g]] + [o]
                members = [m for m in comp if m in set(members)]
                if not is_convex(set(members)) or _plan(planner, members, allow_split, cache) is None:
                    continue
                keep = gids[0]
                local[keep] = members
                for g in gids[1:]:
                    local[g] = []
                for m in members:
                    group_of[m] = keep
                placed = True
                break
            if not placed:
                start = [o]
                pulled = _feeding_chain(o, group_of, fusible)
                if pulled:
                    g, moved = group_of[pulled[0]], set(pulled)
                    rest = [m for m in local[g] if m not in moved]
                    mine = [m for m in comp if m in moved or m is o]
                    if (
                        rest
                        and is_convex(set(rest))
                        and _plan(planner, rest, allow_split, cache) is not None
                        and _plan(planner, mine, allow_split, cache) is not None
                    ):
                        local[g] = rest
                        start = mine
                for m in start:
                    group_of[m] = len(local)
                local.append(start)
        groups += [g for g in local if g]
    # kn-simplify gives each matmul its own copy of a shared row statistic so that kernels apart
    # each compute theirs; copies that land in one kernel (a gate and an up projection) need one
    merged = [cse_ops(g) for g in groups]
    if any(len(a) != len(b) for a, b in zip(merged, groups)):
        cache.clear()  # a cached plan of a subset may read a merged copy as an input
    groups = merged
    applied = []
    shares = concurrent_sm_shares(groups, planner.device.num_sms) if share_sms else {}
    for i, members in enumerate(groups):
        if i in shares:
            shared = Planner(replace(planner.device, num_sms=shares[i]))
            plan = _plan(shared, members, allow_split, {}, rank)
        else:
            plan = _plan(planner, members, allow_split, cache, rank)
        if plan is None:
            continue
        if not per_op and hopper_attention and _leave_to_flash_attention(members, plan.cost_us, planner.device):
            continue
        if not per_op and _leave_to_gemm(members, planner, allow_split, cache, hopper_gemm):
            continue
        apply_plan(members, plan)
        applied.append(plan)
    reorder_block(block)
    return applied


def _leave_to_flash_attention(members: list[Operation], best_us: float, device: DeviceModel) -> bool:
    """Whether the group is an attention that `cute.hopper_attention` (prefill) or
    `cute.decode_attention` (a few query rows per head) computes faster than its best plan
    (module docstring, step 3); if so it is lowered to that op here."""
    group = match_attention(members)
    if group is None:
        return False
    if fits_kernel(group) and flash_attention_us(group, device) < best_us:
        lower_attention(group, device)
        return True
    if fits_decode(group, device) and decode_attention_us(group, device) < best_us:
        lower_decode(group, device)
        return True
    return False


def _leave_to_gemm(members: list[Operation], planner: Planner, allow_split: bool, cache: dict, hopper_gemm: bool) -> bool:
    """Whether the group leaves the generated kernels (module docstring, step 3): to sm_90 GEMMs
    whose epilogues apply the group's elementwise ops (`gemm_epilogue`, lowered here when their
    estimates sum below the group's best plan), or a lone compute-bound matmul to a library call."""
    best = _plan(planner, members, allow_split, cache)
    if best is None:
        return False
    device = planner.device
    if hopper_gemm and (chains := split_into_chains(members, compute_bound)) is not None:
        gemm_us = sum(hopper_gemm_us(c.matmul, device) + factor_bytes(c) / device.hbm_bytes_per_us for c in chains)
        if gemm_us < best.cost_us:
            for chain in chains:
                lower_chain(chain)
            return True
    lone = members[0] if len(members) == 1 and isinstance(members[0], kn.MatmulOp) else None
    return lone is not None and compute_bound(lone) and library_gemm_us(lone, device) < best.cost_us


def partial_input(ext: tuple[Any, ...], partials: list[SSAValue], insert: Callable[[Operation], None]) -> SSAValue:
    """The value a combine kernel reads for its input `ext = ("partial", j[, view])`: kernel 1's
    j-th result, or a `kn.reshape` of it to `view` (inserted with `insert`) where the combine
    reads it folded (split_combine.py); kn-alias-reshape makes that reshape a view."""
    value = partials[ext[1]]
    if len(ext) > 2 and tuple(ext[2]) != kn.shape_of(value):
        view = ReshapeOp(value, ext[2])
        insert(view)
        return view.output
    return value


def apply_plan(members: list[Operation], plan: FusionPlan) -> list[kn.CustomizedOp]:
    """Replace the group `members` by the kernels of `plan` (inserted before the first member)."""
    current, out_values = group_from_ops(members)
    # the plan may have been made before an earlier group was replaced: read the current values
    remap = {
        old.ext: new.ext
        for old, new in zip(plan.kernels[0].group.nodes, current.nodes)
        if old.kind == "input" and new.kind == "input"
    }
    anchor = members[0]
    block = anchor.parent_block()
    assert block is not None
    kernels: list[kn.CustomizedOp] = []
    partials: list[SSAValue] = []

    def ext_value(ext):  # noqa: ANN001, ANN202
        if isinstance(ext, tuple) and ext and ext[0] == "partial":
            return partial_input(ext, partials, lambda op: block.insert_op_before(op, anchor))
        return remap.get(ext, ext)

    base = next((v.name_hint for v in out_values if v.name_hint), None)
    for i, plan_k in enumerate(plan.kernels):
        op = emit_kernel(plan_k, ext_value)
        block.insert_op_before(op, anchor)
        kernels.append(op)
        partials = list(op.results)
        if base is not None and i + 1 < len(plan.kernels):
            for j, r in enumerate(partials):
                r.name_hint = f"{base}_part{j}"
    final = kernels[-1]
    for old, new in zip(out_values, final.results):
        if new.type != old.type:  # a folded combine's rows (split_combine.folded_shape)
            view = ReshapeOp(new, kn.shape_of(old))
            block.insert_op_before(view, anchor)
            new = view.output
        if old.name_hint and not new.name_hint:
            new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    for m in reversed(members):
        m.detach()
        m.erase()
    return kernels
