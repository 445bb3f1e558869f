"""CPU tests of the persistent megakernel (issue #32): the `mpk` dialect and its verifier,
`kn-to-task-graph` (tile-level dependencies, events, workers, buffer planning), the
`mirage-megakernel` pipeline, the printed CUDA (compiled with nvcc when present), the launch
plan and the host-side trace/report helpers.  GPU tests: test/e2e/test_megakernel_gpu.py."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from conftest import run_tool
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.dialects.func import FuncOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from mirage_xdsl.bench.megakernel import workload
from mirage_xdsl.codegen.cuda_target import emit_cuda
from mirage_xdsl.codegen.launch_plan import LaunchPlan
from mirage_xdsl.codegen.megakernel import local_elision
from mirage_xdsl.codegen.megakernel_info import MegakernelInfo
from mirage_xdsl.dialects import cute
from mirage_xdsl.dialects.mpk import EventOp, MpkVerifyError, TaskGraphOp, TaskOp
from mirage_xdsl.dialects.mpk.verify import intersects
from mirage_xdsl.driver.compile import make_context
from mirage_xdsl.passes.mpk.assign import assign_workers, latest_starts
from mirage_xdsl.passes.mpk.footprint import split_offset
from mirage_xdsl.passes.mpk.pipeline import MirageMegakernelPass, worker_smem_budget
from mirage_xdsl.passes.mpk.task_graph import KnToTaskGraphPass, kernel_smem
from mirage_xdsl.passes.pipeline import MirageTranspilePass, fuse_plain_graphs
from mirage_xdsl.runtime.megakernel import chrome_trace

ROOT = Path(__file__).resolve().parents[2]

TILES = """
func.func @tiles(%X: tensor<8x256xf16> {kn.strides = array<i64: 256, 1>},
                 %W: tensor<256x64xf16> {kn.strides = array<i64: 64, 1>, kn.weight}) -> tensor<8x64xf16> {
  %a = kn.relu %X : tensor<8x256xf16>
  %b = kn.exp %a : tensor<8x256xf16>
  %c = kn.matmul %b, %W : tensor<8x256xf16>, tensor<256x64xf16> -> tensor<8x64xf16>
  func.return %c : tensor<8x64xf16>
}
"""


PAIR = """
func.func @pair(%X: tensor<8x64xf16> {kn.strides = array<i64: 64, 1>},
                %W: tensor<64x64xf16> {kn.strides = array<i64: 64, 1>, kn.weight}) -> tensor<8x64xf16> {
  %h = kn.matmul %X, %W : tensor<8x64xf16>, tensor<64x64xf16> -> tensor<8x64xf16>
  %o = kn.relu %h : tensor<8x64xf16>
  func.return %o : tensor<8x64xf16>
}
"""


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def megakernel(module: ModuleOp, **opts: object) -> TaskGraphOp:
    MirageMegakernelPass(**opts).apply(make_context(), module)  # type: ignore[arg-type]
    (graph,) = [op for op in module.walk() if isinstance(op, TaskGraphOp)]
    return graph


# ---- the dialect and its verifier ----------------------------------------------------------


def _graph(count: int = 2, second_triggers: tuple[int, ...] = (0,)) -> str:
    t1 = ", ".join(map(str, second_triggers))
    return f"""
mpk.task_graph attributes {{workers = 2 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X", "Y"]}} {{
  mpk.event {{id = 0 : i64, count = {count} : i64}}
  mpk.task {{id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = -1 : i64, triggers = array<i64: 0>, reads = [], writes = [array<i64: 1, 0, 8, 0, 64>]}}
  mpk.task {{id = 1 : i64, kernel = "k0", blocks = array<i64: 1, 2>, worker = 1 : i64, wait = -1 : i64, triggers = array<i64{': ' + t1 if t1 else ''}>, reads = [], writes = [array<i64: 1, 0, 8, 64, 128>]}}
  mpk.task {{id = 2 : i64, kernel = "k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64>, reads = [array<i64: 1, 0, 8, 0, 128>], writes = []}}
}}
"""


def test_task_graph_round_trips_and_verifies() -> None:
    module = parse(_graph())
    module.verify()
    assert parse(str(module)).is_structurally_equivalent(module)
    (graph,) = [op for op in module.walk() if isinstance(op, TaskGraphOp)]
    assert [t.block_range for t in graph.tasks] == [(0, 1), (1, 2), (0, 1)]
    assert graph.tasks[2].footprint(False) == [(1, ((0, 8), (0, 128)))]


@pytest.mark.parametrize(
    ("count", "triggers", "message"),
    [
        (1, (0,), r"event 0 has count 1 but 2 task\(s\) trigger it; rule: an event's count equals"),
        (1, (), r"task 2 \(k1 block 0\) reads tile Y\[0:8, 0:128\], which task 1 \(k0 block 1\) writes \(\[0:8, 64:128\]\), "
         r"and no event path leads from that task to it; rule: every tile a consumer reads is covered by an event"),
    ],
)
def test_verifier_rejects(count: int, triggers: tuple[int, ...], message: str) -> None:
    module = parse(_graph(count, triggers))
    with pytest.raises(VerifyException, match=message):
        module.verify()


def test_verifier_rejects_a_cycle() -> None:
    text = """
mpk.task_graph attributes {workers = 1 : i64, threads = 128 : i64, smem = 0 : i64, buffers = ["X"]} {
  mpk.event {id = 0 : i64, count = 1 : i64}
  mpk.event {id = 1 : i64, count = 1 : i64}
  mpk.task {id = 0 : i64, kernel = "k0", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 1 : i64, triggers = array<i64: 0>, reads = [], writes = []}
  mpk.task {id = 1 : i64, kernel = "k1", blocks = array<i64: 0, 1>, worker = 0 : i64, wait = 0 : i64, triggers = array<i64: 1>, reads = [], writes = []}
}
"""
    with pytest.raises(MpkVerifyError, match=r"is on a dependency cycle.*rule: the task graph is acyclic"):
        parse(text).verify()


def test_box_helpers() -> None:
    assert intersects(((0, 8), (0, 64)), ((0, 8), (63, 128)))
    assert not intersects(((0, 8), (0, 64)), ((0, 8), (64, 128)))
    assert split_offset(3 * 256 + 17, (8, 256), (256, 1)) == (3, 17)
    assert split_offset(300, (1, 256), (256, 1)) is None  # past the end of the only row
    assert split_offset(5, (8, 1), (1, 1)) == (5, 0)  # a dim of size 1 stays at 0


def test_assign_workers_keeps_a_chain_on_one_worker_and_spreads_independent_tasks() -> None:
    chain = assign_workers([100] * 4, [[], [0], [1], [2]], 4)
    assert chain.worker == [0, 0, 0, 0]
    wide = assign_workers([100] * 4, [[], [], [], []], 2)
    assert sorted(wide.worker) == [0, 0, 1, 1] and wide.makespan_ns == 200
    with pytest.raises(ValueError, match="depends on the later task"):
        assign_workers([1, 1], [[1], []], 1)


def test_assign_workers_spreads_ready_tasks_over_sms() -> None:
    # 8 workers on 4 SMs (worker w on SM w % 4): after a long task on SM 0 and short ones on
    # SMs 1-3, the fifth task goes to the least loaded SM, not to the lowest free worker (4, SM 0)
    # (as long as the fifth: no slack to queue behind a busy worker)
    costs, deps = [400, 100, 100, 100, 400], [[]] * 5
    assert assign_workers(costs, deps, 8).worker == [0, 1, 2, 3, 4]
    assert assign_workers(costs, deps, 8, num_sms=4).worker == [0, 1, 2, 3, 5]
    assert assign_workers([100] * 4, [[], [0], [1], [2]], 8, num_sms=4).worker == [0] * 4  # a chain stays put


def test_assign_workers_defers_a_task_with_slack_behind_busy_workers() -> None:
    # t1, t2 stream on the critical path (t4 needs both); t3 is a graph output ready with them
    # and 2 of the 4 workers (2 SMs: saturated) are busy: it queues behind the first to free up
    # instead of taking an idle worker and sharing the bandwidth with them
    deps = [[], [0], [0], [0], [1, 2]]
    plan = assign_workers([100, 1000, 1000, 500, 1000], deps, 4, num_sms=2)
    assert plan.worker[3] in (plan.worker[1], plan.worker[2]) and plan.start_ns[3] == plan.start_ns[1] + 1000
    assert latest_starts([100, 1000, 1000, 500, 1000], deps) == [0, 600, 600, 2600, 2100]
    # no slack for that wait (t3 as long as the rest of the critical path), or no SM count: no deferral
    assert assign_workers([100, 1000, 1000, 2000, 1000], deps, 4, num_sms=2).start_ns[3] == 600
    assert assign_workers([100, 1000, 1000, 500, 1000], deps, 4).start_ns[3] == 600


# ---- kn-to-task-graph and mirage-megakernel -----------------------------------------------------


def test_tile_level_dependencies() -> None:
    module = parse(TILES)
    graph = megakernel(module, workers=4)
    tasks, events = graph.tasks, graph.events
    by_kernel: dict[str, list[TaskOp]] = {}
    for t in tasks:
        by_kernel.setdefault(t.kernel.data, []).append(t)
    relu, exp, mm = by_kernel["tiles_k0"], by_kernel["tiles_k1"], by_kernel["tiles_k2"]
    assert len(relu) == len(exp) == 2 and len(mm) == 32  # one task per threadblock
    producers = {e.ident: [t.ident for t in tasks if e.ident in t.trigger_events] for e in events}
    # exp's block i waits only for relu's block i (the tile it reads), not the whole kernel
    for i in range(2):
        assert producers[exp[i].wait_event] == [relu[i].ident]
    # a split-K block reads one 64-column tile of b: exp's block 0 writes columns 0-127
    assert producers[mm[0].wait_event] == [exp[0].ident]
    assert producers[mm[31].wait_event] == [exp[1].ident]
    assert all(0 <= t.worker_id < 4 for t in tasks)
    assert "mpk.est_makespan_ns" in graph.attributes
    fn = next(op for op in module.walk() if isinstance(op, FuncOp))
    assert fn.attributes["mpk.megakernel"].data == "tiles_mpk"  # type: ignore[attr-defined]


def test_workspace_is_replanned_without_reuse() -> None:
    fresh, shared = workload("chain3"), workload("chain3")
    bump = megakernel(fresh, reuse_workspace=False)
    reuse = megakernel(shared, reuse_workspace=True)
    size = {m: next(op for op in m.walk() if isinstance(op, FuncOp)).attributes["kn.workspace_size"] for m in (fresh, shared)}
    assert size[fresh].value.data > size[shared].value.data  # type: ignore[attr-defined]
    # kn-plan-workspace puts the second matmul's output where the first one's lived: each of
    # its split-K blocks then waits for both relu blocks (whole-buffer hazard), not the one
    # whose tile it reads
    assert min(e.needed for e in bump.events) == 1
    assert min(e.needed for e in reuse.events) == 2


def test_chain40_is_a_chain_of_40_tasks() -> None:
    graph = megakernel(workload("chain40"))
    assert len(graph.tasks) == 40 and len(graph.events) == 39
    assert all(e.needed == 1 for e in graph.events)  # transitively reduced: one producer each
    assert {t.worker_id for t in graph.tasks} == {0}  # the list scheduler keeps a chain together
    wait, triggers = local_elision(graph)
    assert wait == [-1] * 40 and triggers == [[]] * 40  # all on one worker: no event is awaited


DECODE = """
func.func @decode(%Q: tensor<8x4x128xf16> {kn.strides = array<i64: 512, 128, 1>},
                  %K: tensor<8x128x4096xf16> {kn.strides = array<i64: 524288, 1, 128>},
                  %V: tensor<8x4096x128xf16> {kn.strides = array<i64: 524288, 128, 1>}) -> tensor<8x4x128xf16> {
  %s = kn.matmul %Q, %K : tensor<8x4x128xf16>, tensor<8x128x4096xf16> -> tensor<8x4x4096xf16>
  %m = kn.reduction_max %s {dim = 2 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
  %d = kn.sub %s, %m : tensor<8x4x4096xf16>, tensor<8x4x1xf16> -> tensor<8x4x4096xf16>
  %e = kn.exp %d : tensor<8x4x4096xf16>
  %o = kn.matmul %e, %V : tensor<8x4x4096xf16>, tensor<8x4096x128xf16> -> tensor<8x4x128xf16>
  %r = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
  %y = kn.div %o, %r : tensor<8x4x128xf16>, tensor<8x4x1xf16> -> tensor<8x4x128xf16>
  func.return %y : tensor<8x4x128xf16>
}
"""


def test_tasks_are_planned_within_the_workers_share_of_shared_memory() -> None:
    # planned with the per-block limit, decode attention's kernels leave fewer than four workers
    # per SM; planned within a quarter of the SM, they fit four
    assert worker_smem_budget(4) < 58 * 1024
    one = megakernel(parse(DECODE), per_op=False, ctas_per_sm=0)
    four_module = parse(DECODE)
    four = megakernel(four_module, per_op=False, ctas_per_sm=4)
    assert one.num_workers < 4 * 132 and four.num_workers == 4 * 132
    assert four.sm_major == 132  # four workers per SM, numbered SM-major
    kernels = [op for op in four_module.walk() if op.name == "cute.kernel"]
    assert kernels and all(kernel_smem(k) <= worker_smem_budget(4) for k in kernels)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ctas-per-sm must be at least 1"):
        worker_smem_budget(0)


LIBRARY_CALL = """
func.func @lib(%X: tensor<8x256xf16> {kn.strides = array<i64: 256, 1>},
               %Y: tensor<8x256xf16> {kn.strides = array<i64: 256, 1>}) -> tensor<8x512xf16> {
  %a = kn.relu %X : tensor<8x256xf16>
  %c = kn.concat %a, %Y {dim = 1 : i64} : tensor<8x256xf16>, tensor<8x256xf16> -> tensor<8x512xf16>
  func.return %c : tensor<8x512xf16>
}
"""


def test_kn_to_task_graph_rejects_library_calls() -> None:
    module = parse(LIBRARY_CALL)
    MirageTranspilePass().apply(make_context(), module)  # kn.concat has no fused kernel: a library copy
    with pytest.raises(DiagnosticException, match=r"kn-to-task-graph: 'kn.concat' is not a generated kernel.*mirage-megakernel"):
        KnToTaskGraphPass().apply(make_context(), module)


def test_kn_to_task_graph_rejects_mixed_thread_counts() -> None:
    module = workload("chain3")
    with pytest.raises(DiagnosticException, match=r"kernels use different thread counts.*block-threads"):
        MirageMegakernelPass(threads=0).apply(make_context(), module)  # the planner's 128 and 512


def test_pipeline_from_mirage_opt() -> None:
    proc = run_tool("mirage_xdsl.tools.mirage_opt", str(ROOT / "examples" / "megakernel" / "chain3.mlir"), "-p", "mirage-megakernel{workers=8}")
    assert proc.returncode == 0, proc.stderr
    assert "mpk.task_graph attributes" in proc.stdout and "workers = 8 : i64" in proc.stdout


# ---- the printed CUDA and the launch plan ------------------------------------------------------


def test_one_persistent_kernel_is_printed() -> None:
    module = workload("chain3")
    megakernel(module, trace=True, dispatch="table")
    program = emit_cuda(module, "sm_90a")
    src = program.source
    assert program.kernel_names == ["chain3_mpk"]
    assert len(re.findall(r"__global__", src)) == 1
    assert src.count("static __device__ __noinline__ void chain3_k") == 3  # 4 kernels, two the same matmul
    task_bodies = src[: src.index("namespace mpk_chain3")]
    assert "blockIdx" not in task_bodies and "mpk_block" in task_bodies
    assert "griddepcontrol" not in task_bodies and "wait_for_prior_grids" not in task_bodies  # no PDL inside tasks
    # the launch itself is a programmatic dependent launch: every worker places itself, then
    # triggers; its first task waits for the previous grid through its gate, a worker without
    # tasks after its empty queue
    kernel_text = src[src.index('extern "C" __global__'):]
    assert kernel_text.index("mx::mpk_place(") < kernel_text.index("mx::allow_dependent_launch();")
    assert "q == queue_off[w]}" in kernel_text and "mx::mpk_launch_sync(&mpk_launch" in kernel_text
    assert "mx::MpkGate gate{" in src and "mx::mpk_add_release(" in src and "mx::mpk_finish(state, mpk_launch.gen" in src
    assert task_bodies.count("if (!mpk_gate.pass()) return;") == 3  # each body waits through its gate
    assert task_bodies.count("if (!mpk_gate.launch_sync()) return;") == 3
    assert "trace + 2 * t" in src and "prefetch" not in src
    header = (ROOT / "codegen" / "include" / "mirage_xdsl" / "megakernel.cuh").read_text()
    for needle in ("ld.acquire.gpu", "atom.add.release.gpu", "__nanosleep", "%%globaltimer"):
        assert needle in header
    plan = program.plans["chain3"]
    (launch,) = plan.steps
    assert launch.kernel == "chain3_mpk" and launch.pdl and launch.grid[0] == 4 * 132  # 4 workers per SM
    # SM-major numbering: each worker takes slot * 132 + smid, and asks for enough shared memory
    # that no fifth worker fits an SM
    assert "mx::mpk_place(" in src and "const unsigned w = mpk_w;" in src
    assert 4 * (launch.smem_bytes + 1024) <= 233472 < 5 * (launch.smem_bytes + 1024)
    assert [r.kind for r in launch.args] == ["output", "input", "input", "workspace", "counters"]
    info = MegakernelInfo.from_dict(plan.megakernel)  # type: ignore[arg-type]
    assert plan.counters == info.state_word + info.words and info.trace and info.sm_slots == 132
    assert info.slot_word % 2 == 0 and info.slot_word + 2 * 132 <= plan.counters  # uint64 slot counters
    assert LaunchPlan.from_json(plan.to_json()).to_json() == plan.to_json()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize(("name", "dispatch"), [("chain3", "auto"), ("chain40", "auto"), ("chain3", "scheduler")])
def test_megakernel_compiles_with_nvcc(name: str, dispatch: str, tmp_path: Path) -> None:
    from mirage_xdsl.driver.nvcc import compile_cuda

    module = workload(name)
    megakernel(module, dispatch=dispatch)
    program = emit_cuda(module, "sm_90a")
    cubin = compile_cuda(program.source, "sm_90a", cache_dir=tmp_path)
    assert Path(cubin).stat().st_size > 0


def test_weight_prologue_loads_are_issued_before_the_task_waits() -> None:
    """A task body that streams graph inputs issues its ring prologue (the ops a kernel issues
    before its PDL wait) before it waits on its event through `mpk_gate`, so the loads stream
    while its producers finish; of those, the kn.weight loads come before `launch_sync()`,
    where a worker's first task waits for the previous grid; the others wait first."""
    module = workload("decoder_layer")
    megakernel(module, per_op=False)
    src = emit_cuda(module, "sm_90a").source
    bodies = src[: src.index("namespace mpk_")].split("static __device__ __noinline__ void ")[1:]
    grid_early = "issued before the worker's first task waits for the previous grid"
    early = "issued before the task's dependency wait"
    prefetching = [b for b in bodies if early in b or grid_early in b]
    assert prefetching and len(prefetching) < len(bodies)
    for body in prefetching:
        sync, gate = body.index("if (!mpk_gate.launch_sync()) return;"), body.index("if (!mpk_gate.pass()) return;")
        assert sync < gate and body.index("mx::g2s_async<") < gate
        if grid_early in body:
            assert body.index(grid_early) < body.index("mx::g2s_async<") < sync
    assert all(b.count("mpk_gate.pass()") == 1 and b.count("mpk_gate.launch_sync()") == 1 for b in bodies)
    # the Q projection: its Wq tiles (i1, kn.weight) before the grid wait, its x tiles (i0, the
    # layer's input, which an earlier kernel may write) after it
    q = next(b for b in bodies if b.startswith("decoder_layer_k0_task"))
    sync, gate = q.index("mpk_gate.launch_sync()"), q.index("mpk_gate.pass()")
    assert "i1 + mpk_block" in q[:sync] and "i0 + mpk_block" not in q[:sync] and "i0 + mpk_block" in q[sync:gate]


def test_a_deadlocked_graph_is_printed_only_unverified() -> None:
    module = workload("chain3")
    megakernel(module, dispatch="table")
    event = [op for op in module.walk() if isinstance(op, EventOp)][-1]
    event.count = IntegerAttr(event.needed + 1, i64)
    with pytest.raises(VerifyException, match="count"):
        module.verify()
    assert f"{event.needed}}}" in emit_cuda(module, "sm_90a").source.replace(" ", "")  # the printer trusts the IR


def test_chrome_trace_layout() -> None:
    info = MegakernelInfo("f_mpk", 0, (1,), ("k0 block 0", "k1 block 0"), 2, (0, 1), True)
    doc = chrome_trace(info, [(0, 0, 1000, 3000), (1, 1, 4000, 4500)])
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert xs[0] == {"name": "k0 block 0", "cat": "task", "ph": "X", "pid": 0, "tid": 0, "ts": 0.0, "dur": 2.0, "args": {"task": 0}}
    assert xs[1]["ts"] == 3.0 and xs[1]["tid"] == 1
    json.dumps(doc)




TWO_LAYERS = """
func.func @two(%X: tensor<8x256xf16> {kn.strides = array<i64: 256, 1>},
               %W1: tensor<256x256xf16> {kn.strides = array<i64: 256, 1>, kn.weight},
               %W2: tensor<256x256xf16> {kn.strides = array<i64: 256, 1>, kn.weight}) -> tensor<8x256xf16> {
  %a = kn.matmul %X, %W1 : tensor<8x256xf16>, tensor<256x256xf16> -> tensor<8x256xf16>
  %b = kn.relu %a : tensor<8x256xf16>
  %c = kn.matmul %b, %W2 : tensor<8x256xf16>, tensor<256x256xf16> -> tensor<8x256xf16>
  %d = kn.relu %c : tensor<8x256xf16>
  func.return %d : tensor<8x256xf16>
}
"""


def test_a_repeated_layer_shares_its_task_functions() -> None:
    module = parse(TWO_LAYERS)
    megakernel(module, dispatch="table")  # one kernel per op: matmul, relu, matmul, relu
    src = emit_cuda(module, "sm_90").source
    names = [op.kernel_name.data for op in module.walk() if isinstance(op, cute.KernelOp)]
    assert len(names) == 4
    assert [f"void {n}_task(" in src for n in names] == [True, True, False, False]
    for n in names[:2]:
        assert src.count(f"{n}_task(") == 3  # the definition and one call per kernel


# ---- dispatch: tables, straight-line worker programs, inlined task bodies -----------------------


def test_dispatch_is_chosen_by_the_task_count() -> None:
    from mirage_xdsl.passes.mpk.dispatch import INLINE_MAX_TASKS, STRAIGHT_MAX_TASKS, choose_dispatch

    assert [choose_dispatch(n) for n in (1, INLINE_MAX_TASKS, INLINE_MAX_TASKS + 1)] == ["inline", "inline", "straight"]
    assert [choose_dispatch(n) for n in (STRAIGHT_MAX_TASKS, STRAIGHT_MAX_TASKS + 1)] == ["straight", "table"]
    assert megakernel(workload("chain40")).dispatch == "inline"  # 40 tasks
    assert megakernel(workload("chain3")).dispatch == "straight"  # 260 tasks
    assert megakernel(workload("chain3"), dispatch="table").dispatch == "table"


def _printed_gates(src: str) -> dict[int, tuple[int, int]]:
    """task -> (wait event or -1, count) as a straight-line program prints its gate."""
    gate = re.compile(r"mx::MpkGate gate\{(nullptr|events \+ (\d+)), (\d+)ull, state, (\d+)u,")
    return {int(m[4]): (int(m[2]) if m[2] else -1, int(m[3])) for m in gate.finditer(src)}


@pytest.mark.parametrize("name", ["chain40", "chain3"])
def test_straight_line_programs_print_each_task_once_in_queue_order(name: str) -> None:
    module = workload(name)
    graph = megakernel(module)
    src = emit_cuda(module, "sm_90a").source
    assert "namespace mpk_" not in src and "queue_off" not in src  # no tables
    qualifier = "__forceinline__" if graph.dispatch == "inline" else "__noinline__"
    assert re.findall(r"static __device__ (\w+) void", src) == [qualifier] * 2 + ([qualifier] if name == "chain3" else [])
    wait, triggers = local_elision(graph)
    events = graph.events
    assert _printed_gates(src) == {t.ident: (wait[t.ident], events[wait[t.ident]].needed if wait[t.ident] >= 0 else 0) for t in graph.tasks}
    for w in {t.worker_id for t in graph.tasks}:  # each worker's case lists its queue in order
        case = src[src.index(f"    case {w}: {{") :]
        case = case[: case.index("      break;")]
        queue = [t.ident for t in graph.tasks if t.worker_id == w]
        assert [int(t) for t in re.findall(r"// task (\d+):", case)] == queue
        for t in queue:
            body = case[case.index(f"// task {t}:") :]
            body = body[: body.index("\n      }\n")]
            first = t == queue[0]  # waits for the previous grid through its gate
            assert ("if (mpk_abort) return;" in body) == (wait[t] >= 0 or first)
            assert body.split("\n")[1].endswith(f"&mpk_launch, {'true' if first else 'false'}}};")
            assert re.findall(r"mpk_add_(?:release|relaxed)\(events \+ (\d+)", body) == [str(e) for e in triggers[t]]
    if name == "chain40":  # one chain on one worker: no wait and no trigger left
        assert len({t.worker_id for t in graph.tasks}) == 1 and "mpk_add_release" not in src


def test_straight_line_tasks_of_several_blocks_loop_over_them() -> None:
    """A task of several blocks (`blocks-per-task`) runs them in a loop whose first block holds
    the armed gate; the later ones pass a disarmed one (no second wait, no second start stamp)."""
    module = workload("chain3")
    graph = megakernel(module, blocks_per_task=4, trace=True)
    multi = [t for t in graph.tasks if t.block_range[1] - t.block_range[0] > 1]
    assert graph.dispatch == "straight" and multi  # 66 tasks of up to 4 blocks instead of 260
    src = emit_cuda(module, "sm_90a").source
    t = multi[0]
    lo, hi = t.block_range
    body = src[src.index(f"// task {t.ident}: ") :]
    body = body[: body.index("\n      }\n")]
    assert f"for (unsigned b = {lo}u; b < {hi}u; ++b) {{" in body
    assert "gate.ev = nullptr;" in body and "gate.trace = nullptr;" in body
    assert f"trace[{2 * t.ident + 1}] = mx::mpk_globaltimer();" in body


def test_dispatch_errors_name_the_rule() -> None:
    from xdsl.dialects.builtin import StringAttr
    from xdsl.utils.exceptions import PassFailedException

    with pytest.raises(PassFailedException, match="dispatch is 'fast'; rule: auto, table, straight, inline, scheduler"):
        megakernel(workload("chain40"), dispatch="fast")
    module = workload("chain40")
    graph = megakernel(module)
    graph.attributes["mpk.dispatch"] = StringAttr("fast")
    with pytest.raises(MpkVerifyError, match="mpk.dispatch is .*rule: it is a string, one of table, straight, inline, scheduler"):
        graph.verify()
    with pytest.raises(PassFailedException, match="dispatch=scheduler needs at least 2 CTAs .* got workers=1; raise workers"):
        megakernel(workload("chain40"), dispatch="scheduler", workers=1)


def _table(src: str, name: str) -> list[int]:
    """The values of the printed constant table `name`."""
    m = re.search(rf"const unsigned {name}\[\d+\] = {{([^}}]*)}};", src)
    assert m, name
    return [int(v) for v in m[1].split(",")]


def test_scheduler_dispatch_gives_the_last_cta_to_the_scheduler() -> None:
    """`dispatch=scheduler` (codegen/megakernel_scheduler.py): the workers are one fewer than the
    CTAs, the scheduler CTA takes the last SM-major slot, and its tables hand every task over
    exactly once -- the tasks without a wait at the start, the others with their event."""
    module = workload("chain3")
    graph = megakernel(module, dispatch="scheduler")
    assert graph.dispatch == "scheduler" and graph.num_workers == 4 * 132 - 1 and graph.sm_major == 132
    assert max(t.worker_id for t in graph.tasks) < graph.num_workers
    program = emit_cuda(module, "sm_90a")
    src, plan = program.source, program.plans["chain3"]
    (launch,) = plan.steps
    assert launch.grid[0] == 4 * 132
    info = MegakernelInfo.from_dict(plan.megakernel)  # type: ignore[arg-type]
    assert info.scheduler and info.ctas == 4 * 132 and plan.counters == info.state_word + info.words
    assert info.queue_word >= info.slot_word + 2 * 132 and (info.queue_word - info.state_word) % 2 == 0
    assert f"if (w == {graph.num_workers}u) {{  // the scheduler CTA" in src
    assert "mx::mpk_pop(heads + w, slots, gen * n, i, state, w," in src and "mx::mpk_st_relaxed(heads + v," in src
    assert f"mx::mpk_finish(state, gen, {4 * 132}u);" in src and "if (mpk_abort) return;" in src
    initial, offsets, consumers = _table(src, "sched_initial"), _table(src, "ev_cons_off"), _table(src, "ev_cons")
    assert initial == [t.ident for t in graph.tasks if t.wait_event < 0]
    for e in graph.events:
        assert consumers[offsets[e.ident] : offsets[e.ident + 1]] == [t.ident for t in graph.tasks if t.wait_event == e.ident]
    assert sorted(initial + consumers) == [t.ident for t in graph.tasks]  # each task handed over once
    assert _table(src, "task_worker") == [t.worker_id for t in graph.tasks]
    # no dependency is elided: a task's triggers are all its events
    assert _table(src, "trig") == [e for t in graph.tasks for e in t.trigger_events]


SIBLINGS = """
func.func @qkv(%x: tensor<1x1024xf16> {kn.strides = array<i64: 1024, 1>},
               %Wq: tensor<1024x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight},
               %Wk: tensor<1024x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight},
               %Wv: tensor<1024x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.weight})
               -> (tensor<1x4096xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>) {
  %n = kn.rms_norm %x {normalized_shape = array<i64: 1024>} : tensor<1x1024xf16>
  %q = kn.matmul %n, %Wq : tensor<1x1024xf16>, tensor<1024x4096xf16> -> tensor<1x4096xf16>
  %k = kn.matmul %n, %Wk : tensor<1x1024xf16>, tensor<1024x1024xf16> -> tensor<1x1024xf16>
  %v = kn.matmul %n, %Wv : tensor<1x1024xf16>, tensor<1024x1024xf16> -> tensor<1x1024xf16>
  func.return %q, %k, %v : tensor<1x4096xf16>, tensor<1x1024xf16>, tensor<1x1024xf16>
}
"""


def test_concurrent_kernels_are_planned_for_their_share_of_the_sms() -> None:
    from mirage_xdsl.passes.conversion.sm_shares import concurrent_sm_shares

    fn = next(op for op in parse(SIBLINGS).walk() if isinstance(op, FuncOp))
    rms, q, k, v = [[op] for op in fn.body.block.ops if op.name.startswith("kn.")]
    # rms_norm is alone on its level; the three projections share 132 SMs by weight bytes 4:1:1
    assert concurrent_sm_shares([rms, q, k, v], 132) == {1: 88, 2: 22, 3: 22}

    def blocks(share: bool) -> dict[str, int]:
        module = parse(SIBLINGS)
        fuse_plain_graphs(make_context(), module, per_op=False, block_threads=128, smem_limit=worker_smem_budget(4), share_sms=share)
        grids = {}
        for op in module.walk():
            if op.name == "kn.customized" and op.operands[-1].name_hint in ("Wq", "Wk", "Wv"):
                grids[op.operands[-1].name_hint] = math.prod(op.grid)  # type: ignore[attr-defined]
        return grids

    alone, shared = blocks(False), blocks(True)
    # the small projections get fewer, longer tiles; the large one keeps a grid that fills its share
    assert shared["Wk"] < alone["Wk"] and shared["Wv"] < alone["Wv"]
    assert shared["Wk"] * 4 <= shared["Wq"] <= alone["Wq"]


@pytest.mark.parametrize(
    ("code", "record", "message"),
    [
        (1, (8, 0, 5, 8), r"megakernel deadlock: task 8 \(pair_k1 block 0, worker \d+\) waits on event 0 \(count 5 of 8\)"),
        (3, (4, 1, 4, 5), r"megakernel deadlock: worker 1 waits for the scheduler to push its task number 5 of this launch \(it pushed 4\)"),
        (4, (8, 0, 5, 8), r"megakernel deadlock: the scheduler waits on event 0 \(count 5 of 8\) before task 8 \(pair_k1 block 0, worker \d+\)"),
        # placement: a fourth worker on SM 7 of a three-per-SM graph, or an SM id beyond the graph's
        (2, (7, 0, 3, 3), r"megakernel placement: worker CTA 0 started on SM 7 as slot 3, but .* 3 workers per SM"),
        (2, (140, 0, 2**64 - 1, 3), r"megakernel placement: worker CTA 0 started on SM 140 outside the SM range"),
    ],
)
def test_the_watchdog_report_names_what_waited(
    code: int, record: tuple[int, int, int, int], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`check_megakernel` reads the error record the device wrote (state words: code, task,
    event, value, needed, worker) into one sentence per kind of wait, and clears the counters."""
    import numpy as np

    from mirage_xdsl.runtime import megakernel as host
    from mirage_xdsl.runtime.megakernel import MegakernelDeadlock, check_megakernel

    module = parse(PAIR)
    MirageMegakernelPass(workers=3, dispatch="scheduler").apply(make_context(), module)
    plan = emit_cuda(module, "sm_90a").plans["pair"]
    state = np.array([0, 0, code, *record, 0], dtype=np.uint64)
    monkeypatch.setattr(host, "_words", lambda graph, first, count: state)

    class Counters:
        cleared = False

        def fill(self, value: int) -> None:
            self.cleared = value == 0

    class Graph:
        func_name = "pair"

    graph = Graph()
    graph.plan = plan  # type: ignore[attr-defined]
    graph._counters = Counters()  # type: ignore[attr-defined]
    with pytest.raises(MegakernelDeadlock, match=message):
        check_megakernel(graph)
    assert graph._counters.cleared  # type: ignore[attr-defined]
