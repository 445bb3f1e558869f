"""`kn-to-task-graph`: the fused kernels of a lowered kernel graph as one megakernel's tasks.

Runs after kn-fuse / kn-partition and the per-kernel lowering (`mirage-transpile`: every
`kn.customized` is a `cute.kernel` with its workspace planned by kn-plan-workspace).  Per
function it appends one `mpk.task_graph` (dialects/mpk/ops.py) before `func.return`:

* tasks: one per `blocks-per-task` consecutive threadblocks (linear ids, x fastest) of each
  kernel, in kernel order then block order -- a topological order, the region order;
* buffer planning: intermediates and grid-sum scratch re-placed without reuse (option
  `reuse-workspace=false`, the default; kernels overlap in a megakernel, and shared memory
  would serialise them), else kn-plan-workspace's placement is kept;
* TILE-level dependencies from the footprints (passes/mpk/footprint.py): a task that reads
  a box of a tensor depends on exactly the producer tasks whose written boxes intersect it,
  not on whole kernels; a read of an aliased `kn.reshape` (a view, kn-alias-reshape) is a
  read of the box of the owning tensor between the flat element offsets it covers
  (passes/mpk/alias.py), so the consumer waits for the producer tiles of that range;
  workspace buffers that kn-plan-workspace let share memory (disjoint lifetimes) and
  grid-sum scratch add whole-buffer edges from every earlier task touching the overlapping
  bytes to every later task writing them (WAR/WAW through reuse; a later read needs only its
  own writers, which already waited);
* events (`count`, `producers`, `consumers`): one per distinct producer set after a transitive reduction (a producer that is an
  ancestor of another producer of the same task is dropped), `count` = its size; a task
  waits on at most one event and triggers every event whose set holds it (seed 003,
  section 5);
* workers: `workers` (0: SMs x CTAs per SM that shared memory and threads allow, at most
  `MAX_CTAS_PER_SM`; one of them the scheduler under `dispatch=scheduler`), assigned
  statically by passes/mpk/assign.py (`worker`, `cost_ns` on each task,
  `mpk.est_makespan_ns` on the graph); with a whole number of workers per SM the assignment
  spreads work over SMs and the graph records `mpk.sm_major = <SMs>`.

Writes: the `mpk.task_graph` op (with `mpk.watchdog_ns`, `mpk.dispatch` (option `dispatch`,
passes/mpk/dispatch.py), `mpk.sm_major` where it applies, and `mpk.trace` under `trace=true`);
the function attribute `mpk.megakernel = "<func>_mpk"`.
Errors (DiagnosticException via emit_error, "kn-to-task-graph: <rule>; <fix>"): a kernel-level
op left as a library call (a `kn.reshape` that is a copy among them), kernels of different thread counts, a late-finisher kernel.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import NoReturn

from xdsl.context import Context
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, TensorType, UnitAttr, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from mirage_xdsl.dialects import cute, kn
from mirage_xdsl.dialects.mpk import DISPATCH_ATTR, DISPATCH_MODES, SM_MAJOR_ATTR, EventOp, TaskGraphOp, TaskOp, box
from mirage_xdsl.dialects.mpk.verify import intersects
from mirage_xdsl.passes.mpk.alias import owner_read
from mirage_xdsl.passes.mpk.assign import assign_workers, sm_major, task_cost_ns
from mirage_xdsl.passes.mpk.dispatch import choose_dispatch
from mirage_xdsl.passes.mpk.footprint import Box, FootprintError, kernel_accesses
from mirage_xdsl.passes.tb.layout_math import elem_bytes_of, physical_num_elems
from mirage_xdsl.target import SM90

MAX_CTAS_PER_SM = 4
"""Worker CTAs per SM at most (the persistent kernel's `__launch_bounds__` minimum): a
memory-bound task keeps only its own tiles in flight, so several per SM are needed to stream
weights (an H200 ran decoder_mlp at 2.8 TB/s with 2 per SM, 2026-11-26)."""
WORKSPACE_ALIGN = 128
"""Byte alignment of workspace buffers (kn-plan-workspace's, Mirage `plan_dtensor_memory`)."""
SMEM_MARGIN = 1024
"""Bytes added to the kernels' planned shared memory when counting CTAs per SM: the
printer appends block-reduction scratch and the grid-sum flag (codegen/cuda_printer.py)."""
MEGAKERNEL_ATTR = "mpk.megakernel"
WATCHDOG_ATTR = "mpk.watchdog_ns"
TRACE_ATTR = "mpk.trace"
MAKESPAN_ATTR = "mpk.est_makespan_ns"


def _fail(op: Operation, rule: str, fix: str) -> NoReturn:
    msg = f"kn-to-task-graph: {rule}; {fix}"
    op.emit_error(msg, PassFailedException(msg))
    raise PassFailedException(msg)  # emit_error raises; this line keeps the type checker informed


def _bytes(value: SSAValue, strides: tuple[int, ...]) -> int:
    typ = value.type
    assert isinstance(typ, TensorType)
    eb = elem_bytes_of(typ.element_type)
    return physical_num_elems(tuple(typ.get_shape()), strides, eb) * eb


def kernel_smem(kernel: cute.KernelOp) -> int:
    """Shared memory of a kernel's plan and its sliced-K scratch (bytes, without the
    printer's few appended bytes, see SMEM_MARGIN)."""
    need = kernel.smem_bytes
    ks = kernel.attributes.get(cute.KSLICE_SCRATCH)
    if isinstance(ks, DenseArrayBase):
        base, nbytes = kn.ints(ks)
        need = max(need, base + nbytes)
    return need


def auto_workers(threads: int, smem: int, num_sms: int = SM90.num_sms) -> int:
    """Worker CTAs: `num_sms` x the CTAs per SM that shared memory and threads allow
    (at most MAX_CTAS_PER_SM)."""
    by_smem = SM90.smem_per_sm // (smem + SMEM_MARGIN + SM90.smem_reserved_per_block)
    by_threads = 2048 // threads
    return num_sms * max(1, min(MAX_CTAS_PER_SM, by_smem, by_threads))


def bump_workspace(fn: FuncOp, kernels: list[cute.KernelOp], returned: set[SSAValue]) -> None:
    """Re-place every intermediate and grid-sum scratch of `fn` without reuse (Mirage's
    `plan_dtensor_memory`: bump allocation, 128-byte aligned): in a megakernel, kernels
    overlap, and memory that kn-plan-workspace lets two buffers share would add whole-buffer
    dependencies between their tasks.  Rewrites `kn.workspace_offset`,
    `kn.grid_sum_scratch_offset` and the function's `kn.workspace_size`."""
    cur = 0
    for k in kernels:
        offs = k.attributes.get("kn.workspace_offset")
        if isinstance(offs, DenseArrayBase):
            new = []
            for r, off in enumerate(kn.ints(offs)):
                if off < 0 or k.results[r] in returned:
                    new.append(off)
                    continue
                new.append(cur)
                cur = _round_up(cur + _bytes(k.results[r], k.strides_of(r)), WORKSPACE_ALIGN)
            k.attributes["kn.workspace_offset"] = DenseArrayBase.from_list(i64, new)
        gs = next((o for o in k.walk() if isinstance(o, cute.GridSumOp)), None)
        if isinstance(k.attributes.get(kn.GRID_SUM_SCRATCH_ATTR), IntegerAttr) and gs is not None:
            k.attributes[kn.GRID_SUM_SCRATCH_ATTR] = IntegerAttr(cur, i64)
            slot = sum(math.prod(cute.smem_shape(v)) for v in gs.ins)
            cur = _round_up(cur + math.prod(k.grid) * slot * 4, WORKSPACE_ALIGN)
    fn.attributes["kn.workspace_size"] = IntegerAttr(cur, i64)


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a


@dataclass
class _Task:
    kernel: cute.KernelOp
    blocks: tuple[int, int]
    reads: list[tuple[SSAValue, Box]]
    writes: list[tuple[SSAValue, Box]]
    nbytes: int


def build_task_graph(
    fn: FuncOp,
    workers: int = 0,
    blocks_per_task: int = 1,
    num_sms: int = SM90.num_sms,
    reuse_workspace: bool = False,
    scheduler: bool = False,
) -> TaskGraphOp | None:
    """Build (and insert before `func.return`) the task graph of `fn`; None when `fn` holds no
    kernel.  Errors are emitted on the offending op (module docstring)."""
    block = fn.body.block
    ret = block.last_op
    if not isinstance(ret, ReturnOp):
        _fail(fn, "the kernel graph must end with func.return", "lower it with mirage-transpile first")
    kernels = [op for op in block.ops if isinstance(op, cute.KernelOp)]
    if not kernels:
        return None
    for op in block.ops:
        if isinstance(op, TaskGraphOp):
            _fail(op, "the function already holds a task graph", "run kn-to-task-graph once")
        if isinstance(op, kn.ReshapeOp) and kn.ALIAS_ATTR not in op.attributes:
            _fail(
                op,
                "this kn.reshape is a copy (a library call): its input's strides admit no view of the new shape, "
                "or its result is a graph output",
                "reshape a row-major tensor (one a kernel writes), and return the reshaped tensor's consumer, "
                "not the reshape itself",
            )
        if isinstance(op, kn.ReshapeOp):
            continue  # a view of its input's buffer (kn-alias-reshape): reads map to the owner
        if not isinstance(op, (cute.KernelOp, ReturnOp)):
            _fail(
                op,
                f"'{op.name}' is not a generated kernel (a library call or an unlowered op cannot be a megakernel task)",
                "compile with mirage-megakernel, whose kn-fuse{per-op=true} lowers every op, lone matmuls included, "
                "to a kernel",
            )
    threads = {k.num_threads for k in kernels}
    if len(threads) > 1:
        desc = ", ".join(f"{k.kernel_name.data}: {k.num_threads}" for k in kernels)
        _fail(kernels[0], f"the kernels use different thread counts ({desc}); one megakernel runs every task with one",
              "partition with kn-fuse{block-threads=N} (mirage-megakernel does)")
    nthreads = threads.pop()

    if not reuse_workspace:
        bump_workspace(fn, kernels, set(ret.arguments))

    # buffers: graph inputs, then every kernel result
    names: list[str] = []
    buf_of: dict[SSAValue, int] = {}
    for arg in block.args:
        buf_of[arg] = len(names)
        names.append(arg.name_hint or f"arg{arg.index}")
    returned = set(ret.arguments)
    ws_range: dict[object, tuple[int, int]] = {}  # value or ("scratch", kernel) -> byte range
    for k in kernels:
        offs = k.attributes.get("kn.workspace_offset")
        for r, res in enumerate(k.results):
            buf_of[res] = len(names)
            names.append(res.name_hint or f"{k.kernel_name.data}.out{r}")
            if res in returned or not isinstance(offs, DenseArrayBase):
                continue
            off = kn.ints(offs)[r]
            if off >= 0:
                ws_range[res] = (off, off + _bytes(res, k.strides_of(r)))
        scratch = k.attributes.get(kn.GRID_SUM_SCRATCH_ATTR)
        gs = next((o for o in k.walk() if isinstance(o, cute.GridSumOp)), None)
        if isinstance(scratch, IntegerAttr) and gs is not None:
            slot = sum(math.prod(cute.smem_shape(v)) for v in gs.ins)
            off = scratch.value.data
            ws_range[("scratch", k)] = (off, off + math.prod(k.grid) * slot * 4)

    # tasks and their footprints
    tasks: list[_Task] = []
    kernel_tasks: dict[cute.KernelOp, list[int]] = {}
    for k in kernels:
        try:
            per_block = kernel_accesses(k)
        except FootprintError as err:
            _fail(k, str(err), "see the message")
        values = [*k.results, *k.inputs]
        ids = []
        for lo in range(0, len(per_block), blocks_per_task):
            hi = min(lo + blocks_per_task, len(per_block))
            reads: dict[tuple[SSAValue, Box], None] = {}
            writes: dict[tuple[SSAValue, Box], None] = {}
            for accesses in per_block[lo:hi]:
                for a in accesses:
                    (writes if a.write else reads)[owner_read(values[a.param], a.box)] = None
            nbytes = 0
            for v, b in [*reads, *writes]:
                typ = v.type
                assert isinstance(typ, TensorType)
                nbytes += math.prod(h - lo_ for lo_, h in b) * elem_bytes_of(typ.element_type)
            ids.append(len(tasks))
            tasks.append(_Task(k, (lo, hi), list(reads), list(writes), nbytes))
        kernel_tasks[k] = ids

    # dependencies: tile-level RAW, whole-buffer hazards through workspace reuse
    deps: list[set[int]] = [set() for _ in tasks]
    writers: dict[SSAValue, list[tuple[int, Box]]] = defaultdict(list)
    history: list[tuple[object, tuple[int, int], bool, list[int]]] = []  # (key, bytes, writes, tasks)
    for k in kernels:
        ids = kernel_tasks[k]
        for t in ids:
            for v, rb in tasks[t].reads:
                for p, wb in writers.get(v, ()):
                    if intersects(rb, wb):
                        deps[t].add(p)
        touched: dict[object, tuple[bool, list[int]]] = {}
        for t in ids:
            for v, _ in tasks[t].reads:
                if v in ws_range:
                    w, ts = touched.setdefault(v, (False, []))
                    ts.append(t)
            for v, _ in tasks[t].writes:
                if v in ws_range:
                    w, ts = touched.get(v, (False, []))
                    touched[v] = (True, [*ts, t])
        if ("scratch", k) in ws_range:
            touched[("scratch", k)] = (True, list(ids))
        # a write waits for every earlier task touching its bytes under another buffer (WAR /
        # WAW through reuse); a read needs only its own writers, which waited for those
        for key, (w, ts) in touched.items():
            lo, hi = ws_range[key]
            for key2, (lo2, hi2), _, ts2 in history:
                if w and key2 != key and lo < hi2 and lo2 < hi:
                    for t in ts:
                        deps[t].update(ts2)
        for key, (w, ts) in touched.items():
            history.append((key, ws_range[key], w, sorted(set(ts))))
        for t in ids:
            for v, wb in tasks[t].writes:
                writers[v].append((t, wb))

    # transitive reduction: drop a producer that is already an ancestor of another one
    # (fewer triggers per task: each is an atomic on the producer's critical path)
    anc: list[int] = []
    for t, d in enumerate(deps):
        covered = 0
        for q in d:
            covered |= anc[q]
        deps[t] = {p for p in d if not (covered >> p) & 1}
        bits = covered
        for p in deps[t]:
            bits |= 1 << p
        anc.append(bits)

    # events: one per distinct producer set
    event_of: dict[frozenset[int], int] = {}
    wait = [-1] * len(tasks)
    triggers: list[list[int]] = [[] for _ in tasks]
    for t, d in enumerate(deps):
        if not d:
            continue
        key = frozenset(d)
        if key not in event_of:
            event_of[key] = len(event_of)
            for p in sorted(key):
                triggers[p].append(event_of[key])
        wait[t] = event_of[key]

    smem = max(kernel_smem(k) for k in kernels)
    ctas = workers or auto_workers(nthreads, smem, num_sms)
    # under scheduler dispatch the last CTA slot is the scheduler's
    nworkers = ctas - 1 if scheduler else ctas
    if nworkers < 1:
        _fail(fn, f"dispatch=scheduler needs at least 2 CTAs (one is the scheduler), got workers={ctas}", "raise workers")
    costs = [task_cost_ns(t.nbytes) for t in tasks]
    plan = assign_workers(costs, [sorted(d) for d in deps], nworkers, num_sms, slots=ctas)

    body = Block()
    waiting: dict[int, list[int]] = defaultdict(list)
    for t, e in enumerate(wait):
        if e >= 0:
            waiting[e].append(t)
    for key, e in sorted(event_of.items(), key=lambda kv: kv[1]):
        body.add_op(EventOp(e, len(key), sorted(key), waiting[e]))
    for t, task in enumerate(tasks):
        body.add_op(
            TaskOp(
                t,
                task.kernel.kernel_name.data,
                task.blocks,
                plan.worker[t],
                wait[t],
                triggers[t],
                [box(buf_of[v], [lo for lo, _ in b], [hi for _, hi in b]) for v, b in task.reads],
                [box(buf_of[v], [lo for lo, _ in b], [hi for _, hi in b]) for v, b in task.writes],
                costs[t],
            )
        )
    graph = TaskGraphOp(nworkers, nthreads, smem, names, Region(body))
    graph.attributes[MAKESPAN_ATTR] = IntegerAttr(plan.makespan_ns, i64)
    if sms := sm_major(ctas, num_sms):
        graph.attributes[SM_MAJOR_ATTR] = IntegerAttr(sms, i64)
    block.insert_op_before(graph, ret)
    fn.attributes[MEGAKERNEL_ATTR] = StringAttr(f"{fn.sym_name.data}_mpk")
    return graph


@dataclass(frozen=True)
class KnToTaskGraphPass(ModulePass):
    """Append a `mpk.task_graph` to every lowered kernel graph (module docstring)."""

    name = "kn-to-task-graph"

    workers: int = 0
    """Worker CTAs of the megakernel (0: SMs x the CTAs per SM its shared memory allows)."""
    blocks_per_task: int = 1
    """Consecutive threadblocks of one kernel per task."""
    num_sms: int = SM90.num_sms
    reuse_workspace: bool = False
    """Keep kn-plan-workspace's shared placement (smaller workspace, more dependencies);
    false re-places intermediates without reuse (`bump_workspace`)."""
    trace: bool = False
    """Record every task's start and end (%globaltimer) for a Chrome trace (`mpk.trace`)."""
    watchdog_ms: int = 500
    """A wait spinning longer than this ends the launch with the deadlock report
    (`mpk.watchdog_ns`)."""
    dispatch: str = "auto"
    """How workers find their tasks (`mpk.dispatch`: table, straight, inline or scheduler); `auto`:
    `choose_dispatch` by the task count (passes/mpk/dispatch.py).  `scheduler` gives the last
    of the `workers` CTAs to a scheduler (codegen/megakernel_scheduler.py), so the graph has
    one worker fewer."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Append a verified `mpk.task_graph` to every func of `op` that holds kernels
        (`build_task_graph`), with `mpk.watchdog_ns` = `watchdog_ms` x 10^6 and `mpk.trace` if `trace`.

        Raises:
            PassFailedException: an option out of range (blocks-per-task or watchdog-ms < 1,
                workers < 0), or `build_task_graph`'s located errors.
            VerifyException: the built task graph fails its verifier.
        """
        if self.blocks_per_task < 1 or self.workers < 0 or self.watchdog_ms < 1:
            _fail(op, "blocks-per-task and watchdog-ms must be >= 1 and workers >= 0", "fix the options")
        if self.dispatch != "auto" and self.dispatch not in DISPATCH_MODES:
            _fail(op, f"dispatch is '{self.dispatch}'; rule: auto, {', '.join(DISPATCH_MODES)}", "pick one of them")
        for fn in [f for f in op.walk() if isinstance(f, FuncOp) and f.body.blocks]:
            scheduler = self.dispatch == "scheduler"
            graph = build_task_graph(fn, self.workers, self.blocks_per_task, self.num_sms, self.reuse_workspace, scheduler)
            if graph is None:
                continue
            graph.attributes[WATCHDOG_ATTR] = IntegerAttr(self.watchdog_ms * 1_000_000, i64)
            if self.trace:
                graph.attributes[TRACE_ATTR] = UnitAttr()
            mode = choose_dispatch(len(graph.tasks)) if self.dispatch == "auto" else self.dispatch
            graph.attributes[DISPATCH_ATTR] = StringAttr(mode)
            graph.verify()
