"""`tb-resolve-layout`: choose the innermost (unit-stride) dim of every tensor with Z3.

Mirage's `resolve_tensor_layout` (mirage-notes 3.2) as a weighted boolean model solved with
`z3.Optimize`.  Unknowns, one finite-domain choice each (encoded as one boolean per value
with an exactly-one constraint, as Mirage's `di_`/`si_`/`sw_`/`op_iter_dim_` variables):

* every DTensor (graph inputs, kn op results): its innermost dim (fixed for graph inputs and
  the tensors of a `contraction.contract`: the innermost dims of their recorded strides);
* every materialised STensor (`tb.input` results and the results of fusion-chain tails; the
  intermediate values of a chain live in registers and take the tail's layout): its
  innermost dim and its swizzled dim (-1 = none);
* every chain led by an elementwise, reduction or accumulator op: the dim along which
  consecutive threads walk (`iter_dim`).

The constraints and costs, and the solvers, are in `layout_problem.py`; this module builds
the `LayoutGraph` of each function and writes the solution back.

Writes (passes/README.md): `tb.innermost`, `tb.swizzled` (per result, -1 = none) on every tb
op, `tb.iter_dim` on leaders of elementwise/reduction/accumulator chains, `kn.innermost` on
kn ops, the argument attribute `kn.innermost` on graph inputs, and the function attributes
`mirage.layout_cost` (the objective) and `mirage.layout_status` ("optimal" or "timeout").
An unsatisfiable model is reported with `op.emit_error` on the first op of its unsat core.

The model is built by pure functions (`build_problem` from a `LayoutGraph`, then
`solve_z3` / `brute_force`), so it can be tested without IR.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, TensorType, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects import kn, tb
from mirage_xdsl.passes.tb.fusion_chains import chain_members, chains_of
from mirage_xdsl.passes.tb.layout_math import elem_bytes_of, innermost_of_strides, storage_elem_bytes
from mirage_xdsl.passes.tb.layout_problem import (
    DEFAULT_RLIMIT,
    DEFAULT_SEED,
    DEFAULT_TIMEOUT_MS,
    LayoutGraph,
    LayoutProblem,
    LayoutSolution,
    LayoutTimeout,
    LayoutUnsat,
    OpDesc,
    OpKind,
    TensorDesc,
    build_problem,
    solve_z3,
)

PASS_NAME = "tb-resolve-layout"
CONTRACT_OP = "contraction.contract"
"""Its tensors keep the innermost dims of the strides it was built with (kn-partition's lone
matmuls for the sm_90a GEMM, `conversion/matmul_contract.py`): a fixed layout, like a graph
input's."""


@dataclass
class _GraphBuilder:
    """Collects the LayoutGraph of one `func.func` and where each piece lives in the IR."""

    tensors: list[TensorDesc] = field(default_factory=list)
    ops: list[OpDesc] = field(default_factory=list)
    op_origin: list[Operation] = field(default_factory=list)
    tensor_of: dict[SSAValue, int] = field(default_factory=dict)
    iter_leaders: dict[int, Operation] = field(default_factory=dict)

    def tensor(self, value: SSAValue, on_chip: bool = False, elem_bytes: int | None = None) -> int:
        """The index of `value`'s TensorDesc, added on first use (`on_chip`: an STensor; `elem_bytes`:
        bytes per stored element, default its element type's).

        Raises:
            ValueError: an element type without a bit width, when `elem_bytes` is not given."""
        if value not in self.tensor_of:
            nbytes = elem_bytes if elem_bytes is not None else elem_bytes_of(kn.element_type_of(value))
            self.tensors.append(TensorDesc(kn.shape_of(value), on_chip, nbytes))
            self.tensor_of[value] = len(self.tensors) - 1
        return self.tensor_of[value]

    def add(self, origin: Operation, kind: OpKind, tensors: Sequence[int], dim: int = -1, rule: str = "") -> int:
        """Add a rule of `kind` over `tensors` (TensorDesc indices) with `dim` and the diagnostic
        `rule`, from IR op `origin`; its index."""
        self.ops.append(OpDesc(kind, tuple(tensors), dim, rule))
        self.op_origin.append(origin)
        return len(self.ops) - 1

    def graph(self) -> LayoutGraph:
        """The LayoutGraph collected so far (no IR in it)."""
        return LayoutGraph(tuple(self.tensors), tuple(self.ops))


def _strides_attr(attrs: DictionaryAttr | None) -> tuple[int, ...] | None:
    if attrs is None:
        return None
    strides = attrs.data.get(kn.STRIDES_ATTR)
    return kn.ints(strides) if isinstance(strides, DenseArrayBase) else None


def _dict_at(array: ArrayAttr | None, index: int) -> DictionaryAttr | None:
    if array is None or index >= len(array.data):
        return None
    entry = array.data[index]
    return entry if isinstance(entry, DictionaryAttr) else None


REDUCING_TB_OPS = (tb.ReductionOp, tb.ReductionToDimxOp, tb.ReductionMaxOp, tb.ReduceMaxOp)


def _iter_forbidden_dim(leader: Operation) -> int:
    """The dim a chain leader reduces (never its iter dim), or -1."""
    if isinstance(leader, REDUCING_TB_OPS):
        return leader.reduce_dim
    if isinstance(leader, tb.ForloopAccumOp) and leader.accum_kind not in ("nored", "nored_rescale", "max"):
        return len(kn.shape_of(leader.input)) - 1
    if isinstance(leader, tb.RmsNormOp):
        return len(kn.shape_of(leader.input)) - 1
    return -1


def _add_threadblock_graph(b: _GraphBuilder, graph: kn.CustomizedOp) -> dict[SSAValue, SSAValue]:
    """Add the STensors and rules of one customized op; returns value -> materialised value
    (chain intermediates map to their chain's tail result)."""
    block = graph.body.block
    chains = chains_of(block)
    members = chain_members(chains)
    alias: dict[SSAValue, SSAValue] = {}
    for ops in members.values():
        tail = ops[-1]
        for res in tail.results:
            nbytes = storage_elem_bytes(res)
            b.tensor(res, on_chip=True, elem_bytes=nbytes)
            alias[res] = res
        for op in ops[:-1]:
            for res in op.results:
                alias[res] = tail.results[0]
    for ops in sorted(members.values(), key=lambda m: chains[m[0]][0]):
        leader, tail = ops[0], ops[-1]
        if isinstance(leader, tb.InputOp):
            arg = leader.dtensor
            assert isinstance(arg, BlockArgument)
            dten = b.tensor(graph.inputs[arg.index])
            b.add(leader, "tb_input", (dten, b.tensor_of[leader.result]), rule="tb.input copy")
        elif isinstance(leader, tb.OutputOp):
            index = next(r for o, r, _ in graph.output_slots() if o is leader)
            b.add(leader, "tb_output", (b.tensor_of[alias[leader.input]], b.tensor(graph.outputs[index])), rule="tb.output copy")
        elif isinstance(leader, tb.MatmulOp):
            ts: Sequence[int] = (b.tensor_of[alias[leader.lhs]], b.tensor_of[alias[leader.rhs]], b.tensor_of[tail.results[0]])
            b.add(leader, "tb_matmul", ts, rule="tb.matmul operands need their last two dims innermost or swizzled (ldmatrix)")
        else:
            ts = [b.tensor_of[alias[v]] for v in leader.operands] + [b.tensor_of[r] for r in tail.results]
            o = b.add(leader, "tb_iter", ts, _iter_forbidden_dim(leader), rule=f"{leader.name} iteration dim")
            b.iter_leaders[o] = leader
    return alias


def _add_reshape(b: _GraphBuilder, op: kn.ReshapeOp) -> None:
    """A `kn.reshape` reads and writes row-major order: its result, and its input when the
    compiler lays it out (a kernel's or another reshape's result), get the last dim innermost,
    so kn-alias-reshape can make the result a view of the input's buffer."""
    owner = op.input.owner
    fixed_input = isinstance(owner, Operation) and isinstance(owner, (kn.CustomizedOp, kn.ReshapeOp))
    for v in (op.input, op.output) if fixed_input else (op.output,):
        dim = len(kn.shape_of(v)) - 1
        b.add(op, "fix", (b.tensor(v),), dim, rule=f"kn.reshape keeps row-major order: dim {dim} innermost")


def build_graph(func: FuncOp) -> tuple[_GraphBuilder, dict[SSAValue, SSAValue]]:
    """The LayoutGraph of one kernel-graph function (with the IR bookkeeping)."""
    b = _GraphBuilder()
    alias: dict[SSAValue, SSAValue] = {}
    body = func.body.block
    for i, arg in enumerate(body.args):
        if not isinstance(arg.type, TensorType):
            continue
        t = b.tensor(arg)
        strides = _strides_attr(_dict_at(func.arg_attrs, i))
        shape = kn.shape_of(arg)
        dim = innermost_of_strides(shape, strides) if strides is not None else len(shape) - 1
        b.add(func, "fix", (t,), dim, rule=f"graph input #{i} strides make dim {dim} innermost")
    for op in body.ops:
        if isinstance(op, ReturnOp):
            for i, value in enumerate(op.arguments):
                strides = _strides_attr(_dict_at(func.res_attrs, i))
                if strides is not None and hasattr(value.type, "get_shape"):
                    dim = innermost_of_strides(kn.shape_of(value), strides)
                    b.add(op, "fix", (b.tensor(value),), dim, rule=f"graph output #{i} strides make dim {dim} innermost")
            continue
        if isinstance(op, kn.CustomizedOp):
            for res in op.outputs:
                b.tensor(res)
            alias.update(_add_threadblock_graph(b, op))
            continue
        if op.name == CONTRACT_OP:
            for v in (*op.operands, *op.results):
                dim = innermost_of_strides(kn.shape_of(v), kn.dtensor_strides(v))
                b.add(op, "fix", (b.tensor(v),), dim, rule=f"{CONTRACT_OP} reads its tensors with the strides of its config")
            continue
        if isinstance(op, kn.ReshapeOp):
            _add_reshape(b, op)
            continue
        values = [v for v in (*op.operands, *op.results) if hasattr(v.type, "get_shape")]
        if not values or op.dialect_name() != "kn":
            continue
        ts = [b.tensor(v) for v in values]
        if isinstance(op, kn.MatmulOp):
            b.add(op, "kn_matmul", ts, rule="kn.matmul operands need their innermost dim among the last two (cuBLAS)")
        else:
            ranks = {len(b.tensors[t].shape) for t in ts}
            if len(ts) > 1 and len(ranks) == 1:
                b.add(op, "kn_same", ts, rule=f"{op.name} operands and results share the innermost dim")
            if isinstance(op, (kn.ReductionOp, kn.ReductionMaxOp)):
                b.add(op, "kn_reduction", (ts[0],), op.dim.value.data, rule=f"{op.name} over the innermost dim")
    return b, alias


def _ints_attr(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _write_results(func: FuncOp, b: _GraphBuilder, alias: dict[SSAValue, SSAValue], prob: LayoutProblem, sol: LayoutSolution) -> None:
    def inner(value: SSAValue) -> int:
        t = b.tensor_of.get(alias.get(value, value))
        return -1 if t is None else sol.values[prob.innermost[t]]

    def swizzled(value: SSAValue) -> int:
        t = b.tensor_of.get(alias.get(value, value))
        if t is None or t not in prob.swizzled:
            return -1
        return sol.values[prob.swizzled[t]]

    body = func.body.block
    for op in body.ops:
        if isinstance(op, kn.CustomizedOp):
            for tb_op in op.body.block.ops:
                tb_op.attributes["tb.innermost"] = _ints_attr([inner(r) for r in tb_op.results])
                tb_op.attributes["tb.swizzled"] = _ints_attr([swizzled(r) for r in tb_op.results])
        if op.dialect_name() == "kn" and op.results:
            op.attributes["kn.innermost"] = _ints_attr([inner(r) for r in op.results])
    for o, leader in b.iter_leaders.items():
        leader.attributes["tb.iter_dim"] = IntegerAttr(sol.values[prob.iter_dim[o]], i64)
    arg_attrs: list[DictionaryAttr] = []
    for i, arg in enumerate(body.args):
        old = _dict_at(func.arg_attrs, i)
        data = dict(old.data) if old is not None else {}
        if arg in b.tensor_of:
            data["kn.innermost"] = IntegerAttr(inner(arg), i64)
        arg_attrs.append(DictionaryAttr(data))
    func.arg_attrs = ArrayAttr(arg_attrs)
    func.attributes["mirage.layout_cost"] = IntegerAttr(sol.cost, i64)
    func.attributes["mirage.layout_status"] = StringAttr(sol.status)


def _fail(op: Operation, message: str) -> None:
    op.emit_error(message, PassFailedException(message))


def _func_ops(module: ModuleOp) -> Iterator[FuncOp]:
    for op in module.walk():
        if isinstance(op, FuncOp) and op.body.blocks:
            yield op


@dataclass(frozen=True)
class ResolveLayoutPass(ModulePass):
    """Solve the layout model of every kernel graph and record the decisions.

    Options: `timeout-ms` (Z3 wall-clock safety net per function, default 60000; the search
    itself is bounded by a deterministic resource budget, `layout_problem.DEFAULT_RLIMIT`;
    when either is spent the best layout found is kept with `mirage.layout_status =
    "timeout"`), `rlimit` (that budget), `seed` (Z3 random seed).
    """

    name = PASS_NAME

    timeout_ms: int = DEFAULT_TIMEOUT_MS
    seed: int = DEFAULT_SEED
    rlimit: int = DEFAULT_RLIMIT

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Solve the layout problem of every kernel-graph func in `op` with Z3 and write the chosen layouts.

        Raises:
            PassFailedException: the constraints are unsatisfiable (emitted on the first op of the
                unsat core, with the conflicting rules) or Z3 spent its budget (`rlimit`,
                `timeout_ms`) before finding any layout.
        """
        for func in list(_func_ops(op)):
            b, alias = build_graph(func)
            prob = build_problem(b.graph())
            try:
                sol = solve_z3(prob, self.timeout_ms, self.seed, self.rlimit)
            except LayoutUnsat as err:
                origins = [o for o in err.origins if o >= 0]
                rules = "; ".join(dict.fromkeys(b.ops[o].rule for o in origins)) or "per-tensor rules"
                # point at the first op of the core that is not a graph input (those are the
                # function's own constraints)
                ops = [b.op_origin[o] for o in sorted(origins)]
                where = next((o for o in ops if o is not func), func)
                _fail(
                    where,
                    f"{PASS_NAME}: no layout satisfies the constraints (Z3 unsat; conflicting rules: {rules}); "
                    "give the graph inputs/outputs kn.strides whose unit-stride dims agree with these rules",
                )
                return
            except LayoutTimeout as err:
                _fail(func, f"{PASS_NAME}: {err}; raise the budget with tb-resolve-layout{{rlimit=N timeout-ms=M}}")
                return
            _write_results(func, b, alias, prob, sol)
