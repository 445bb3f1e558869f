"""`tb-plan-swizzle`: how every shared-memory tile avoids bank conflicts (mirage-notes 3.6).

Tiles considered: the materialised ones (inputs, chain tails; chain-internal results are
never stored). A tile needs a plan when tb-resolve-layout marked one of its dims as
*swizzled* (threads walk it although it is not innermost) and both that dim and the
innermost dim have more than one element.

* **Chunk.** The contiguous run the tile's users need: 16 B if it is loaded by a chunked
  input, stored by a chunked output, or is a matmul operand / a matmul chain's result
  (ldmatrix rows), else one element; rounded up to a power of two, at least 4 B (one bank
  word), at most 16 B. `chunks = stride(swizzled dim) / chunk`.
* **XOR** when `chunks` is a power of two: `Swizzle<B,M,S>` over element offsets with
  `M = log2(chunk elems)` and (B, S) from `swizzle_math.ampere_xor`. `Swizzle<0,..>` is the
  identity and is written `"none"` (one chunk per row already spreads 8 rows over 128 B).
* **shift** otherwise: the swizzled dim's stride becomes `n` chunks, `n` the smallest
  `>= chunks` coprime with the chunks in 128 B; outer dims are re-packed and
  `tb.strides` / `tb.num_phy_elems` rewritten (odd chunk counts need no padding).
* `hopper-gmma=true`: every swizzled tile whose rows are a multiple of 16 B takes the GMMA
  canonical atom `Swizzle<B,4,3>` over **byte** offsets, B = 3/2/1/0 for rows that are a
  multiple of 128/64/32/16 bytes (64/32/16/8 fp16 elements); other tiles keep the plan above.

Writes `tb.swizzle = [#"none" | "xor<B,M,S>" | "shift", ...]` (one StringAttr per result)
on every tb op with results (chain-internal results: `"none"`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, OpResult
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import tb
from mirage_xdsl.dialects.kn import CustomizedOp, int_array, shape_of
from mirage_xdsl.passes.tb import swizzle_math as sm
from mirage_xdsl.passes.tb.layout_math import alignment_elems
from mirage_xdsl.passes.tb.schedule import graph_records, innermost_of, result_elem_bytes, stensor_layout, swizzled_of
from mirage_xdsl.passes.tb.schedule_order import chain_tails


@dataclass(frozen=True)
class SwizzlePlan:
    """The shared-memory layout of one tile: swizzle `kind` ("none", "xor<B,M,S>" or "shift"),
    element `strides` and the physical element count `num_phy_elems` (padding included).
    """
    kind: str  # "none" | "xor<B,M,S>" | "shift"
    strides: tuple[int, ...]
    num_phy_elems: int


def plan_tile(
    dims: Sequence[int],
    strides: Sequence[int],
    num_phy_elems: int,
    innermost: int,
    swizzled: int,
    elem_bytes: int,
    min_chunk_elems: int,
    hopper_gmma: bool = False,
) -> SwizzlePlan:
    """Swizzle plan of one tile (pure; see the module docstring)."""
    none = SwizzlePlan("none", tuple(strides), num_phy_elems)
    if swizzled < 0 or swizzled == innermost or dims[swizzled] <= 1 or dims[innermost] <= 1:
        return none
    row = strides[swizzled]  # elements between consecutive indices of the swizzled dim
    if hopper_gmma:
        xor = sm.hopper_gmma_xor(row * elem_bytes)
        if xor is not None:
            return SwizzlePlan(str(xor), tuple(strides), num_phy_elems)
    chunk_bytes = sm.chunk_bytes_for(min_chunk_elems, elem_bytes)
    chunk_elems = max(chunk_bytes // elem_bytes, 1)
    if row % chunk_elems:
        return none
    chunks = row // chunk_elems
    if sm.is_pow2(chunks):
        xor = sm.ampere_xor(chunks, chunk_elems, chunk_bytes)
        return none if xor.b == 0 else SwizzlePlan(str(xor), tuple(strides), num_phy_elems)
    n = sm.shift_chunks(chunks, chunk_bytes)
    if n == chunks:
        return SwizzlePlan("shift", tuple(strides), num_phy_elems)
    new, phy = sm.repack_strides(dims, strides, innermost, swizzled, n * chunk_elems)
    return SwizzlePlan("shift", tuple(new), phy)


def min_chunk_elems(graph: CustomizedOp) -> dict[tuple[Operation, int], int]:
    """(op, result) -> contiguous elements its users need (16 B for chunked copies / MMA)."""
    ops, recs = graph_records(graph)
    need: dict[tuple[Operation, int], int] = {}

    def mark(v: object) -> None:
        if isinstance(v, OpResult):
            key = (v.op, v.index)
            need[key] = max(need.get(key, 1), alignment_elems(result_elem_bytes(v)))

    members: dict[int, list[int]] = {}
    for r in recs:
        members.setdefault(r.chain, []).append(r.idx)
    for o, r in zip(ops, recs):
        if isinstance(o, tb.InputOp) and "tb.chunked" in o.attributes:
            mark(o.result)
        elif isinstance(o, tb.OutputOp) and "tb.chunked" in o.attributes:
            mark(o.input)
        elif isinstance(o, tb.MatmulOp):
            mark(o.lhs)
            mark(o.rhs)
            tail = max(members[r.chain], key=lambda i: recs[i].chain_pos)
            for res in ops[tail].results:
                mark(res)
    return need


@dataclass(frozen=True)
class PlanSwizzlePass(ModulePass):
    """Choose XOR / shift swizzles for shared-memory tiles (passes/README.md step 8)."""

    name = "tb-plan-swizzle"

    hopper_gmma: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Plan the swizzles of every `kn.customized` in `op` (`plan_graph`).

        Raises:
            Nothing.
        """
        for graph in op.walk():
            if isinstance(graph, CustomizedOp):
                self.plan_graph(graph)

    def plan_graph(self, graph: CustomizedOp) -> None:
        """Write `tb.swizzle` on every op of `graph` with results (chain tails get `plan_tile`'s
        choice, other results "none"), and the updated `tb.strides` / `tb.num_phy_elems` where a
        plan changed the layout.
        """
        ops, recs = graph_records(graph)
        tails = chain_tails(recs)
        need = min_chunk_elems(graph)
        for i, o in enumerate(ops):
            if not o.results:
                continue
            kinds: list[str] = []
            all_strides, all_phy = [], []
            changed = False
            for r, res in enumerate(o.results):
                strides, phy = stensor_layout(o, r)
                if i in tails:
                    plan = plan_tile(
                        shape_of(res),
                        strides,
                        phy,
                        innermost_of(o, r),
                        swizzled_of(o, r),
                        result_elem_bytes(res),
                        need.get((o, r), 1),
                        self.hopper_gmma,
                    )
                else:
                    plan = SwizzlePlan("none", tuple(strides), phy)
                kinds.append(plan.kind)
                changed |= plan.strides != tuple(strides) or plan.num_phy_elems != phy
                all_strides.append(plan.strides)
                all_phy.append(plan.num_phy_elems)
            o.attributes["tb.swizzle"] = ArrayAttr(StringAttr(k) for k in kinds)
            if changed:
                o.attributes["tb.strides"] = ArrayAttr(int_array(s) for s in all_strides)
                o.attributes["tb.num_phy_elems"] = int_array(all_phy)


__all__ = ["PlanSwizzlePass", "SwizzlePlan", "plan_tile"]
