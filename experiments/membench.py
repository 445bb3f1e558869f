"""Memory-system microbenchmark: how fast can a block-tiled kernel stream a weight matrix?

Streams the rmsnorm_linear weight W [4096, 6144] fp16 (four copies, rotated, so that the
60 MiB L2 does not serve it) the way our GEMV-shaped kernels do -- cp.async rings of S stages
of KT x TN tiles per 128-thread block, split-K over `split` blocks -- with almost no compute,
and also with direct 16-byte register loads (U in flight per thread).  Prints the measured
device-to-device copy bandwidth and, per configuration, GB/s and its fraction of it.

    python experiments/membench.py        # on the GPU machine; needs only CuPy (NVRTC)

Findings: benchmarks/EXPERIMENTS.md, 2026-11-22 (membench).
"""
import itertools

import cupy as cp
import numpy as np
from streaming import K, N, compile_kernels, copy_bandwidth_gbs, kernel, print_table, time_us, weight_copies

SRC = r'''
#include <cuda_fp16.h>
__device__ __forceinline__ void cpa(void* s, const void* g) {
  unsigned a = (unsigned)__cvta_generic_to_shared(s);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(a), "l"(g) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void waitg() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory"); }

// block (col tile bx, split by): rows [by*KB, (by+1)*KB) of columns [bx*TN, bx*TN+TN)
template <int TN, int KT, int S, int KB>
__global__ void __launch_bounds__(128) ring(const __half* __restrict__ W, int N, float* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  __half* buf = reinterpret_cast<__half*>(smem);
  const int tid = threadIdx.x;
  constexpr int CPR = TN / 8;            // 16-byte chunks per row
  constexpr int CHUNKS = KT * CPR;       // per stage
  constexpr int ITERS = KB / KT;
  const __half* base = W + (size_t)blockIdx.y * KB * N + blockIdx.x * TN;
  auto load = [&](int it, int slot) {
    const __half* g = base + (size_t)it * KT * N;
    __half* s = buf + slot * KT * TN;
    #pragma unroll 4
    for (int c = tid; c < CHUNKS; c += 128) {
      int r = c / CPR, q = c % CPR;
      cpa(s + r * TN + q * 8, g + (size_t)r * N + q * 8);
    }
  };
  #pragma unroll
  for (int p = 0; p < S - 1; ++p) { if (p < ITERS) load(p, p); commit(); }
  float acc = 0.f;
  #pragma unroll 1
  for (int it = 0; it < ITERS; ++it) {
    waitg<S - 2>();
    __syncthreads();
    if (it + S - 1 < ITERS) load(it + S - 1, (it + S - 1) % S);
    commit();
    const __half* s = buf + (it % S) * KT * TN;
    #pragma unroll 4
    for (int c = tid; c < CHUNKS; c += 128) acc += __half2float(s[c * 8]);
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
}

// direct: each thread keeps U 16-byte loads in flight; block = TN columns x KB rows
template <int TN, int U, int KB>
__global__ void __launch_bounds__(128) direct(const __half* __restrict__ W, int N, float* out) {
  const int tid = threadIdx.x;
  constexpr int CPR = TN / 8;
  constexpr int ROWS_PER_PASS = 128 / CPR;
  const __half* base = W + (size_t)blockIdx.y * KB * N + blockIdx.x * TN;
  const int r0 = tid / CPR, q = tid % CPR;
  float acc = 0.f;
  #pragma unroll 1
  for (int r = r0; r < KB; r += ROWS_PER_PASS * U) {
    uint4 v[U];
    #pragma unroll
    for (int u = 0; u < U; ++u) {
      int rr = r + u * ROWS_PER_PASS;
      if (rr < KB) v[u] = __ldg(reinterpret_cast<const uint4*>(base + (size_t)rr * N + q * 8));
      else v[u] = make_uint4(0,0,0,0);
    }
    #pragma unroll
    for (int u = 0; u < U; ++u) acc += __half2float(*reinterpret_cast<const __half*>(&v[u].x));
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
}
'''
ring_cfgs = []
for TN, KT, S in itertools.product((16, 32, 64, 128), (64, 128, 256), (2, 3, 4, 6)):
    split = {16: 1, 32: 2, 64: 4, 128: 8}[TN]
    for sp in sorted({split, split * 2}):
        KB = K // sp
        if KB % KT or KB // KT < 2: continue
        smem = S * KT * TN * 2
        if smem > 200 * 1024: continue
        ring_cfgs.append((TN, KT, S, KB, sp, smem))
direct_cfgs = []
for TN, U in itertools.product((16, 32, 64, 128, 256), (2, 4, 8)):
    for sp in (1, 2, 4, 8, 16):
        blocks = (N // TN) * sp
        if blocks < 264 or blocks > 3000: continue
        direct_cfgs.append((TN, U, K // sp, sp))
names = [f"ring<{a},{b},{c},{d}>" for a, b, c, d, *_ in ring_cfgs] + [f"direct<{a},{b},{c}>" for a, b, c, _ in direct_cfgs]
mod = compile_kernels(SRC, names)
copies = weight_copies()
out = cp.zeros(4096, cp.float32)
copy_gbs = copy_bandwidth_gbs()
res = []
for (TN, KT, S, KB, sp, smem), name in zip(ring_cfgs, names):
    f = kernel(mod, name, smem)
    grid = (N // TN, sp)
    t = time_us(lambda i: f(grid, (128,), (copies[i], np.int32(N), out), shared_mem=smem))
    occ = min(2048 // 128, (228 * 1024) // (smem + 1024))
    res.append((t, f"ring TN={TN:<3} KT={KT:<3} S={S} split={sp:<2} blocks={grid[0]*grid[1]:<5} smem={smem//1024:>3}K blk/SM<={occ:<2}"))
for (TN, U, KB, sp), name in zip(direct_cfgs, names[len(ring_cfgs):]):
    f = kernel(mod, name)
    grid = (N // TN, sp)
    t = time_us(lambda i: f(grid, (128,), (copies[i], np.int32(N), out)))
    res.append((t, f"direct TN={TN:<3} U={U} split={sp:<2} blocks={grid[0]*grid[1]}"))
print_table(res, copy_gbs)
