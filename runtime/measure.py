"""Checking and timing a compiled graph on the GPU: the one timing loop of the project.

`mirage-bench`, `mirage-run --bench`, `compile(autotune=...)` and the genetic tuner
(driver/tune/) all time through these helpers, so every number is measured the same way:

- `bench_us(run, n_sets, stream)`: median µs of one `run(i)`, timed with CUDA events around
  sweeps through all input sets (host work included: what a caller of the graph sees);
- `device_us(graph, sets, stream)`: µs of one run of a compiled graph on the device alone,
  from one CUDA graph that runs it on the input sets in turn (`sweep_sets`: at least
  `SWEEP_LAUNCHES` runs), replayed;
- `sweep_us(replay, n_runs, stream)`: the same for any replay callable holding such a graph;
- `rotation_sets(bytes)`: how many input sets to rotate so that one sweep touches about 3x
  the L2 and weights are not served from it;
- `relative_error`, `to_device`, `plan_bytes`, `device_sets`: the correctness check against
  the reference and the device copies of inputs.

Needs numpy only at import time; CuPy when called (passed in or imported then).  Moved here
from bench/timing.py and bench/check.py (which re-export the names) so that driver/ may use them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

L2_BYTES = 60 * 1024 * 1024
"""H200 L2 (bytes; 60 MiB as read off the device, docs/h200-device-facts.md); rotating input
sets until 3x this many bytes are touched keeps weights cold."""

SWEEP_LAUNCHES = 16
"""Runs of the program in one timed CUDA graph (the input sets repeated in turn).  The first
run of a replay starts on an idle GPU, without the previous run's end to overlap (graph
launches do not chain through programmatic dependent launch), so a graph of few runs charges
each with a share of that boundary: with one pass over 4 sets (the harness until
2026-11-25) rmsnorm_linear cost about 1 µs more per run than in a long sequence of launches
(H200: with 16 runs the large workloads took 0.7-1.3 µs less per run, torch 0.6-1.5).  16 runs
keep that share small, for ours and the peers alike."""


def rotation_sets(input_bytes: int, limit: int = 8) -> int:
    """Input sets to rotate so that one sweep reads about 3x the L2 (2..limit) when one set
    holds `input_bytes` bytes."""
    if input_bytes <= 0:
        return 2
    return max(2, min(limit, math.ceil(3 * L2_BYTES / input_bytes)))


def bench_us(run: Callable[[int], Any], n_sets: int, stream: Any, *, warmup: int = 20, reps: int = 60) -> float:
    """Median microseconds of one `run(i)` (i = input-set index), timed with CUDA events on
    `stream` (a CuPy stream) over `reps` sweeps through all `n_sets` sets, after `warmup` runs.

    Exceptions of `run` are not caught.
    """
    import cupy  # type: ignore[import-not-found]

    for i in range(warmup):
        run(i % n_sets)
    stream.synchronize()
    times = []
    for _ in range(reps):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for i in range(n_sets):
            run(i)
        end.record(stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) * 1000.0 / n_sets)
    return statistics.median(times)


def copy_bandwidth_gbs(cupy: Any, nbytes: int = 1 << 30, stream: Any = None) -> float:
    """Device-to-device copy bandwidth of this GPU in GB/s (10^9 bytes per second), bytes
    read plus bytes written: the median of `bench_us` timings of one `nbytes` cudaMemcpyAsync
    between two CuPy buffers (1 GiB by default, far beyond the L2).  The measure the issues'
    bandwidth targets use (issue #32: "at least 88% of the measured copy bandwidth")."""
    src = cupy.empty(nbytes, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    src.fill(1)
    stream = stream or cupy.cuda.get_current_stream()
    us = bench_us(lambda _i: dst.data.copy_from_device_async(src.data, nbytes, stream), 1, stream, warmup=3, reps=20)
    return 2 * nbytes / (us * 1e3)


def sweep_us(replay: Callable[[], Any], n_runs: int, stream: Any, *, warmup: int = 20, reps: int = 60) -> float:
    """Microseconds per run of `replay()`, a launch of one CUDA graph that runs the program
    `n_runs` times (on input sets in turn): the median replay time / `n_runs`."""
    return bench_us(lambda i: replay(), 1, stream, warmup=warmup, reps=reps) / n_runs


def sweep_sets(sets: Sequence[Sequence[Any]], launches: int = SWEEP_LAUNCHES) -> list[Sequence[Any]]:
    """The input sets in turn, repeated until there are at least `launches` of them (one pass
    when there are already that many): the runs of one timed CUDA graph."""
    return list(sets) * max(1, math.ceil(launches / max(1, len(sets))))


def device_us(
    graph: Any, sets: Sequence[Sequence[Any]], stream: Any, launches: int = SWEEP_LAUNCHES, *, reps: int = 60
) -> float | None:
    """Device time (µs) of one run of `graph` (a loaded CompiledGraph): one CUDA graph
    running it on the input sets in turn (`sweep_sets(sets, launches)`), replayed and timed;
    None when the plan cannot be captured (a library matmul: CuPy cannot record cuBLAS into a
    graph).  `reps`: timed replays, the median is returned.

    Raises:
        InputError: an input set does not match the graph's plan (`CompiledGraph.check`).
    """
    from mirage_xdsl.runtime.validate import LaunchError

    runs = sweep_sets(sets, launches)
    try:
        launch = graph.capture_sweep(runs)
    except LaunchError:
        return None
    return sweep_us(lambda: launch(stream), len(runs), stream, reps=reps)


def relative_error(outs: Sequence[np.ndarray], refs: Sequence[np.ndarray]) -> float:
    """max over outputs of max|out - ref| / max|ref| (dimensionless); inf for NaN/inf in
    `outs`, a shape mismatch or a different number of outputs."""
    if len(outs) != len(refs):
        return math.inf
    worst = 0.0
    for out, ref in zip(outs, refs):
        out = np.asarray(out, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        if out.shape != ref.shape or not np.all(np.isfinite(out)):
            return math.inf
        denom = float(np.max(np.abs(ref))) if ref.size else 0.0
        diff = float(np.max(np.abs(out - ref))) if ref.size else 0.0
        worst = max(worst, diff / denom if denom > 0 else diff)
    return worst


def to_device(cupy: Any, x: np.ndarray) -> Any:
    """Copy a numpy array to the GPU with the same element strides (padding left zero)."""
    from mirage_xdsl.runtime.validate import alloc_elements

    item = x.itemsize
    strides = tuple(s // item for s in x.strides)
    flat = cupy.zeros(max(alloc_elements(x.shape, strides), 1), dtype=x.dtype)
    view = cupy.lib.stride_tricks.as_strided(flat, x.shape, x.strides)
    view[...] = cupy.asarray(np.ascontiguousarray(x))
    return view


def plan_bytes(specs: Sequence[Any]) -> int:
    """Bytes of the allocations of `specs` (plan TensorSpecs, strides included)."""
    from mirage_xdsl.runtime.library_ops import storage_dtype
    from mirage_xdsl.runtime.validate import alloc_elements

    return sum(alloc_elements(s.shape, s.strides) * storage_dtype(s.dtype).itemsize for s in specs)


def device_sets(cupy: Any, specs: Sequence[Any], n: int) -> list[list[Any]]:
    """`n` input sets for timing, drawn on the GPU (uniform(-0.5, 0.5) floats, small ints),
    laid out with the specs' strides: the values only need to be realistic."""
    from mirage_xdsl.runtime.library_ops import storage_dtype
    from mirage_xdsl.runtime.validate import alloc_elements

    sets = []
    for _ in range(n):
        xs = []
        for spec in specs:
            dt = storage_dtype(spec.dtype)
            count = max(alloc_elements(spec.shape, spec.strides), 1)
            if spec.dtype == "bfloat16":
                bits = cupy.random.uniform(-0.5, 0.5, count, dtype=cupy.float32).view(cupy.uint32) >> 16
                flat = bits.astype(cupy.uint16)
            elif dt.kind == "f":
                flat = cupy.random.uniform(-0.5, 0.5, count).astype(dt)
            else:
                flat = cupy.random.randint(0, 8, count).astype(dt)
            xs.append(cupy.lib.stride_tricks.as_strided(flat, spec.shape, tuple(s * dt.itemsize for s in spec.strides)))
        sets.append(xs)
    return sets
