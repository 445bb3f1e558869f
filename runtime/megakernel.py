"""Host side of the persistent megakernel (codegen/megakernel.py): residency, the watchdog's
report, and the per-task trace.

* `check_residency(graph)` (run by `CompiledGraph.load` for a megakernel plan): every worker
  CTA must be resident at once -- workers wait on each other, and a worker that never starts
  would hang the others -- so `workers <= SMs x occupancy` (cuOccupancyMaxActiveBlocksPerMultiprocessor),
  else `LaunchError` naming the figures and the fix (`workers=` in kn-to-task-graph).
* `check_megakernel(graph)` synchronises and reads the error record: when the device watchdog
  fired (a wait spun past `mpk.watchdog_ns`), it raises `MegakernelDeadlock` with
  "megakernel deadlock: task T (<kernel> block b) waits on event E (count c of n)" and zeroes
  the counter buffer (generation, done count, events) so the next launch starts clean.
* `read_trace` / `write_chrome_trace` (plans compiled with `trace=true`): the start and end of
  every task of the last launch (%globaltimer, ns) as Chrome trace JSON ("X" events, one
  thread per worker; opens in Perfetto and chrome://tracing).

No xDSL; CuPy is imported on first use.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from mirage_xdsl.codegen.megakernel_info import STATE_WORDS, MegakernelInfo

__all__ = ["MegakernelDeadlock", "check_megakernel", "check_residency", "megakernel_info", "read_trace", "write_chrome_trace"]


class MegakernelDeadlock(RuntimeError):
    """The megakernel's watchdog fired: a task waited past the timeout on an event (or a
    worker found no slot of the SM-major numbering and the launch ended)."""


def megakernel_info(graph: Any) -> MegakernelInfo | None:
    """The `MegakernelInfo` of a CompiledGraph's plan (None: not a megakernel)."""
    raw = graph.plan.megakernel
    return MegakernelInfo.from_dict(raw) if raw else None


def check_residency(graph: Any, kernel: Any, threads: int, smem: int, device: Any) -> None:
    """Raise `LaunchError` unless all worker CTAs of the megakernel fit on the device at once.

    Args:
        graph: the loaded CompiledGraph; kernel: its CuPy function; threads, smem: launch
            threads and dynamic shared memory (bytes); device: the CuPy device."""
    from cupy.cuda import driver

    from mirage_xdsl.runtime.validate import LaunchError

    info = megakernel_info(graph)
    if info is None:
        return
    per_sm = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(int(getattr(kernel, "kernel", kernel).ptr), threads, smem))
    sms = int(device.attributes.get("MultiProcessorCount", 132))
    if info.sm_slots and sms != info.sm_slots:
        raise LaunchError(
            f"{graph.func_name}: the megakernel numbers its {info.workers} workers by SM for {info.sm_slots} SMs "
            f"(mpk.sm_major) but this GPU has {sms}; fix: recompile with kn-to-task-graph{{num-sms={sms}}}"
        )
    if info.ctas > per_sm * sms:
        raise LaunchError(
            f"{graph.func_name}: the megakernel needs {info.ctas} resident CTAs but this GPU holds "
            f"{per_sm} per SM x {sms} SMs = {per_sm * sms} ({threads} threads, {smem} B shared memory each); "
            f"fix: recompile with kn-to-task-graph{{workers={per_sm * sms}}}"
        )


def _words(graph: Any, first: int, count: int) -> np.ndarray:
    """uint64 values at uint32 word `first` of the graph's counter buffer (synchronises)."""
    import cupy

    cupy.cuda.runtime.deviceSynchronize()
    return graph._counters[first : first + 2 * count].get().view(np.uint64)


def check_megakernel(graph: Any) -> None:
    """Synchronise; raise `MegakernelDeadlock` when the last launch's watchdog fired.

    Raises:
        MegakernelDeadlock: "megakernel deadlock: task T (...) waits on event E (count c of n)"
            (or, under scheduler dispatch, the scheduler waiting on an event / a worker on its queue),
            or "megakernel placement: ..." when a worker found no SM-major slot (the counter
            buffer is zeroed, so the graph can run again)."""
    info = megakernel_info(graph)
    if info is None or graph._counters is None:
        return
    state = _words(graph, info.state_word, STATE_WORDS)
    if not state[2]:
        return
    task, event, value, needed, worker = (int(v) for v in state[3:8])
    graph._counters.fill(0)
    if int(state[2]) == 2:
        slot = f"as slot {value}" if value < 1 << 63 else "outside the SM range"
        raise MegakernelDeadlock(
            f"megakernel placement: worker CTA {worker} started on SM {task} {slot}, but the "
            f"SM-major numbering (mpk.sm_major) expects SM ids below {info.sm_slots} and {needed} workers "
            "per SM; fix: recompile for this GPU (kn-to-task-graph num-sms, ctas-per-sm)"
        )
    if int(state[2]) == 3:
        raise MegakernelDeadlock(
            f"megakernel deadlock: worker {event} waits for the scheduler to push its task number {task + 1} "
            f"of this launch (it pushed {value}); the watchdog ended the launch instead of hanging"
        )
    label = info.tasks[task] if task < len(info.tasks) else "?"
    if int(state[2]) == 4:
        raise MegakernelDeadlock(
            f"megakernel deadlock: the scheduler waits on event {event} (count {value} of {needed}) before task "
            f"{task} ({label}, worker {info.task_worker[task]}); the watchdog ended the launch instead of hanging"
        )
    raise MegakernelDeadlock(
        f"megakernel deadlock: task {task} ({label}, worker {worker}) waits on event {event} "
        f"(count {value} of {needed}); the watchdog ended the launch instead of hanging"
    )


def read_trace(graph: Any) -> list[tuple[int, int, int, int]]:
    """(task, worker, start ns, end ns) of every task of the last launch.

    Raises:
        ValueError: the plan was compiled without `trace=true`."""
    info = megakernel_info(graph)
    if info is None or not info.trace:
        raise ValueError(f"{graph.func_name}: not a megakernel compiled with trace=true (mirage-megakernel{{trace=true}})")
    times = _words(graph, info.trace_word, 2 * len(info.tasks))
    return [(t, info.task_worker[t], int(times[2 * t]), int(times[2 * t + 1])) for t in range(len(info.tasks))]


def chrome_trace(info: MegakernelInfo, records: list[tuple[int, int, int, int]]) -> dict:
    """Chrome trace JSON (dict) of `records`: one "X" event per task, µs from the first start,
    `tid` = worker (Chrome Trace Event Format, "Complete events")."""
    t0 = min((s for _, _, s, _ in records if s), default=0)
    events = [
        {"name": info.tasks[t], "cat": "task", "ph": "X", "pid": 0, "tid": w, "ts": (s - t0) / 1e3, "dur": max(e - s, 0) / 1e3,
         "args": {"task": t}}
        for t, w, s, e in records
    ]
    meta = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": w, "args": {"name": f"worker {w}"}} for w in range(info.workers)]
    return {"traceEvents": meta + events, "displayTimeUnit": "ns", "otherData": {"kernel": info.kernel}}


def write_chrome_trace(graph: Any, path: str | os.PathLike[str]) -> int:
    """Write the last launch's trace as Chrome trace JSON to `path`; return the task count."""
    records = read_trace(graph)
    info = megakernel_info(graph)
    assert info is not None
    with open(path, "w") as f:
        json.dump(chrome_trace(info, records), f)
    return len(records)
