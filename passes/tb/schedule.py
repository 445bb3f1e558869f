"""`tb-schedule`: execution order, barriers and per-op copy/accumulator metadata of every
threadblock graph (mirage-notes 3.5; seed 000 "TB Graph Scheduling",
docs/seeds/000_801cde5f44520f02.txt).

**Stages.** pre-loop = inputs with `forloop_dim = -1` (loaded once); loop = iterated inputs
and every op whose first operand is not `after_accum` (accumulators included); post-loop =
ops whose first operand is `after_accum` and the outputs.

**Levels (the depth DP).** Inputs are level 0. An op fused into a chain (`tb.chain_pos > 0`)
takes its leader's level; any other op gets `1 + max(level of its producers)`, where a
producer from an earlier stage (a pre-loop input seen from the loop; an accumulator or
anything before the loop seen from the post-loop) counts as level 0. A barrier
(`__syncthreads`) separates consecutive levels of a stage, and only those: the number of
levels of a stage is its longest dependency path, so no order has fewer barriers.
`tb.grid_sum` ops (which synchronise the split blocks once) share one post-loop level and
never move: the first one after the post-loop ops that feed a grid sum (a `reduction` that
shrinks a partial before it is summed, see tb-decompose-accumulators); every other
post-loop op runs after them.

**Peak memory among orders with the fewest barriers.** Keeping the number of levels, a
chain with slack may run at any level between its ASAP level (the DP) and its ALAP level.
Shared memory is only released at barriers (mirage-notes 3.7), so the order of ops *within*
a level never changes the live bytes; what changes them is the level each chain runs at.
We pick the level assignment that minimises the peak of live shared-memory bytes (the
lifetimes of `tensor_lifetimes`, the same ones `tb-plan-smem` packs): exhaustively when the
product of the chains' slack ranges is at most `EXACT_LIMIT` (ties: lexicographically
earliest levels), otherwise by greedy descent from ASAP (move one chain at a time to the
level that lowers the peak most, until no move helps). Within a level ops run by chain (the
leader's position), then chain position; `tb.output` ops keep their relative order (the k-th
output produces the graph's k-th result), each no earlier than the previous one.

**Metadata** (passes/README.md, step 7):
* `tb.chunked` on an input: 16-byte copies are legal - every DTensor stride is a multiple of
  `A = 16 B / sizeof(T)` (or 1), the *real innermost dim* (first dim of size != 1 with
  stride 1, else the last dim) of the DTensor and of the STensor coincide, the STensor has
  stride 1 there and multiples of `A` elsewhere, and every block offset
  `(dim / grid) * stride` and the loop step `tile * stride` are multiples of `A`.
  Same rule on outputs (block offset `tile * stride`).
* `tb.pipelined` on an input: chunked and iterated (`forloop_dim >= 0`, cp.async
  multi-buffered; the number of buffers, `tb.stages`, is tb-plan-pipeline's decision).
  Deviation: not when `forloop_range == 1` (one iteration gains nothing from a second buffer, which would only cost shared memory).
* `tb.accum_in_reg` on a `nored` accumulator: its chain is exactly `[matmul, nored]` and the
  running total of fp32 registers per thread (`ceil(numel / threads)`) of the register
  accumulators so far stays <= 192. Mirage first counts every `nored` in the running total
  and then drops those not on a `[matmul, nored]` chain; we only count the candidates, so an
  accumulator that stays in shared memory never uses up register budget.
  Deviation: an fp32 `nored` accumulator that ends a chain of elementwise ops (rms_norm's
  sum of squares: `[square, mul_scalar, nored]`) is kept in registers too when it takes at
  most `ELEMENTWISE_ACCUM_MAX_REGS` per thread and fits the same running total, counted
  after the matmul accumulators.  The printer holds it as an `mx::RegTile` and stores it
  once after the loop, so tb-plan-smem gives its shared tile only that post-loop lifetime
  (Mirage reserves it for the whole loop).
* `tb.stage`, `tb.level` on every op, `tb.num_barriers` (barriers between levels, summed
  over the stages) on the `kn.customized`. Stage boundaries (after the pre-loop loads, at the
  end of each iteration, after the loop, after the register write-back) always have a
  barrier and are not counted.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import tb
from mirage_xdsl.dialects.kn import CustomizedOp, element_type_of, ints, shape_of
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.dialects.tiling import row_major_strides
from mirage_xdsl.passes.tb import dsa
from mirage_xdsl.passes.tb.layout_math import (
    alignment_elems,
    calc_tensor_strides,
    elem_bytes_of,
    storage_elem_bytes,
    stores_fp32,
)
from mirage_xdsl.target import ELEMENTWISE_ACCUM_MAX_REGS

PASS_NAME = "tb-schedule"
STAGES = ("pre", "loop", "post")
EXACT_LIMIT = 2048
"""Largest number of level assignments searched exhaustively."""
MAX_ACCUM_REGS = 192
"""fp32 registers per thread that register accumulators may use in total (Mirage's rule)."""


# ---------------------------------------------------------------------------------------
# Pure core: a threadblock graph as small records


@dataclass
class SchedOp:
    """One tb op. `operands`: (producer index, result index), producer -1 = block argument."""

    idx: int
    name: str
    operands: tuple[tuple[int, int], ...] = ()
    after_accum_in: bool = False
    chain: int = -1
    chain_pos: int = 0
    result_bytes: tuple[int, ...] = ()
    forloop_dim: int = -1
    accum_kind: str | None = None
    loop_carried: tuple[int, ...] = ()
    """Results read back by the next iteration (`tb.reduction_max`'s running max)."""

    def __post_init__(self) -> None:
        if self.chain < 0:
            self.chain = self.idx

    @property
    def is_input(self) -> bool:
        return self.name == "tb.input"

    @property
    def is_output(self) -> bool:
        return self.name == "tb.output"

    @property
    def is_accum(self) -> bool:
        return self.name == "tb.forloop_accum"

    @property
    def is_grid_sum(self) -> bool:
        return self.name == "tb.grid_sum"


@dataclass(frozen=True)
class TensorLife:
    """One shared-memory buffer: result `result` of op `op` (`buffer` k >= 1 = the (k+1)-th
    stage buffer of a pipelined input), `size` bytes, live in the half-open time range
    [start, end)."""

    op: int
    result: int
    size: int
    start: int
    end: int
    category: str
    buffer: int = 0


@dataclass
class Schedule:
    stage: list[str]
    level: list[int]
    order: list[int]
    num_barriers: int
    peak_live: int
    search: str  # "exact" | "greedy" | "fixed" (no slack)
    barriers_per_stage: dict[str, int] = field(default_factory=dict)


def stage_of(op: SchedOp) -> str:
    if op.is_input:
        return "pre" if op.forloop_dim < 0 else "loop"
    if op.is_output:
        return "post"
    return "post" if op.after_accum_in else "loop"


def chain_tails(ops: Sequence[SchedOp]) -> set[int]:
    """Ops whose results are materialised in shared memory: inputs and chain tails."""
    last: dict[int, SchedOp] = {}
    for op in ops:
        cur = last.get(op.chain)
        if cur is None or op.chain_pos > cur.chain_pos:
            last[op.chain] = op
    return {op.idx for op in ops if op.is_input or last[op.chain] is op}


def _chains(ops: Sequence[SchedOp]) -> dict[int, list[int]]:
    members: dict[int, list[int]] = {}
    for op in ops:
        members.setdefault(op.chain, []).append(op.idx)
    for m in members.values():
        m.sort(key=lambda i: ops[i].chain_pos)
    return members


def _chain_preds(ops: Sequence[SchedOp], stages: Sequence[str], members: dict[int, list[int]]) -> dict[int, set[int]]:
    """Chain -> chains of the same stage it depends on (a producer in another stage gives none)."""
    preds: dict[int, set[int]] = {c: set() for c in members}
    for c, idxs in members.items():
        for i in idxs:
            for p, _ in ops[i].operands:
                if p >= 0 and ops[p].chain != c and stages[p] == stages[i]:
                    preds[c].add(ops[p].chain)
    return preds


def asap_levels(ops: Sequence[SchedOp], stages: Sequence[str] | None = None) -> list[int]:
    """The depth DP: inputs 0, fused ops their leader's level, others 1 + max(producers).

    Grid sums synchronise the split blocks once: they all take the level after the deepest
    post-loop op that feeds one of them, and every other post-loop op comes after them."""
    stages = stages or [stage_of(o) for o in ops]
    if not any(o.is_grid_sum for o in ops):
        return _depths(ops, stages, None)
    feeds_sum = _feeds_grid_sum(ops, stages)
    free = _depths(ops, stages, None)  # a feeder's depth depends only on feeders and the loop
    sums_level = 1 + max((free[i] for i in feeds_sum), default=0)
    return _depths(ops, stages, (sums_level, feeds_sum))


def _depths(ops: Sequence[SchedOp], stages: Sequence[str], sums: tuple[int, set[int]] | None) -> list[int]:
    """The DP; with `sums` = (the grid sums' level, the ops that feed them), grid sums take
    that level and the other post-loop ops come after it."""
    level = [0] * len(ops)
    for op in ops:  # topological order
        if op.is_input:
            level[op.idx] = 0
        elif op.chain_pos > 0 and op.chain != op.idx:
            level[op.idx] = level[op.chain]
        elif sums is not None and op.is_grid_sum:
            level[op.idx] = sums[0]
        else:
            prods = [level[p] if stages[p] == stages[op.idx] else 0 for p, _ in op.operands if p >= 0]
            if sums is not None and stages[op.idx] == "post" and op.idx not in sums[1]:
                prods.append(sums[0])
            level[op.idx] = 1 + max(prods, default=0)
    return level


def _feeds_grid_sum(ops: Sequence[SchedOp], stages: Sequence[str]) -> set[int]:
    """Post-loop ops (not grid sums) with a path to a `tb.grid_sum`."""
    feeds: set[int] = set()
    for op in reversed(ops):  # consumers before producers
        if op.is_grid_sum or op.idx in feeds:
            for p, _ in op.operands:
                if p >= 0 and stages[p] == "post" and not ops[p].is_grid_sum:
                    feeds.add(p)
    return feeds


def time_axis(ops: Sequence[SchedOp], stages: Sequence[str], levels: Sequence[int]) -> tuple[int, int, int]:
    """(P, loop_base, W): pre-loop level i -> time i; `P` = loop start (accumulators cleared,
    pipelined loads primed); loop level j -> `loop_base + j`; `W` = the register write-back
    after the loop; post level k -> `W + k`."""
    pre = [levels[o.idx] for o in ops if stages[o.idx] == "pre"]
    loop = [levels[o.idx] for o in ops if stages[o.idx] == "loop"]
    p = (max(pre) + 1) if pre else 0
    loop_base = p + 1
    w = loop_base + ((max(loop) + 1) if loop else 0)
    return p, loop_base, w


def tensor_lifetimes(
    ops: Sequence[SchedOp],
    stages: Sequence[str],
    levels: Sequence[int],
    in_reg: set[int],
    pipelined: set[int],
    nbuf: dict[int, int] | None = None,
) -> list[TensorLife]:
    """Shared-memory buffers and their lifetimes by the categories of mirage-notes 3.7.

    A pipelined input has `nbuf[op]` buffers (default 2: a double buffer; `tb.stages`,
    written by tb-plan-pipeline), all live for the whole loop.

    A buffer is freed at the first barrier after its last use: at the end of the last
    consumer's level; a tensor used inside the loop but made before it (pre-loop inputs,
    shared-memory accumulators) lives until the loop ends. Chain-internal results take no
    shared memory. Register accumulators only need shared memory for the write-back.
    """
    p, loop_base, w = time_axis(ops, stages, levels)
    tails = chain_tails(ops)
    consumers: dict[tuple[int, int], list[int]] = {}
    for op in ops:
        for prod in op.operands:
            if prod[0] >= 0:
                consumers.setdefault(prod, []).append(op.idx)

    def when(i: int) -> int:
        st = stages[i]
        return levels[i] if st == "pre" else (loop_base + levels[i] if st == "loop" else w + levels[i])

    lives: list[TensorLife] = []
    for op in ops:
        if op.idx not in tails:
            continue
        for r, size in enumerate(op.result_bytes):
            st = stages[op.idx]
            if op.is_input and st == "pre":
                cat, start = "pre-input", when(op.idx)
            elif op.is_input and op.idx in pipelined:
                cat, start = "pipelined-input", p
            elif op.is_input:
                cat, start = "loop-input", when(op.idx)
            elif op.is_accum and op.idx in in_reg:
                cat, start = "reg-accum", w
            elif op.is_accum:
                cat, start = "smem-accum", p
            elif st == "loop" and r in op.loop_carried:
                # filled before the loop and read back by every iteration: it must not share
                # storage with anything else live during the loop, even with no consumer
                cat, start = "loop-carried", p
            else:
                cat, start = ("loop" if st == "loop" else "post"), when(op.idx)
            if cat == "pipelined-input":
                end = w
            else:
                ends = []
                for c in consumers.get((op.idx, r), []):
                    if stages[c] == "loop":
                        ends.append(when(c) + 1 if cat in ("loop-input", "loop") else w)
                    else:
                        ends.append(when(c) + 1)
                if stages[op.idx] == "pre" and not consumers.get((op.idx, r)):
                    # a pre-loop write nobody reads (an unused loop-invariant input) still
                    # lands in the phase that clears the accumulators before the loop's first
                    # barrier: keep it apart from them (found by bench/fuzz.py)
                    ends.append(p + 1)
                if cat == "loop-carried":
                    # written by every iteration: live to the loop's end even when nothing
                    # reads it (found by bench/fuzz.py)
                    ends.append(w)
                if cat == "smem-accum":
                    # the same, and one step past the loop: cute-register-accumulators may keep
                    # it in registers and write it back after the loop even when nothing reads
                    # it (fuzz seed 10 graph 169: a dead accumulator's write-back overwrote a
                    # live one's)
                    ends.append(w + 1)
                end = max(ends, default=start + 1)
            lives.append(TensorLife(op.idx, r, size, start, max(end, start + 1), cat))
            if cat == "pipelined-input":
                n = max(2, (nbuf or {}).get(op.idx, 2))
                for k in range(1, n):
                    lives.append(TensorLife(op.idx, r, size, start, end, cat, buffer=k))
    return lives


def peak_live_bytes(lives: Sequence[TensorLife]) -> int:
    return dsa.lower_bound([(t.size, t.start, t.end) for t in lives])


def count_barriers(order: Sequence[int], stages: Sequence[str], levels: Sequence[int]) -> dict[str, int]:
    out = {s: 0 for s in STAGES}
    prev: dict[str, int] = {}
    for i in order:
        st = stages[i]
        if st in prev and prev[st] != levels[i]:
            out[st] += 1
        prev[st] = levels[i]
    return out


def schedule_ops(
    ops: Sequence[SchedOp],
    in_reg: set[int] | None = None,
    pipelined: set[int] | None = None,
    exact_limit: int = EXACT_LIMIT,
) -> Schedule:
    """Stages, levels and execution order with the fewest barriers, then the lowest peak of
    live shared-memory bytes (see the module docstring)."""
    in_reg = in_reg or set()
    pipelined = pipelined or set()
    stages = [stage_of(o) for o in ops]
    outputs = [o.idx for o in ops if o.is_output]

    def fix_outputs(lv: list[int]) -> list[int]:
        # the k-th tb.output produces result k: outputs keep their relative order, so an
        # output runs no earlier than the one before it (never adds a level)
        prev = 0
        for i in outputs:
            own = 1 + max([lv[p] if stages[p] == stages[i] else 0 for p, _ in ops[i].operands if p >= 0], default=0)
            lv[i] = max(own, prev)
            prev = lv[i]
        return lv

    asap = fix_outputs(asap_levels(ops, stages))
    members = _chains(ops)
    preds = _chain_preds(ops, stages, members)
    succs: dict[int, set[int]] = {c: set() for c in members}
    for c, ps in preds.items():
        for q in ps:
            succs[q].add(c)
    top = {s: max([asap[o.idx] for o in ops if stages[o.idx] == s], default=0) for s in STAGES}
    topo = sorted(members)  # a chain's producers have smaller leader positions
    alap: dict[int, int] = {}
    for c in reversed(topo):
        if ops[c].is_input:
            alap[c] = 0
            continue
        if ops[c].is_grid_sum:  # the sums never move, so what feeds them stays before them
            alap[c] = asap[c]
            continue
        alap[c] = min([alap[s] - 1 for s in succs[c]], default=top[stages[c]])
    movable = [
        c for c in topo if not (ops[c].is_input or ops[c].is_output or ops[c].is_grid_sum) and alap[c] > asap[c]
    ]

    def assign(chain_level: dict[int, int]) -> list[int]:
        lv = list(asap)
        for c, l in chain_level.items():
            for i in members[c]:
                lv[i] = l
        return fix_outputs(lv)

    def peak(lv: Sequence[int]) -> int:
        return peak_live_bytes(tensor_lifetimes(ops, stages, lv, in_reg, pipelined))

    def lower(c: int, chosen: dict[int, int]) -> int:
        return max([chosen.get(q, asap[q]) + 1 for q in preds[c]], default=asap[c])

    search = "fixed"
    best_choice: dict[int, int] = {}
    if movable:
        space = 1
        for c in movable:
            space *= alap[c] - asap[c] + 1
        if space <= exact_limit:
            search = "exact"
            best: tuple[int, tuple[int, ...]] | None = None

            def dfs(k: int, chosen: dict[int, int]) -> None:
                nonlocal best, best_choice
                if k == len(movable):
                    lv = assign(chosen)
                    key = (peak(lv), tuple(chosen[c] for c in movable))
                    if best is None or key < best:
                        best, best_choice = key, dict(chosen)
                    return
                c = movable[k]
                for l in range(max(lower(c, chosen), asap[c]), alap[c] + 1):
                    chosen[c] = l
                    dfs(k + 1, chosen)
                    del chosen[c]

            dfs(0, {})
        else:
            search = "greedy"
            chosen = {c: asap[c] for c in movable}
            cur = peak(assign(chosen))
            improved = True
            while improved:
                improved = False
                best_move: tuple[int, int, int] | None = None
                for c in movable:
                    hi = min([chosen.get(s, asap[s]) - 1 for s in succs[c] if not ops[s].is_output], default=alap[c])
                    for l in range(max(lower(c, chosen), asap[c]), min(hi, alap[c]) + 1):
                        if l == chosen[c]:
                            continue
                        old = chosen[c]
                        chosen[c] = l
                        pk = peak(assign(chosen))
                        chosen[c] = old
                        if pk < cur and (best_move is None or pk < best_move[0]):
                            best_move = (pk, c, l)
                if best_move is not None:
                    cur, c, l = best_move
                    chosen[c] = l
                    improved = True
            best_choice = chosen
    levels = assign(best_choice)
    order = sorted(
        range(len(ops)),
        key=lambda i: (STAGES.index(stages[i]), levels[i], ops[i].chain, ops[i].chain_pos, i),
    )
    per_stage = count_barriers(order, stages, levels)
    return Schedule(
        stages,
        levels,
        order,
        sum(per_stage.values()),
        peak(levels),
        search,
        per_stage,
    )


def register_accumulators(
    ops: Sequence[SchedOp],
    numel: dict[int, int],
    threads: int,
    max_regs: int = MAX_ACCUM_REGS,
    elementwise: Collection[int] = (),
) -> set[int]:
    """`nored` accumulators kept in registers, within the running budget of `max_regs` fp32
    registers per thread (`ceil(numel / threads)` each): first those on an exact
    `[matmul, nored]` chain (Mirage's rule), then those in `elementwise` -- fp32
    accumulators ending a chain of two or more ops led by an elementwise op (the caller
    checks the op kinds and the tile's storage type) -- of at most
    `ELEMENTWISE_ACCUM_MAX_REGS` each.  A lone accumulator (a chain of one) stays in shared
    memory: convert-tb-to-cute may fuse it into a register chain (register_chain.py)."""
    members = _chains(ops)
    kept: set[int] = set()
    total = 0

    def keep(idx: int, cap: int) -> None:
        nonlocal total
        regs = -(-numel[idx] // max(threads, 1))
        if regs <= cap and total + regs <= max_regs:
            total += regs
            kept.add(idx)

    for op in ops:
        if op.is_accum and op.accum_kind == "nored":
            chain = members[op.chain]
            if len(chain) == 2 and ops[chain[0]].name == "tb.matmul" and chain[1] == op.idx:
                keep(op.idx, max_regs)
    for op in ops:
        if op.is_accum and op.accum_kind == "nored" and op.idx in elementwise:
            chain = members[op.chain]
            if len(chain) >= 2 and chain[-1] == op.idx:
                keep(op.idx, ELEMENTWISE_ACCUM_MAX_REGS)
    return kept


def elementwise_chain_accumulators(ops: Sequence[Operation], recs: Sequence[SchedOp]) -> set[int]:
    """Positions of the fp32 `nored` accumulators whose chain leader is an elementwise op
    (unary or binary, not a matmul): the `elementwise` candidates of
    `register_accumulators`.  `recs` are `graph_records(...)`'s, chain ids = leader positions."""
    out: set[int] = set()
    for i, o in enumerate(ops):
        if not (isinstance(o, tb.ForloopAccumOp) and o.accum_kind == "nored" and stores_fp32(o.result)):
            continue
        leader = ops[recs[i].chain]
        if isinstance(leader, (tb.TbUnaryOp, tb.TbBinaryOp)) and not isinstance(leader, tb.MatmulOp):
            out.add(i)
    return out


def real_innermost_dim(dims: Sequence[int], strides: Sequence[int]) -> int:
    """First dim of size != 1 with stride 1, else the last dim (Mirage's chunked-copy rule)."""
    for d, (n, s) in enumerate(zip(dims, strides)):
        if s == 1 and n != 1:
            return d
    return len(dims) - 1


def can_chunk_copy(
    dtensor_strides: Sequence[int],
    dtensor_dims: Sequence[int],
    tile_dims: Sequence[int],
    tile_strides: Sequence[int],
    elem_bytes: int,
    offset_steps: Sequence[int],
) -> bool:
    """16-byte chunked G<->S copy legality (mirage-notes 3.5). `offset_steps`: element offsets
    between neighbouring blocks along each partitioned grid axis and between iterations."""
    a = alignment_elems(elem_bytes)
    if any(s % a and s != 1 for s in dtensor_strides):
        return False
    d_in = real_innermost_dim(dtensor_dims, dtensor_strides)
    s_in = real_innermost_dim(tile_dims, tile_strides)
    if d_in != s_in or dtensor_strides[d_in] != 1 or tile_strides[s_in] != 1:
        return False
    if any(st % a for d, st in enumerate(tile_strides) if d != s_in and tile_dims[d] != 1):
        return False
    return all(step % a == 0 for step in offset_steps)


# ---------------------------------------------------------------------------------------
# IR access shared by the schedule, swizzle and smem passes


def _int_attr(op: Operation, name: str) -> int | None:
    attr = op.attributes.get(name)
    return attr.value.data if isinstance(attr, IntegerAttr) else None


def is_accumulator_value(value: SSAValue) -> bool:
    return isinstance(value, OpResult) and isinstance(value.op, tb.ForloopAccumOp)


def result_elem_bytes(value: SSAValue) -> int:
    """Storage bytes per element: fp32 for accumulator tiles (passes/README.md)."""
    return storage_elem_bytes(value)


def innermost_of(op: Operation, r: int) -> int:
    attr = op.attributes.get("tb.innermost")
    if isinstance(attr, DenseArrayBase):
        vals = ints(attr)
        if r < len(vals) and vals[r] >= 0:
            return vals[r]
    return len(shape_of(op.results[r])) - 1


def swizzled_of(op: Operation, r: int) -> int:
    attr = op.attributes.get("tb.swizzled")
    if isinstance(attr, DenseArrayBase):
        vals = ints(attr)
        if r < len(vals):
            return vals[r]
    return -1


def stensor_layout(op: Operation, r: int) -> tuple[tuple[int, ...], int]:
    """(strides, num_phy_elems) of result `r` of tb op `op`: `tb.strides`/`tb.num_phy_elems`
    when tb-compute-strides ran, else `calc_tensor_strides` with the recorded (or last) dim
    innermost."""
    strides = op.attributes.get("tb.strides")
    phy = op.attributes.get("tb.num_phy_elems")
    if isinstance(strides, ArrayAttr) and isinstance(phy, DenseArrayBase) and r < len(strides.data):
        st = strides.data[r]
        assert isinstance(st, DenseArrayBase)
        return ints(st), ints(phy)[r]
    value = op.results[r]
    return calc_tensor_strides(shape_of(value), innermost_of(op, r), result_elem_bytes(value))




def graph_records(graph: CustomizedOp) -> tuple[list[Operation], list[SchedOp]]:
    """The block's ops and their records (chains from tb-fusion-chains or computed)."""
    from mirage_xdsl.passes.tb.fusion_chains import chains_of

    block = graph.body.block
    ops = list(block.ops)
    index = {o: i for i, o in enumerate(ops)}
    chains = chains_of(block)
    recs: list[SchedOp] = []
    for i, o in enumerate(ops):
        operands = []
        for v in o.operands:
            if isinstance(v, OpResult) and v.op in index:
                operands.append((index[v.op], v.index))
            else:
                operands.append((-1, v.index if isinstance(v, BlockArgument) else 0))
        chain, pos = chains.get(o, (i, 0))
        recs.append(
            SchedOp(
                idx=i,
                name=o.name,
                operands=tuple(operands),
                after_accum_in=bool(o.operands) and tb.after_accum(o.operands[0]),
                chain=chain,
                chain_pos=pos,
                result_bytes=tuple(stensor_layout(o, r)[1] * result_elem_bytes(o.results[r]) for r in range(len(o.results))),
                forloop_dim=o.fdim if isinstance(o, tb.InputOp) else -1,
                accum_kind=o.accum_kind if isinstance(o, tb.ForloopAccumOp) else None,
                loop_carried=tuple(getattr(o, "LOOP_CARRIED_RESULTS", ())),
            )
        )
    # chain ids are leader positions at the time chains were recorded; re-key them to the
    # leader's current position so that records are self-consistent after reorders
    leader_pos: dict[int, int] = {}
    for r in recs:
        if r.chain_pos == 0:
            leader_pos[r.chain] = r.idx
    for r in recs:
        r.chain = leader_pos.get(r.chain, r.idx)
    return ops, recs


def input_copy_steps(op: tb.InputOp, graph: CustomizedOp) -> list[int]:
    """Element offsets between neighbouring blocks (each partitioned grid axis) and between
    iterations of a tb.input."""
    dims = shape_of(op.dtensor)
    strides = dtensor_strides(graph.inputs[op.dtensor.index]) if isinstance(op.dtensor, BlockArgument) else row_major_strides(dims)
    tile = shape_of(op.result)
    steps = []
    for g, m in zip(graph.grid, op.imap):
        if g > 1 and m >= 0:
            steps.append(dims[m] // g * strides[m])
    if op.fdim >= 0 and graph.num_iterations > 1:
        steps.append(tile[op.fdim] * strides[op.fdim])
    return steps


def input_is_chunked(op: tb.InputOp, graph: CustomizedOp) -> bool:
    assert isinstance(op.dtensor, BlockArgument)
    dvalue = graph.inputs[op.dtensor.index]
    strides, _ = stensor_layout(op, 0)
    return can_chunk_copy(
        dtensor_strides(dvalue),
        shape_of(dvalue),
        shape_of(op.result),
        strides,
        result_elem_bytes(op.result),
        input_copy_steps(op, graph),
    )


def output_index(op: tb.OutputOp) -> int:
    k = 0
    for o in op.parent_block().ops:  # type: ignore[union-attr]
        if o is op:
            return k
        if isinstance(o, tb.OutputOp):
            k += 1
    raise ValueError("tb.output not in its block")


def output_is_chunked(op: tb.OutputOp, graph: CustomizedOp, index: int) -> bool:
    dvalue = graph.outputs[index]
    dstrides = dtensor_strides(dvalue)
    src = op.input
    assert isinstance(src, OpResult)
    strides, _ = stensor_layout(src.op, src.index)
    tile = shape_of(src)
    steps = [tile[m] * dstrides[m] for g, m in zip(graph.grid, op.omap) if g > 1 and m >= 0]
    if result_elem_bytes(src) != elem_bytes_of(element_type_of(dvalue)):
        return False  # an fp32 accumulator tile stored to an fp16 tensor converts per element
    return can_chunk_copy(dstrides, shape_of(dvalue), tile, strides, elem_bytes_of(element_type_of(dvalue)), steps)


def set_flag(op: Operation, name: str, on: bool) -> None:
    if on:
        op.attributes[name] = UnitAttr()
    else:
        op.attributes.pop(name, None)


@dataclass(frozen=True)
class SchedulePass(ModulePass):
    """Order every threadblock graph (fewest barriers, then lowest peak shared memory) and
    record the copy/accumulator metadata (passes/README.md step 7)."""

    name = "tb-schedule"

    max_accum_regs: int = MAX_ACCUM_REGS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for graph in op.walk():
            if isinstance(graph, CustomizedOp):
                self.schedule_graph(graph)

    def schedule_graph(self, graph: CustomizedOp) -> Schedule:
        ops, recs = graph_records(graph)
        threads = graph.block[0] * graph.block[1] * graph.block[2]
        pipelined: set[int] = set()
        outputs_seen = 0
        for i, o in enumerate(ops):
            if isinstance(o, tb.InputOp):
                chunked = input_is_chunked(o, graph)
                set_flag(o, "tb.chunked", chunked)
                pipe = chunked and o.fdim >= 0 and graph.num_iterations > 1
                set_flag(o, "tb.pipelined", pipe)
                if pipe:
                    pipelined.add(i)
            elif isinstance(o, tb.OutputOp):
                set_flag(o, "tb.chunked", output_is_chunked(o, graph, outputs_seen))
                outputs_seen += 1
        numel = {}
        for i, o in enumerate(ops):
            if isinstance(o, tb.ForloopAccumOp):
                n = 1
                for d in shape_of(o.result):
                    n *= d
                numel[i] = n
        elementwise = elementwise_chain_accumulators(ops, recs)
        in_reg = register_accumulators(recs, numel, threads, self.max_accum_regs, elementwise)
        for i, o in enumerate(ops):
            if isinstance(o, tb.ForloopAccumOp):
                set_flag(o, "tb.accum_in_reg", i in in_reg)
        sched = schedule_ops(recs, in_reg, pipelined)
        block = graph.body.block
        for i in sched.order:
            o = ops[i]
            o.attributes["tb.stage"] = StringAttr(sched.stage[i])
            o.attributes["tb.level"] = IntegerAttr(sched.level[i], i64)
            block.detach_op(o)
            block.add_op(o)
        graph.attributes["tb.num_barriers"] = IntegerAttr(sched.num_barriers, i64)
        return sched


def schedule_of(graph: CustomizedOp) -> tuple[list[Operation], list[SchedOp], list[str], list[int]]:
    """Re-read a scheduled graph: ops (in block order), records, stages and levels from the
    `tb.stage`/`tb.level` attributes (computed afresh when missing)."""
    ops, recs = graph_records(graph)
    stages, levels = [], []
    for o in ops:
        st = o.attributes.get("tb.stage")
        lv = _int_attr(o, "tb.level")
        if not isinstance(st, StringAttr) or lv is None:
            sched = schedule_ops(recs)
            return ops, recs, sched.stage, sched.level
        stages.append(st.data)
        levels.append(lv)
    return ops, recs, stages, levels


__all__ = [
    "SchedOp",
    "Schedule",
    "SchedulePass",
    "TensorLife",
    "asap_levels",
    "can_chunk_copy",
    "register_accumulators",
    "elementwise_chain_accumulators",
    "schedule_ops",
    "tensor_lifetimes",
]

