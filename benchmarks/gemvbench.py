"""Hand-written rms_norm(X) @ W kernels: how close can the whole rmsnorm workload get to the
read ceiling (readbench.py) when W streams through registers in the shape readbench reads it?

Both kernels compute Y = rms_norm(X) @ W exactly as the rmsnorm workloads do (X [M, 4096],
W [4096, 6144] fp16, no epsilon, no gain): split-K over blockIdx.y, fp32 partials plus each
split's sum of squares in a scratch buffer, and the last block of each column tile (arrival
counter, as our `tb.grid_sum`) sums the partials, scales by 1/rms and stores fp16.

- `fma_gemv<M, TN, THREADS, U, KB>` (CUDA cores, for M <= 4): a lane owns 8 consecutive
  columns; each 16-byte load of a W row gives 8 * M FMAs with the row's X values (in shared
  memory as fp32).  Rows go U at a time, the next U loaded before the current ones are used.
- `mma_gemv<M, WARPS, U, KB>` (tensor cores, M <= 16): a warp owns 64 columns and 16 K rows
  per step; lane (g, t) loads rows 4t..4t+3 of its step at columns 8g..8g+7 (four 16-byte
  loads, each W row a whole 128-byte line across 8 lanes), byte-permutes them into k-pair
  registers and issues 8 m16n8k16 MMAs whose k and n orders are permuted to match; A (X) comes
  from shared memory.  Warps split the block's K rows and are summed in shared memory.

`partials_only` builds skip the grid sum (partials written, nothing combined) to show what the
combine costs.  Checked against float64 on the host with a NaN-poisoned Y before timing.

    python benchmarks/gemvbench.py        # on the GPU machine; needs only CuPy (NVRTC)

Results: benchmarks/results/gemvbench-h200-2026-11-25.md. Neither kernel beats the generated
ones, because the combine's round trips land after the stream ends.
"""
import itertools
import sys

import cupy as cp
import numpy as np
from streaming import TILE_READ_SRC, W_BYTES, K, N, compile_kernels, copy_bandwidth_gbs, graph_time_us, kernel, weight_copies

SRC = r'''
#include <cuda_fp16.h>

__device__ __forceinline__ uint4 ld_stream(const __half* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// Store the block's [M][TN] partial and its M sums of squares; the last of the S blocks of
// column tile `tile` sums all S records, scales by 1/rms and writes Y.  Returns on other blocks.
template <int M, int TN, int THREADS, bool PARTIALS_ONLY>
__device__ __forceinline__ void grid_combine(const float* red_sum, const float* ssq, float* scratch,
                                             unsigned* counters, __half* Y, int n, int tile, int split, int S) {
  constexpr int REC = M * TN + M;
  float* mine = scratch + ((size_t)tile * S + split) * REC;
  for (int i = threadIdx.x; i < M * TN; i += THREADS) mine[i] = red_sum[i];
  if (threadIdx.x < M) mine[M * TN + threadIdx.x] = ssq[threadIdx.x];
  if (PARTIALS_ONLY) return;
  // arrival as our grid_arrive (codegen/include/mirage_xdsl/grid.cuh): block barrier, then
  // one acq_rel atomic at GPU scope; no sequentially consistent __threadfence
  __shared__ unsigned is_last;
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned prev;
    asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(prev) : "l"(counters + tile) : "memory");
    is_last = prev == (unsigned)S - 1u;
    if (is_last) atomicExch(counters + tile, 0u);  // re-armed for the next launch
  }
  __syncthreads();
  if (!is_last) return;
  const float* all = scratch + (size_t)tile * S * REC;
  for (int i = threadIdx.x; i < M * TN; i += THREADS) {
    const int m = i / TN, c = i % TN;
    float acc = 0.f, ss = 0.f;
    #pragma unroll 32
    for (int s = 0; s < S; ++s) {
      acc += __ldcg(all + (size_t)s * REC + i);
      ss += __ldcg(all + (size_t)s * REC + M * TN + m);
    }
    Y[(size_t)m * n + (size_t)tile * TN + c] = __float2half(acc * rsqrtf(ss * (1.0f / 4096.0f)));
  }
}

template <int M, int TN, int THREADS, int U, int KB, bool PARTIALS_ONLY>
__global__ void __launch_bounds__(THREADS) fma_gemv(const __half* __restrict__ X, const __half* __restrict__ W,
    __half* __restrict__ Y, float* __restrict__ scratch, unsigned* __restrict__ counters, int k_total, int n) {
  constexpr int L = TN / 8, R = THREADS / L, NW = THREADS / 32;
  static_assert(THREADS % L == 0 && KB % (R * U) == 0 && 32 % L == 0, "tile shape");
  __shared__ float xs[KB][M];
  __shared__ float red[NW][M * TN];
  __shared__ float ssq_w[NW][M];
  __shared__ float out_sum[M * TN];
  __shared__ float ssq[M];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, q = tid % L, r0 = tid / L;
  const int tile = blockIdx.x, split = blockIdx.y, S = gridDim.y, k0 = split * KB;
  const __half* wp = W + (size_t)(k0 + r0) * n + (size_t)tile * TN + q * 8;
  uint4 v[U], nxt[U];
  #pragma unroll
  for (int u = 0; u < U; ++u) v[u] = ld_stream(wp + (size_t)(u * R) * n);
  for (int i = tid; i < M * KB / 8; i += THREADS) {  // X[:, k0 : k0 + KB] as fp32, [k][m]
    const int m = i / (KB / 8), k = 8 * (i % (KB / 8));
    uint4 raw = *reinterpret_cast<const uint4*>(X + (size_t)m * k_total + k0 + k);
    const __half* h = reinterpret_cast<const __half*>(&raw);
    #pragma unroll
    for (int e = 0; e < 8; ++e) xs[k + e][m] = __half2float(h[e]);
  }
  __syncthreads();
  float acc[M][8];
  #pragma unroll
  for (int m = 0; m < M; ++m)
    #pragma unroll
    for (int j = 0; j < 8; ++j) acc[m][j] = 0.f;
  #pragma unroll 1
  for (int r = r0; r < KB; r += R * U) {
    const bool more = r + R * U < KB;
    #pragma unroll
    for (int u = 0; u < U; ++u)
      if (more) nxt[u] = ld_stream(wp + (size_t)(r - r0 + R * U + u * R) * n);
    #pragma unroll
    for (int u = 0; u < U; ++u) {
      const __half2* h = reinterpret_cast<const __half2*>(&v[u]);
      float x[M];
      #pragma unroll
      for (int m = 0; m < M; ++m) x[m] = xs[r + u * R][m];
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        float2 f = __half22float2(h[j]);
        #pragma unroll
        for (int m = 0; m < M; ++m) {
          acc[m][2 * j] = fmaf(x[m], f.x, acc[m][2 * j]);
          acc[m][2 * j + 1] = fmaf(x[m], f.y, acc[m][2 * j + 1]);
        }
      }
    }
    #pragma unroll
    for (int u = 0; u < U; ++u) v[u] = nxt[u];
  }
  // lanes of a warp that share columns (same q) first, then the warps in shared memory
  float ss[M];
  #pragma unroll
  for (int m = 0; m < M; ++m) {
    #pragma unroll
    for (int j = 0; j < 8; ++j)
      #pragma unroll
      for (int off = L; off < 32; off *= 2) acc[m][j] += __shfl_xor_sync(0xffffffffu, acc[m][j], off);
    ss[m] = 0.f;  // this split's sum of squares, off the streaming loop
    for (int k = tid; k < KB; k += THREADS) ss[m] += xs[k][m] * xs[k][m];
    #pragma unroll
    for (int off = 16; off > 0; off /= 2) ss[m] += __shfl_xor_sync(0xffffffffu, ss[m], off);
  }
  if (lane < L) {
    #pragma unroll
    for (int m = 0; m < M; ++m)
      #pragma unroll
      for (int j = 0; j < 8; ++j) red[warp][m * TN + q * 8 + j] = acc[m][j];
  }
  if (lane == 0) {
    #pragma unroll
    for (int m = 0; m < M; ++m) ssq_w[warp][m] = ss[m];
  }
  __syncthreads();
  for (int i = tid; i < M * TN; i += THREADS) {
    float s = 0.f;
    #pragma unroll
    for (int w = 0; w < NW; ++w) s += red[w][i];
    out_sum[i] = s;
  }
  if (tid < M) {
    float s = 0.f;
    #pragma unroll
    for (int w = 0; w < NW; ++w) s += ssq_w[w][tid];
    ssq[tid] = s;
  }
  __syncthreads();
  grid_combine<M, TN, THREADS, PARTIALS_ONLY>(out_sum, ssq, scratch, counters, Y, n, tile, split, S);
}

__device__ __forceinline__ void mma16816(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// W rows (4t .. 4t+3) x columns (8g .. 8g+7) of one 16-row step, as four 16-byte loads
struct Step { uint4 row[4]; };

template <int M, int WARPS, int U, int KB, bool PARTIALS_ONLY>
__global__ void __launch_bounds__(WARPS * 32) mma_gemv(const __half* __restrict__ X, const __half* __restrict__ W,
    __half* __restrict__ Y, float* __restrict__ scratch, unsigned* __restrict__ counters, int k_total, int n) {
  constexpr int TN = 64, THREADS = WARPS * 32, STEPS = KB / 16, PER_WARP = STEPS / WARPS;
  static_assert(STEPS % WARPS == 0 && PER_WARP % U == 0 && M <= 16, "tile shape");
  __shared__ __align__(16) __half xs[M][KB + 16];
  __shared__ float red[WARPS][M * TN];
  __shared__ float ssq_w[1][M];
  __shared__ float out_sum[M * TN];
  __shared__ float ssq[M];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int tile = blockIdx.x, split = blockIdx.y, S = gridDim.y, k0 = split * KB;
  // warp w takes steps w, w + WARPS, ...; lane rows 4t..4t+3 of a step, columns 8g..8g+7
  const __half* wp = W + (size_t)(k0 + warp * 16 + 4 * t) * n + (size_t)tile * TN + 8 * g;
  const size_t step_stride = (size_t)WARPS * 16 * n;
  Step cur[U], nxt[U];
  #pragma unroll
  for (int u = 0; u < U; ++u)
    #pragma unroll
    for (int i = 0; i < 4; ++i) cur[u].row[i] = ld_stream(wp + u * step_stride + (size_t)i * n);
  for (int i = tid; i < M * KB / 8; i += THREADS) {  // X[:, k0 : k0 + KB], [m][k]
    const int m = i / (KB / 8), k = 8 * (i % (KB / 8));
    *reinterpret_cast<uint4*>(&xs[m][k]) = *reinterpret_cast<const uint4*>(X + (size_t)m * k_total + k0 + k);
  }
  __syncthreads();
  float acc[8][4];
  #pragma unroll
  for (int j = 0; j < 8; ++j)
    #pragma unroll
    for (int c = 0; c < 4; ++c) acc[j][c] = 0.f;
  #pragma unroll 1
  for (int s = 0; s < PER_WARP; s += U) {
    const bool more = s + U < PER_WARP;
    #pragma unroll
    for (int u = 0; u < U; ++u)
      #pragma unroll
      for (int i = 0; i < 4; ++i)
        if (more) nxt[u].row[i] = ld_stream(wp + (s + U + u) * step_stride + (size_t)i * n);
    #pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kk = (warp + (s + u) * WARPS) * 16 + 4 * t;  // block-local K row of this lane
      uint2 xa = g < M ? *reinterpret_cast<const uint2*>(&xs[g][kk]) : make_uint2(0u, 0u);
      uint2 xb = g + 8 < M ? *reinterpret_cast<const uint2*>(&xs[g + 8][kk]) : make_uint2(0u, 0u);
      const unsigned* r0 = reinterpret_cast<const unsigned*>(&cur[u].row[0]);
      const unsigned* r1 = reinterpret_cast<const unsigned*>(&cur[u].row[1]);
      const unsigned* r2 = reinterpret_cast<const unsigned*>(&cur[u].row[2]);
      const unsigned* r3 = reinterpret_cast<const unsigned*>(&cur[u].row[3]);
      #pragma unroll
      for (int j = 0; j < 8; ++j) {
        const unsigned sel = (j & 1) ? 0x7632u : 0x5410u;
        unsigned b0 = __byte_perm(r0[j / 2], r1[j / 2], sel);
        unsigned b1 = __byte_perm(r2[j / 2], r3[j / 2], sel);
        mma16816(acc[j], xa.x, xb.x, xa.y, xb.y, b0, b1);
      }
    }
    #pragma unroll
    for (int u = 0; u < U; ++u) cur[u] = nxt[u];
  }
  // acc[j][0..1] = Y[g][8*(2t) + j], Y[g][8*(2t+1) + j]; acc[j][2..3] the same for row g + 8
  #pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (g < M) {
      red[warp][g * TN + 16 * t + j] = acc[j][0];
      red[warp][g * TN + 16 * t + 8 + j] = acc[j][1];
    }
    if (g + 8 < M) {
      red[warp][(g + 8) * TN + 16 * t + j] = acc[j][2];
      red[warp][(g + 8) * TN + 16 * t + 8 + j] = acc[j][3];
    }
  }
  for (int m = warp; m < M; m += WARPS) {  // this split's sums of squares, off the streaming loop
    float ss = 0.f;
    for (int k = lane; k < KB; k += 32) {
      const float x = __half2float(xs[m][k]);
      ss += x * x;
    }
    #pragma unroll
    for (int off = 16; off > 0; off /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    if (lane == 0) ssq_w[0][m] = ss;
  }
  __syncthreads();
  for (int i = tid; i < M * TN; i += THREADS) {
    float s = 0.f;
    #pragma unroll
    for (int w = 0; w < WARPS; ++w) s += red[w][i];
    out_sum[i] = s;
  }
  if (tid < M) ssq[tid] = ssq_w[0][tid];
  __syncthreads();
  grid_combine<M, TN, THREADS, PARTIALS_ONLY>(out_sum, ssq, scratch, counters, Y, n, tile, split, S);
}

''' + TILE_READ_SRC


Config = tuple[str, tuple[int, int], int, int, int]  # instance, grid, threads, splits, columns per block


def fma_configs(m: int) -> list[Config]:
    """(template instance, grid, threads, splits) of the CUDA-core kernel for M = m."""
    out = []
    for tn, threads, u, split in itertools.product((64, 128, 256), (128, 256), (2, 4, 8), (4, 8, 16, 32)):
        lanes = tn // 8
        rows = threads // lanes
        kb = K // split
        if kb % (rows * u) or threads % lanes:
            continue
        blocks = (N // tn) * split
        smem = kb * m * 4 + (threads // 32) * m * tn * 4 + m * tn * 4
        if not 384 <= blocks <= 3072 or smem > 48 * 1024:
            continue
        out.append((f"fma_gemv<{m},{tn},{threads},{u},{kb},false>", (N // tn, split), threads, split, tn))
    return out


def mma_configs(m: int) -> list[Config]:
    """The same for the tensor-core kernel (64 columns per block)."""
    out = []
    for warps, u, split in itertools.product((2, 4, 8), (1, 2, 4), (4, 8, 16, 32)):
        kb = K // split
        steps = kb // 16
        smem = m * (kb + 16) * 2 + warps * m * 64 * 4 + m * 64 * 4
        if steps % warps or (steps // warps) % u or smem > 48 * 1024:
            continue
        out.append((f"mma_gemv<{m},{warps},{u},{kb},false>", (N // 64, split), warps * 32, split, 64))
    return out


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    rms = np.sqrt((x64 * x64).mean(axis=1, keepdims=True))
    return (x64 / rms) @ w.astype(np.float64)


def main() -> None:
    copies = weight_copies()
    copy_gbs = copy_bandwidth_gbs()
    w_host = cp.asnumpy(copies[0]).reshape(K, N)
    rows = []
    for m, label in ((2, "bs1"), (16, "bs8")):
        cfgs = (fma_configs(m) if m <= 4 else []) + mma_configs(m)
        names = [c[0] for c in cfgs] + [c[0].replace(",false>", ",true>") for c in cfgs]
        mod = compile_kernels(SRC, names)
        xs = [cp.random.uniform(-1, 1, (m, K), dtype=cp.float32).astype(cp.float16) for _ in copies]
        y = cp.empty((m, N), cp.float16)
        scratch = cp.empty(32 * N * (m + 1) * 4, cp.float32)
        counters = cp.zeros(N // 64, cp.uint32)
        ref = reference(cp.asnumpy(xs[0]), w_host)
        for name, grid, threads, split, tn in cfgs:
            for partials_only in (False, True):
                inst = name.replace(",false>", ",true>") if partials_only else name
                f = kernel(mod, inst)
                launch = lambda i, f=f, grid=grid, threads=threads: f(grid, (threads,), (xs[i], copies[i], y, scratch, counters, np.int32(K), np.int32(N)))
                if not partials_only:
                    y.fill(cp.nan)
                    launch(0)
                    err = float(np.abs(cp.asnumpy(y).astype(np.float64) - ref).max() / np.abs(ref).max())
                    if not err < 1e-2:
                        print(f"FAIL {label} {inst}: rel err {err}", file=sys.stderr)
                        continue
                t = graph_time_us(launch)
                rows.append((label, t, inst, grid[0] * grid[1], "partials only" if partials_only else "full"))
        print(f"# {label}: {len(cfgs)} configurations timed", file=sys.stderr, flush=True)
    mod = compile_kernels(SRC, ["tile<128,4,128>", "tile<64,8,512>"])
    sink = cp.zeros(1 << 16, cp.float32)
    for inst, grid, threads in (("tile<128,4,128>", (48, 32), 256), ("tile<64,8,512>", (96, 8), 128)):
        f = kernel(mod, inst)
        t = graph_time_us(lambda i, f=f, grid=grid, threads=threads: f(grid, (threads,), (copies[i], np.int32(N), sink)))
        rows.append(("read", t, inst, grid[0] * grid[1], "W only"))
    print(f"copy bandwidth (read+write): {copy_gbs:.0f} GB/s; W {W_BYTES / 1e6:.1f} MB")
    for label in ("read", "bs1", "bs8"):
        for kind in ("W only", "full", "partials only"):
            sel = sorted(r for r in rows if r[0] == label and r[4] == kind)
            for lab, t, inst, blocks, _ in sel[:8]:
                print(f"{lab:4} {kind:13} {t:6.1f} us {100 * W_BYTES / t / 1e3 / copy_gbs:5.1f}%  blocks={blocks:<5} {inst}")


if __name__ == "__main__":
    main()
