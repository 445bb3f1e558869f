"""The persistent megakernel: a `mpk.task_graph` printed as ONE `__global__` kernel.

    mirage-opt graph.mlir -p mirage-megakernel -t cuda

Per function holding a task graph (passes/mpk/task_graph.py) the translation unit has:

* every `cute.kernel` of the function as a task body, `static __device__ <name>_task(<its
  parameters>, const uint3 mpk_block)` (cuda_printer.task_function: `blockIdx` replaced by
  the parameter, no PDL `griddepcontrol`), printed once per distinct body
  (`shared_task_bodies`: a repeated layer calls its first copy);
* how a worker finds its tasks, as the graph's `mpk.dispatch` says (passes/mpk/dispatch.py):
  `table` -- constant tables (per task its kernel, block range, wait event and triggers; per
  worker its queue; per event its count) and a loop with one `switch` on the task's kernel;
  `straight` -- `switch (w)` with each worker's queue as straight-line calls whose task
  index, event, count and block are literals; `inline` -- the same with the task functions
  `__forceinline__`; `scheduler` -- the tables, and one more CTA that pushes each task into
  its worker's queue once its event is reached (codegen/megakernel_scheduler.py);
* `extern "C" __global__ void __launch_bounds__(T, B) <func>_mpk(outputs, inputs, workspace,
  counters)`: worker CTA w runs queue w (with `mpk.sm_major` = S, a worker's w is
  slot x S + its SM id, `mx::mpk_place`, so that w runs on SM w % S as the assignment
  assumed); it runs each task's blocks (a barrier after each), handing the first an
  `mx::MpkGate`: the body issues its ring-prologue loads of graph inputs (the ops a kernel
  issues before its PDL wait), then thread 0 waits on the task's event (`mx::mpk_wait`:
  ld.acquire.gpu, __nanosleep back-off, a globaltimer watchdog that records the task, the
  event and its counts and makes every worker return) and the block meets in
  `__syncthreads`; after the task thread 0 fences and
  adds 1 (atom.add.release.gpu) to each triggered event (include/mirage_xdsl/megakernel.cuh).
  Counters are generation-numbered (launch g waits for (g + 1) x count), so the launch replays
  in a CUDA graph.  With `mpk.trace` thread 0 also stores each task's start and end
  (%globaltimer, ns) for runtime/megakernel.py's Chrome trace.

Every task uses the megakernel's thread count; the dynamic shared memory is the largest of
the kernels' (`launch_smem_bytes`), and for an SM-major graph at least `occupancy_cap_smem`.
A task's first trigger is `atom.add.release.gpu` after `__threadfence()`; further triggers are
relaxed `red` adds the same fence orders.
Waits whose producers all ran earlier on the same worker are not printed
(`local_elision`).  Under static dispatch the kernel is launched with programmatic dependent
launch.  A worker first places itself (its SM's uint64 slot counter, which grows by the
workers per SM each launch: slot = ticket % workers per SM), then triggers its dependents
(`griddepcontrol.launch_dependents`), so the next launch's CTAs are launched once every
worker of this one has placed itself, take the SM slots of workers that have finished their
queues and prefetch there; a launch's CTAs all trigger only once they run, so its workers are
all resident before the next launch's take any slot.  Its first task's body issues the ring
prologue loads of kn.weight inputs (`cute.before_grid_wait`; no launch writes a weight), then
waits for the previous grid in `MpkGate::launch_sync` (`mx::mpk_launch_sync`:
`griddepcontrol.wait`: the previous launch, of this graph or another, has completed and its
writes are visible; then it reads the generation word that launch published and checks the
placement ticket against it), then issues its other prologue loads and waits on its event; a
worker without tasks waits after its empty queue.  Against waiting at the kernel's start
(H100, 2026-11-27, same process, before / after): the decoder layer 152.7 -> 148.7-149.2 us,
at batch 8 196.2 -> 191.8-191.9, four layers 598.5 -> 595.6-596.2, chain40 12.2 -> 11.9-12.1:
the first tasks' weights stream while the previous launch drains.
Weights are not prefetched into L2 ahead of their tasks: the prefetch
competed with the tasks on the critical path (an H200, 2026-11-26: the decoder layer 164.3 ->
161.1 us without it, at batch 8 224.6 -> 211.8, chain40 39.1 -> 30.7; decoder_mlp 101.8 ->
104.3).  The LaunchPlan has one `KernelLaunch` (grid = workers,
PDL unless under scheduler dispatch) and `LaunchPlan.megakernel` (`MegakernelInfo`): where the state words, events and
trace lie in the counter buffer (uint32 words after the kernels' grid-sum counters).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, replace

from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp

from mirage_xdsl.codegen.build_launch_plan import plan_function
from mirage_xdsl.codegen.cuda_printer import print_module, task_function
from mirage_xdsl.codegen.cuda_syntax import CudaEmitError, c_type
from mirage_xdsl.codegen.kernel_resources import launch_smem_bytes
from mirage_xdsl.codegen.launch_plan import KernelLaunch, LaunchPlan, LibraryCall, TensorRef
from mirage_xdsl.codegen.megakernel_info import MegakernelInfo
from mirage_xdsl.codegen.megakernel_scheduler import scheduler_branch, scheduler_tables, worker_loop
from mirage_xdsl.dialects import cute, kn
from mirage_xdsl.dialects.mpk import EventOp, TaskGraphOp, TaskOp
from mirage_xdsl.target import SM90

HEADER = "mirage_xdsl/megakernel.cuh"
WATCHDOG_ATTR = "mpk.watchdog_ns"
"""i64 on the task graph (kn-to-task-graph `watchdog-ms`): the wait timeout in ns."""
TRACE_ATTR = "mpk.trace"
"""unit attribute on the task graph (kn-to-task-graph `trace`): record task start/end."""
DEFAULT_WATCHDOG_NS = 500_000_000
"""A wait that spins longer than this (0.5 s) is a deadlock: no task of a decode step runs for
that long, and the host reports it well within a second."""


def _err(op: object, msg: str) -> CudaEmitError:
    return CudaEmitError(f"cuda target: mpk.task_graph: {msg}")


CONSTANT_TABLE_BYTES = 48 * 1024
"""Tables up to this size (bytes, all together) go to `__constant__` memory (64 KiB per
module, CUDA C++ Programming Guide, "Device Memory Space Specifiers"): every thread of a
worker reads the same entry, which the constant cache broadcasts; larger ones stay in global
memory."""


def _table(ctype: str, name: str, values: list[int], space: str) -> str:
    vals = values or [0]
    body = ", ".join(str(v) for v in vals)
    return f"static {space} const {ctype} {name}[{len(vals)}] = {{{body}}};"


def local_elision(graph: TaskGraphOp) -> tuple[list[int], list[list[int]]]:
    """(wait event or -1, triggered events) per task as printed: a wait whose producers all
    run earlier on the waiting task's own worker is dropped (the worker's barrier after each
    task already orders their writes before its reads: bar.sync orders memory within the CTA,
    PTX ISA "bar"), and so is every trigger of an event nothing waits on any more."""
    tasks = graph.tasks
    producers: dict[int, list[int]] = {}
    for t in tasks:
        for e in t.trigger_events:
            producers.setdefault(e, []).append(t.ident)
    wait = []
    for t in tasks:
        e = t.wait_event
        local = e >= 0 and all(tasks[p].worker_id == t.worker_id for p in producers.get(e, []))
        wait.append(-1 if local else e)
    awaited = {e for e in wait if e >= 0}
    return wait, [[e for e in t.trigger_events if e in awaited] for t in tasks]


def shared_task_bodies(kernels: Sequence[cute.KernelOp], bodies: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """(the task functions to print, the function each kernel's tasks call): a kernel whose
    body is the same text as an earlier one's up to its name (a layer repeated in the graph:
    the same shapes, its tensors passed as arguments) calls the earlier function, so the
    megakernel's code stays the size of one layer and a later layer runs instructions the first
    one already brought into L2."""
    first: dict[str, str] = {}
    keep: list[str] = []
    task_fn: dict[str, str] = {}
    for k, body in zip(kernels, bodies):
        name = k.kernel_name.data
        key = re.sub(rf"\b{re.escape(name)}(?![0-9A-Za-z])", "@KERNEL", body)
        if key not in first:
            first[key] = f"{name}_task"
            keep.append(body)
        task_fn[name] = first[key]
    return keep, task_fn


def occupancy_cap_smem(ctas: int) -> int:
    """Dynamic shared memory (bytes) a worker asks for so that at most `ctas` fit one SM: then
    `ctas` x SMs co-resident workers are exactly `ctas` per SM, which the SM-major numbering
    (`mx::mpk_place`) relies on.  A block holds its request plus the driver's reservation
    (target/device.py `smem_reserved_per_block`)."""
    return SM90.smem_capping_blocks(ctas)


def task_label(kernel: str, lo: int, hi: int) -> str:
    """How error messages and traces name the task of `kernel`'s blocks [lo, hi)."""
    return f"{kernel} block {lo}" if hi == lo + 1 else f"{kernel} blocks [{lo}, {hi})"


def print_megakernel(fn: func.FuncOp, graph: TaskGraphOp, arch: str) -> tuple[str, LaunchPlan]:
    """(source of the task bodies and the persistent kernel, LaunchPlan) of one function.

    Raises:
        CudaEmitError: a task names a kernel that is not in the function, a kernel's block
            is not 1-D or its thread count differs from the graph's, a late-finisher kernel."""
    base_plan = plan_function(fn, arch)
    kernels = [op for op in fn.body.block.ops if isinstance(op, cute.KernelOp)]
    by_name = {k.kernel_name.data: k for k in kernels}
    launches = {s.kernel: s for s in base_plan.steps if isinstance(s, KernelLaunch)}
    nt = graph.num_threads
    for k in kernels:
        if k.block != (nt, 1, 1):
            raise _err(k, f"kernel {k.kernel_name.data} has block {k.block}; every task runs with ({nt}, 1, 1)")
    weights = kn.weight_inputs(fn)
    inline = graph.dispatch == "inline"
    bodies, task_fn = shared_task_bodies(kernels, [task_function(k, weights, inline=inline) for k in kernels])
    smem = max(launch_smem_bytes(k) for k in kernels)
    sched = graph.dispatch == "scheduler"
    ctas_total = graph.num_workers + int(sched)  # the scheduler CTA takes the last slot
    sms = graph.sm_major
    ctas = ctas_total // sms if sms else 0
    if sms:
        smem = max(smem, occupancy_cap_smem(ctas))
    if sched:  # the scheduler's per-worker push counts (codegen/megakernel_scheduler.py)
        smem = max(smem, 4 * graph.num_workers)
    name = f"{fn.sym_name.data}_mpk"
    tasks, events = graph.tasks, graph.events
    for t in tasks:
        if t.kernel.data not in by_name:
            raise _err(graph, f"task {t.ident} runs kernel '{t.kernel.data}', which the function does not hold")
    workers = graph.num_workers
    queues: list[list[int]] = [[] for _ in range(workers)]
    for t in tasks:
        queues[t.worker_id].append(t.ident)
    if sched:  # every dependency goes through the scheduler: none is elided
        wait, triggers = [t.wait_event for t in tasks], [list(t.trigger_events) for t in tasks]
    else:
        wait, triggers = local_elision(graph)
    trace = TRACE_ATTR in graph.attributes
    wd = graph.attributes.get(WATCHDOG_ATTR)
    watchdog = wd.value.data if isinstance(wd, IntegerAttr) else DEFAULT_WATCHDOG_NS
    state_word = base_plan.counters + (base_plan.counters & 1)  # 8-byte aligned
    info = MegakernelInfo(
        name, state_word, tuple(e.needed for e in events),
        tuple(task_label(t.kernel.data, *t.block_range) for t in tasks), workers,
        tuple(t.worker_id for t in tasks), trace, sms, sched,
    )

    # megakernel parameters: graph outputs, graph inputs, workspace, counters
    params = []
    for i, spec in enumerate(base_plan.outputs):
        params.append(f"{c_type_of(spec.dtype)}* o{i}")
    for i, spec in enumerate(base_plan.inputs):
        params.append(f"const {c_type_of(spec.dtype)}* i{i}")
    params += ["unsigned char* mpk_ws", "unsigned* mpk_counters"]

    def arg_expr(ref: TensorRef, ctype: str) -> str:
        if ref.kind == "input":
            return f"i{ref.index}"
        if ref.kind == "output":
            return f"o{ref.index}"
        if ref.kind == "counters":
            return f"mpk_counters + {ref.offset // 4}"
        return f"reinterpret_cast<{ctype}*>(mpk_ws + {ref.offset})"

    calls: dict[str, tuple[str, tuple[int, int, int]]] = {}  # kernel -> (call up to the block index, grid)
    for k in kernels:
        step = launches[k.kernel_name.data]
        types = [c_type(kn.element_type_of(a)) for a in k.body.block.args]
        types += ["float", "unsigned"]  # grid-sum scratch, counters
        args = [arg_expr(r, types[j] if r.kind != "counters" else "unsigned") for j, r in enumerate(step.args)]
        calls[k.kernel_name.data] = (f"{task_fn[k.kernel_name.data]}({', '.join(args)}, ", k.grid)
    ns = f"mpk_{fn.sym_name.data}"
    if graph.dispatch in ("table", "scheduler"):
        tables, loop = _table_dispatch(
            ns, kernels, calls, tasks, events, queues, wait, triggers, trace, watchdog, info if sched else None
        )
    else:
        counts = [events[e].needed if e >= 0 else 0 for e in wait]
        tables, loop = [], _worker_programs(tasks, queues, wait, counts, triggers, calls, trace, watchdog)
    per_sm = max(1, min(-(-ctas_total // SM90.num_sms), 2048 // nt, 32))  # __launch_bounds__ minimum blocks per SM
    # straight-line programs without waits, triggers or a trace never name the events
    used = graph.dispatch in ("table", "scheduler") or trace or any(e >= 0 for e in wait) or any(triggers)
    events_decl = "  unsigned long long* events = state + mx::kMpkStateWords;\n" if used else ""
    trace_decl = f"  unsigned long long* trace = events + {len(events)};\n" if trace else ""
    dyn_decl = "  extern __shared__ __align__(128) unsigned char mpk_dyn_smem[];\n" if sched else ""
    placement_decl = placement = ""
    worker = "  const unsigned w = blockIdx.x;"
    if sms:
        placement_decl = "  __shared__ unsigned mpk_w;\n"
        placement = (
            f"    mpk_w = mx::mpk_place(reinterpret_cast<unsigned long long*>(mpk_counters + {info.slot_word}), &mpk_launch, {sms}u,"
            " state);"
            "  // worker w runs on SM w % SMs\n"
        )
        worker = "  if (mpk_w == ~0u) return;  // placement recorded as an error\n  const unsigned w = mpk_w;"
    scheduler_note = " + a scheduler CTA" if sched else ""
    # static dispatch launches with PDL: the next launch's CTAs are launched once every worker of
    # this one has placed itself, take the SM slots of workers that finished their queues and
    # issue their first task's weight loads there; each waits for this launch in that task
    # (MpkGate::launch_sync) or, without tasks, after its (empty) queue
    if sched:
        start = "  if (!mx::mpk_launch_sync(&mpk_launch, state, &mpk_abort)) return;\n  const unsigned long long gen = mpk_launch.gen;\n"
    else:
        start = "  mx::allow_dependent_launch();  // every worker of this launch has placed itself\n"
    kernel = f"""// {name}: {len(tasks)} tasks of {len(kernels)} kernels on {workers} worker CTAs{scheduler_note} of {nt} threads,
// {len(events)} events, {smem} B dynamic shared memory; watchdog {watchdog} ns; {graph.dispatch} dispatch
extern "C" __global__ void __launch_bounds__({nt}, {per_sm}) {name}(
    {(','+chr(10)+'    ').join(params)}) {{
  const int tid = threadIdx.x;
  unsigned long long* state = reinterpret_cast<unsigned long long*>(mpk_counters + {state_word});
{events_decl}{trace_decl}{dyn_decl}  __shared__ mx::MpkLaunch mpk_launch;
  __shared__ int mpk_abort;
{placement_decl}  if (tid == 0) {{
    mpk_launch.ctas = {ctas}u;
    mpk_abort = 0;
{placement}  }}
  __syncthreads();
{start}{worker}
{loop}  if (tid == 0) mx::mpk_finish(state, mpk_launch.gen, {ctas_total}u);
}}
"""
    launch = KernelLaunch(
        name,
        (ctas_total, 1, 1),
        (nt, 1, 1),
        smem,
        tuple(TensorRef("output", i) for i in range(len(base_plan.outputs)))
        + tuple(TensorRef("input", i) for i in range(len(base_plan.inputs)))
        + (TensorRef("workspace", 0, 0), TensorRef("counters", 0, 0)),
        pdl=not sched,
    )
    tail = tuple(s for s in base_plan.steps if isinstance(s, LibraryCall))  # trailing output copies
    plan = replace(
        base_plan,
        steps=(launch, *tail),
        counters=state_word + info.words,
        megakernel=asdict(info),
    )
    return "\n".join(bodies + tables + [kernel]), plan


def _block_expr(b: str, grid: tuple[int, int, int]) -> str:
    """`make_uint3(...)` of the linear block `b` (a C expression) of a kernel with `grid`."""
    gx, gy, _ = grid
    return f"make_uint3({b} % {gx}u, ({b} / {gx}u) % {gy}u, {b} / {gx * gy}u)"


def _literal_block(b: int, grid: tuple[int, int, int]) -> str:
    """`make_uint3(x, y, z)` of the linear block `b` of a kernel with `grid`, in literals."""
    gx, gy, _ = grid
    return f"make_uint3({b % gx}u, {(b // gx) % gy}u, {b // (gx * gy)}u)"


def _table_case(i: int, call: str, grid: tuple[int, int, int]) -> str:
    """The `switch` case of kernel `i` in the table dispatch: its blocks [lo, hi) in turn."""
    return (
        f"      case {i}:\n"
        f"        for (unsigned b = lo; b < hi; ++b) {{\n"
        f"          {call}{_block_expr('b', grid)}, gate);\n"
        f"          if (mpk_abort) return;  // the watchdog fired here or in another worker\n"
        f"          gate.ev = nullptr;  // later blocks of the task: nothing to wait for\n"
        f"          gate.trace = nullptr;\n"
        f"          gate.sync = false;\n"
        f"          __syncthreads();\n"
        f"        }}\n"
        f"        break;"
    )


def _trigger_text(events: Sequence[int], indent: str) -> str:
    """Thread 0 adds 1 to each event in `events` (the first with release semantics after a
    fence, the others relaxed: the fence orders them), or nothing."""
    if not events:
        return ""
    adds = [f"(void)mx::mpk_add_release(events + {events[0]}, 1ull);"]
    adds += [f"mx::mpk_add_relaxed(events + {e}, 1ull);" for e in events[1:]]
    return f"{indent}if (tid == 0) {{\n{indent}  __threadfence();\n" + "".join(f"{indent}  {a}\n" for a in adds) + f"{indent}}}\n"


def _table_dispatch(
    ns: str,
    kernels: Sequence[cute.KernelOp],
    calls: dict[str, tuple[str, tuple[int, int, int]]],
    tasks: Sequence[TaskOp],
    events: Sequence[EventOp],
    queues: Sequence[Sequence[int]],
    wait: Sequence[int],
    triggers: Sequence[Sequence[int]],
    trace: bool,
    watchdog: int,
    scheduler: MegakernelInfo | None = None,
) -> tuple[list[str], str]:
    """(`__constant__` tables, the worker's loop over its queue) of `table` dispatch: per task
    its kernel, block range, wait event and triggers; per worker its queue; per event its count.
    With `scheduler` (the graph's info under scheduler dispatch) also the scheduler's tables,
    and the scheduler CTA's code before a loop that pops the worker's queue instead."""
    kidx = {k.kernel_name.data: i for i, k in enumerate(kernels)}
    cases = [_table_case(i, *calls[k.kernel_name.data]) for i, k in enumerate(kernels)]
    trig_off: list[int] = [0]
    trig: list[int] = []
    for t in tasks:
        trig += triggers[t.ident]
        trig_off.append(len(trig))
    qoff = [0]
    for q in queues:
        qoff.append(qoff[-1] + len(q))
    entries = [
        ("unsigned short", "task_kernel", [kidx[t.kernel.data] for t in tasks]),
        ("unsigned", "task_lo", [t.block_range[0] for t in tasks]),
        ("unsigned", "task_hi", [t.block_range[1] for t in tasks]),
        ("int", "task_wait", list(wait)),
        ("unsigned", "trig_off", trig_off),
        ("unsigned", "trig", trig),
        ("unsigned", "queue_off", qoff),
        ("unsigned", "queue", [t for q in queues for t in q]),
        ("unsigned", "event_count", [e.needed for e in events]),
    ]
    if scheduler is not None:
        entries += scheduler_tables(wait, [t.worker_id for t in tasks], len(events))
    nbytes = sum(4 * max(len(v), 1) for _, _, v in entries)
    space = "__constant__" if nbytes <= CONSTANT_TABLE_BYTES else "__device__"
    tables = [f"namespace {ns} {{  // {nbytes} B of tables in {space} memory"]
    tables += [_table(ct, tn, v, space) for ct, tn, v in entries]
    tables += [f"}}  // namespace {ns}", ""]
    if scheduler is not None:
        initial = sum(1 for e in wait if e < 0)
        branch = scheduler_branch(len(queues), len(events), initial, scheduler.queue_word, watchdog)
        loop = worker_loop(len(queues), scheduler.queue_word, watchdog, "\n".join(cases), trace)
        return tables, f"  using namespace {ns};\n" + branch + loop
    trace_slot = "trace + 2 * t" if trace else "nullptr"
    trace_end = "      if (tid == 0) trace[2 * t + 1] = mx::mpk_globaltimer();\n" if trace else ""
    loop = f"""  using namespace {ns};
  for (unsigned q = queue_off[w]; q < queue_off[w + 1]; ++q) {{
    const unsigned t = queue[q];
    const int e = task_wait[t];
    const unsigned long long n = e >= 0 ? event_count[e] : 0ull;
    // the task's body waits through the gate after issuing its ring-prologue loads of graph inputs;
    // the worker's first task waits there for the previous grid too (after its weight loads)
    mx::MpkGate gate{{e >= 0 ? events + e : nullptr, n, state, t, (unsigned)e, {watchdog}ull, &mpk_abort, {trace_slot}, &mpk_launch,
                     q == queue_off[w]}};
    {{
      const unsigned lo = task_lo[t], hi = task_hi[t];
      switch (task_kernel[t]) {{
{chr(10).join(cases)}
      }}
    }}
{trace_end}    const unsigned t0 = trig_off[t], t1 = trig_off[t + 1];
    if (tid == 0 && t0 < t1) {{
      __threadfence();
      (void)mx::mpk_add_release(events + trig[t0], 1ull);
      for (unsigned i = t0 + 1; i < t1; ++i) mx::mpk_add_relaxed(events + trig[i], 1ull);  // ordered by the fence above
    }}
  }}
  if (queue_off[w] == queue_off[w + 1] && !mx::mpk_launch_sync(&mpk_launch, state, &mpk_abort)) return;  // no task
"""
    return tables, loop


def _worker_programs(
    tasks: Sequence[TaskOp],
    queues: Sequence[Sequence[int]],
    wait: Sequence[int],
    counts: Sequence[int],
    triggers: Sequence[Sequence[int]],
    calls: dict[str, tuple[str, tuple[int, int, int]]],
    trace: bool,
    watchdog: int,
) -> str:
    """`switch (w)` over the workers with tasks, each case its queue as straight-line code
    (`straight` and `inline` dispatch): every task index, event, count and block a literal."""
    cases = []
    for w, queue in enumerate(queues):
        if queue:
            body = "".join(
                _straight_task(tasks[t], wait[t], counts[t], triggers[t], calls, trace, watchdog, first=i == 0)
                for i, t in enumerate(queue)
            )
            cases.append(f"    case {w}: {{\n{body}      break;\n    }}\n")
    no_task = "      if (!mx::mpk_launch_sync(&mpk_launch, state, &mpk_abort)) return;\n"
    return "  switch (w) {\n" + "".join(cases) + "    default:  // no task\n" + no_task + "      break;\n  }\n"


def _straight_task(
    task: TaskOp,
    e: int,
    count: int,
    triggers: Sequence[int],
    calls: dict[str, tuple[str, tuple[int, int, int]]],
    trace: bool,
    watchdog: int,
    first: bool = False,
) -> str:
    """One task of a straight-line worker program: the gate (its event `e` of `count`
    producers, or none; the worker's `first` task waits for the previous grid through it), the
    calls of its blocks, the trace's end stamp and its triggers."""
    t = task.ident
    lo, hi = task.block_range
    call, grid = calls[task.kernel.data]
    ev = f"events + {e}" if e >= 0 else "nullptr"
    slot = f"trace + {2 * t}" if trace else "nullptr"
    abort = ["if (mpk_abort) return;  // the watchdog fired here or in another worker"] if e >= 0 or first else []
    sync = "true" if first else "false"
    lines = [
        f"{{  // task {t}: {task_label(task.kernel.data, lo, hi)}",
        f"  mx::MpkGate gate{{{ev}, {count}ull, state, {t}u, {e & 0xFFFFFFFF}u, {watchdog}ull, &mpk_abort, {slot}, &mpk_launch, {sync}}};",
    ]
    if hi == lo + 1:
        lines += [f"  {call}{_literal_block(lo, grid)}, gate);", *(f"  {a}" for a in abort), "  __syncthreads();"]
    else:
        lines += [f"  for (unsigned b = {lo}u; b < {hi}u; ++b) {{", f"    {call}{_block_expr('b', grid)}, gate);"]
        lines += [f"    {a}" for a in abort]
        lines += ["    gate.ev = nullptr;  // later blocks: nothing to wait for", "    gate.trace = nullptr;", "    gate.sync = false;"]
        lines += ["    __syncthreads();", "  }"]
    if trace:
        lines.append(f"  if (tid == 0) trace[{2 * t + 1}] = mx::mpk_globaltimer();")
    ind = "      "
    return "".join(f"{ind}{line}\n" for line in lines) + _trigger_text(triggers, ind + "  ") + f"{ind}}}\n"


def c_type_of(dtype: str) -> str:
    """C++ element type of a LaunchPlan dtype name (as cuda_printer.c_type spells it).

    Raises:
        CudaEmitError: a dtype the kernels do not handle."""
    types = {"float16": "mx::f16", "bfloat16": "mx::bf16", "float32": "float", "float64": "double"}
    if dtype not in types:
        raise CudaEmitError(f"cuda target: mpk.task_graph: no CUDA type for a {dtype} graph tensor")
    return types[dtype]


def task_graph_of(fn: func.FuncOp) -> TaskGraphOp | None:
    """The function's `mpk.task_graph`, if any."""
    return next((op for op in fn.body.block.ops if isinstance(op, TaskGraphOp)), None)


def has_task_graph(module: ModuleOp) -> bool:
    """Whether `module` holds an `mpk.task_graph` (then `emit_cuda` prints megakernels)."""
    return any(isinstance(op, TaskGraphOp) for op in module.walk())


def print_module_megakernels(module: ModuleOp, arch: str = "sm_90") -> tuple[str, dict[str, LaunchPlan]]:
    """(CUDA source, plans) of a module: functions with a task graph as one megakernel each,
    the others as print_module prints them."""
    plain = [fn for fn in module.walk() if isinstance(fn, func.FuncOp) and task_graph_of(fn) is None]
    parts: list[str] = []
    plans: dict[str, LaunchPlan] = {}
    if plain:
        src, plans = _print_plain(module, plain, arch)
        parts.append(src)
    else:
        parts.append(f'// Generated by mirage_xdsl (cuda target, {arch}): persistent megakernel(s).\n#include "mirage_xdsl/runtime.cuh"\n')
    parts.append(f'#include "{HEADER}"\n')
    for fn in module.walk():
        if isinstance(fn, func.FuncOp) and (graph := task_graph_of(fn)) is not None:
            src, plan = print_megakernel(fn, graph, arch)
            parts.append(src)
            plans[fn.sym_name.data] = plan
    return "\n".join(parts), plans


def _print_plain(module: ModuleOp, plain: list[func.FuncOp], arch: str) -> tuple[str, dict[str, LaunchPlan]]:
    """print_module on the functions without a task graph (detached into a scratch module)."""
    tops = list(module.body.block.ops)
    for top in tops:
        top.detach()
    scratch = ModuleOp([])
    try:
        for fn in plain:
            scratch.body.block.add_op(fn)
        return print_module(scratch, arch)
    finally:
        for fn in plain:
            fn.detach()
        module.body.block.add_ops(tops)

