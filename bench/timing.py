"""Timing on the GPU: CUDA events, warm-up, median of many sweeps over rotated input sets.

Every number of `mirage-bench` and `mirage-run --bench` comes from here, so ours and the
peers are timed the same way:

- `bench_us(run, n_sets, stream)`: median µs of one `run(i)`, timed with CUDA events around
  sweeps through all input sets (host work included: what a caller of the graph sees);
- `device_us(graph, sets, stream)`: µs of one run of a compiled graph on the device alone,
  from one CUDA graph that runs it on the input sets in turn (`sweep_sets`: at least
  `SWEEP_LAUNCHES` runs), replayed;
- `sweep_us(replay, n_runs, stream)`: the same for any replay callable holding such a graph
  (the torch peers, see peers.py);
- `rotation_sets(bytes)`: how many input sets to rotate so that one sweep touches about 3x
  the L2 and weights are not served from it;
- `copy_bandwidth_gbs()`: the device-to-device copy bandwidth, the yardstick of the
  achieved bandwidth columns.

Needs numpy only at import time; CuPy (and torch for `torch_graph_runner`) when called.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

L2_BYTES = 60 * 1024 * 1024
"""H200 L2 (bytes); rotating input sets until 3x this many bytes are touched keeps weights cold."""

SWEEP_LAUNCHES = 16
"""Runs of the program in one timed CUDA graph (the input sets repeated in turn).  The first
run of a replay starts on an idle GPU, without the previous run's end to overlap (graph
launches do not chain through programmatic dependent launch), so a graph of few runs charges
each with a share of that boundary: with one pass over 4 sets (the harness until
2026-11-25) rmsnorm_linear cost about 1 µs more per run than in a long sequence of launches
(H200: with 16 runs the large workloads took 0.7-1.3 µs less per run, torch 0.6-1.5).  16 runs keep that share small, for ours
and the peers alike."""

COPY_BYTES = 1 << 30
"""Size of the buffer copied by `copy_bandwidth_gbs` (1 GiB: far beyond any L2)."""


def rotation_sets(input_bytes: int, limit: int = 8) -> int:
    """Input sets to rotate so that one sweep reads about 3x the L2 (2..limit) when one set
    holds `input_bytes` bytes."""
    if input_bytes <= 0:
        return 2
    return max(2, min(limit, math.ceil(3 * L2_BYTES / input_bytes)))


def bench_us(run: Callable[[int], Any], n_sets: int, stream: Any, *, warmup: int = 20, reps: int = 60) -> float:
    """Median microseconds of one `run(i)` (i = input-set index), timed with CUDA events on
    `stream` (a CuPy stream) over `reps` sweeps through all `n_sets` sets, after `warmup` runs."""
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


def sweep_us(replay: Callable[[], Any], n_runs: int, stream: Any, *, warmup: int = 20, reps: int = 60) -> float:
    """Microseconds per run of `replay()`, a launch of one CUDA graph that runs the program
    `n_runs` times (on input sets in turn): the median replay time / `n_runs`."""
    return bench_us(lambda i: replay(), 1, stream, warmup=warmup, reps=reps) / n_runs


def sweep_sets(sets: Sequence[Sequence[Any]], launches: int = SWEEP_LAUNCHES) -> list[Sequence[Any]]:
    """The input sets in turn, repeated until there are at least `launches` of them (one pass
    when there are already that many): the runs of one timed CUDA graph."""
    return list(sets) * max(1, math.ceil(launches / max(1, len(sets))))


def device_us(graph: Any, sets: Sequence[Sequence[Any]], stream: Any, launches: int = SWEEP_LAUNCHES) -> float | None:
    """Device time (µs) of one run of `graph` (a loaded CompiledGraph): one CUDA graph
    running it on the input sets in turn (`sweep_sets(sets, launches)`), replayed and timed;
    None when the plan cannot be captured (a library matmul: CuPy cannot record cuBLAS into a
    graph)."""
    from mirage_xdsl.runtime.executable import LaunchError

    runs = sweep_sets(sets, launches)
    try:
        launch = graph.capture_sweep(runs)
    except LaunchError:
        return None
    return sweep_us(lambda: launch(stream), len(runs), stream)


def torch_graph_runner(fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]]) -> Callable[[int], Any]:
    """CUDA graphs of `fn`, one per input set (torch tensors); the returned callable replays
    the graph of set i on torch's current stream."""
    import torch  # type: ignore[import-not-found]

    graphs = []
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for xs in input_sets:
            fn(*xs)
    torch.cuda.current_stream().wait_stream(side)
    for xs in input_sets:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn(*xs)
        graphs.append(g)
    return lambda i: graphs[i].replay()


def torch_sweep_graph(fn: Callable[..., Any], input_sets: Sequence[Sequence[Any]]) -> Callable[[], Any]:
    """One CUDA graph (torch capture) running `fn` once on each input set, in order, after a
    warm-up of every set on a side stream; returns `replay()` (on torch's current stream).
    The outputs live in the graph's private pool for as long as `replay` does."""
    import torch  # type: ignore[import-not-found]

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            for xs in input_sets:
                fn(*xs)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = [fn(*xs) for xs in input_sets]

    def replay() -> None:
        g.replay()

    replay.outputs = outs  # type: ignore[attr-defined]  # the outputs live as long as the graph
    return replay


def copy_bandwidth_gbs(nbytes: int = COPY_BYTES, reps: int = 30) -> float:
    """Device-to-device copy bandwidth in GB/s (1e9 bytes/s), bytes read + written: the median
    of `reps` timed `cudaMemcpyAsync` copies of an `nbytes` buffer (CuPy, CUDA events), after
    a warm-up."""
    import cupy  # type: ignore[import-not-found]

    src = cupy.ones(nbytes, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    pointers = (dst.data.ptr, src.data.ptr)
    stream = cupy.cuda.get_current_stream()
    kind = cupy.cuda.runtime.memcpyDeviceToDevice

    def copy() -> None:
        cupy.cuda.runtime.memcpyAsync(pointers[0], pointers[1], nbytes, kind, stream.ptr)

    for _ in range(3):
        copy()
    stream.synchronize()
    times = []
    for _ in range(reps):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        copy()
        end.record(stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) / 1000.0)
    seconds = statistics.median(times)
    del src, dst
    cupy.get_default_memory_pool().free_all_blocks()
    return 2 * nbytes / seconds / 1e9
