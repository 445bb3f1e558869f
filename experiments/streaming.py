"""Shared harness of the weight-streaming microbenchmarks (membench, readbench, unsplitbench;
bulkbench, tmabench and gemvbench were deleted: see benchmarks/EXPERIMENTS.md).

The matrix is the rmsnorm_linear weight W [K, N] = [4096, 6144] fp16 (50.3 MB); four copies
are rotated so that the 60 MiB L2 does not serve it.  Times are CUDA-event medians (µs per
kernel launch); bandwidth is W's bytes over that time, and its fraction is of the measured
device-to-device copy bandwidth (bytes read + written).  CuPy only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cupy as cp
import numpy as np

K, N = 4096, 6144
W_BYTES = K * N * 2

# The tile reader of readbench.py (the read ceiling), shared with gemvbench.py (deleted) so that a run
# can time the ceiling next to its own kernels: block (bx, by) reads a [KB, TN] tile of W.
TILE_READ_SRC = r'''
#include <cuda_fp16.h>
// block (bx, by) reads rows [by*KB, (by+1)*KB) x columns [bx*TN, bx*TN + TN) of W [K, N] fp16
template <int TN, int U, int KB>
__global__ void tile(const __half* __restrict__ W, int n, float* out) {
  constexpr int CPR = TN / 8;                      // 16-byte chunks per tile row
  const int rows_per_pass = blockDim.x / CPR;      // blockDim.x is a multiple of CPR
  const int r0 = threadIdx.x / CPR, q = threadIdx.x % CPR;
  const __half* base = W + (size_t)blockIdx.y * KB * n + (size_t)blockIdx.x * TN + q * 8;
  unsigned acc = 0;
  for (int r = r0; r < KB; r += rows_per_pass * U) {
    uint4 v[U];
    #pragma unroll
    for (int u = 0; u < U; ++u) {
      int rr = r + u * rows_per_pass;
      v[u] = rr < KB ? __ldg(reinterpret_cast<const uint4*>(base + (size_t)rr * n)) : make_uint4(0, 0, 0, 0);
    }
    #pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = 1.f;
}
'''


def weight_copies(n: int = 4) -> list[Any]:
    """`n` random fp16 copies of W (flat CuPy arrays)."""
    return [cp.random.uniform(-1, 1, K * N, dtype=cp.float32).astype(cp.float16) for _ in range(n)]


def time_us(launch: Callable[[int], Any], rotate: int = 4, reps: int = 30) -> float:
    """Median µs of one `launch(i)` over `reps` timed sweeps of i = 0 .. rotate-1."""
    start, end = cp.cuda.Event(), cp.cuda.Event()
    for i in range(5):
        launch(i % rotate)
    samples = []
    for _ in range(reps):
        start.record()
        for i in range(rotate):
            launch(i)
        end.record()
        end.synchronize()
        samples.append(cp.cuda.get_elapsed_time(start, end) * 1000 / rotate)
    return float(np.median(samples))


def graph_time_us(launch: Callable[[int], Any], rotate: int = 4, reps: int = 30) -> float:
    """Median µs of one `launch(i)` when the `rotate` launches are captured into one CUDA graph
    and replayed (how `mirage-bench` times device work): no per-launch host overhead."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        for i in range(rotate):
            launch(i)
        graph = stream.end_capture()
    return time_us(lambda _i: graph.launch(), rotate=1, reps=reps) / rotate


def compile_kernels(source: str, names: list[str]) -> Any:
    """The CUDA `source` compiled for sm_90 by NVRTC, with the template instances `names`."""
    return cp.RawModule(code=source, options=("-std=c++17", "--gpu-architecture=sm_90"), name_expressions=names)


def kernel(module: Any, name: str, smem: int = 0) -> Any:
    """Kernel `name` of `module`, allowed `smem` bytes of dynamic shared memory (above 48 KiB
    a kernel must opt in)."""
    f = module.get_function(name)
    if smem > 48 * 1024:
        f.max_dynamic_shared_size_bytes = smem
    return f


def copy_bandwidth_gbs() -> float:
    """Device-to-device copy of 512 MiB: bytes read + written per second (GB/s)."""
    a = cp.empty(512 * 1024 * 1024, cp.uint8)
    b = cp.empty_like(a)
    t = time_us(lambda _i: b.__setitem__(Ellipsis, a), reps=10)
    return 2 * a.nbytes / t / 1e3


def print_table(results: list[tuple[float, str]], copy_gbs: float, top: int | None = None, bottom: int = 0) -> None:
    """`results` = (µs, description); fastest first, with GB/s and % of the copy bandwidth."""
    rows = sorted((W_BYTES / t / 1e3, d, t) for t, d in results)[::-1]
    shown = rows if top is None else rows[:top]
    print(f"copy bandwidth (read+write): {copy_gbs:.0f} GB/s")
    for bw, d, t in shown:
        print(f"{bw:7.0f} GB/s {100 * bw / copy_gbs:5.1f}%  {t:6.1f} us  {d}")
    if bottom and top is not None and len(rows) > top:
        print("...")
        for bw, d, t in rows[-bottom:]:
            print(f"{bw:7.0f} GB/s {100 * bw / copy_gbs:5.1f}%  {t:6.1f} us  {d}")
