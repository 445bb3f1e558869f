// mirage_xdsl device library: sm_90a flash attention (wgmma), one block of query rows per CTA.
//
//   O[h][i][:] = sum_j softmax_j(scale * Q[h][i] . K[h][j]) V[h][j][:]      (keys j <= i + offset
//                                                                            when CAUSAL)
//
// FlashAttention-2's loop (Dao 2023, algorithm 1) on Hopper's warpgroup MMA, organised as
// FlashAttention-3 (Shah et al. 2024, section 3) organises it: a producer warpgroup fills
// shared-memory rings of key and value tiles while consumer warpgroups (64 query rows each)
// compute.  Per key tile of BN (64 or 128) keys, S = Q K^T is one chain of `wgmma` m64nBNk16
// with both operands in shared memory; the running row max, the rescale factor and
// P = exp(S - max) stay in the accumulator registers; P, rounded to 16 bits, is the register A
// operand of O += P V (`wgmma` m64nDk16, V MN-major); S of the next tile and P V of this one
// are in flight together, the softmax of the next beside P V (the intra-warpgroup overlap of
// FlashAttention-3's algorithm 2).  Two consumers with 128-key tiles (FlashAttention-3's
// 128 x 128 tiles at head dim 128) ran the 4096-token prefill of 8 heads 18 % faster than two
// blocks of one 64-row consumer with 64-key tiles on an H200 (125-131 vs 153-158 µs, fp16,
// 2026-11-27).  Tiles arrive by TMA, issued by one producer thread (the earlier 128-thread
// cp.async producer took 6-7 % longer at 4096 tokens on an H200, 2026-11-28: 130.3 vs 121.3 µs
// fp16, 126.4 vs 118.3 bf16; sustained, these kernels run at the 700 W power limit, where the
// copy instructions' energy costs clock), in boxes of 64 head-dim elements x rows with the
// 128-byte swizzle, which is the canonical K-major layout (PTX ISA 8.x, "Asynchronous Warpgroup
// Level Matrix Shared Memory Layout"): 64-element column chunks of 128-byte rows, 16-byte unit u
// of row r at (u ^ (r & 7)) * 16.  The host encodes Q, K and V as 4-D tensor maps {head dim,
// rows, heads, 1} (codegen/hopper_attention.py `attention_maps`); a tensor without a head dim
// (head stride 0) has one head.  Q and K are K-major operands (rows: query rows / keys; K: the
// head dim), V the MN-major B operand of P V (rows: keys); the
// row sum is taken in fp32 before P is rounded.  With CAUSAL, a block walks only the key tiles
// its last row sees and masks the tiles that cross the diagonal; the grid dispatches the query
// blocks heaviest first (longest-first list scheduling: with two blocks per SM it beat the
// heavy-half-first order `cute-causal-skip` gives the mma.sync chain, 93.7 vs 107.5 µs for the
// suite's 4096-token causal prefill on an H200).
//
// Requires sm_90a; the host emulator does not model it.  The lowering's rules: head dim D of
// 64 or 128 with stride 1, seq_k a multiple of BN, 16-byte aligned rows, a positive scale (the
// row maximum is taken over the raw scores and then scaled), NC = 2 for BN = 128.
#pragma once
#ifndef MX_HOST
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "hopper_gemm.cuh"
#include "hopper_wgmma.cuh"

namespace mx {
namespace hopper {

// The problem of one `flash_attention` launch (strides in elements; the head dim has stride 1).
struct AttnShape {
  int seq_q, seq_k;      // query rows and keys per head
  int row_blocks;        // query blocks per head: ceil(seq_q / (64 NC)) (the grid's y extent)
  long long q_h, q_r;    // Q head and row strides
  long long k_h, k_r;    // K (stored [keys, D]) head and key strides
  long long v_h, v_r;    // V head and key strides
  long long o_h, o_r;    // O head and row strides
  float scale_log2;      // the softmax scale times log2(e): exp(scale s) = 2^(scale_log2 s)
  int causal_offset;     // CAUSAL: key j is kept for query row i when j <= i + causal_offset
};

// Loads through the tensor maps of Q, K and V (the kernel's `__grid_constant__` parameters).
struct AttnMaps {
  const CUtensorMap* q;
  const CUtensorMap* k;
  const CUtensorMap* v;
};

// Bytes of dynamic shared memory `flash_attention` needs: Q, STAGES stages of K and of V, the
// mbarriers (Q's, and full / empty per stage of each ring) and 1 KiB for the 1024-byte
// alignment of the swizzled tiles.
template <class T, int D, int NC, int BN, int STAGES>
constexpr int flash_attention_smem_bytes() {
  return (64 * NC * D + 2 * STAGES * BN * D) * (int)sizeof(T) + (1 + 4 * STAGES) * 8 + 1024;
}

// cp.async of a ROWS x D tile (row stride `row_stride`, D contiguous) into the swizzled K-major
// layout above; rows at or past `rows` are zero-filled.  The split-key decode kernel's loads
// (decode_attention.cuh); the flash kernel loads by TMA (`tma_tile`).
template <class T, int ROWS, int D, int NT>
__device__ __forceinline__ void load_swizzled(unsigned char* dst, const T* src, long long row_stride, int rows, int tid) {
  constexpr int UNITS = D / 8;  // 16-byte units per row
  static_assert((ROWS * UNITS) % NT == 0, "load_swizzled: the threads share the tile evenly");
#pragma unroll
  for (int n = 0; n < ROWS * UNITS / NT; ++n) {
    const int i = tid + n * NT;
    const int r = i / UNITS, u = i % UNITS;
    unsigned char* d = dst + (u / 8) * (ROWS * 128) + r * 128 + (((u % 8) ^ (r & 7)) * 16);
    const bool in = r < rows;
    const T* p = in ? src + (long long)r * row_stride + u * 8 : src;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(d)), "l"(p), "r"(in ? 16 : 0)
                 : "memory");
  }
}

// TMA of a ROWS x D tile at (row, head) of `map` into the swizzled K-major layout above: D / 64
// boxes of {64, ROWS}, box c at c * ROWS * 128 bytes (the 128-byte swizzle of the map is the
// layout's); rows past the tensor's end are zero-filled.  Completes on `bar`.
template <class T, int ROWS, int D>
__device__ __forceinline__ void tma_tile(unsigned char* dst, const CUtensorMap* map, uint64_t* bar, int row, int head) {
#pragma unroll
  for (int c = 0; c < D / 64; ++c) tma_load_4d(dst + c * ROWS * 128, map, bar, 64 * c, row, head, 0);
}

// An empty asm that "defines" r: the register's computation is finished before the next
// `wgmma_fence` (without it, the compiler may sink e.g. P's rounding between the wgmmas that
// read it, and ptxas serialises the wgmma pipeline: its C7513 / C7514 notes).
__device__ __forceinline__ void fence_reg(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void fence_reg(float& r) { asm volatile("" : "+f"(r)::"memory"); }
template <class R, int N>
__device__ __forceinline__ void fence_regs(R (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) fence_reg(r[i]);
}

__device__ __forceinline__ float attn_ex2(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// Registers per thread after `setmaxnreg` (PTX ISA, "setmaxnreg"): the producer (one thread
// issuing TMA loads) keeps 40; the consumers take what the block's share of the SM's 64K
// registers leaves (NC = 1: two blocks of 256 threads per SM, 128 each at launch; NC = 2: one
// block of 384, 168 each).  A 128-key consumer holds S (64 registers), P (32) and O (64 at head
// dim 128): it needs NC = 2's 232.
constexpr int kFlashProducerRegs = 40;
template <int NC>
struct FlashConsumerRegs {
  static constexpr int value = NC == 1 ? 2 * 128 - kFlashProducerRegs : (3 * 168 - kFlashProducerRegs) / 2 / 8 * 8;
};

// The block's shared memory: Q, the K and V rings, and their mbarriers.
template <class T, int D, int NC, int BN, int STAGES>
struct FlashSmem {
  static constexpr int kQBytes = 64 * NC * D * (int)sizeof(T), kTileBytes = BN * D * (int)sizeof(T);
  unsigned char* q;
  unsigned char* k;  // STAGES tiles
  unsigned char* v;  // STAGES tiles
  uint64_t* q_full;
  uint64_t* k_full;  // per stage: the producer's copies landed
  uint64_t* k_empty;  // per stage: every consumer warp is done with it
  uint64_t* v_full;
  uint64_t* v_empty;
  __device__ explicit FlashSmem(unsigned char* raw) {
    unsigned char* base = raw + ((1024 - (smem_addr(raw) & 1023)) & 1023);  // the 128-B swizzle needs 1024-B alignment
    q = base;
    k = q + kQBytes;
    v = k + STAGES * kTileBytes;
    q_full = reinterpret_cast<uint64_t*>(v + STAGES * kTileBytes);
    k_full = q_full + 1;
    k_empty = k_full + STAGES;
    v_full = k_empty + STAGES;
    v_empty = v_full + STAGES;
  }
};

// The producer (thread 0 of warpgroup 0): Q, then K(t) and V(t) for every key tile, each into its
// ring stage once the consumers freed it, by TMA; a tile completes on its stage's `full` barrier
// (one arrival with the tile's byte count).
template <class T, int D, int NC, int BN, int STAGES>
__device__ __forceinline__ void flash_produce(const FlashSmem<T, D, NC, BN, STAGES>& sm, const AttnMaps& maps, const AttnShape& s,
                                              int head, int row0, int n_kt) {
  constexpr int BM = 64 * NC, TILE = FlashSmem<T, D, NC, BN, STAGES>::kTileBytes;
  const int hq = s.q_h ? head : 0, hk = s.k_h ? head : 0, hv = s.v_h ? head : 0;
  mbar_expect_tx(sm.q_full, BM * D * (int)sizeof(T));
  tma_tile<T, BM, D>(sm.q, maps.q, sm.q_full, row0, hq);
  int st = 0;
  unsigned ph = 0;
  for (int t = 0; t < n_kt; ++t) {
    mbar_wait(&sm.k_empty[st], ph ^ 1);
    mbar_expect_tx(&sm.k_full[st], TILE);
    tma_tile<T, BN, D>(sm.k + st * TILE, maps.k, &sm.k_full[st], t * BN, hk);
    mbar_wait(&sm.v_empty[st], ph ^ 1);
    mbar_expect_tx(&sm.v_full[st], TILE);
    tma_tile<T, BN, D>(sm.v + st * TILE, maps.v, &sm.v_full[st], t * BN, hv);
    if (++st == STAGES) {
      st = 0;
      ph ^= 1;
    }
  }
}

// One consumer warpgroup (64 query rows from row0 + 64 cw): the online-softmax loop over the
// block's n_kt key tiles in FlashAttention-3's order (its algorithm 2), then O / row sum stored
// to `oh`.  Per iteration: S(t + 1) = Q K(t + 1) and O += P(t) V(t) are issued as two wgmma
// groups; once S(t + 1) is done, its softmax -- exp2 in place in S's registers -- runs beside
// P(t) V(t); after P V, O is rescaled and P(t + 1) rounded into the one P buffer (a second
// buffer would not fit the registers with 128-key tiles).
template <class T, int D, int NC, int BN, int STAGES, bool CAUSAL>
__device__ __forceinline__ void flash_consume(const FlashSmem<T, D, NC, BN, STAGES>& sm, T* oh, const AttnShape& s, int row0,
                                              int n_kt, int cw, int tid) {
  constexpr int BM = 64 * NC, TILE = FlashSmem<T, D, NC, BN, STAGES>::kTileBytes;
  const float kNegInf = -__int_as_float(0x7f800000);
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, tq = lane % 4;
  float acc[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) acc[i] = 0.0f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f};
  const int my_row = row0 + cw * 64 + warp * 16 + g;
  const uint32_t q0 = smem_addr(sm.q) + cw * 64 * 128;
  float sc[BN / 2];
  uint32_t p[BN / 16][4];
  const auto wait_full = [&](uint64_t* full, int t) {
    mbar_wait(&full[t % STAGES], (t / STAGES) & 1);
    fence_async_smem();
  };
  const auto release = [&](uint64_t* empty, int t) {
    if (lane == 0) mbar_arrive(&empty[t % STAGES]);
  };
  // descriptor words: low = start address >> 4 | LBO >> 4 << 16, high = SBO >> 4 | swizzle; a
  // tile's k-steps add their byte offset >> 4 to the low word (addresses stay below 256 KiB)
  const uint32_t q_lo = (uint32_t)smem_desc(q0, 16, 1024), k_lo = (uint32_t)smem_desc(smem_addr(sm.k), 16, 1024);
  const uint32_t kv_hi = (uint32_t)(smem_desc(0, 16, 1024) >> 32);
  const uint32_t v_lo = (uint32_t)smem_desc(smem_addr(sm.v), BN * 128, 1024);
  const auto desc = [](uint32_t lo, uint32_t hi) { return (uint64_t)hi << 32 | lo; };
  const auto issue_scores = [&](int t) {
    const uint32_t kst = k_lo + (uint32_t)((t % STAGES) * TILE >> 4);
    fence_regs(sc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const uint64_t da = desc(q_lo + ((kk / 4) * (BM * 128) + (kk % 4) * 32) / 16, kv_hi);
      const uint64_t db = desc(kst + ((kk / 4) * (BN * 128) + (kk % 4) * 32) / 16, kv_hi);
      Wgmma<BN>::template run<0, T>(sc, da, db, kk > 0 ? 1 : 0);
    }
    wgmma_commit();
    fence_regs(sc);
  };
  float alpha[2];
  // exp(S - max) in place, the running max / sum and the rescale factor
  const auto softmax = [&](int t) {
    const bool masked = CAUSAL && t * BN + BN - 1 > row0 + s.causal_offset;
    if (masked) {
#pragma unroll
      for (int i = 0; i < BN / 2; ++i)
        if (t * BN + 8 * (i / 4) + 2 * tq + (i & 1) > my_row + 8 * ((i >> 1) & 1) + s.causal_offset) sc[i] = kNegInf;
    }
    float mx[2] = {kNegInf, kNegInf};
    {  // four partial maxima per row: short dependency chains
      float pm[2][4];
#pragma unroll
      for (int i = 0; i < 16; ++i) pm[(i >> 1) & 1][(i >> 2) & 3] = i & 1 ? fmaxf(pm[(i >> 1) & 1][(i >> 2) & 3], sc[i]) : sc[i];
#pragma unroll
      for (int i = 16; i < BN / 2; ++i) pm[(i >> 1) & 1][(i >> 2) & 3] = fmaxf(pm[(i >> 1) & 1][(i >> 2) & 3], sc[i]);
#pragma unroll
      for (int r = 0; r < 2; ++r) mx[r] = fmaxf(fmaxf(pm[r][0], pm[r][1]), fmaxf(pm[r][2], pm[r][3]));
    }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float nm = fmaxf(m[r], mx[r] * s.scale_log2);  // scale > 0: the max of the scaled scores
      base[r] = nm == kNegInf ? 0.0f : nm;
      alpha[r] = attn_ex2(m[r] - base[r]);
      m[r] = nm;
    }
    float rs[2] = {0.0f, 0.0f};
    {  // four partial sums per row
      float ps[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) {
        const int r = (i >> 1) & 1;
        sc[i] = attn_ex2(fmaf(sc[i], s.scale_log2, -base[r]));
        ps[r][(i >> 2) & 3] += sc[i];
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) rs[r] = (ps[r][0] + ps[r][1]) + (ps[r][2] + ps[r][3]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) l[r] = fmaf(l[r], alpha[r], rs[r]);
  };
  const auto round_p = [&]() {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      p[j / 2][(j % 2) * 2] = pack2<T>(sc[4 * j], sc[4 * j + 1]);
      p[j / 2][(j % 2) * 2 + 1] = pack2<T>(sc[4 * j + 2], sc[4 * j + 3]);
    }
  };
  const auto issue_pv = [&](int t) {
#pragma unroll
    for (int kc = 0; kc < BN / 16; ++kc) fence_regs(p[kc]);
    fence_regs(acc);
    const uint32_t vst = v_lo + (uint32_t)((t % STAGES) * TILE >> 4);
    wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < BN / 16; ++kc) {
      const uint64_t db = desc(vst + kc * 16 * 128 / 16, kv_hi);
      WgmmaRs<D>::template run<1, T>(acc, p[kc], db, 1);
    }
    wgmma_commit();
    fence_regs(acc);
  };
  mbar_wait(sm.q_full, 0);
  fence_async_smem();
  if (n_kt > 0) {
    wait_full(sm.k_full, 0);
    issue_scores(0);
    wgmma_wait<0>();
    release(sm.k_empty, 0);
    softmax(0);
    round_p();
  }
  for (int kt = 0; kt + 1 < n_kt; ++kt) {
    wait_full(sm.k_full, kt + 1);
    issue_scores(kt + 1);
    wait_full(sm.v_full, kt);
    issue_pv(kt);
    wgmma_wait<1>();  // S(kt + 1) is done; P(kt) V(kt) may still run beside its softmax
    release(sm.k_empty, kt + 1);
    softmax(kt + 1);
    wgmma_wait<0>();
    release(sm.v_empty, kt);
#pragma unroll
    for (int i = 0; i < D / 2; ++i) acc[i] *= alpha[(i >> 1) & 1];
    round_p();
  }
  if (n_kt > 0) {
    wait_full(sm.v_full, n_kt - 1);
    issue_pv(n_kt - 1);
    wgmma_wait<0>();
    release(sm.v_empty, n_kt - 1);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  const float inv[2] = {l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f};
#pragma unroll
  for (int j = 0; j < D / 8; ++j) {
    const int col = 8 * j + 2 * tq;
    if (my_row < s.seq_q) store_pair<T>(oh + (long long)my_row * s.o_r + col, acc[4 * j] * inv[0], acc[4 * j + 1] * inv[0]);
    if (my_row + 8 < s.seq_q)
      store_pair<T>(oh + (long long)(my_row + 8) * s.o_r + col, acc[4 * j + 2] * inv[1], acc[4 * j + 3] * inv[1]);
  }
}

// The kernel body; call from a `__global__ __launch_bounds__(128 * (NC + 1), NC == 1 ? 2 : 1)`
// kernel with `flash_attention_smem_bytes<T, D, NC, BN, STAGES>()` bytes of dynamic shared
// memory and the grid (heads, s.row_blocks).  Warpgroup 0 produces (`flash_produce`),
// warpgroups 1..NC consume (`flash_consume`); after the barriers' initialisation no block-wide
// barrier: a stage is refilled once each consumer warp has arrived on its `empty` barrier.
template <class T, int D, int NC, int BN, int STAGES, bool CAUSAL>
__device__ __forceinline__ void flash_attention(const AttnMaps maps, T* __restrict__ o, const AttnShape s) {
  static_assert(D == 64 || D == 128, "flash_attention: head dim 64 or 128");
  static_assert(BN == 64 || BN == 128, "flash_attention: key tiles of 64 or 128");
  static_assert(NC == 1 || NC == 2, "flash_attention: one or two consumer warpgroups");
  extern __shared__ unsigned char smem_raw[];
  const FlashSmem<T, D, NC, BN, STAGES> sm(smem_raw);
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    mbar_init(sm.q_full, 1);
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(&sm.k_full[i], 1);  // the producer's expect_tx; the TMA completes the bytes
      mbar_init(&sm.v_full[i], 1);
      mbar_init(&sm.k_empty[i], NC * 4);  // lane 0 of every consumer warp
      mbar_init(&sm.v_empty[i], NC * 4);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    prefetch_tensor_map(maps.q);
    prefetch_tensor_map(maps.k);
    prefetch_tensor_map(maps.v);
  }
  __syncthreads();
  const int head = blockIdx.x;
  int rb = blockIdx.y;
  if constexpr (CAUSAL) rb = s.row_blocks - 1 - rb;  // the heaviest query blocks (the most key tiles) first
  const int row0 = rb * 64 * NC;
  int n_kt = s.seq_k / BN;
  if constexpr (CAUSAL) {
    const int last = row0 + 64 * NC - 1 + s.causal_offset;  // the last key the block's last row sees
    n_kt = min(n_kt, last < 0 ? 0 : last / BN + 1);
  }
  if (wg == 0) {
    setmaxnreg_dec<kFlashProducerRegs>();
    if (tid == 0) flash_produce(sm, maps, s, head, row0, n_kt);
  } else {
    setmaxnreg_inc<FlashConsumerRegs<NC>::value>();
    flash_consume<T, D, NC, BN, STAGES, CAUSAL>(sm, o + head * s.o_h, s, row0, n_kt, wg - 1, tid);
  }
}

}  // namespace hopper
}  // namespace mx
#endif  // MX_HOST
