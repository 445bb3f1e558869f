"""Does the bulk copy engine stream a weight matrix faster than 16-byte cp.async?

Same setup as membench.py (W [4096, 6144] fp16, four rotated copies, 128-thread blocks,
S-stage rings of KT x TN tiles, split-K), but each tile row is one 1-D `cp.async.bulk`
(global -> shared, completing on a per-stage mbarrier with expect_tx), issued by the first
warp.  Answer on the H200 (results/membench-h200-2026-11-22.md, bulk section): no -- at most
59 % of the copy bandwidth against 74-81 % for cp.async; one bulk op per 32-256-byte row is too
fine-grained.  2-D tensor-map TMA (one instruction per tile) is not covered here.

    python benchmarks/bulkbench.py      # on the GPU machine; CuPy (NVRTC) only
"""
import itertools

import cupy as cp
import numpy as np
from streaming import K, N, compile_kernels, copy_bandwidth_gbs, kernel, print_table, time_us, weight_copies

SRC = r'''
#include <cuda_fp16.h>
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(unsigned long long* b, int n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(b)), "r"(n)); }
__device__ __forceinline__ void mb_expect(unsigned long long* b, int bytes) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" :: "r"(sa(b)), "r"(bytes) : "memory"); }
__device__ __forceinline__ void bulk(void* dst, const void* src, int bytes, unsigned long long* b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(b)) : "memory"); }
__device__ __forceinline__ void mb_wait(unsigned long long* b, int parity) {
  asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" :: "r"(sa(b)), "r"(parity) : "memory"); }

template <int TN, int KT, int S, int KB>
__global__ void __launch_bounds__(128) bulkring(const __half* __restrict__ W, int N, float* out) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem);
  __half* buf = reinterpret_cast<__half*>(smem + 128);
  const int tid = threadIdx.x;
  constexpr int ITERS = KB / KT;
  const __half* base = W + (size_t)blockIdx.y * KB * N + blockIdx.x * TN;
  if (tid < S) mb_init(&bars[tid], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  auto load = [&](int it, int slot) {
    if (tid < 32) {
      if (tid == 0) mb_expect(&bars[slot], KT * TN * 2);
      __syncwarp();
      const __half* g = base + (size_t)it * KT * N;
      __half* s = buf + slot * KT * TN;
      for (int r = tid; r < KT; r += 32) bulk(s + r * TN, g + (size_t)r * N, TN * 2, &bars[slot]);
    }
  };
  for (int p = 0; p < S - 1 && p < ITERS; ++p) load(p, p);
  float acc = 0.f;
  #pragma unroll 1
  for (int it = 0; it < ITERS; ++it) {
    const int slot = it % S;
    mb_wait(&bars[slot], (it / S) & 1);
    __syncthreads();  // everyone is done with the slot refilled next
    if (it + S - 1 < ITERS) load(it + S - 1, (it + S - 1) % S);
    const __half* s = buf + slot * KT * TN;
    for (int c = tid; c < KT * TN / 8; c += 128) acc += __half2float(s[c * 8]);
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
}
'''
cfgs = []
for TN, KT, S in itertools.product((16, 32, 64, 128, 256), (64, 128, 256), (2, 3, 4, 6)):
    for sp in (1, 2, 4, 8):
        blocks = (N // TN) * sp
        KB = K // sp
        smem = 128 + S * KT * TN * 2
        if blocks < 96 or blocks > 1600 or KB % KT or KB // KT < 2 or smem > 200 * 1024: continue
        cfgs.append((TN, KT, S, KB, sp, smem))
names = [f"bulkring<{a},{b},{c},{d}>" for a, b, c, d, *_ in cfgs]
mod = compile_kernels(SRC, names)
copies = weight_copies()
out = cp.zeros(4096, cp.float32)
copy_gbs = copy_bandwidth_gbs()
res = []
for (TN, KT, S, KB, sp, smem), name in zip(cfgs, names):
    f = kernel(mod, name, smem)
    grid = (N // TN, sp)
    t = time_us(lambda i: f(grid, (128,), (copies[i], np.int32(N), out), shared_mem=smem))
    res.append((t, f"bulk TN={TN:<3} KT={KT:<3} S={S} split={sp} blocks={grid[0]*grid[1]:<5} smem={smem//1024}K"))
print_table(res, copy_gbs, top=40, bottom=5)
