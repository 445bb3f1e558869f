"""The abstract group that the threadblock-graph planner works on.

`kn-partition` gathers basic kn ops (a convex sub-graph of one function) into a `Group`: one
`Node` per value -- the group's inputs and the result of each op -- with its shape, element
type and operands by index, so the planner (`default_tb_graph.Planner`), its analyses
(`plan_analysis`) and its cost model (`plan_cost`) never touch the IR; `build_tb_graph`
turns a chosen plan back into IR.  Which kn ops a block graph can hold is `fusible_op`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.dialects.builtin import StringAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from mirage_xdsl.dialects import kn

UNARY_KINDS = ("exp", "square", "sqrt", "silu", "sigmoid", "gelu", "relu", "log", "clamp", "mul_scalar", "add_scalar")
BINARY_KINDS = ("add", "sub", "mul", "div", "pow")
FUSIBLE_KINDS = (*UNARY_KINDS, *BINARY_KINDS, "matmul", "reduction", "reduction_max", "rms_norm", "causal_mask")
"""The kn op names (without `kn.`) a block graph can hold (`fusible_op`)."""



@dataclass(eq=False)
class Node:
    """One value of a group: a group input (`kind == "input"`, `ext` = the outside value) or
    the result of a basic kn op (`kind` = the op name without `kn.`)."""

    idx: int
    kind: str
    shape: tuple[int, ...]
    dtype: Attribute
    args: tuple[int, ...] = ()
    props: dict[str, Any] = field(default_factory=dict)
    ext: Any = None
    name: str | None = None
    weight: bool = False
    """a group input read from a function argument marked `kn.weight` (`kn.is_weight`)"""


@dataclass
class Group:
    """A convex sub-graph of basic kn ops in topological order, with its outputs."""

    nodes: list[Node] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    records: tuple[str, ...] = ()
    aligned: list[tuple[int, int]] = field(default_factory=list)
    """Pairs of nodes whose dims of equal size share axes although no op relates them: the two
    operands of a `kn.concat` (one kernel writes both into one buffer, kn-fold-views) and two
    results of one `kn.chunk` (views of one tensor)."""

    def add(
        self,
        kind: str,
        shape: Sequence[int],
        dtype: Attribute,
        args: Sequence[int] = (),
        props: dict[str, Any] | None = None,
        ext: Any = None,
        name: str | None = None,
        weight: bool = False,
    ) -> int:
        """Append a node (see `Node` for the fields) and return its index."""
        node = Node(len(self.nodes), kind, tuple(shape), dtype, tuple(args), dict(props or {}), ext, name, weight)
        self.nodes.append(node)
        return node.idx

    def users(self) -> dict[int, list[int]]:
        """node -> the nodes that read it (once per operand, in node order)."""
        out: dict[int, list[int]] = {n.idx: [] for n in self.nodes}
        for n in self.nodes:
            for a in n.args:
                out[a].append(n.idx)
        return out

    def kinds(self) -> list[str]:
        """The op kinds of the group's non-input nodes, in node order."""
        return [n.kind for n in self.nodes if n.kind != "input"]


def elem_bytes(dtype: Attribute) -> int:
    """Bytes per element of `dtype` (its bit width / 8, at least 1; 4 when it has none)."""
    width: int | None = getattr(dtype, "bitwidth", None)
    if width is None:
        width = int(getattr(getattr(dtype, "width", None), "data", 32))
    return max(1, width // 8)


def numel(shape: Sequence[int]) -> int:
    """Elements of a tensor of `shape` (1 for a scalar)."""
    return math.prod(shape)


def fusible_op(op: Operation) -> bool:
    """A kn op the planner can place in a block graph."""
    if op.dialect_name() != "kn" or len(op.results) != 1 or op.regions:
        return False
    kind = op.name[3:]
    if kind not in FUSIBLE_KINDS:
        return False
    if not all(isinstance(v.type, TensorType) for v in (*op.operands, *op.results)):
        return False
    if isinstance(op, kn.RmsNormOp) and len(kn.ints(op.normalized_shape)) != 1:
        return False  # tb.rms_norm normalises the last dim only
    return True


def _props_of(op: Operation) -> dict[str, Any]:
    if isinstance(op, kn.ClampOp):
        return {"min": op.min_value.value.data, "max": op.max_value.value.data}
    if isinstance(op, kn.MulScalarOp | kn.AddScalarOp):
        return {"scalar": op.scalar.value.data}
    if isinstance(op, kn.ReductionOp):
        return {"dim": op.dim.value.data, "size": op.size.value.data}
    if isinstance(op, kn.ReductionMaxOp):
        return {"dim": op.dim.value.data, "size": 1}
    if isinstance(op, kn.RmsNormOp):
        return {"normalized": len(kn.ints(op.normalized_shape))}
    if isinstance(op, kn.CausalMaskOp):
        return {"offset": op.offset_value}
    return {}


def group_from_ops(ops: Sequence[Operation]) -> tuple[Group, list[SSAValue]]:
    """The abstract group of `ops` (in block order) and the SSA values its outputs replace
    (results used by an op outside the group, in program order)."""
    opset = set(ops)
    group = Group()
    index: dict[SSAValue, int] = {}
    records: list[str] = []
    for op in ops:
        args = []
        for v in op.operands:
            if v not in index:
                index[v] = group.add(
                    "input", kn.shape_of(v), kn.element_type_of(v), ext=v, name=v.name_hint, weight=kn.is_weight(v)
                )
            args.append(index[v])
        res = op.results[0]
        index[res] = group.add(op.name[3:], kn.shape_of(res), kn.element_type_of(res), args, _props_of(op))
        rec = op.attributes.get("kn.composite")
        if isinstance(rec, StringAttr):
            records.append(rec.data)
    out_values: list[SSAValue] = []
    for op in ops:
        res = op.results[0]
        if any(use.operation not in opset for use in res.uses):
            group.outputs.append(index[res])
            out_values.append(res)
        for use in res.uses:
            user = use.operation
            if isinstance(user, kn.ConcatOp) and user.lhs in index and user.rhs in index:
                group.aligned.append((index[user.lhs], index[user.rhs]))
    chunked: dict[Operation, int] = {}
    for v, n in index.items():
        owner = v.owner
        if isinstance(owner, kn.ChunkOp):
            if owner in chunked:
                group.aligned.append((chunked[owner], n))
            chunked.setdefault(owner, n)
    group.aligned = list(dict.fromkeys(group.aligned))
    group.records = tuple(records)
    return group, out_values


def is_attention(group: Group) -> bool:
    """Whether `group` is an attention (softmax(Q K^T) V) block."""
    kinds = group.kinds()
    return "softmax_matmul" in group.records or ("exp" in kinds and kinds.count("matmul") >= 2)


def reads_any(group: Group, node: int, targets: set[int]) -> bool:
    """Whether `node` is or (transitively) reads one of `targets`."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n in targets:
            return True
        if n not in seen:
            seen.add(n)
            stack.extend(group.nodes[n].args)
    return False
