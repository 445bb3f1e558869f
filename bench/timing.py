"""Timing on the GPU: CUDA events, warm-up, median of many sweeps over rotated input sets.

Every number of `mirage-bench` and `mirage-run --bench` comes from here, so ours and the
peers are timed the same way (the first five live in runtime/measure.py, shared with the
tuner of driver/tune/, and are re-exported here):

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

import statistics
from collections.abc import Callable, Sequence
from typing import Any

# The timing loop lives in runtime/measure.py (driver/tune uses it too); re-exported here.
from mirage_xdsl.runtime.measure import (  # noqa: F401 - re-exported
    L2_BYTES,
    SWEEP_LAUNCHES,
    bench_us,
    device_us,
    rotation_sets,
    sweep_sets,
    sweep_us,
)

COPY_BYTES = 1 << 30
"""Size of the buffer copied by `copy_bandwidth_gbs` (1 GiB: far beyond any L2)."""


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
