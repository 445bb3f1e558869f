"""Can an unsplit rms_norm(X) @ W stream W and X fast enough?  (rmsnorm bs8, #5)

A split-K plan pays for its partials' combine at the end of the grid; an unsplit plan has
no combine, but every block reads all of X [16, 4096] fp16 (128 KB, served by L2) beside
its own columns of W.  This probe reads, with no arithmetic, what such a kernel would read:
block b streams W's columns [b*TN, b*TN + TN) over all K rows (16-byte `__ldg`s, U in flight
per thread) and, with `x`, the matching K range of X in the same trips (16 x the trip's rows,
so 16 B of X per 2 * TN B of W).  Grids of N / TN blocks: TN = 16 -> 384, 32 -> 192, 64 -> 96.
Timed as readbench.py does (a CUDA graph of four launches over rotated copies of W).

    python experiments/unsplitbench.py    # on the GPU machine; needs only CuPy (NVRTC)
"""
import itertools

import cupy as cp
import numpy as np
from streaming import W_BYTES, K, N, compile_kernels, copy_bandwidth_gbs, graph_time_us, kernel, weight_copies

ROWS = 16  # rmsnorm bs8's X rows

SRC = r'''
#include <cuda_fp16.h>
// block b reads W[:, b*TN : b*TN + TN] and (READ_X) the K range of X [16, K] of each trip
template <int TN, int U, bool READ_X>
__global__ void unsplit(const __half* __restrict__ W, const __half* __restrict__ X, int n, int k, float* out) {
  constexpr int CPR = TN / 8;                      // 16-byte chunks per W row of the tile
  const int rows_per_pass = blockDim.x / CPR;
  const int r0 = threadIdx.x / CPR, q = threadIdx.x % CPR;
  const __half* base = W + (size_t)blockIdx.x * TN + q * 8;
  const int span = rows_per_pass * U;              // W rows per trip
  const int xchunks = 16 * span / 8;               // 16-byte chunks of X per trip
  unsigned acc = 0;
  for (int t0 = 0; t0 < k; t0 += span) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int rr = t0 + r0 + u * rows_per_pass;
      v[u] = rr < k ? __ldg(reinterpret_cast<const uint4*>(base + (size_t)rr * n)) : make_uint4(0, 0, 0, 0);
    }
    if constexpr (READ_X) {
      for (int c = threadIdx.x; c < xchunks; c += blockDim.x) {
        const int row = c / (span / 8), kc = c % (span / 8);
        const uint4 x = __ldg(reinterpret_cast<const uint4*>(X + (size_t)row * k + t0 + kc * 8));
        acc ^= x.y;
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].w;
  }
  if (acc == 0x12345678u) out[blockIdx.x] = 1.f;
}
'''

configs = [
    (tn, u, threads, x)
    for tn, u, threads, x in itertools.product((16, 32, 64), (4, 8, 16), (128, 256, 512), (False, True))
    if (threads // (tn // 8)) * u <= K
]
names = sorted({f"unsplit<{tn},{u},{str(x).lower()}>" for tn, u, _, x in configs})
mod = compile_kernels(SRC, names)
copies = weight_copies()
xs = cp.random.uniform(-1, 1, ROWS * K, dtype=cp.float32).astype(cp.float16)
out = cp.zeros(1 << 16, cp.float32)
copy_gbs = copy_bandwidth_gbs()
rows = []
for tn, u, threads, x in configs:
    f = kernel(mod, f"unsplit<{tn},{u},{str(x).lower()}>")
    blocks = N // tn
    t = graph_time_us(lambda i: f((blocks,), (threads,), (copies[i], xs, np.int32(N), np.int32(K), out)))
    rows.append((t, tn, u, threads, x, blocks))
print(f"copy bandwidth (read+write): {copy_gbs:.0f} GB/s; W {W_BYTES / 1e6:.1f} MB")
print("| TN | blocks | threads | U | X read | µs | W GB/s | % of copy |")
print("|---|---|---|---|---|---|---|---|")
for t, tn, u, threads, x, blocks in sorted(rows):
    bw = W_BYTES / t / 1e3
    print(f"| {tn} | {blocks} | {threads} | {u} | {'yes' if x else 'no'} | {t:.1f} | {bw:.0f} | {100 * bw / copy_gbs:.1f} |")
