"""`tb-plan-smem`: shared-memory offsets of every materialised tile (mirage-notes 3.7).

Lifetimes come from the schedule (`tb.stage`/`tb.level`, see `schedule_order.tensor_lifetimes`):
a buffer is freed at the first barrier after its last use, and by category

| category | live |
|---|---|
| pre-loop input | from its load until the loop ends, or its last post-loop use |
| register accumulator (`tb.accum_in_reg`) | from the write-back after the loop to its last use |
| register-chain value (`tb.in_registers`) | never (no tile) |
| shared-memory accumulator | from the clear before the loop to its last post-loop use, or one step past the loop |
| loop-carried result (`tb.reduction_max`'s running max) | from its fill before the loop to the loop's end, or its last post-loop use |
| loop intermediate (non-pipelined loop inputs, chain results in the loop) | within the iteration |
| post-loop intermediate | from its level to its last use |
| pipelined input (`tb.pipelined`) | `tb.stages` buffers (default 2), from before the loop to its end |

Chain-internal results stay in registers (offset -1). The offsets are packed by
`dsa.plan`: first-/best-/worst-fit online heuristics and an OR-tools CP-SAT model
(NoOverlap2D, minimise the peak) warm-started from the best heuristic under `time-limit-ms`,
skipped when a heuristic reaches the lower bound (the peak of live bytes). Sizes are rounded
up to 16 B and offsets 16-B aligned; a tile with a Hopper GMMA swizzle over byte addresses
(`xor<B,4,3>`) is aligned to its swizzle period `2^(B+7)` bytes.

A 128-byte header precedes the tiles (its first 16 bytes are zero: the out-of-bounds source
of ldmatrix lanes), so offsets start at 128 (or at the largest tile alignment above it).
The planned size must fit `smem-limit` (default 232448 B = 227 KiB, sm_90's opt-in maximum
per block). The buffers of one pipelined input form one contiguous ring (stage k at
`offset + k * stride`). Over the limit, pipelined inputs first lose stages (all together,
down to 2: `tb.stages` is rewritten), then fall back to single-buffered loads, largest
first (`tb.pipelined` removed, re-planned) until the plan fits (Mirage would reject the
graph); if it still does not fit, a located error names the graph, the size and the limit.

Writes (passes/README.md step 9): `tb.smem_offset = array<i64>` per tb op with results
(bytes from the dynamic shared-memory base, -1 = not materialised); on pipelined inputs
`tb.smem_offsets_pipeline = array<i64>` (the byte offset of every stage buffer, stage 0 =
`tb.smem_offset`; iteration `it` reads stage `it % N`) and `tb.stages = i64` (N, the
number of buffers actually planned); `tb.smem_size` and `tb.smem_planner` on the
`kn.customized`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from mirage_xdsl.dialects.kn import CustomizedOp, int_array
from mirage_xdsl.passes.conversion.register_chain import IN_REGISTERS
from mirage_xdsl.passes.tb import dsa
from mirage_xdsl.passes.tb.schedule import schedule_of
from mirage_xdsl.passes.tb.schedule_order import SchedOp, tensor_lifetimes
from mirage_xdsl.passes.tb.swizzle_math import parse_swizzle
from mirage_xdsl.target import SM90
from mirage_xdsl.target.errors import SharedMemoryExceeded

PASS_NAME = "tb-plan-smem"
HEADER_BYTES = 128
TILE_ALIGN = 16
SM90_SMEM_LIMIT = SM90.smem_per_block_optin  # cudaFuncAttributeMaxDynamicSharedMemorySize on sm_90


@dataclass(frozen=True)
class SmemPlan:
    """A shared-memory plan of one graph: byte `offsets` of every (op index, result, ring buffer),
    the block's `size` in bytes (header included), the DSA `planner` that found it, the
    live-bytes `lower_bound` and whether the plan is proven `optimal`.
    """
    offsets: dict[tuple[int, int, int], int]  # (op index, result, buffer) -> byte offset
    size: int  # incl. the header
    planner: str
    lower_bound: int
    optimal: bool


def tile_alignment(swizzle: str) -> int:
    """Offset alignment a tile's swizzle needs: byte-addressed GMMA swizzles `xor<B,4,3>`
    repeat every 8 rows of `16 * 2^B` bytes; element-offset swizzles only need 16 B."""
    xor = parse_swizzle(swizzle)
    if xor is not None and xor.m == 4 and xor.s == 3:
        return 1 << (xor.b + xor.m + xor.s)
    return TILE_ALIGN


def _graph_label(graph: CustomizedOp) -> str:
    fn = graph.parent_op()
    while fn is not None and not isinstance(fn, func.FuncOp):
        fn = fn.parent_op()
    k = 0
    if fn is not None:
        for o in fn.walk():
            if o is graph:
                break
            if isinstance(o, CustomizedOp):
                k += 1
        return f"kn.customized #{k} in @{fn.sym_name.data}"
    return "kn.customized"


def pipeline_stages(op: Operation) -> int:
    """Buffers of a pipelined input: its `tb.stages` (tb-plan-pipeline), else 2."""
    attr = op.attributes.get("tb.stages")
    if isinstance(attr, IntegerAttr):
        return max(2, attr.value.data)
    return 2


@dataclass(frozen=True)
class PlanSmemPass(ModulePass):
    """Pack the shared-memory tiles of every threadblock graph (passes/README.md step 9)."""

    name = "tb-plan-smem"

    time_limit_ms: int = 200
    smem_limit: int = SM90_SMEM_LIMIT
    use_cpsat: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Plan the shared memory of every `kn.customized` in `op` (`plan_graph`).

        Raises:
            SharedMemoryExceeded: a graph needs more than `smem_limit` bytes per block.
        """
        for graph in op.walk():
            if isinstance(graph, CustomizedOp):
                self.plan_graph(graph)

    def plan_graph(self, graph: CustomizedOp) -> SmemPlan:
        """Plan and write the shared memory of `graph`.

        Writes `tb.smem_offset` (bytes per result, -1 = not in shared memory) on its ops, the
        ring of `tb.smem_offsets_pipeline` and `tb.stages` on pipelined inputs, and `tb.smem_size`
        and `tb.smem_planner` on the graph.  Over `smem_limit`, the rings lose a stage at a time
        down to double buffers, then the largest pipelined input is loaded single-buffered, and the
        plan is packed again.

        Raises:
            SharedMemoryExceeded: still over `smem_limit` with no pipelined input left (emitted on
                the graph, with the size and lower bound).
        """
        ops, recs, stages, levels = schedule_of(graph)
        in_reg = {i for i, o in enumerate(ops) if "tb.accum_in_reg" in o.attributes or IN_REGISTERS in o.attributes}
        pipelined = {i for i, o in enumerate(ops) if "tb.pipelined" in o.attributes}
        nbuf = {i: pipeline_stages(ops[i]) for i in pipelined}
        dropped: list[int] = []
        while True:
            plan = self.pack(ops, recs, stages, levels, in_reg, pipelined, nbuf)
            if plan.size <= self.smem_limit or not pipelined:
                break
            deep = [i for i in pipelined if nbuf[i] > 2]
            if deep:
                # over the limit: one stage fewer for every pipelined input (they share one
                # ring index), then re-plan
                for i in deep:
                    nbuf[i] -= 1
                continue
            # still over with double buffers: load the largest pipelined input
            # single-buffered and re-plan
            drop = max(pipelined, key=lambda i: (recs[i].result_bytes[0], -i))
            pipelined.discard(drop)
            dropped.append(drop)
            ops[drop].attributes.pop("tb.pipelined", None)
            ops[drop].attributes.pop("tb.stages", None)

        for i, o in enumerate(ops):
            if not o.results:
                continue
            o.attributes["tb.smem_offset"] = int_array([plan.offsets.get((i, r, 0), -1) for r in range(len(o.results))])
            o.attributes.pop("tb.smem_offset_async", None)  # the pre-ring spelling
            if i in pipelined:
                o.attributes["tb.smem_offsets_pipeline"] = int_array([plan.offsets[(i, 0, k)] for k in range(nbuf[i])])
                o.attributes["tb.stages"] = IntegerAttr(nbuf[i], i64)
            else:
                o.attributes.pop("tb.smem_offsets_pipeline", None)
        graph.attributes["tb.smem_size"] = IntegerAttr(plan.size, i64)
        graph.attributes["tb.smem_planner"] = StringAttr(plan.planner)
        if plan.size > self.smem_limit:
            msg = (
                f"{PASS_NAME}: {_graph_label(graph)} needs {plan.size} bytes of shared memory per block "
                f"(lower bound {plan.lower_bound} B incl. the header"
                + (", already without double-buffered loads" if dropped else "")
                + f"), more than the limit of {self.smem_limit} bytes; use smaller tiles: a larger grid_dim "
                f"or forloop_range (iterate an input with forloop_dim) so each block holds less"
            )
            graph.emit_error(msg, SharedMemoryExceeded(msg, plan.size, self.smem_limit))
        return plan

    def pack(
        self,
        ops: list[Operation],
        recs: list[SchedOp],
        stages: list[str],
        levels: list[int],
        in_reg: set[int],
        pipelined: set[int],
        nbuf: dict[int, int] | None = None,
    ) -> SmemPlan:
        """Pack one set of lifetimes (sizes, lower bound and offsets include the header).

        The `nbuf[i]` buffers of pipelined input i (default 2) are packed as ONE item, stage
        k at `offset + k * stride` (`stride` = the tile size rounded up to its alignment), so
        the printer can index the ring arithmetically."""
        lives = tensor_lifetimes(recs, stages, levels, in_reg, pipelined, nbuf)
        items: list[tuple[int, int, int]] = []
        aligns: list[int] = []
        members: list[list[tuple[tuple[int, int, int], int]]] = []  # per item: (key, byte shift)
        ring: dict[tuple[int, int], int] = {}  # (op, result) of a pipelined input -> item index
        for t in lives:
            sw = ops[t.op].attributes.get("tb.swizzle")
            kind = ""
            if isinstance(sw, ArrayAttr) and t.result < len(sw.data):
                entry = sw.data[t.result]
                kind = entry.data if isinstance(entry, StringAttr) else ""
            align = tile_alignment(kind)
            key = (t.op, t.result, t.buffer)
            if t.category == "pipelined-input":
                stride = dsa.round_up(t.size, max(align, TILE_ALIGN))
                j = ring.get((t.op, t.result))
                if j is not None:
                    members[j].append((key, t.buffer * stride))
                    items[j] = (items[j][0] + stride, items[j][1], items[j][2])
                    continue
                ring[(t.op, t.result)] = len(items)
                items.append((stride, t.start, t.end))
                members.append([(key, t.buffer * stride)])
            else:
                items.append((t.size, t.start, t.end))
                members.append([(key, 0)])
            aligns.append(align)
        result = dsa.plan(
            items,
            align=TILE_ALIGN,
            time_limit_ms=self.time_limit_ms,
            use_cpsat=self.use_cpsat,
            aligns=aligns,
        )
        base = max([HEADER_BYTES] + aligns)
        offsets = {key: base + off + shift for ms, off in zip(members, result.offsets) for key, shift in ms}
        return SmemPlan(offsets, base + result.peak, result.planner, base + result.lower_bound, result.optimal)
