"""The order tb-schedule gives a threadblock graph, on abstract op records (`SchedOp`):
stages, levels and barriers, and the level assignment with the lowest peak of live
shared-memory bytes (`schedule_ops`); the tensor lifetimes that tb-plan-smem packs
(`tensor_lifetimes`).

**Stages.** pre-loop = inputs with `forloop_dim = -1` (loaded once); loop = iterated inputs
and every op whose first operand is not `after_accum` (accumulators included); post-loop =
ops whose first operand is `after_accum` and the outputs.

**Levels (the depth DP).** Inputs are level 0. An op fused into a chain (`tb.chain_pos > 0`)
takes its leader's level (the whole chain runs after the producers of every member's
operands); any other op gets `1 + max(level of its producers)`, where a
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
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from mirage_xdsl.passes.tb import dsa

STAGES = ("pre", "loop", "post")


EXACT_LIMIT = 2048
"""Largest number of level assignments searched exhaustively."""


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
        """Whether the op is a `tb.input`."""
        return self.name == "tb.input"

    @property
    def is_output(self) -> bool:
        """Whether the op is a `tb.output`."""
        return self.name == "tb.output"

    @property
    def is_accum(self) -> bool:
        """Whether the op is a `tb.forloop_accum`."""
        return self.name == "tb.forloop_accum"

    @property
    def is_grid_sum(self) -> bool:
        """Whether the op is a `tb.grid_sum`."""
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
    """A block schedule: per op its `stage` ("pre", "loop", "post") and `level` (barrier-separated
    step within the stage), the emission `order` (op indices), the total `num_barriers` and their
    split `barriers_per_stage`, the `peak_live` shared-memory bytes (the DSA lower bound of the
    tile lifetimes) and the `search` that found it ("exact", "greedy" or "fixed").
    """
    stage: list[str]
    level: list[int]
    order: list[int]
    num_barriers: int
    peak_live: int
    search: str  # "exact" | "greedy" | "fixed" (no slack)
    barriers_per_stage: dict[str, int] = field(default_factory=dict)


def stage_of(op: SchedOp) -> str:
    """The stage of an op: inputs "pre" without a for-loop dim, else "loop"; outputs "post"; other
    ops "post" when their first operand comes after an accumulator, else "loop".
    """
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


def _chain_order(preds: dict[int, set[int]]) -> list[int]:
    """The chains in a topological order of `preds` (producers first), always the ready chain
    of lowest leader position next: leader order itself when every producer leads earlier,
    which fails only when a later member's second operand (a rescaled accumulator's scale)
    is made after the chain's leader."""
    waiting = {c: len(ps) for c, ps in preds.items()}
    users: dict[int, list[int]] = {c: [] for c in preds}
    for c, ps in preds.items():
        for q in ps:
            users[q].append(c)
    ready = [c for c, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        c = heapq.heappop(ready)
        order.append(c)
        for u in users[c]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    return order


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
    members: dict[int, list[int]] = {}
    for op in ops:  # topological order
        members.setdefault(op.chain, []).append(op.idx)
        if op.is_input:
            level[op.idx] = 0
        elif op.chain_pos > 0 and op.chain != op.idx:
            # a member's other operands (a rescaled accumulator's scale) must be ready
            # when the chain runs: the whole chain moves down to the latest of them
            outside = [level[p] for p, _ in op.operands if p >= 0 and ops[p].chain != op.chain and stages[p] == stages[op.idx]]
            need = 1 + max(outside, default=-1)
            if need > level[op.chain]:
                for m in members[op.chain]:
                    level[m] = need
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
    shared memory. Register accumulators only need shared memory for the write-back; other
    ops in `in_reg` (values of a register chain, `tb.in_registers`) none.
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
        if op.idx not in tails or (op.idx in in_reg and not op.is_accum):
            continue  # chain-internal, or a value of a register chain (register_chain.IN_REGISTERS)
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
    """Peak live bytes of tile lifetimes: the DSA lower bound (max over time of the live bytes, `dsa.lower_bound`)."""
    return dsa.lower_bound([(t.size, t.start, t.end) for t in lives])


def count_barriers(order: Sequence[int], stages: Sequence[str], levels: Sequence[int]) -> dict[str, int]:
    """Barriers per stage of an emission order: one each time the level changes between consecutive ops of the stage."""
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
    topo = _chain_order(preds)
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
