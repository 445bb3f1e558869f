// mirage_xdsl device library: split-key decode attention (flash decoding) for a few query rows
// per KV head.
//
//   O[h][i][:] = sum_j softmax_j(scale * Q[h][i] . K[h][j]) V[h][j][:]      (i < G <= 16)
//
// Flash decoding (Dao et al. 2023, "Flash-Decoding for long-context inference"): the grid is
// (heads, splits); a block takes seq_k / splits keys of one head, and each of its WARPS warps a
// contiguous quarter (1 / WARPS) of those, walked 16 keys at a time with no block barrier: a warp
// streams its own STAGES-deep ring of 16-key K and V tiles by cp.async (128-byte swizzle,
// `load_swizzled`), computes S = Q K^T with mma.sync m16n8k16 (`mma_16x8x16`; Q's G rows, zero-padded to 16, in
// registers as the A fragments; K by ldmatrix, `ldsm`), the online softmax in the accumulator registers,
// and O += P V (P re-used in registers as the A operand -- FlashAttention-2's register layout --,
// V by ldmatrix.trans).  At the end the warps' (max, sum, O) meet in shared memory; with one
// split the block writes O / sum, else it stores its partial (fp32: max, sum, O per row) to the
// workspace, and the last block of the head to arrive (a per-head counter, reset after use)
// combines the splits, rescaling each by exp(m_s - max m), and writes O.
//
// Requires sm_80 or later (mma.sync, ldmatrix, cp.async); the lowering uses it on sm_90.
// Rules (the lowering's and the verifier's): head dim D of 64 or 128 with stride 1, G <= 16
// query rows, seq_k a multiple of 16 x WARPS x splits, 16-byte aligned rows, a positive scale.
#pragma once
#ifndef MX_HOST
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "hopper_attention.cuh"
#include "mma.cuh"

namespace mx {
namespace hopper {

// One `decode_attention` launch (strides in elements; the head dim has stride 1).
struct DecodeShape {
  int seq_k;           // keys per head
  int keys_per_split;  // seq_k / splits
  long long q_h, q_r;  // Q head and row strides
  long long k_h, k_r;  // K (stored [keys, D]) head and key strides
  long long v_h, v_r;  // V head and key strides
  long long o_h, o_r;  // O head and row strides
  float scale_log2;    // the softmax scale times log2(e)
};

constexpr int kDecodeKeys = 16;  // keys per warp step (one m16n8k16 k-extent of P V)

// Dynamic shared memory: each warp's ring of STAGES (K, V) tile pairs, 128 B of alignment slack;
// at least the warps' (max, sum, O) rows for the block's combine (which reuses the rings).
template <int D, int WARPS, int STAGES>
constexpr int decode_attention_smem_bytes() {
  constexpr int ring = WARPS * STAGES * 2 * kDecodeKeys * D * 2, combine = WARPS * 16 * (D + 2) * 4;
  return (ring > combine ? ring : combine) + 128;
}

template <class T>
__device__ __forceinline__ void decode_store(T* p, float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    *p = __float2bfloat16_rn(x);
  } else {
    *p = __float2half_rn(x);
  }
}

// Byte offset of 16-byte unit u of row r in a swizzled 16-row tile (`load_swizzled`'s layout).
__device__ __forceinline__ int decode_unit(int r, int u) {
  return (u / 8) * (kDecodeKeys * 128) + r * 128 + (((u % 8) ^ (r & 7)) * 16);
}

// The kernel body; call from a `__global__ __launch_bounds__(32 * WARPS)` kernel with grid
// (heads, splits) and `decode_attention_smem_bytes<D, WARPS, STAGES>()` bytes of dynamic shared
// memory.  `ws` (heads x splits x G x (D + 2) floats) and `counters` (heads words, zero at
// launch, zero again after) are used when splits > 1.
template <class T, int D, int G, int WARPS, int STAGES>
__device__ __forceinline__ void decode_attention(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                                 T* __restrict__ o, float* __restrict__ ws, unsigned* __restrict__ counters,
                                                 const DecodeShape s) {
  static_assert(D == 64 || D == 128, "decode_attention: head dim 64 or 128");
  static_assert(G >= 1 && G <= 16, "decode_attention: 1..16 query rows per head");
  constexpr int TILE = kDecodeKeys * D * 2, NB = D / 8;
  constexpr bool kBf16 = std::is_same_v<T, __nv_bfloat16>;
  const float kNegInf = -__int_as_float(0x7f800000);
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((128 - (smem_addr(smem_raw) & 127)) & 127);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int head = blockIdx.x, split = blockIdx.y, splits = gridDim.y;
  const int per_warp = s.keys_per_split / WARPS, steps = per_warp / kDecodeKeys;
  const long long key0 = (long long)split * s.keys_per_split + (long long)warp * per_warp;
  const T* kh = k + head * s.k_h + key0 * s.k_r;
  const T* vh = v + head * s.v_h + key0 * s.v_r;
  unsigned char* ring = base + warp * STAGES * 2 * TILE;
  // Q's rows g and g + 8 as m16n8k16 A fragments (rows >= G are zero)
  unsigned qa[D / 16][4];
  const T* qh = q + head * s.q_h;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int c = 16 * kk + 2 * t;
    qa[kk][0] = g < G ? *reinterpret_cast<const uint32_t*>(qh + g * s.q_r + c) : 0u;
    qa[kk][1] = g + 8 < G ? *reinterpret_cast<const uint32_t*>(qh + (g + 8) * s.q_r + c) : 0u;
    qa[kk][2] = g < G ? *reinterpret_cast<const uint32_t*>(qh + g * s.q_r + c + 8) : 0u;
    qa[kk][3] = g + 8 < G ? *reinterpret_cast<const uint32_t*>(qh + (g + 8) * s.q_r + c + 8) : 0u;
  }
  const auto load_step = [&](int step) {
    unsigned char* slot = ring + (step % STAGES) * 2 * TILE;
    load_swizzled<T, kDecodeKeys, D, 32>(slot, kh + (long long)step * kDecodeKeys * s.k_r, s.k_r, kDecodeKeys, lane);
    load_swizzled<T, kDecodeKeys, D, 32>(slot + TILE, vh + (long long)step * kDecodeKeys * s.v_r, s.v_r, kDecodeKeys, lane);
  };
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < steps) load_step(st);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  float acc[NB][4];
#pragma unroll
  for (int n = 0; n < NB; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};
  // ldmatrix row addresses: lane -> (row, unit) of matrix lane / 8
  const int k_row = (lane & 7) + 8 * (lane >> 4), k_unit = (lane >> 3) & 1;  // S: keys x d
  const int v_row = (lane & 7) + 8 * ((lane >> 3) & 1), v_unit = lane >> 4;  // P V: keys x d, transposed
  for (int step = 0; step < steps; ++step) {
    if (step + STAGES - 1 < steps) load_step(step + STAGES - 1);
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1) : "memory");
    __syncwarp();
    const unsigned char* kb = ring + (step % STAGES) * 2 * TILE;
    const unsigned char* vb = kb + TILE;
    float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      unsigned b[4];
      ldsm<4, false>(b, kb + decode_unit(k_row, 2 * kk + k_unit));
      mma_16x8x16<kBf16>(sc[0], qa[kk], {b[0], b[1]});
      mma_16x8x16<kBf16>(sc[1], qa[kk], {b[2], b[3]});
    }
    // online softmax: rows g (registers 0, 1) and g + 8 (2, 3) over this step's 16 keys
    float mx[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(fmaxf(sc[0][2 * r], sc[0][2 * r + 1]), fmaxf(sc[1][2 * r], sc[1][2 * r + 1]));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    float alpha[2], base2[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float nm = fmaxf(m[r], mx[r] * s.scale_log2);  // scale > 0
      alpha[r] = attn_ex2(m[r] - nm);
      base2[r] = nm;
      m[r] = nm;
    }
    unsigned pa[4];
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const float p0 = attn_ex2(fmaf(sc[j][0], s.scale_log2, -base2[0])), p1 = attn_ex2(fmaf(sc[j][1], s.scale_log2, -base2[0]));
      const float p2 = attn_ex2(fmaf(sc[j][2], s.scale_log2, -base2[1])), p3 = attn_ex2(fmaf(sc[j][3], s.scale_log2, -base2[1]));
      rs[0] += p0 + p1;
      rs[1] += p2 + p3;
      pa[2 * j] = pack2<T>(p0, p1);      // row g, keys 8j + 2t, +1
      pa[2 * j + 1] = pack2<T>(p2, p3);  // row g + 8
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) l[r] = fmaf(l[r], alpha[r], rs[r]);
#pragma unroll
    for (int n = 0; n < NB; n += 2) {
      unsigned b[4];
      ldsm<4, true>(b, vb + decode_unit(v_row, n + v_unit));
      acc[n][0] *= alpha[0], acc[n][1] *= alpha[0], acc[n][2] *= alpha[1], acc[n][3] *= alpha[1];
      acc[n + 1][0] *= alpha[0], acc[n + 1][1] *= alpha[0], acc[n + 1][2] *= alpha[1], acc[n + 1][3] *= alpha[1];
      mma_16x8x16<kBf16>(acc[n], pa, {b[0], b[1]});
      mma_16x8x16<kBf16>(acc[n + 1], pa, {b[2], b[3]});
    }
    __syncwarp();  // every lane's ldmatrix of this slot precedes the copies that refill it
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  // the block's combine: per warp w and row i, [max, sum, O[D]] in the reused rings
  __syncthreads();
  float* part = reinterpret_cast<float*>(base);
  constexpr int ROW = D + 2;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = g + 8 * r;
    if (row < G) {
      float* dst = part + (warp * 16 + row) * ROW;
      if (t == 0) dst[0] = m[r], dst[1] = l[r];
#pragma unroll
      for (int n = 0; n < NB; ++n) dst[2 + 8 * n + 2 * t] = acc[n][2 * r], dst[3 + 8 * n + 2 * t] = acc[n][2 * r + 1];
    }
  }
  __syncthreads();
  float* wsh = ws + (long long)head * splits * G * ROW;
  for (int i = threadIdx.x; i < G * D; i += 32 * WARPS) {
    const int row = i / D, col = i % D;
    float mm = kNegInf;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) mm = fmaxf(mm, part[(w * 16 + row) * ROW]);
    float sum = 0.0f, out = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const float* src = part + (w * 16 + row) * ROW;
      const float f = attn_ex2(src[0] - mm);
      sum = fmaf(src[1], f, sum);
      out = fmaf(src[2 + col], f, out);
    }
    if (splits == 1) {
      decode_store<T>(o + head * s.o_h + row * s.o_r + col, sum > 0.0f ? out / sum : 0.0f);
    } else {
      float* dst = wsh + (split * G + row) * ROW;
      if (col == 0) dst[0] = mm, dst[1] = sum;
      dst[2 + col] = out;
    }
  }
  if (splits == 1) return;
  // the last block of this head to finish combines the splits
  __shared__ unsigned last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&counters[head], 1u) == (unsigned)splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = threadIdx.x; i < G * D; i += 32 * WARPS) {
    const int row = i / D, col = i % D;
    float mm = kNegInf;
    for (int sp = 0; sp < splits; ++sp) mm = fmaxf(mm, __ldcg(wsh + (sp * G + row) * ROW));
    float sum = 0.0f, out = 0.0f;
    for (int sp = 0; sp < splits; ++sp) {
      const float* src = wsh + (sp * G + row) * ROW;
      const float f = attn_ex2(__ldcg(src) - mm);
      sum = fmaf(__ldcg(src + 1), f, sum);
      out = fmaf(__ldcg(src + 2 + col), f, out);
    }
    decode_store<T>(o + head * s.o_h + row * s.o_r + col, sum > 0.0f ? out / sum : 0.0f);
  }
  if (threadIdx.x == 0) counters[head] = 0u;  // ready for the next launch
}

}  // namespace hopper
}  // namespace mx
#endif  // MX_HOST
