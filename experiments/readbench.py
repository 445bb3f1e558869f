"""Read ceiling: how fast can any kernel read the rmsnorm_linear weight once?

membench.py measured block-tiled [KB, TN] streams (what our GEMV-shaped kernels do) with
eager launches.  This script measures the bound those are compared against: a flat read of
W's 50.3 MB as contiguous 16-byte loads per block (U loads in flight per thread), and wide
row tiles ([KB, TN] with TN up to whole rows), each timed two ways:

- eager: back-to-back launches over four rotated copies, CUDA events (streaming.time_us);
- graph: the four launches captured into one CUDA graph, replayed (how `mirage-bench`
  times `ours dev` and the torch graph peers).

Also a flat read of 1 GiB (the asymptotic read bandwidth).  Fractions are of the measured
device-to-device copy bandwidth (bytes read + written), as in every record.

    python experiments/readbench.py        # on the GPU machine; needs only CuPy (NVRTC)
"""
import itertools

import cupy as cp
import numpy as np
from streaming import (
    TILE_READ_SRC,
    W_BYTES,
    K,
    N,
    compile_kernels,
    copy_bandwidth_gbs,
    graph_time_us,
    kernel,
    print_table,
    time_us,
    weight_copies,
)

SRC = r'''
#include <cuda_fp16.h>
// block b reads bytes [b*chunk, (b+1)*chunk) of W as 16-byte loads, U in flight per thread
template <int U>
__global__ void flat(const uint4* __restrict__ W, long long n16, long long chunk16, float* out) {
  const long long begin = blockIdx.x * chunk16;
  const long long end = min(begin + chunk16, n16);
  unsigned acc = 0;
  for (long long i = begin + threadIdx.x; i < end; i += (long long)blockDim.x * U) {
    uint4 v[U];
    #pragma unroll
    for (int u = 0; u < U; ++u) {
      long long j = i + (long long)u * blockDim.x;
      v[u] = j < end ? __ldg(W + j) : make_uint4(0, 0, 0, 0);
    }
    #pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = 1.f;
}

''' + TILE_READ_SRC


SMS = cp.cuda.Device().attributes["MultiProcessorCount"]
flat_cfgs = [(u, t, b) for u, t, b in itertools.product((4, 8), (256, 512, 1024), (1, 2, 4, 8, 16))]
tile_cfgs = []
for tn, u, threads in itertools.product((64, 128, 256, 512, 1024), (4, 8), (128, 256, 512)):
    if threads % (tn // 8):
        continue
    for split in (1, 2, 4, 8, 16, 32, 64):
        blocks = (N // tn) * split
        if SMS <= blocks <= 4096 and (K // split) >= threads // (tn // 8):
            tile_cfgs.append((tn, u, K // split, threads, split))
names = [f"flat<{u}>" for u in (4, 8)] + [f"tile<{tn},{u},{kb}>" for tn, u, kb, *_ in tile_cfgs]
mod = compile_kernels(SRC, sorted(set(names)))
copies = weight_copies()
out = cp.zeros(1 << 16, cp.float32)
copy_gbs = copy_bandwidth_gbs()
n16 = W_BYTES // 16
results = {"eager": [], "graph": []}
for u, threads, per_sm in flat_cfgs:
    f = kernel(mod, f"flat<{u}>")
    blocks = SMS * per_sm
    chunk = -(-n16 // blocks)
    launch = lambda i: f((blocks,), (threads,), (copies[i], np.int64(n16), np.int64(chunk), out))
    desc = f"flat U={u} threads={threads:<4} blocks={blocks}"
    results["eager"].append((time_us(launch), desc))
    results["graph"].append((graph_time_us(launch), desc))
for tn, u, kb, threads, split in tile_cfgs:
    f = kernel(mod, f"tile<{tn},{u},{kb}>")
    grid = (N // tn, split)
    launch = lambda i: f(grid, (threads,), (copies[i], np.int32(N), out))
    desc = f"tile TN={tn:<4} U={u} threads={threads:<3} split={split:<2} blocks={grid[0] * grid[1]}"
    results["eager"].append((time_us(launch), desc))
    results["graph"].append((graph_time_us(launch), desc))
big = cp.empty(1 << 30, cp.uint8)
f = kernel(mod, "flat<8>")
big16 = big.nbytes // 16
t_big = graph_time_us(lambda i: f((SMS * 8,), (512,), (big, np.int64(big16), np.int64(-(-big16 // (SMS * 8))), out)), rotate=1, reps=10)
print(f"# flat read of 1 GiB: {t_big:.1f} us = {big.nbytes / t_big / 1e3:.0f} GB/s ({100 * big.nbytes / t_big / 1e3 / copy_gbs:.1f}% of copy)")
for mode in ("graph", "eager"):
    print(f"\n## {mode} ({len(results[mode])} configurations, 25 fastest)")
    print_table(results[mode], copy_gbs, top=25)
