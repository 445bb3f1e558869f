"""Does 2-D TMA stream a weight matrix faster than 16-byte cp.async?

Same setup as membench.py (W [4096, 6144] fp16, four rotated copies, 128-thread blocks,
S-stage rings of KT x TN tiles, split-K), but each stage is ONE `cp.async.bulk.tensor.2d`
(tensor maps made with the driver's cuTensorMapEncodeTiled through ctypes, kept in global
memory, L2 promotion 256 B), completing on a per-stage mbarrier.  Answer on the H200
(results/membench-h200-2026-11-22.md, TMA section): no -- the best tiles reach 77 % of the
copy bandwidth (15.8 µs), the same ceiling as cp.async (74-81 %).

`--deep`: rings of 32-192 KiB in flight per block, split 1, 2 or 4 (96-block unsplit grids
included), timed by CUDA-graph replay like `mirage-bench` (results/discard-partials-h200-2026-11-25.md:
the best reach 14.2 µs against 13.1 for readbench's 16-byte loads, unsplit 96-block grids
14.6, and deeper rings are slower).

    python benchmarks/tmabench.py [--deep]   # on the GPU machine; CuPy (NVRTC) + libcuda
"""
import ctypes
import itertools
import sys

import cupy as cp
import numpy as np
from streaming import K, N, compile_kernels, copy_bandwidth_gbs, graph_time_us, kernel, print_table, time_us, weight_copies

SRC = r'''
#include <cuda_fp16.h>
__device__ __forceinline__ unsigned sa(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mb_init(unsigned long long* b, int n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(sa(b)), "r"(n)); }
__device__ __forceinline__ void mb_expect(unsigned long long* b, int bytes) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" :: "r"(sa(b)), "r"(bytes) : "memory"); }
__device__ __forceinline__ void tma2d(void* dst, const void* map, int x, int y, unsigned long long* b) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
               :: "r"(sa(dst)), "l"(map), "r"(x), "r"(y), "r"(sa(b)) : "memory"); }
__device__ __forceinline__ void mb_wait(unsigned long long* b, int parity) {
  asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" :: "r"(sa(b)), "r"(parity) : "memory"); }

template <int TN, int KT, int S, int KB>
__global__ void __launch_bounds__(128) tmaring(const unsigned char* __restrict__ maps, int which, float* out) {
  extern __shared__ __align__(1024) unsigned char smem[];
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem);
  __half* buf = reinterpret_cast<__half*>(smem + 1024);
  const void* map = maps + which * 128;
  const int tid = threadIdx.x;
  constexpr int ITERS = KB / KT;
  const int x0 = blockIdx.x * TN, y0 = blockIdx.y * KB;
  if (tid < S) mb_init(&bars[tid], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  auto load = [&](int it, int slot) {
    if (tid == 0) { mb_expect(&bars[slot], KT * TN * 2); tma2d(buf + slot * KT * TN, map, x0, y0 + it * KT, &bars[slot]); }
  };
  for (int p = 0; p < S - 1 && p < ITERS; ++p) load(p, p);
  float acc = 0.f;
  #pragma unroll 1
  for (int it = 0; it < ITERS; ++it) {
    const int slot = it % S;
    mb_wait(&bars[slot], (it / S) & 1);
    __syncthreads();
    if (it + S - 1 < ITERS) load(it + S - 1, (it + S - 1) % S);
    const __half* s = buf + slot * KT * TN;
    for (int c = tid; c < KT * TN / 8; c += 128) acc += __half2float(s[c * 8]);
  }
  if (acc == 12345.f) out[blockIdx.x] = acc;
}
'''
lib = ctypes.CDLL("libcuda.so.1")
enc = lib.cuTensorMapEncodeTiled
enc.restype = ctypes.c_int
copies = weight_copies()
def maps_for(TN, KT):
    host = np.zeros(4 * 128, np.uint8)
    for i, w in enumerate(copies):
        m = (ctypes.c_ubyte * 128)()
        gdim = (ctypes.c_uint64 * 2)(N, K)
        gstr = (ctypes.c_uint64 * 1)(N * 2)
        box = (ctypes.c_uint32 * 2)(TN, KT)
        est = (ctypes.c_uint32 * 2)(1, 1)
        rc = enc(ctypes.byref(m), ctypes.c_int(6), ctypes.c_uint32(2), ctypes.c_void_p(w.data.ptr), gdim, gstr, box, est,
                 ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(3), ctypes.c_int(0))
        if rc != 0: raise RuntimeError(f"cuTensorMapEncodeTiled failed: {rc} (TN={TN} KT={KT})")
        host[i * 128:(i + 1) * 128] = np.frombuffer(bytes(m), np.uint8)
    return cp.asarray(host)
DEEP = "--deep" in sys.argv
cfgs = []
if DEEP:
    for TN, KT, sp, inflight in itertools.product((32, 64, 128), (64, 128, 256), (1, 2, 4), (32, 64, 96, 128, 192)):
        S = inflight * 1024 // (KT * TN * 2)
        blocks = (N // TN) * sp; KB = K // sp; smem = 1024 + S * KT * TN * 2
        if S >= 2 and blocks >= 48 and KB % KT == 0 and KB // KT >= 2 and smem <= 220 * 1024 and (TN, KT, S, KB, sp, smem) not in cfgs:
            cfgs.append((TN, KT, S, KB, sp, smem))
else:
    for TN, KT, S in itertools.product((16, 32, 64, 128, 256), (32, 64, 128, 256), (2, 3, 4, 6)):
        for sp in (1, 2, 4, 8):
            blocks = (N // TN) * sp; KB = K // sp; smem = 1024 + S * KT * TN * 2
            if blocks < 96 or blocks > 1600 or KB % KT or KB // KT < 2 or smem > 200 * 1024: continue
            cfgs.append((TN, KT, S, KB, sp, smem))
names = [f"tmaring<{a},{b},{c},{d}>" for a, b, c, d, *_ in cfgs]
mod = compile_kernels(SRC, names)
out = cp.zeros(4096, cp.float32)
copy_gbs = copy_bandwidth_gbs()
cache = {}
res = []
for (TN, KT, S, KB, sp, smem), name in zip(cfgs, names):
    if (TN, KT) not in cache: cache[(TN, KT)] = maps_for(TN, KT)
    mp = cache[(TN, KT)]
    f = kernel(mod, name, smem)
    grid = (N // TN, sp)
    timer = graph_time_us if DEEP else time_us
    t = timer(lambda i: f(grid, (128,), (mp, np.int32(i), out), shared_mem=smem))
    res.append((t, f"tma TN={TN:<3} KT={KT:<3} S={S} split={sp} blocks={grid[0]*grid[1]:<5} smem={smem//1024}K"))
print_table(res, copy_gbs, top=40, bottom=5)
