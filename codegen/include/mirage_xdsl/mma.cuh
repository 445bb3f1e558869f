// mirage_xdsl device library: threadblock matmul C(MxN) += A(MxK) * B(KxN) over shared tiles.
//
// Tensor-core path (`MmaAcc`, fp16/bf16 operands, fp32 accumulators): `mma.sync` m16n8k16
// (or m16n8k8 when K <= 8).  Warp w < TGM*TGN owns the atom blocks (mb, nb) with
// mb = w % TGM (mod TGM) and nb = w / TGM (mod TGN); each lane keeps FM x FN x 4 floats.
// Operand fragments are read from shared memory through the tiles' own layouts (any
// strides, swizzle included) with zero fill outside M/N/K, so tiles that do not divide the
// atom need no padding.  Register fragment layout (PTX ISA, mma.m16n8k16, .f16):
//   A: a0 (g, 2t..2t+1)  a1 (g+8, 2t..)  a2 (g, 2t+8..)  a3 (g+8, 2t+8..)   [row, k]
//   B: b0 (2t..2t+1, g)  b1 (2t+8.., g)                                     [k, col]
//   C: c0,c1 (g, 2t..2t+1)  c2,c3 (g+8, 2t..2t+1)                            [row, col]
// with g = lane / 4, t = lane % 4 (m16n8k8 uses a0, a1 and b0 only).
//
// Sliced K: with KS > 1 the block's NT/32 warps are KS groups of TGM*TGN warps; group s
// runs the k-steps s, s + KS, ... of every call into its own partial accumulator (the warps
// a thr_layout smaller than the block would leave idle share the K loop instead, which
// also shortens each warp's dependent mma chain), and mma_store sums the groups through
// `scratch` ((KS-1) * TGM*TGN * 32 * FM*FN*4 floats, `MmaAcc::kScratchFloats`) before the
// epilogue.  This is CUTLASS's "sliced-K" warp arrangement.
//
// CUDA-core fallback (`FmaAcc`, any element types): thread tid owns outputs tid + j*NT.
#pragma once
#include "core.cuh"

namespace mx {

template <int M, int N, int TGM, int TGN, int AK, int KSLICES = 1>
struct MmaAcc {
  static constexpr int MB = (M + 15) / 16;
  static constexpr int NB = (N + 7) / 8;
  static constexpr int FM = (MB + TGM - 1) / TGM;
  static constexpr int FN = (NB + TGN - 1) / TGN;
  static constexpr int KS = KSLICES;
  static constexpr int kScratchFloats = (KS - 1) * TGM * TGN * 32 * FM * FN * 4;
  float c[FM][FN][4];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
      for (int j = 0; j < FN; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) c[i][j][r] = 0.0f;
  }
};

template <bool BF16>
__device__ __forceinline__ void mma_16x8x16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef MX_HOST
  mxh::mma(d, a, b, BF16, 16);
#else
  if constexpr (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

template <bool BF16>
__device__ __forceinline__ void mma_16x8x8(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef MX_HOST
  mxh::mma(d, a, b, BF16, 8);
#else
  if constexpr (BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  }
#endif
}

// ldmatrix: N (1, 2, 4) 8x8 matrices of 16-bit elements; lane l gives the shared address of
// row l % 8 of matrix l / 8 (8 contiguous elements, 16-B aligned).  Lane l receives, in
// register q, elements (l/4, 2(l%4)) and (l/4, 2(l%4)+1) of matrix q, or with TRANS the
// elements (2(l%4), l/4) and (2(l%4)+1, l/4) (low half first).
template <int N, bool TRANS>
__device__ __forceinline__ void ldsm(unsigned (&r)[N], const void* row) {
#ifdef MX_HOST
  mxh::ldmatrix(r, N, TRANS, row);
#else
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (N == 4 && TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  } else if constexpr (N == 4) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  } else if constexpr (N == 2 && TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  } else {
    static_assert(N == 2, "ldsm: x2 or x4");
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(a));
  }
#endif
}

// Two consecutive-k elements (k, k+1) of a matrix view as one packed 32-bit register
// (element k in the low half), zero outside rows < R and k < KK.  PAIR: the view's k
// stride is 1, so an in-bounds pair is one aligned 32-bit load.
template <class LV, bool PAIR, int R, int KK, class T>
__device__ __forceinline__ unsigned ld_pair(const T* p, int r, int k) {
  if (r >= R) return 0u;
  if constexpr (PAIR) {
    if (k + 1 < KK) return *reinterpret_cast<const unsigned*>(p + LV::off(r, k));
  }
  const unsigned lo = k < KK ? bits16(p[LV::off(r, k)]) : 0u;
  const unsigned hi = k + 1 < KK ? bits16(p[LV::off(r, k + 1)]) : 0u;
  return lo | (hi << 16);
}

// How a fragment operand is read from shared memory (chosen by the printer per operand):
enum : int {
  kLdElem = 0,   // 16-bit loads, any layout
  kLdPair = 1,   // 32-bit loads of (k, k+1): k stride 1
  kLdsm = 2,     // ldmatrix, rows = m (or n), 8 contiguous k: k stride 1, K % 8 == 0
  kLdsmT = 3,    // ldmatrix.trans, rows = k, 8 contiguous m (or n): m (n) stride 1
};

// The operand fragments of k-step `k0` of warp (wm, wn).
template <class Acc, int M, int N, int K, int TGM, int TGN, int AK, class LA, class LB, int AM, int BM, class T>
__device__ __forceinline__ void mma_fragments(unsigned (&af)[Acc::FM][4], unsigned (&bfr)[Acc::FN][2], const T* a, const T* b,
                                              const void* zero, int lane, int wm, int wn, int k0) {
  static_cast<void>(zero);
  const int g = lane >> 2, t = lane & 3;
  const int q = lane >> 3, i8 = lane & 7;
  // Whole fragments only (every row / column / k of every fragment inside the tile): no
  // select between the operand and the zero row.  Besides saving the compares, this avoids
  // a ptxas (CUDA 13.0) miscompile: with the select, the register holding the shared base
  // (the zero row's address) was overwritten by a predicated fragment address and later
  // reused as the base by the elementwise pass after the matmul -- out-of-bounds shared
  // reads (fuzz seed 2 graph 446, test/data/fuzz_2_446.mlir).
  constexpr bool K_WHOLE = K % 16 == 0;
  constexpr bool A_WHOLE = K_WHOLE && Acc::FM * TGM * 16 <= M;
  constexpr bool B_WHOLE = K_WHOLE && Acc::FN * TGN * 8 <= N;
#pragma unroll
  for (int i = 0; i < Acc::FM; ++i) {
    const int m0 = (wm + i * TGM) * 16;
    if constexpr (AK == 16 && AM == kLdsm) {
      const int m = m0 + i8 + 8 * (q & 1), k = k0 + 8 * (q >> 1);
      ldsm<4, false>(af[i], (A_WHOLE || (m < M && k < K)) ? static_cast<const void*>(a + LA::off(m, k)) : zero);
    } else if constexpr (AK == 16 && AM == kLdsmT) {
      const int m = m0 + 8 * (q & 1), k = k0 + i8 + 8 * (q >> 1);
      ldsm<4, true>(af[i], (A_WHOLE || (m < M && k < K)) ? static_cast<const void*>(a + LA::off(m, k)) : zero);
    } else {
      const int r = m0 + g;
      af[i][0] = ld_pair<LA, AM == kLdPair, M, K>(a, r, k0 + 2 * t);
      af[i][1] = ld_pair<LA, AM == kLdPair, M, K>(a, r + 8, k0 + 2 * t);
      if constexpr (AK == 16) {
        af[i][2] = ld_pair<LA, AM == kLdPair, M, K>(a, r, k0 + 2 * t + 8);
        af[i][3] = ld_pair<LA, AM == kLdPair, M, K>(a, r + 8, k0 + 2 * t + 8);
      } else {
        af[i][2] = af[i][3] = 0u;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < Acc::FN; ++j) {
    const int n0 = (wn + j * TGN) * 8;
    if constexpr (AK == 16 && BM == kLdsm) {
      const int n = n0 + i8, k = k0 + 8 * (q & 1);
      ldsm<2, false>(bfr[j], (B_WHOLE || (n < N && k < K)) ? static_cast<const void*>(b + LB::off(n, k)) : zero);
    } else if constexpr (AK == 16 && BM == kLdsmT) {
      const int k = k0 + i8 + 8 * (q & 1);
      ldsm<2, true>(bfr[j], (B_WHOLE || (n0 < N && k < K)) ? static_cast<const void*>(b + LB::off(n0, k)) : zero);
    } else {
      const int n = n0 + g;
      bfr[j][0] = ld_pair<LB, BM == kLdPair, N, K>(b, n, k0 + 2 * t);
      if constexpr (AK == 16) {
        bfr[j][1] = ld_pair<LB, BM == kLdPair, N, K>(b, n, k0 + 2 * t + 8);
      } else {
        bfr[j][1] = 0u;
      }
    }
  }
}

// acc += the product of one k-step's fragments (atom blocks past the tile are skipped; the
// condition is warp-uniform).
template <class Acc, int TGM, int TGN, int AK, bool BF16>
__device__ __forceinline__ void mma_step(Acc& acc, const unsigned (&af)[Acc::FM][4], const unsigned (&bfr)[Acc::FN][2], int wm,
                                         int wn) {
#pragma unroll
  for (int i = 0; i < Acc::FM; ++i) {
#pragma unroll
    for (int j = 0; j < Acc::FN; ++j) {
      if (wm + i * TGM < Acc::MB && wn + j * TGN < Acc::NB) {
        if constexpr (AK == 16) {
          mma_16x8x16<BF16>(acc.c[i][j], af[i], bfr[j]);
        } else {
          mma_16x8x8<BF16>(acc.c[i][j], af[i], bfr[j]);
        }
      }
    }
  }
}

// acc += A * B.  LA: view (row m, col k) of A; LB: view (row n, col k) of B, i.e. B^T, so
// both operands are addressed (mn, k).  AM/BM: how each operand is read (above).  With
// ldmatrix every 8-element row segment that starts outside the tile reads the zeroed
// 16-byte block `zero` instead (ldmatrix is warp-wide, so lanes cannot be masked); a
// segment that starts inside may run past M or N into the row padding, which only feeds
// accumulator rows/columns that mma_store drops.
// When a warp's fragments of the whole call fit in kPreloadRegs registers, every fragment
// load is issued before the first mma: ptxas otherwise interleaved them step by step in
// some kernels (one ldmatrix -> mma latency per k-step): the generated late-finisher kernel
// of rmsnorm bs8 took 14.1-14.3 us on an H200 with that schedule and 13.8-13.9 with this one
// (a one-step-ahead pipeline measured the same); c0xr did not move (2026-11-25).
constexpr int kPreloadRegs = 48;
template <int NT, class Acc, int M, int N, int K, int TGM, int TGN, int AK, bool BF16, class LA, class LB, int AM,
          int BM, class T>
__device__ __forceinline__ void mma_run(Acc& acc, const T* a, const T* b, const void* zero, int tid) {
  constexpr int KS = Acc::KS;
  constexpr int STEPS = (K + AK - 1) / AK;
  constexpr int MINE = (STEPS + KS - 1) / KS;  // k-steps per slice
  const int warp = tid >> 5;
  if (warp >= TGM * TGN * KS) return;
  const int slice = warp / (TGM * TGN);
  const int lane = tid & 31;
  const int wm = warp % TGM, wn = (warp / TGM) % TGN;
  if constexpr (MINE * (Acc::FM * 4 + Acc::FN * 2) <= kPreloadRegs) {
    unsigned af[MINE][Acc::FM][4];
    unsigned bfr[MINE][Acc::FN][2];
#pragma unroll
    for (int u = 0; u < MINE; ++u) {
      const int step = slice + u * KS;
      if (STEPS % KS == 0 || step < STEPS)
        mma_fragments<Acc, M, N, K, TGM, TGN, AK, LA, LB, AM, BM>(af[u], bfr[u], a, b, zero, lane, wm, wn, step * AK);
    }
#pragma unroll
    for (int u = 0; u < MINE; ++u) {
      const int step = slice + u * KS;
      if (STEPS % KS == 0 || step < STEPS) mma_step<Acc, TGM, TGN, AK, BF16>(acc, af[u], bfr[u], wm, wn);
    }
  } else {
    // fully unrolled when short, so every ldmatrix can be issued ahead of the mma chain
#pragma unroll(MINE <= 16 ? MINE : 2)
    for (int u = 0; u < MINE; ++u) {
      const int step = slice + u * KS;
      if (STEPS % KS != 0 && step >= STEPS) break;
      unsigned af[Acc::FM][4];
      unsigned bfr[Acc::FN][2];
      mma_fragments<Acc, M, N, K, TGM, TGN, AK, LA, LB, AM, BM>(af, bfr, a, b, zero, lane, wm, wn, step * AK);
      mma_step<Acc, TGM, TGN, AK, BF16>(acc, af, bfr, wm, wn);
    }
  }
}

// ---- row sums of squares on the tensor cores (rms_norm's sum of x^2 beside its matmul) ----

// sum_k A[r, k]^2 for the 16 rows r of A [16, K] (fp16/bf16, view LA (row, k), ldmatrix
// readable like mma_run's kLdsm), as the diagonal of A A^T.  The B operand of A^T's n-block
// b (A's rows 8b..8b+7) is, register for register, A's own fragment: (a0, a2) for b = 0 and
// (a1, a3) for b = 1 (mma.m16n8k16 fragment layouts above), so a k-step costs one ldmatrix
// and two mma.sync and no elementwise pass over the tile.  Warp w adds k-steps w, w + NT/32,
// ... of each call.  fp16/bf16 squares are exact in fp32, so only the summation order
// differs from an elementwise sum.  Measured on rmsnorm bs8 (H200, 2026-11-25): 0.3-0.4 us
// less than the elementwise sum of squares.
template <int NT, int K, bool BF16, class LA>
struct SquareSumMma {
  static_assert(K % 16 == 0, "whole k16 steps");
  float c[2][4];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int r = 0; r < 4; ++r) c[b][r] = 0.0f;
  }
  template <class T>
  __device__ __forceinline__ void add(const T* a, int tid) {
    constexpr int STEPS = K / 16, WARPS = NT / 32, MINE = (STEPS + WARPS - 1) / WARPS;
    const int lane = tid & 31, q = lane >> 3, i8 = lane & 7;
    // a compile-time trip count (a loop from the warp index was kept as a loop, 4x unrolled)
#pragma unroll
    for (int u = 0; u < MINE; ++u) {
      const int step = (tid >> 5) + u * WARPS;
      if (STEPS % WARPS != 0 && step >= STEPS) break;
      unsigned f[4];
      ldsm<4, false>(f, a + LA::off(i8 + 8 * (q & 1), step * 16 + 8 * (q >> 1)));
      const unsigned b0[2] = {f[0], f[2]}, b1[2] = {f[1], f[3]};
      mma_16x8x16<BF16>(c[0], f, b0);
      mma_16x8x16<BF16>(c[1], f, b1);
    }
  }
  // This warp's share of row (lane % 16)'s sum in lanes 0-15, 0 in lanes 16-31: summed over
  // a block's threads holding rows tid % 16, each row's total is counted once.  The share of
  // row g (and g + 8) sits in lane 4g + g/2, at accumulator column g (diagonal).
  __device__ __forceinline__ float row_share(int tid) const {
    const int lane = tid & 31, g = (lane >> 2) & 7;
    const float lo = (g & 1) ? c[0][1] : c[0][0], hi = (g & 1) ? c[1][3] : c[1][2];
    const int r = lane & 7, src = 4 * r + (r >> 1);
    const float vlo = __shfl_sync(0xffffffffu, lo, src), vhi = __shfl_sync(0xffffffffu, hi, src);
    return lane < 8 ? vlo : lane < 16 ? vhi : 0.0f;
  }
};

// ---- matmul -> epilogue -> matmul in registers (flash attention's P never leaves them) ----
//
// S = A @ B (M rows, N1 columns: the scores of N1 keys), P = epilogue(S) rounded to the
// element type T, sum += P, acc += P @ C (C: N1 x D, the values).  The block's warps form a
// TGM x W grid (thr_layout (TGM, W) of S, SAcc = the type of `sum`): warp (wm, wn) computes
// S for the 16 rows of block wm and the atom blocks wn, wn + W, ... of keys and, without
// leaving registers, multiplies its own columns of P by the matching rows of C: the m16n8k16
// C fragments of two n8 blocks are exactly the A fragment of one k16 step (FlashAttention-2's
// trick), with k index 0..7 <-> the keys of block 2p and 8..15 <-> those of block 2p + 1.
// So the W warps of a row block split the keys of the second product: `acc` has thr_layout
// (TGM, 1) and K sliced over W (its slices are added by mma_store).  W = 1 is
// FlashAttention-2's layout (each warp owns 16 rows and every key); decode tiles of 16 rows
// use TGM = 1.  Needs one row block per warp (SAcc::FM == 1) and FN of SAcc even.
// LC: view (n, k) of C (C^T, like mma_run's LB), CM its load mode (kLdsmT or elements).
template <int NT, class Acc, class SAcc, int M, int N1, int K1, int D, int TGM, int W, bool BF16, class LA, class LB,
          int AM, int BM, class LC, int CM, class T, class F>
__device__ __forceinline__ void mma_chain_run(Acc& acc, SAcc& sum, const T* a, const T* b, const T* c, const void* zero,
                                              int tid, F epilogue) {
  static_assert(SAcc::FM == 1 && SAcc::FN % 2 == 0 && Acc::KS == W && Acc::FM == 1, "mma_chain_run: see above");
  SAcc s;
  s.zero();
  mma_run<NT, SAcc, M, N1, K1, TGM, W, 16, BF16, LA, LB, AM, BM>(s, a, b, zero, tid);
  const int warp = tid >> 5;
  if (warp >= TGM * W) return;
  const int wn = warp / TGM;  // the key group; the row block (warp % TGM) is acc's own
  const int lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int q = lane >> 3, i8 = lane & 7;
  unsigned p[SAcc::FN][2];  // row g and row g + 8: packed (col 2t, col 2t + 1) of each n8 block
#pragma unroll
  for (int j = 0; j < SAcc::FN; ++j) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const T lo = from_f<T>(epilogue(s.c[0][j][2 * r])), hi = from_f<T>(epilogue(s.c[0][j][2 * r + 1]));
      sum.c[0][j][2 * r] += to_f(lo);
      sum.c[0][j][2 * r + 1] += to_f(hi);
      p[j][r] = bits16(lo) | (bits16(hi) << 16);
    }
  }
#pragma unroll
  for (int jp = 0; jp < SAcc::FN / 2; ++jp) {
    const unsigned af[4] = {p[2 * jp][0], p[2 * jp][1], p[2 * jp + 1][0], p[2 * jp + 1][1]};
    const int key0 = 8 * (wn + 2 * jp * W), key1 = 8 * (wn + (2 * jp + 1) * W);  // first key of each half
#pragma unroll
    for (int nb = 0; nb < Acc::FN; ++nb) {
      const int n0 = nb * 8;
      unsigned bfr[2];
      if constexpr (CM == kLdsmT) {
        const int key = ((q & 1) ? key1 : key0) + i8;
        // no select when every n8 block is inside D (see mma_fragments: a ptxas miscompile)
        ldsm<2, true>(bfr, (Acc::FN * 8 <= D || n0 < D) ? static_cast<const void*>(c + LC::off(n0, key)) : zero);
      } else {
        const int n = n0 + g;
        const auto el = [&](int key) { return n < D ? bits16(c[LC::off(n, key)]) : 0u; };
        bfr[0] = el(key0 + 2 * t) | (el(key0 + 2 * t + 1) << 16);
        bfr[1] = el(key1 + 2 * t) | (el(key1 + 2 * t + 1) << 16);
      }
      if (n0 < D) mma_16x8x16<BF16>(acc.c[0][nb], af, bfr);
    }
  }
}

// 2^x with the MUFU.EX2 approximation, subnormal results flushed to 0 (ex2.approx.ftz.f32:
// PTX ISA, "ex2"): online-softmax weights below 2^-126 vanish beside a row sum of at least 1.
__device__ __forceinline__ float ex2_ftz(float x) {
#ifdef MX_HOST
  return exp2f(x);
#else
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#endif
}

// The causal mask an online chain applies to its scores (cute.mma_chain mask_*): element
// (r, c) of the iteration's score tile is kept when c <= r + diag, diag = the tile's global
// first row + offset - its global first column (dialects/cute/mask_ops.py).  NoMask: none.
struct NoMask {
  static constexpr bool kActive = false;
  __device__ __forceinline__ bool keep(int, int) const { return true; }
};
struct CausalMask {
  static constexpr bool kActive = true;
  int diag;
  __device__ __forceinline__ bool keep(int r, int c) const { return c <= r + diag; }
};

// mma_chain_run with FlashAttention-2's online softmax (Dao 2023, algorithm 1; cute.mma_chain
// `online`): S = scale(A @ B) in fp32, a running row max m (rmax: rows g and g + 8 of each
// of the lane's FM row blocks, -inf before the loop), r = exp(m_old - m) rescales acc and
// sum's row totals, and P = round(exp(S - m)) feeds acc += P @ C.  W = 1: each warp owns all
// N1 keys of its rows (FM row blocks: wm, wm + TGM, ...), so row maxima and sums need quad
// shuffles only, and every key / value fragment read from shared memory serves all FM row
// blocks.  sum keeps row totals in column 2t of its first n8 block (per lane: the lane's
// share of the row); a row sum over sum's columns after the loop is the softmax
// denominator, summed from P in fp32 before P is rounded to T for P @ C.  exp(x) = exp2(x log2 e)
// (ex2_ftz).  C is read by ldmatrix.x4.trans, two n8 blocks of
// D per load, when CM is kLdsmT and D a multiple of 16.  `mask` (CausalMask) sets the scores
// it does not keep to -inf after `scale`.
template <int NT, class Acc, class SAcc, int M, int N1, int K1, int D, int TGM, bool BF16, class LA, class LB,
          int AM, int BM, class LC, int CM, class T, class F, class MK = NoMask>
__device__ __forceinline__ void mma_chain_online_run(Acc& acc, SAcc& sum, float (&rmax)[2 * Acc::FM], const T* a,
                                                     const T* b, const T* c, const void* zero, int tid, F scale,
                                                     MK mask = MK{}) {
  constexpr int FM = Acc::FM;
  static_assert(SAcc::FM == FM && SAcc::FN % 2 == 0 && Acc::KS == 1, "mma_chain_online_run: see above");
  constexpr float kLog2e = 1.4426950408889634f;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const int q = lane >> 3, i8 = lane & 7;
  SAcc s;
  s.zero();
  if constexpr (AM == kLdsm && BM == kLdsm && K1 % 16 == 0 && M == 16 * TGM * FM) {
    // S = A @ B with ldmatrix.x4 for two n8 blocks of B at once (mma_run loads them one
    // by one); every row and key is inside the tile
    if (warp >= TGM) return;
    // a k-step's fragments are all loaded before its MMAs (as mma_run does), the next
    // step's while these run
    unsigned af[2][FM][4];
    unsigned bf[2][SAcc::FN / 2][4];
    const auto load = [&](int buf, int k0) {
#pragma unroll
      for (int i = 0; i < FM; ++i)
        ldsm<4, false>(af[buf][i], a + LA::off((warp + i * TGM) * 16 + i8 + 8 * (q & 1), k0 + 8 * (q >> 1)));
#pragma unroll
      for (int j = 0; j < SAcc::FN / 2; ++j) ldsm<4, false>(bf[buf][j], b + LB::off(16 * j + i8 + 8 * (q >> 1), k0 + 8 * (q & 1)));
    };
    load(0, 0);
#pragma unroll
    for (int ks = 0; ks < K1 / 16; ++ks) {
      const int cur = ks & 1;
      if (ks + 1 < K1 / 16) load(cur ^ 1, 16 * (ks + 1));
#pragma unroll
      for (int j = 0; j < SAcc::FN / 2; ++j) {
        const unsigned b0[2] = {bf[cur][j][0], bf[cur][j][1]}, b1[2] = {bf[cur][j][2], bf[cur][j][3]};
#pragma unroll
        for (int i = 0; i < FM; ++i) {
          mma_16x8x16<BF16>(s.c[i][2 * j], af[cur][i], b0);
          mma_16x8x16<BF16>(s.c[i][2 * j + 1], af[cur][i], b1);
        }
      }
    }
  } else {
    mma_run<NT, SAcc, M, N1, K1, TGM, 1, 16, BF16, LA, LB, AM, BM>(s, a, b, zero, tid);
    if (warp >= TGM) return;
  }
  unsigned p[FM][SAcc::FN][2];  // per row block, row g and row g + 8: packed (col 2t, col 2t + 1)
#pragma unroll
  for (int i = 0; i < FM; ++i) {
    float mx[2] = {rmax[2 * i], rmax[2 * i + 1]};
#pragma unroll
    for (int j = 0; j < SAcc::FN; ++j) {
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        float v = scale(s.c[i][j][h]);
        if constexpr (MK::kActive) {
          // the m16n8 C fragment: rows g, g + 8 of row block warp + i TGM; columns 2t, 2t + 1
          if (!mask.keep((warp + i * TGM) * 16 + g + 8 * (h >> 1), 8 * j + 2 * t + (h & 1))) v = neg_inf();
        }
        s.c[i][j][h] = v;
        mx[h >> 1] = fmaxf(mx[h >> 1], v);
      }
    }
    float base[2], alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      base[r] = mx[r] == neg_inf() ? 0.0f : mx[r] * kLog2e;  // a row of -inf scores stays 0
      alpha[r] = ex2_ftz(rmax[2 * i + r] * kLog2e - base[r]);
      rmax[2 * i + r] = mx[r];
    }
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < SAcc::FN; ++j) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float lo = ex2_ftz(fmaf(s.c[i][j][2 * r], kLog2e, -base[r]));
        const float hi = ex2_ftz(fmaf(s.c[i][j][2 * r + 1], kLog2e, -base[r]));
        rs[r] += lo + hi;  // the row sum of P before its rounding to T
        p[i][j][r] = pack2<T>(lo, hi);
      }
    }
    sum.c[i][0][0] = fmaf(sum.c[i][0][0], alpha[0], rs[0]);
    sum.c[i][0][2] = fmaf(sum.c[i][0][2], alpha[1], rs[1]);
#ifndef MX_ONLINE_ALWAYS_RESCALE
    // once the running maxima settle, whole warps skip the rescale (alpha = 1 exactly)
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f))
#endif
    {
#pragma unroll
      for (int nb = 0; nb < Acc::FN; ++nb) {
#pragma unroll
        for (int h = 0; h < 4; ++h) acc.c[i][nb][h] *= alpha[h >> 1];
      }
    }
  }
  constexpr bool X4 = CM == kLdsmT && D % 16 == 0 && Acc::FN * 8 == D;
#pragma unroll
  for (int jp = 0; jp < SAcc::FN / 2; ++jp) {
    const int key0 = 16 * jp, key1 = 16 * jp + 8;  // first key of each half
#pragma unroll
    for (int nb = 0; nb < Acc::FN; nb += (X4 ? 2 : 1)) {
      const int n0 = nb * 8;
      unsigned bfr[2][2];
      if constexpr (X4) {
        // lanes 8q..8q+7 address key row (q & 1 ? key1 : key0) + i8 of n8 block nb + (q >> 1)
        unsigned r4[4];
        ldsm<4, true>(r4, c + LC::off(n0 + 8 * (q >> 1), ((q & 1) ? key1 : key0) + i8));
        bfr[0][0] = r4[0];
        bfr[0][1] = r4[1];
        bfr[1][0] = r4[2];
        bfr[1][1] = r4[3];
      } else if constexpr (CM == kLdsmT) {
        const int key = ((q & 1) ? key1 : key0) + i8;
        ldsm<2, true>(bfr[0], (Acc::FN * 8 <= D || n0 < D) ? static_cast<const void*>(c + LC::off(n0, key)) : zero);
      } else {
        const int n = n0 + g;
        const auto el = [&](int key) { return n < D ? bits16(c[LC::off(n, key)]) : 0u; };
        bfr[0][0] = el(key0 + 2 * t) | (el(key0 + 2 * t + 1) << 16);
        bfr[0][1] = el(key1 + 2 * t) | (el(key1 + 2 * t + 1) << 16);
      }
#pragma unroll
      for (int i = 0; i < FM; ++i) {
        const unsigned af[4] = {p[i][2 * jp][0], p[i][2 * jp][1], p[i][2 * jp + 1][0], p[i][2 * jp + 1][1]};
#pragma unroll
        for (int u = 0; u < (X4 ? 2 : 1); ++u) {
          if (n0 + 8 * u < D) mma_16x8x16<BF16>(acc.c[i][nb + u], af, bfr[u]);
        }
      }
    }
  }
}

// The stores of one lane of thr_layout warp (wm, wn).
template <class Acc, int M, int N, int TGM, int TGN, class LC, bool READ, class TC, class F>
__device__ __forceinline__ void mma_store_lane(const Acc& acc, TC* c, int g, int t, int wm, int wn, F f) {
#pragma unroll
  for (int i = 0; i < Acc::FM; ++i) {
#pragma unroll
    for (int j = 0; j < Acc::FN; ++j) {
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const int r = (wm + i * TGM) * 16 + g + (h >> 1) * 8;
        const int n = (wn + j * TGN) * 8 + 2 * t + (h & 1);
        if (r < M && n < N) {
          const int o = LC::off(r, n);
          float old = 0.0f;
          if constexpr (READ) old = to_f(c[o]);
          c[o] = from_f<TC>(f(old, acc.c[i][j][h]));
        }
      }
    }
  }
}

// c[LC(r, n)] = f(old, acc) for every (r, n) of the MxN tile this lane holds.  With sliced
// K every thread of the block must call it (it has barriers): slices 1.. park their partial
// sums in `scratch`, slice 0 adds them and stores.
template <class Acc, int M, int N, int TGM, int TGN, class LC, bool READ, class TC, class F>
__device__ __forceinline__ void mma_store(const Acc& acc_in, TC* c, float* scratch, int tid, F f) {
  const int warp = tid >> 5;
  const int lane = tid & 31;
  constexpr int P = TGM * TGN;
  constexpr int F4 = Acc::FM * Acc::FN * 4;
  Acc acc = acc_in;
  if constexpr (Acc::KS > 1) {
    const int slice = warp / P, pw = warp % P;
    // [slice-1][warp][element][lane]: consecutive lanes hit consecutive banks
    if (slice > 0 && slice < Acc::KS) {
      float* dst = scratch + ((slice - 1) * P + pw) * F4 * 32 + lane;
#pragma unroll
      for (int i = 0; i < Acc::FM; ++i)
#pragma unroll
        for (int j = 0; j < Acc::FN; ++j)
#pragma unroll
          for (int h = 0; h < 4; ++h) dst[((i * Acc::FN + j) * 4 + h) * 32] = acc.c[i][j][h];
    }
    __syncthreads();
    if (slice == 0) {
#pragma unroll 1
      for (int s = 1; s < Acc::KS; ++s) {
        const float* src = scratch + ((s - 1) * P + pw) * F4 * 32 + lane;
#pragma unroll
        for (int i = 0; i < Acc::FM; ++i)
#pragma unroll
          for (int j = 0; j < Acc::FN; ++j)
#pragma unroll
            for (int h = 0; h < 4; ++h) acc.c[i][j][h] += src[((i * Acc::FN + j) * 4 + h) * 32];
      }
    }
  } else {
    static_cast<void>(scratch);
  }
  if (warp < P) {
    const int g = lane >> 2, t = lane & 3;
    const int wm = warp % TGM, wn = warp / TGM;
    mma_store_lane<Acc, M, N, TGM, TGN, LC, READ>(acc, c, g, t, wm, wn, f);
  }
  if constexpr (Acc::KS > 1) __syncthreads();  // the scratch is free again for the next call
}

// ---- CUDA-core fallback ------------------------------------------------------------------

template <int M, int N, int NT>
struct FmaAcc {
  static constexpr int PER = (M * N + NT - 1) / NT;
  float c[PER];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int j = 0; j < PER; ++j) c[j] = 0.0f;
  }
};

// LA: view (m, k) of A; LB: view (k, n) of B.
template <int NT, class Acc, int M, int N, int K, class LA, class LB, class TA, class TB>
__device__ __forceinline__ void fma_run(Acc& acc, const TA* a, const TB* b, int tid) {
#pragma unroll
  for (int j = 0; j < Acc::PER; ++j) {
    const int idx = tid + j * NT;
    if (idx < M * N) {
      const int r = idx / N, n = idx % N;
      float s = 0.0f;
      for (int k = 0; k < K; ++k) s = fmaf(to_f(a[LA::off(r, k)]), to_f(b[LB::off(k, n)]), s);
      acc.c[j] += s;
    }
  }
}

template <int NT, class Acc, int M, int N, class LC, bool READ, class TC, class F>
__device__ __forceinline__ void fma_store(const Acc& acc, TC* c, int tid, F f) {
#pragma unroll
  for (int j = 0; j < Acc::PER; ++j) {
    const int idx = tid + j * NT;
    if (idx < M * N) {
      const int o = LC::off(idx / N, idx % N);
      float old = 0.0f;
      if constexpr (READ) old = to_f(c[o]);
      c[o] = from_f<TC>(f(old, acc.c[j]));
    }
  }
}

}  // namespace mx
