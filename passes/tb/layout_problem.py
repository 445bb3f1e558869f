"""The layout problem of tb-resolve-layout as pure data, and its solvers.

A `LayoutGraph` (tensors and ops, no IR) becomes a `LayoutProblem` of finite-domain choices
(innermost dim, swizzled dim, iter dim), hard clauses and weighted penalties
(`build_problem`), solved with `z3.Optimize` (`solve_z3`) or exhaustively in tests
(`brute_force`).

Hard constraints (mirage-notes 3.2):
* a swizzled dim is not the innermost dim;
* graph inputs: innermost = the last dim whose given stride is 1 (`kn.strides`, row-major
  when absent); graph outputs with `kn.strides`: likewise;
* `kn.matmul`: the innermost dims of A, B and C are among their last two dims;
  other kn ops (elementwise, reduction, concat, chunk, ...): operands and results share the
  innermost dim;
* `tb.matmul` chains (sm80 rules, also used for sm90): for A, B and the chain output C, each
  of the last two dims is innermost or swizzled;
* elementwise/reduction/accumulator chains: exactly one `iter_dim` (never a reduced dim, and
  a dim of size > 1 in some operand when there is one); for every operand and the chain
  output t with `t.shape[d] > 1`: `iter_dim = d and not innermost(t, d) => swizzled(t, d)`.

Costs (Mirage's `cost` namespace, mirage-notes 3.2 table; sm >= 75 values):

| term | weight |
|---|---|
| `kn.reduction` whose innermost dim is the reduced dim | 4000 |
| `tb.input`: dtensor innermost d, stensor innermost != d (no cp.async) | 20000 |
| `tb.output`: stensor innermost d, dtensor innermost != d | 4000 |
| `tb.matmul` operand (A, B, C) with neither of its last two dims innermost (no ldmatrix) | 10000 |
| each swizzled STensor dim | 1000 |
| each STensor: bytes of `calc_tensor_strides(shape, innermost)` (fp32 for accumulators) | 1 per byte |

Deliberate differences from Mirage: a dim of size 1 never needs a swizzle (threads walking a
size-1 dim all read one element: a broadcast, not a bank conflict; plan_swizzle would ignore
it anyway), and the chain output of elementwise chains takes part in the iter-dim rule (its
stores walk the same dim).  Mirage charges the smem term to every STensor; we charge it to
materialised ones only (the others are not stored).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from mirage_xdsl.passes.tb.layout_math import calc_tensor_strides

if TYPE_CHECKING:
    import z3  # imported lazily at solve time: it costs ~75 ms


# Mirage `resolve_tensor_layout.cc`, namespace `cost` (mirage-notes 3.2), values for sm >= 75.
COST_KN_REDUCTION_ON_INNERMOST = 4000


COST_TB_INPUT_NO_ASYNC_COPY = 20000


COST_TB_OUTPUT_NO_WIDE_COPY = 4000


COST_TB_MATMUL_NO_LDMATRIX = 10000


COST_SWIZZLED_DIM = 1000


COST_SMEM_PER_BYTE = 1


DEFAULT_TIMEOUT_MS = 60000
"""Wall-clock safety net of the layout solve (ms).  The budget that normally ends a search is
`DEFAULT_RLIMIT`, counted in Z3's deterministic resource units: a wall-clock limit near the
solve time changes Z3's search (issue #32's four-layer decoder: 0.8 s of a 2 s limit on a
loaded machine gave one of two equally cheap layouts at random, with the 60 s limit always
the same one)."""

DEFAULT_RLIMIT = 150_000_000
"""Z3 resource units a layout solve may spend (`rlimit`): the four-layer decoder, the largest
graph in examples/, spends 9.2 M (0.8 s)."""


DEFAULT_SEED = 0


OpKind = Literal["fix", "kn_matmul", "kn_same", "kn_reduction", "tb_input", "tb_output", "tb_matmul", "tb_iter"]


@dataclass(frozen=True)
class TensorDesc:
    """One tensor of the layout problem.

    `on_chip`: an STensor (gets a swizzle choice and the smem cost); `elem_bytes`: bytes per
    stored element (4 for accumulator tiles).
    """

    shape: tuple[int, ...]
    on_chip: bool = False
    elem_bytes: int = 2


@dataclass(frozen=True)
class OpDesc:
    """One rule of the layout problem over `tensors` (indices into `LayoutGraph.tensors`).

    kinds and their `tensors`:
    * `fix` (t,): t's innermost dim is `dim` (graph inputs and outputs with strides);
    * `kn_matmul` (A, B, C): innermost among the last two dims;
    * `kn_same` (t0, t1, ...): all share the innermost dim;
    * `kn_reduction` (input,): cost if the innermost is the reduced `dim`;
    * `tb_input` (dtensor, stensor) / `tb_output` (stensor, dtensor): copy costs;
    * `tb_matmul` (A, B, C): ldmatrix rules;
    * `tb_iter` (t0, t1, ...): an elementwise/reduction chain; `dim` = the reduced dim
      (never the iter dim) or -1.
    `rule` names the IR rule for diagnostics.
    """

    kind: OpKind
    tensors: tuple[int, ...]
    dim: int = -1
    rule: str = ""


@dataclass(frozen=True)
class LayoutGraph:
    """The layout problem of one kernel graph, independent of the IR."""

    tensors: tuple[TensorDesc, ...]
    ops: tuple[OpDesc, ...]


Lit = tuple[int, int, bool]
"""`(choice, value, positive)`: `choice == value` (positive) or `choice != value`."""


@dataclass(frozen=True)
class Choice:
    """A finite-domain unknown; exactly one value of `domain` is taken."""

    name: str
    domain: tuple[int, ...]


@dataclass(frozen=True)
class Clause:
    """A hard disjunction of literals, imposed by op `origin` of the LayoutGraph."""

    lits: tuple[Lit, ...]
    origin: int


@dataclass(frozen=True)
class Penalty:
    """`weight` is paid when every literal of the conjunction `lits` holds."""

    weight: int
    lits: tuple[Lit, ...]
    reason: str


@dataclass
class LayoutProblem:
    """Choices, hard clauses and weighted penalties; `innermost[t]`, `swizzled[t]` (on-chip
    tensors) and `iter_dim[o]` (tb_iter ops) index `choices`."""

    choices: list[Choice] = field(default_factory=list)
    clauses: list[Clause] = field(default_factory=list)
    penalties: list[Penalty] = field(default_factory=list)
    innermost: dict[int, int] = field(default_factory=dict)
    swizzled: dict[int, int] = field(default_factory=dict)
    iter_dim: dict[int, int] = field(default_factory=dict)

    @property
    def tie_break(self) -> list[int]:
        """Choices given a conventional preferred value on cost ties (see `solve_z3`)."""
        return [*self.innermost.values(), *self.iter_dim.values(), *self.swizzled.values()]

    def add_choice(self, name: str, domain: Sequence[int]) -> int:
        """Append a choice `name` over `domain` (its possible values) and return its index in `choices`."""
        self.choices.append(Choice(name, tuple(domain)))
        return len(self.choices) - 1


def build_problem(graph: LayoutGraph) -> LayoutProblem:
    """The constraint/cost model of `graph` (rules and weights: module docstring)."""
    prob = LayoutProblem()
    for t, desc in enumerate(graph.tensors):
        rank = len(desc.shape)
        if rank == 0:
            raise ValueError(f"tensor #{t} has rank 0; every tensor needs an innermost dim")
        inner = prob.innermost[t] = prob.add_choice(f"inner{t}", range(rank))
        if not desc.on_chip:
            continue
        swz = prob.swizzled[t] = prob.add_choice(f"swz{t}", range(-1, rank))
        for d in range(rank):
            # a swizzled dim is not the innermost dim
            prob.clauses.append(Clause(((swz, d, False), (inner, d, False)), -1))
            prob.penalties.append(Penalty(COST_SWIZZLED_DIM, ((swz, d, True),), f"swizzle t{t} d{d}"))
            strides_bytes = calc_tensor_strides(desc.shape, d, desc.elem_bytes)[1] * desc.elem_bytes
            prob.penalties.append(Penalty(COST_SMEM_PER_BYTE * strides_bytes, ((inner, d, True),), f"smem t{t} d{d}"))

    for o, op in enumerate(graph.ops):
        ts = op.tensors
        if op.kind == "fix":
            prob.clauses.append(Clause(((prob.innermost[ts[0]], op.dim, True),), o))
        elif op.kind == "kn_matmul":
            for t in ts:
                rank = len(graph.tensors[t].shape)
                prob.clauses.append(Clause(tuple((prob.innermost[t], d, True) for d in range(max(rank - 2, 0), rank)), o))
        elif op.kind == "kn_same":
            first = ts[0]
            rank = len(graph.tensors[first].shape)
            for t in ts[1:]:
                for d in range(rank):
                    # exactly one innermost each: pairwise implications make them equal
                    prob.clauses.append(Clause(((prob.innermost[first], d, False), (prob.innermost[t], d, True)), o))
        elif op.kind == "kn_reduction":
            prob.penalties.append(
                Penalty(COST_KN_REDUCTION_ON_INNERMOST, ((prob.innermost[ts[0]], op.dim, True),), f"op{o} reduce innermost")
            )
        elif op.kind in ("tb_input", "tb_output"):
            if op.kind == "tb_input":
                dten, sten, weight = ts[0], ts[1], COST_TB_INPUT_NO_ASYNC_COPY
                first, second = dten, sten
            else:
                sten, dten, weight = ts[0], ts[1], COST_TB_OUTPUT_NO_WIDE_COPY
                first, second = sten, dten
            rank = min(len(graph.tensors[dten].shape), len(graph.tensors[sten].shape))
            for d in range(rank):
                prob.penalties.append(
                    Penalty(weight, ((prob.innermost[first], d, True), (prob.innermost[second], d, False)), f"op{o} copy d{d}")
                )
        elif op.kind == "tb_matmul":
            for t in ts:
                shape = graph.tensors[t].shape
                rank = len(shape)
                last_two = range(max(rank - 2, 0), rank)
                for d in last_two:
                    if shape[d] > 1:
                        prob.clauses.append(Clause(((prob.innermost[t], d, True), (prob.swizzled[t], d, True)), o))
                if rank > 2:
                    prob.penalties.append(
                        Penalty(
                            COST_TB_MATMUL_NO_LDMATRIX,
                            tuple((prob.innermost[t], d, False) for d in last_two),
                            f"op{o} no ldmatrix t{t}",
                        )
                    )
        elif op.kind == "tb_iter":
            rank = max(len(graph.tensors[t].shape) for t in ts)
            dims = [d for d in range(rank) if d != op.dim]
            # threads walk a dim of size > 1 (a size-1 dim would be a fake, conflict-free choice)
            wide = [d for d in dims if any(d < len(graph.tensors[t].shape) and graph.tensors[t].shape[d] > 1 for t in ts)]
            it = prob.iter_dim[o] = prob.add_choice(f"iter{o}", wide or dims)
            for t in ts:
                shape = graph.tensors[t].shape
                for d in prob.choices[it].domain:
                    if d < len(shape) and shape[d] > 1:
                        prob.clauses.append(
                            Clause(((it, d, False), (prob.innermost[t], d, True), (prob.swizzled[t], d, True)), o)
                        )
        else:  # pragma: no cover - OpKind is closed
            raise ValueError(f"unknown layout op kind {op.kind}")
    return prob


def _holds(lit: Lit, values: Sequence[int]) -> bool:
    choice, value, positive = lit
    return (values[choice] == value) == positive


def evaluate(prob: LayoutProblem, values: Sequence[int]) -> int | None:
    """Cost of an assignment (one value per choice), or None if it breaks a hard clause."""
    for clause in prob.clauses:
        if not any(_holds(lit, values) for lit in clause.lits):
            return None
    return sum(p.weight for p in prob.penalties if all(_holds(lit, values) for lit in p.lits))


def brute_force(prob: LayoutProblem, prune: bool = True) -> tuple[tuple[int, ...], int] | None:
    """The exact optimum by exhaustive enumeration (exponential: for tests on small models),
    or None if no assignment satisfies the clauses.

    With `prune`, a depth-first enumeration that skips a partial assignment as soon as a
    clause over assigned choices fails or the penalties already paid (all weights are >= 0)
    reach the best cost found (branch and bound: still exact).  Without it, every
    assignment of `itertools.product` is evaluated.
    """
    if not prune:
        best: tuple[tuple[int, ...], int] | None = None
        for assignment in itertools.product(*(c.domain for c in prob.choices)):
            cost = evaluate(prob, assignment)
            if cost is not None and (best is None or cost < best[1]):
                best = (tuple(assignment), cost)
        return best

    count = len(prob.choices)
    # check each clause / penalty once all of its choices are assigned
    clauses_at: list[list[Clause]] = [[] for _ in range(count)]
    for clause in prob.clauses:
        clauses_at[max(l[0] for l in clause.lits)].append(clause)
    penalties_at: list[list[Penalty]] = [[] for _ in range(count)]
    for pen in prob.penalties:
        penalties_at[max(l[0] for l in pen.lits)].append(pen)
    values = [0] * count
    result: list[tuple[tuple[int, ...], int] | None] = [None]

    def search(c: int, paid: int) -> None:
        best_now = result[0]
        if best_now is not None and paid >= best_now[1]:
            return
        if c == count:
            result[0] = (tuple(values), paid)
            return
        for v in prob.choices[c].domain:
            values[c] = v
            if not all(any(_holds(l, values) for l in cl.lits) for cl in clauses_at[c]):
                continue
            extra = sum(p.weight for p in penalties_at[c] if all(_holds(l, values) for l in p.lits))
            search(c + 1, paid + extra)

    search(0, 0)
    return result[0]


@dataclass(frozen=True)
class LayoutSolution:
    """One value per choice, its cost, and whether Z3 proved it optimal."""

    values: tuple[int, ...]
    cost: int
    status: Literal["optimal", "timeout"]


class LayoutUnsat(Exception):
    """No assignment satisfies the hard clauses; `origins` = LayoutGraph op indices of an
    unsat core (-1: a per-tensor rule)."""

    def __init__(self, origins: Sequence[int]):
        super().__init__(f"unsatisfiable layout constraints (core ops {sorted(set(origins))})")
        self.origins = tuple(origins)


class LayoutTimeout(Exception):
    """Z3 found no assignment at all within the time limit."""


def solve_z3(
    prob: LayoutProblem, timeout_ms: int = DEFAULT_TIMEOUT_MS, seed: int = DEFAULT_SEED, rlimit: int = DEFAULT_RLIMIT
) -> LayoutSolution:
    """Minimise the penalties subject to the clauses with `z3.Optimize` (MaxSMT).

    Deterministic: fixed random seeds and a resource budget (`rlimit`, Z3's deterministic
    units; status "timeout" with the best model so far when spent); `timeout_ms` is a
    wall-clock safety net far above any solve time, since a limit near it changes the search.

    Raises:
        LayoutUnsat: the clauses are unsatisfiable (with an unsat core).
        LayoutTimeout: no model was found within `timeout_ms`.
    """
    import z3

    z3.set_param("smt.random_seed", seed)
    z3.set_param("sat.random_seed", seed)
    ctx = z3.Context()
    bools: list[dict[int, z3.BoolRef]] = []
    hard: list[z3.BoolRef] = []
    for choice in prob.choices:
        vals = {v: z3.Bool(f"{choice.name}_{v}", ctx) for v in choice.domain}
        bools.append(vals)
        hard.append(z3.PbEq([(b, 1) for b in vals.values()], 1) if len(vals) > 1 else next(iter(vals.values())))

    def lit(l: Lit) -> z3.BoolRef:
        b = bools[l[0]].get(l[1])
        if b is None:  # a value outside the domain never holds
            return z3.BoolVal(not l[2], ctx)
        return b if l[2] else z3.Not(b)

    clause_exprs = [(z3.Or([lit(l) for l in cl.lits]) if len(cl.lits) > 1 else lit(cl.lits[0]), cl.origin) for cl in prob.clauses]
    opt = z3.Optimize(ctx=ctx)
    opt.set("timeout", int(timeout_ms))
    opt.set("rlimit", int(rlimit))
    opt.set("maxsat_engine", "maxres")
    for h in hard:
        opt.add(h)
    for expr, _ in clause_exprs:
        opt.add(expr)
    for pen in prob.penalties:
        if pen.weight > 0:
            cond = z3.And([lit(l) for l in pen.lits]) if len(pen.lits) > 1 else lit(pen.lits[0])
            opt.add_soft(z3.Not(cond), pen.weight, id="cost")
    # Secondary objective (lexicographic, after the cost): among equally cheap layouts prefer
    # the conventional one - innermost and iteration dims on the last dim, no swizzle - so
    # that ties are broken the same way whatever the solver's search order.
    for c in prob.tie_break:
        choice = prob.choices[c]
        preferred = choice.domain[-1] if choice.domain[0] >= 0 else -1
        opt.add_soft(bools[c][preferred], 1, id="tie")
    result = opt.check()
    if result == z3.unsat:
        raise LayoutUnsat(_unsat_core(ctx, hard, clause_exprs))
    status: Literal["optimal", "timeout"] = "optimal" if result == z3.sat else "timeout"
    try:
        model = opt.model()
    except z3.Z3Exception:
        model = None
    if model is None or (len(model) == 0 and prob.choices):
        raise LayoutTimeout(f"Z3 found no layout within its budget ({rlimit} resource units, {timeout_ms} ms)")
    values = []
    for c, choice in enumerate(prob.choices):
        chosen = [v for v, b in bools[c].items() if z3.is_true(model.eval(b, model_completion=True))]
        values.append(chosen[0] if chosen else choice.domain[0])
    cost = evaluate(prob, values)
    if cost is None:  # a partial model from a timeout: no usable answer
        raise LayoutTimeout(f"Z3 found no feasible layout within {timeout_ms} ms")
    return LayoutSolution(tuple(values), cost, status)


def _unsat_core(ctx: z3.Context, hard: list[z3.BoolRef], clauses: list[tuple[z3.BoolRef, int]]) -> list[int]:
    """LayoutGraph op indices of an unsat core of the clauses (the exactly-one constraints
    are assumed)."""
    import z3

    solver = z3.Solver(ctx=ctx)
    for h in hard:
        solver.add(h)
    trackers: dict[int, z3.BoolRef] = {}
    for expr, origin in clauses:
        tracker = trackers.setdefault(origin, z3.Bool(f"rule_{origin}", ctx))
        solver.add(z3.Implies(tracker, expr))
    if solver.check(*trackers.values()) != z3.unsat:
        return []
    core = {str(b) for b in solver.unsat_core()}
    return [origin for origin, tracker in trackers.items() if str(tracker) in core]
