"""`tb-schedule`: execution order, barriers and per-op copy/accumulator metadata of every
threadblock graph (mirage-notes 3.5; seed 000 "TB Graph Scheduling",
docs/seeds/000_801cde5f44520f02.txt).

The order itself (stages, levels, barriers, peak memory) is computed on abstract records
in `schedule_order.py`; this module reads the IR, decides the copy and accumulator
metadata below and writes everything back.

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
  Deviation: an fp32 `nored` or `nored_rescale` accumulator that ends a chain of elementwise ops (rms_norm's
  sum of squares: `[square, mul_scalar, nored]`; a logsumexp's `[sub, exp, nored_rescale]`) is kept in registers too when it takes at
  most `ELEMENTWISE_ACCUM_MAX_REGS` per thread and fits the same running total, counted
  after the matmul accumulators.  The printer holds it as an `mx::RegTile` and stores it
  once after the loop, so tb-plan-smem gives its shared tile only that post-loop lifetime
  (Mirage reserves it for the whole loop).
* `tb.in_registers` on the values of an online-softmax attention body that
  convert-tb-to-cute lowers to a flash `cute.mma_chain` (scores, running max, rescale factor,
  P, P @ V; `register_chain.planned_online_chains`, the same matcher the lowering uses), and
  `tb.accum_in_reg` on its two `nored_rescale` accumulators: tb-plan-smem then gives the
  values no tile and the accumulators one only after the loop.
* `tb.stage`, `tb.level` on every op, `tb.num_barriers` (barriers between levels, summed
  over the stages) on the `kn.customized`. Stage boundaries (after the pre-loop loads, at the
  end of each iteration, after the loop, after the register write-back) always have a
  barrier and are not counted.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, UnitAttr, i64
from xdsl.ir import BlockArgument, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from mirage_xdsl.dialects import tb
from mirage_xdsl.dialects.kn import CustomizedOp, element_type_of, ints, shape_of
from mirage_xdsl.dialects.kn.strides import dtensor_strides
from mirage_xdsl.dialects.tiling import row_major_strides
from mirage_xdsl.dialects.views import element_offset
from mirage_xdsl.passes.conversion.register_chain import IN_REGISTERS, online_register_values, planned_online_chains
from mirage_xdsl.passes.tb.layout_math import alignment_elems, calc_tensor_strides, elem_bytes_of, storage_elem_bytes, stores_fp32
from mirage_xdsl.passes.tb.schedule_order import SchedOp, Schedule, TensorLife, _chains, asap_levels, schedule_ops, tensor_lifetimes
from mirage_xdsl.target import ELEMENTWISE_ACCUM_MAX_REGS

PASS_NAME = "tb-schedule"


MAX_ACCUM_REGS = 192
"""fp32 registers per thread that register accumulators may use in total (Mirage's rule)."""


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
    `nored` / `nored_rescale` accumulators ending a chain of two or more ops led by an elementwise op (the caller
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
        if op.is_accum and op.accum_kind in ("nored", "nored_rescale") and op.idx in elementwise:
            chain = members[op.chain]
            if len(chain) >= 2 and chain[-1] == op.idx:
                keep(op.idx, ELEMENTWISE_ACCUM_MAX_REGS)
    return kept


def elementwise_chain_accumulators(ops: Sequence[Operation], recs: Sequence[SchedOp]) -> set[int]:
    """Positions of the fp32 `nored` / `nored_rescale` accumulators whose chain leader is an elementwise op
    (unary or binary, not a matmul): the `elementwise` candidates of
    `register_accumulators`.  `recs` are `graph_records(...)`'s, chain ids = leader positions."""
    out: set[int] = set()
    for i, o in enumerate(ops):
        if not (isinstance(o, tb.ForloopAccumOp) and o.accum_kind in ("nored", "nored_rescale") and stores_fp32(o.result)):
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


def _int_attr(op: Operation, name: str) -> int | None:
    attr = op.attributes.get(name)
    return attr.value.data if isinstance(attr, IntegerAttr) else None


def is_accumulator_value(value: SSAValue) -> bool:
    """Whether `value` is the result of a `tb.forloop_accum`."""
    return isinstance(value, OpResult) and isinstance(value.op, tb.ForloopAccumOp)


def result_elem_bytes(value: SSAValue) -> int:
    """Storage bytes per element: fp32 for accumulator tiles (passes/README.md)."""
    return storage_elem_bytes(value)


def innermost_of(op: Operation, r: int) -> int:
    """The innermost dim of result `r` of `op`: its `tb.innermost` entry (tb-resolve-layout), else
    (no attribute, no entry or -1) the last dim."""
    attr = op.attributes.get("tb.innermost")
    if isinstance(attr, DenseArrayBase):
        vals = ints(attr)
        if r < len(vals) and vals[r] >= 0:
            return vals[r]
    return len(shape_of(op.results[r])) - 1


def swizzled_of(op: Operation, r: int) -> int:
    """The swizzled dim of result `r` of `op`: its `tb.swizzled` entry (-1: none, also without one)."""
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
    iterations of a tb.input, and its view's first element (a view's tiles partition its box)."""
    dims = op.view_dims
    full = shape_of(op.dtensor)
    strides = dtensor_strides(graph.inputs[op.dtensor.index]) if isinstance(op.dtensor, BlockArgument) else row_major_strides(full)
    tile = shape_of(op.result)
    steps = [element_offset(op.view_offsets, strides)]
    for g, m in zip(graph.grid, op.imap):
        if g > 1 and m >= 0:
            steps.append(dims[m] // g * strides[m])
    if op.fdim >= 0 and graph.num_iterations > 1:
        steps.append(tile[op.fdim] * strides[op.fdim])
    return steps


def input_is_chunked(op: tb.InputOp, graph: CustomizedOp) -> bool:
    """Whether `tb.input` `op` of `graph` can be loaded in 16-byte chunks (`can_chunk_copy` of its
    DTensor, its tile's layout and its block, iteration and view offsets)."""
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


def output_is_chunked(op: tb.OutputOp, graph: CustomizedOp, index: int) -> bool:
    """Whether output `op`, storing result `index` of `graph`, can be stored in 16-byte chunks."""
    dvalue = graph.outputs[index]
    dstrides = dtensor_strides(dvalue)
    src = op.input
    assert isinstance(src, OpResult)
    strides, _ = stensor_layout(src.op, src.index)
    tile = shape_of(src)
    steps = [tile[m] * dstrides[m] for g, m in zip(graph.grid, op.omap) if g > 1 and m >= 0]
    steps.append(element_offset(op.view_offsets, dstrides))
    if result_elem_bytes(src) != elem_bytes_of(element_type_of(dvalue)):
        return False  # an fp32 accumulator tile stored to an fp16 tensor converts per element
    return can_chunk_copy(dstrides, shape_of(dvalue), tile, strides, elem_bytes_of(element_type_of(dvalue)), steps)


def set_flag(op: Operation, name: str, on: bool) -> None:
    """Set the unit attribute `name` on `op` when `on`, else remove it."""
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
        """Schedule every `kn.customized` in `op` (`schedule_graph`).

        Raises:
            Nothing.
        """
        for graph in op.walk():
            if isinstance(graph, CustomizedOp):
                self.schedule_graph(graph)

    def schedule_graph(self, graph: CustomizedOp) -> Schedule:
        """Schedule `graph` in place and return the schedule.

        Marks inputs/outputs `tb.chunked` (16-byte copies possible) and inputs `tb.pipelined`
        (chunked, iterated, more than one loop iteration); marks `tb.accum_in_reg` on the
        accumulators kept in registers (at most `max_accum_regs` per thread); then reorders the
        block's ops into the schedule, writing `tb.stage` and `tb.level` on each and
        `tb.num_barriers` on the graph.
        """
        ops, recs = graph_records(graph)
        threads = graph.block[0] * graph.block[1] * graph.block[2]
        pipelined: set[int] = set()
        result_of = {o: r for o, r, _ in graph.output_slots()}
        for i, o in enumerate(ops):
            if isinstance(o, tb.InputOp):
                chunked = input_is_chunked(o, graph)
                set_flag(o, "tb.chunked", chunked)
                pipe = chunked and o.fdim >= 0 and graph.num_iterations > 1
                set_flag(o, "tb.pipelined", pipe)
                if pipe:
                    pipelined.add(i)
            elif isinstance(o, tb.OutputOp):
                set_flag(o, "tb.chunked", output_is_chunked(o, graph, result_of[o]))
        numel = {}
        for i, o in enumerate(ops):
            if isinstance(o, tb.ForloopAccumOp):
                n = 1
                for d in shape_of(o.result):
                    n *= d
                numel[i] = n
        elementwise = elementwise_chain_accumulators(ops, recs)
        in_reg = register_accumulators(recs, numel, threads, self.max_accum_regs, elementwise)
        # online-softmax attention bodies run as one register chain (register_chain.py):
        # their accumulators live in registers, their intermediates nowhere in shared memory
        index = {o: i for i, o in enumerate(ops)}
        online = planned_online_chains(ops, lambda o: (recs[index[o]].chain, recs[index[o]].chain_pos), threads // 32)
        in_registers = {o for rc in online for o in online_register_values(rc)}
        in_reg |= {index[a] for rc in online for a in (rc.total, rc.second[-1])}
        for i, o in enumerate(ops):
            if isinstance(o, tb.ForloopAccumOp):
                set_flag(o, "tb.accum_in_reg", i in in_reg)
            set_flag(o, IN_REGISTERS, o in in_registers)
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
