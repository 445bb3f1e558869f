// mirage_xdsl device library: the sm_90a (Hopper) GEMM mainloop, warp-specialised.
//
//   C[c][m][n] = sum_k A[c][m][k] * B[c][k][n]     (fp16 or bf16 in, fp32 accumulate, T out)
//
// One block of 128 * (1 + NC) threads: warpgroup 0 is the producer (one thread issues TMA
// loads `cp.async.bulk.tensor` into a STAGES-deep ring of shared-memory buffers, each
// completing on its `full` mbarrier with a transaction count), warpgroups 1..NC are the
// consumers (each owns a 64 x BN slab of the BM = 64*NC x BN output tile, runs `wgmma`
// m64nBNk16 with both operands in shared memory and fp32 accumulators in registers, and
// frees a buffer by arriving on its `empty` mbarrier).  The grid is persistent: block b
// computes tiles b, b + gridDim.x, ... of the batch x m-block x n-block space, visited in
// grouped (L2) order: groups of `group_m` m-blocks sweep the n-blocks column by column, so
// the A rows of a group and the B columns of a few n-blocks stay in L2 (Triton's matmul
// tutorial calls this "grouped ordering"); group_m <= 1 is the plain row-major order.
//
// Operand layouts in shared memory (PTX ISA 8.x, "Asynchronous Warpgroup Level Matrix
// Shared Memory Layout", canonical layouts with the 128-byte swizzle):
//   A: K-major, BM rows of 64 elements (128 B), TMA box {64, BM} with CU_TENSOR_MAP_SWIZZLE_128B;
//      descriptor SBO = 1024 B (8 rows), k-step = +32 B on the start address.
//   B, TRANS_B = 0 (K-major, B given as N rows of K): like A, BN rows.
//   B, TRANS_B = 1 (MN-major, B given as K rows of N, e.g. a row-major [K, N] matrix):
//      BN/64 boxes of {64 (n), 64 (k)}, each 64 rows of 128 B; descriptor LBO = one box
//      (the stride between 64-wide n chunks), SBO = 1024 B (8 k rows), k-step = +2048 B.
// Tensor maps are 4-D: {inner, rows, batch_inner, batch_outer}; batch index
// c = c_outer * batch_inner + c_inner, so a batch made of two non-fusable dims (e.g. b and h
// of `bkhd`) needs no copy.  Out-of-range rows/columns/k are zero-filled by TMA and not
// stored.
//
// Epilogue option MUL (seed 004's ELWISE_MUL): C = (A x B) * D elementwise, D laid out like C.
// Host side: runtime/tensor_map.py encodes the maps (cuTensorMapEncodeTiled) per call.
// Requires sm_90a (wgmma, setmaxnreg); the host emulator does not model it.
#pragma once
#ifndef MX_HOST
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "hopper_wgmma.cuh"

namespace mx {
namespace hopper {

struct GemmShape {
  int m, n, k;             // per-batch problem size (elements)
  int batch;               // number of batches (c)
  int batch_inner;         // c = c_outer * batch_inner + c_inner
  long long ldc;           // C row stride (elements)
  long long c_inner_stride, c_outer_stride;  // C batch strides (elements)
  int group_m;             // L2 group height in m-blocks; <= 1: plain row-major block order
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// Wait until the phase of parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// TMA: a 4-D box of `map` at coordinates (c0 innermost .. c3) into shared memory `dst`.
__device__ __forceinline__ void tma_load_4d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2,
                                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
// The same load multicast to the CTAs of `mask` in the cluster: the data lands at `dst`'s offset
// and completes bytes on `bar`'s offset in each of them.
__device__ __forceinline__ void tma_load_4d_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1,
                                                      int c2, int c3, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4, %5, %6}], [%2], %7;" ::"r"(smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "h"(mask)
      : "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// Arrive on the mbarrier at `bar`'s offset in CTA `cta` of the cluster.  The arrival keeps the
// default .release.cta semantics: the consumer's reads of the buffer it frees are wgmma reads
// already waited for, so nothing needs cluster-scope ordering, and `.release.cluster` made every
// k-tile of a cluster-pair GEMM about 3x slower on an H200 (2026-11-28: an MLP's 128 x 4096 x
// 12288 down projection in 64 x 64 tiles 66 -> 205 TFLOP/s, `bshd,hdn` 460 -> 605).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
      "r"(cta)
      : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<uint64_t>(p)));
}
// MUL epilogue: L2 prefetch of the consumer's 64 x BN slab of the factor, one 128-byte line
// (64 elements of a row) per thread and step, issued MUL_PREFETCH_KTILES k-tiles before the
// epilogue reads it, so that its loads hit L2 instead of waiting on DRAM.
template <class T, int BN>
__device__ __forceinline__ void prefetch_mul_slab(const T* mbase, const GemmShape& s, int row0, int col0, int tid) {
  constexpr int LINES = BN / 64;  // 128-byte lines per row (2-byte elements)
  for (int l = tid; l < 64 * LINES; l += 128) {
    const int row = row0 + l / LINES, col = col0 + (l % LINES) * 64;
    if (row < s.m && col < s.n) prefetch_l2(mbase + (long long)row * s.ldc + col);
  }
}
constexpr int MUL_PREFETCH_KTILES = 4;
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Tile t of the persistent sweep -> (batch, m-block, n-block), grouped (L2) or plain order.
__device__ __forceinline__ void tile_coords(int t, int mblocks, int nblocks, int group_m, int& c, int& mb, int& nb) {
  const int per_batch = mblocks * nblocks;
  c = t / per_batch;
  const int r = t - c * per_batch;
  if (group_m <= 1) {
    mb = r / nblocks;
    nb = r - mb * nblocks;
    return;
  }
  const int per_group = group_m * nblocks;
  const int g = r / per_group;
  const int first = g * group_m;
  const int height = min(mblocks - first, group_m);
  const int q = r - g * per_group;
  mb = first + q % height;
  nb = q / height;
}

// The coordinates of tile `t` of a sweep: `tile_coords`, except that SHARE_A CTA pairs take
// neighbouring n-blocks of one m-block (they share the A tile): tiles 2p and 2p + 1 are the
// n-blocks 2j and 2j + 1 of the p-th tile of the grouped order over paired n-blocks (an even
// n-block count, the planner's rule).
template <int SHARE_A>
__device__ __forceinline__ void unit_coords(int t, int mblocks, int nblocks, int group_m, int& c, int& mb, int& nb) {
  if constexpr (SHARE_A) {
    tile_coords(t >> 1, mblocks, nblocks >> 1, group_m, c, mb, nb);
    nb = 2 * nb + (t & 1);
  } else {
    tile_coords(t, mblocks, nblocks, group_m, c, mb, nb);
  }
}

template <class T>
__device__ __forceinline__ void store_pair(T* p, float a, float b);
template <>
__device__ __forceinline__ void store_pair<half>(half* p, float a, float b) {
  *reinterpret_cast<half2*>(p) = __floats2half2_rn(a, b);
}
template <>
__device__ __forceinline__ void store_pair<__nv_bfloat16>(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float a, float b);
template <>
__device__ __forceinline__ uint32_t pack2<half>(float a, float b) {
  half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&h);
}

// C epilogues of `gemm_ws`.
enum Epilogue : int {
  kStore4 = 0,    // 4-byte stores straight from the accumulator fragment
  kStore16 = 1,   // 16-byte stores after a 4 x 4 transpose within each quad (shuffles)
  kTmaStore = 2,  // 16-byte writes into a 128-B-swizzled staging tile, then TMA stores (async:
                  // the next tile's mainloop overlaps them); needs the C tensor map
};

// Bytes of dynamic shared memory `gemm_ws` needs: the ring, for kTmaStore one 64 x BN staging
// tile per consumer slab (ping-pong: NC slabs per consumer), the ring's mbarriers, the two
// ping-pong order mbarriers, the split-K arrival words, the MUL factor's two mbarriers and 1
// KiB for the 1024-B alignment of the swizzled tiles.
template <class T, int BN, int STAGES, int NC, int EPI, int PINGPONG = 0, int CSLABS = 1>
constexpr int gemm_ws_smem_bytes() {
  return STAGES * (64 * NC * (PINGPONG ? 1 : CSLABS) + BN) * 64 * (int)sizeof(T) +
         (EPI == kTmaStore ? NC * (PINGPONG ? NC : CSLABS) * 64 * BN * (int)sizeof(T) : 0) + 2 * STAGES * 8 + 16 + 16 +
         16 + 1024;
}

__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, const void* src, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// The 16 bytes of row `h` (0: lane/4, 1: lane/4 + 8) of n8 block 4*jg + (lane & 3): a 4 x 4
// transpose within the quad, whose 4 lanes hold 2 columns each of blocks 4*jg .. 4*jg+3.  Lane
// q's word j is M[q][j] (block j, columns 2q, 2q + 1); it needs M[0..3][q].  Two butterfly steps
// (the recursive 2 x 2 block transpose): across lanes q ^ 2 the words whose index differs from q
// in bit 1 are exchanged (the off-diagonal 2 x 2 blocks), then across lanes q ^ 1 those whose
// index differs in bit 0 -- four shuffles and twelve selects on a lane bit, where picking words
// by a lane-dependent index costs a chain of compares and selects per shuffle.
template <class T, int N>
__device__ __forceinline__ uint4 quad_row16(const float (&d)[N], int jg, int h, int lane) {
  const bool q1 = lane & 2, q0 = lane & 1;
  uint32_t m[4];
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) m[jj] = pack2<T>(d[4 * (4 * jg + jj) + 2 * h], d[4 * (4 * jg + jj) + 2 * h + 1]);
  // step 1: words 2, 3 (lanes with q1 = 0) or 0, 1 (q1 = 1) go to lane q ^ 2, into the same slots
  const uint32_t x0 = __shfl_xor_sync(0xffffffffu, q1 ? m[0] : m[2], 2);
  const uint32_t x1 = __shfl_xor_sync(0xffffffffu, q1 ? m[1] : m[3], 2);
  const uint32_t a0 = q1 ? x0 : m[0], a1 = q1 ? x1 : m[1], a2 = q1 ? m[2] : x0, a3 = q1 ? m[3] : x1;
  // step 2: words 1, 3 (q0 = 0) or 0, 2 (q0 = 1) go to lane q ^ 1
  const uint32_t y0 = __shfl_xor_sync(0xffffffffu, q0 ? a0 : a1, 1);
  const uint32_t y1 = __shfl_xor_sync(0xffffffffu, q0 ? a2 : a3, 1);
  return make_uint4(q0 ? y0 : a0, q0 ? a1 : y0, q0 ? y1 : a2, q0 ? a3 : y1);
}

// The default activation of `gemm_ws`: none (the accumulators are stored as they are).
struct NoActivation {
  static constexpr bool kIdentity = true;
  static __device__ __forceinline__ float apply(float x) { return x; }
};

// Free a ring buffer: arrive on its `empty` barrier in this CTA and, in a cluster, in the peer
// (which multicasts into this CTA's buffer too).
template <int CLUSTER>
__device__ __forceinline__ void release(uint64_t* bar, int rank) {
  mbar_arrive(bar);
  if constexpr (CLUSTER > 1) mbar_arrive_cluster(bar, (uint32_t)(rank ^ 1));
}

// The kernel body; call from a `__global__ __launch_bounds__(128 * (NC + 1), 1)` kernel with
// `gemm_ws_smem_bytes<...>()` bytes of dynamic shared memory and the tensor maps passed as
// One work unit of a block's persistent sweep: tile `t`, its k-tiles [k0, k1), `u` the unit's
// index in the sweep (split-K slab), `own` = this CTA stores it (else its cluster peer's).
struct Unit {
  int t, k0, k1, u;
  bool own;
};

// The block of a stream-K sweep (STREAM > 0) whose k-iteration range holds global k-iteration
// i: the grid's G blocks take the ranges [floor(total * b / G), floor(total * (b + 1) / G)), so
// the owner of i is the largest b with floor(total * b / G) <= i.
__device__ __forceinline__ int stream_owner(long long i, long long total, int grid) {
  return (int)(((i + 1) * grid - 1) / total);
}

// The work units of one block, in sweep order.  SPLIT / CLUSTER sweeps: unit groups g =
// blockIdx / CLUSTER, + gridDim / CLUSTER, ...; a group's CLUSTER units are the cluster's
// CTAs' (a CTA past the last unit takes its peer's, not stored), unit u = t * SPLIT + sp covers
// k-tiles [sp * ktiles / SPLIT, (sp + 1) * ktiles / SPLIT).  STREAM > 0 (stream-K, CLUSTER = 1,
// SPLIT = 1): the tiles x ktiles k-iterations, tile-major, are cut into gridDim.x contiguous
// ranges of equal length (+-1), one per block; a block's units are the pieces of its range
// inside one tile each (a tile is shared by the blocks whose ranges meet it).
template <int CLUSTER, int SPLIT, int STREAM>
struct UnitWalk {
  int g, groups, step, units, ktiles, rank;
  long long pos, end;
  __device__ __forceinline__ UnitWalk(int tiles, int ktiles_, int rank_) : ktiles(ktiles_), rank(rank_) {
    units = tiles * SPLIT;
    groups = (units + CLUSTER - 1) / CLUSTER;
    g = blockIdx.x / CLUSTER;
    step = gridDim.x / CLUSTER;
    const long long total = (long long)tiles * ktiles;
    pos = total * blockIdx.x / gridDim.x;
    end = total * (blockIdx.x + 1) / gridDim.x;
  }
  __device__ __forceinline__ bool next(Unit& w) {
    if constexpr (STREAM > 0) {
      if (pos >= end) return false;
      w.t = (int)(pos / ktiles);
      w.k0 = (int)(pos % ktiles);
      w.k1 = (int)(w.k0 + (end - pos < ktiles - w.k0 ? end - pos : ktiles - w.k0));
      w.u = w.t;
      w.own = true;
      pos += w.k1 - w.k0;
      return true;
    } else {
      if (g >= groups) return false;
      w.own = g * CLUSTER + rank < units;
      w.u = w.own ? g * CLUSTER + rank : g * CLUSTER;
      w.t = w.u / SPLIT;
      const int sp = w.u % SPLIT;
      w.k0 = sp * ktiles / SPLIT;
      w.k1 = (sp + 1) * ktiles / SPLIT;
      g += step;
      return true;
    }
  }
};

// `const __grid_constant__ CUtensorMap` parameters (`tmc`: C as {n, m, c_inner, c_outer},
// box {64, 64, 1, 1}, 128-B swizzle; used by kTmaStore only, else may be null).  kStore16
// needs n, ldc and the batch strides to be multiples of 8 elements.  Each consumer keeps one
// wgmma group in flight (wait_group 1) and frees the buffer of the previous k-tile.
// CLUSTER = 2 (the kernel declared `__cluster_dims__(2, 1, 1)`, an even grid): the two CTAs of
// a cluster take tiles 2p and 2p + 1 of the grouped order, which share their n-block when the
// group height is even (group_m and the m-block count even, the planner's rule); each loads
// half of the B boxes and multicasts them to both, so a ring buffer is refilled only when the
// consumers of both CTAs have freed it (remote mbarrier arrivals).  A CTA without a tile of its
// own in the last pair computes its peer's tile and stores nothing.
// MUL = 1 or 2 (seed 004's ELWISE_MUL epilogue): `mul` is a tensor laid out like C (ldc and C's
// batch strides); each accumulator is multiplied by its element, in fp32, before the store.
// MUL = 1: the consumer prefetches its slab of `mul` into L2 MUL_PREFETCH_KTILES k-tiles before
// the end of the tile's mainloop and the 16-byte epilogues (n, ldc and strides multiples of 8)
// load it in 4-byte pairs.  MUL = 2 (kTmaStore, SPLIT = 1, STREAM = 0): the factor comes by TMA
// through `tmd` (D's map, C's geometry): MUL_PREFETCH_KTILES k-tiles before the end of a tile's
// mainloop the consumer's thread 0 waits until its previous tile's stores have read the staging
// tiles and loads the consumer's D slabs into them (completing on the consumer's `dmul`
// mbarrier); the epilogue reads each accumulator's factor from shared memory and the C fragment
// then overwrites it in place (rows are warp-private, so a __syncwarp orders the two), instead
// of global loads waiting on L2 while the accumulators hold most registers.
// SPLIT > 1 (split-K, CLUSTER = 1): each tile's k-tiles are cut into SPLIT consecutive ranges,
// work units t * SPLIT + sp of the persistent sweep; every unit stores its fp32 accumulators to
// its slab of `ws` (SPLIT * tiles * BM * BN floats, in register order), then takes a ticket on
// the tile's arrival counter `cnt[t * NC + consumer]` (zero before the launch); the unit that
// arrives last sums the SPLIT slabs in split order (deterministic), re-arms the counter to
// zero and runs the epilogue.
// STREAM > 0 (stream-K, CLUSTER = 1, SPLIT = 1, PINGPONG = 0; Osama et al., "Stream-K:
// Work-centric Parallel Decomposition for Dense Matrix-Matrix Multiplication on the GPU",
// PPoPP 2023): the tiles x ktiles k-iterations are cut into gridDim.x equal contiguous ranges,
// one per block (`UnitWalk`), so every SM streams the same number of k-tiles however the tile
// count divides the SM count.  A unit that covers a whole tile stores it directly; the P
// blocks sharing a tile each store their partial accumulators to slab p (their order along the
// tile's k-tiles) of the tile's STREAM slabs of `ws` (tiles * STREAM * BM * BN floats; STREAM
// >= the most blocks any tile is shared by, the host's bound ceil(ktiles / floor(total /
// grid)) + 1), then take a ticket on `cnt[t * NC + consumer]`; the last to arrive sums the P
// slabs in k order (deterministic), re-arms the counter and runs the epilogue.
// ACT (kn-partition's epilogue chains): a type with `static constexpr bool kIdentity = false`
// and `static __device__ float apply(float)`, applied to every fp32 accumulator before MUL's
// factor: the stored value is ACT(A x B) [* D].
// PINGPONG = 1 (NC = 2, SPLIT = 1, BN <= 128; CUTLASS calls this schedule
// "ping-pong"): the consumers no longer share a tile; each computes whole BM x BN tiles (its
// NC m64 slabs, BN floats of accumulators per thread), the block's tiles alternating between
// them.  The producer fills the ring in tile order, so consumer 0 runs tile 0's mainloop
// while consumer 1 waits for tile 1's data, then consumer 1 runs its mainloop while consumer
// 0 stores tile 0: the epilogue of one tile overlaps the mainloop of the next, which the
// cooperative schedule leaves exposed (it matters when a tile has few k-tiles).  An order
// mbarrier per consumer lets a consumer start its next mainloop only after the other has
// passed every ring wait of its tile: a consumer skips the other's k-tiles in its ring count,
// and the parity waits (`mbar_wait`) are only unambiguous while the waiter is at most one
// phase behind the barrier.  With CLUSTER = 2 both CTAs of a pair walk the same unit groups, so
// their rings hold the same (unit, k-tile) in each stage and consumer i of both CTAs frees it.
// SHARE_A = 1 (CLUSTER = 2): the pair's CTAs take neighbouring n-blocks of one m-block
// (`unit_coords`) and share the A tile instead: each loads half of its rows (the A map's box is
// BM / 2 rows) and multicasts them, and loads its own B tile -- cuBLAS's 1 x 2 clusters; with
// 256 x 128 tiles the shared operand is the larger one.
// CSLABS = 2 (cooperative, no split- or stream-K, BN <= 128): each consumer owns two m64 slabs
// of the tile (BM = 128 * NC, e.g. 256 x 128 tiles; BN fp32 accumulators per thread), so the
// B tile of a stage feeds twice the rows -- the tile cuBLAS picks for 8 x 1024^3 (sm90
// `256x128_64x4` kernels).
template <class T, int BN, int STAGES, int NC, int TRANS_B, int EPI, int CLUSTER = 1, int MUL = 0,
          class ACT = NoActivation, int SPLIT = 1, int PINGPONG = 0, int STREAM = 0, int CSLABS = 1, int SHARE_A = 0>
__device__ __forceinline__ void gemm_ws(const CUtensorMap* tma, const CUtensorMap* tmb, const CUtensorMap* tmc,
                                        T* __restrict__ c, const GemmShape s, const T* __restrict__ mul = nullptr,
                                        float* __restrict__ ws = nullptr, unsigned* __restrict__ cnt = nullptr,
                                        const CUtensorMap* tmd = nullptr) {
  constexpr int BK = 64;  // 64 fp16/bf16 = one 128-byte swizzle row
  constexpr int MS = PINGPONG ? NC : CSLABS;  // m64 slabs of one consumer's tile
  constexpr int BM = PINGPONG ? 64 * NC : 64 * NC * CSLABS;
  constexpr int A_BYTES = BM * BK * (int)sizeof(T);
  constexpr int B_BYTES = BN * BK * (int)sizeof(T);
  constexpr int C_BYTES = 64 * BN * (int)sizeof(T);  // one consumer's staging tile (kTmaStore)
  constexpr bool MUL_TMA = MUL == 2;  // the factor comes by TMA into the staging tiles
  static_assert(MUL != 2 || (EPI == kTmaStore && SPLIT == 1 && STREAM == 0),
                "MUL = 2 (the factor by TMA) needs the kTmaStore epilogue, no split- and no stream-K");
  static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "BN must be 64, 128, 192 or 256");
  static_assert(SPLIT == 1 || CLUSTER == 1, "split-K runs without clusters");
  static_assert(STREAM == 0 || (CLUSTER == 1 && SPLIT == 1 && !PINGPONG), "stream-K: no cluster, split-K or ping-pong");
  static_assert(!SHARE_A || CLUSTER == 2, "SHARE_A: CTA pairs");
  static_assert(CSLABS == 1 || (CSLABS == 2 && !PINGPONG && SPLIT == 1 && STREAM == 0 && BN <= 128),
                "two slabs per consumer: cooperative, no split- or stream-K, BN <= 128");
  static_assert(!PINGPONG || (NC == 2 && SPLIT == 1 && BN <= 128),
                "ping-pong: two consumers, no split-K, BN <= 128 (BN fp32 accumulators per thread)");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem =
      smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);  // the 128-B swizzle needs 1024-B alignment
  unsigned char* sa = smem;
  unsigned char* sb = smem + STAGES * A_BYTES;
  unsigned char* sc = sb + STAGES * B_BYTES;
  uint64_t* full = reinterpret_cast<uint64_t*>(sc + (EPI == kTmaStore ? NC * MS * C_BYTES : 0));
  uint64_t* empty = full + STAGES;
  uint64_t* order = empty + STAGES;  // PINGPONG: consumer i may start its next mainloop
  int* split_ticket = reinterpret_cast<int*>(order + 2);  // one word per consumer (SPLIT > 1)
  uint64_t* dmul = reinterpret_cast<uint64_t*>(split_ticket + 4);  // MUL_TMA: the D slabs of consumer i landed
  const int wg = warpgroup_index();  // warp-uniform to nvcc: the consumer's descriptors in uniform registers
  const int tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; ++i) {
      mbar_init(&full[i], 1);
      // lane 0 of every consumer warp of the cluster (PINGPONG: of the tile's one consumer)
      mbar_init(&empty[i], CLUSTER * (PINGPONG ? 1 : NC) * 4);
    }
    if (PINGPONG) {
      mbar_init(&order[0], 1);
      mbar_init(&order[1], 1);
    }
    if (MUL_TMA) {
      for (int i = 0; i < NC; ++i) mbar_init(&dmul[i], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    prefetch_tensor_map(tma);
    prefetch_tensor_map(tmb);
    if (EPI == kTmaStore) prefetch_tensor_map(tmc);
    if (MUL_TMA) prefetch_tensor_map(tmd);
  }
  if constexpr (CLUSTER > 1) {
    cluster_sync();  // the peer's barriers are initialised before any multicast or remote arrival
  } else {
    __syncthreads();
  }
  const int mblocks = (s.m + BM - 1) / BM;
  const int nblocks = (s.n + BN - 1) / BN;
  const int tiles = mblocks * nblocks * s.batch;
  const int ktiles = (s.k + BK - 1) / BK;
  const int rank = CLUSTER > 1 ? (int)cluster_rank() : 0;
  if (wg == 0) {
    // register budget of the SM's 64K registers (PTX ISA setmaxnreg): the producer warpgroup
    // keeps 40 per thread, each consumer 232 (128 fp32 accumulators + descriptors and
    // addresses): 128 * 40 + 2 * 128 * 232 = 64512 <= 65536
    setmaxnreg_dec<40>();
    if (tid == 0) {
      int stage = 0;
      unsigned phase = 0;
      UnitWalk<CLUSTER, SPLIT, STREAM> walk(tiles, ktiles, rank);
      for (Unit w; walk.next(w);) {
        int cb, mb, nb;
        unit_coords<SHARE_A>(w.t, mblocks, nblocks, s.group_m, cb, mb, nb);
        const int ci = cb % s.batch_inner, co = cb / s.batch_inner;
        for (int kt = w.k0; kt < w.k1; ++kt) {
          mbar_wait(&empty[stage], phase ^ 1);
          mbar_expect_tx(&full[stage], A_BYTES + B_BYTES);
          unsigned char* b = sb + stage * B_BYTES;
          if (SHARE_A) {  // this CTA's half of the A rows (the map's box), to both CTAs
            tma_load_4d_multicast(sa + stage * A_BYTES + rank * (BM / 2) * BK * (int)sizeof(T), tma, &full[stage], kt * BK,
                                  mb * BM + rank * (BM / 2), ci, co, (uint16_t)3);
          } else {
            tma_load_4d(sa + stage * A_BYTES, tma, &full[stage], kt * BK, mb * BM, ci, co);
          }
          if (CLUSTER > 1 && !SHARE_A) {  // this CTA's share of the B boxes, to both CTAs
            constexpr int NBOX = TRANS_B ? BN / 64 : 1;
            constexpr int ROWS = TRANS_B ? 64 : BN / CLUSTER;  // K-major B: split the BN rows
            const uint16_t mask = (uint16_t)((1u << CLUSTER) - 1);
            if (TRANS_B) {
#pragma unroll
              for (int j = rank * NBOX / CLUSTER; j < (rank + 1) * NBOX / CLUSTER; ++j)
                tma_load_4d_multicast(b + j * 64 * BK * (int)sizeof(T), tmb, &full[stage], nb * BN + 64 * j, kt * BK, ci, co,
                                      mask);
            } else {
              tma_load_4d_multicast(b + rank * ROWS * BK * (int)sizeof(T), tmb, &full[stage], kt * BK, nb * BN + rank * ROWS,
                                    ci, co, mask);
            }
          } else if (TRANS_B) {
#pragma unroll
            for (int j = 0; j < BN / 64; ++j)
              tma_load_4d(b + j * 64 * BK * (int)sizeof(T), tmb, &full[stage], nb * BN + 64 * j, kt * BK, ci, co);
          } else {
            tma_load_4d(b, tmb, &full[stage], kt * BK, nb * BN, ci, co);
          }
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
      }
    }
  } else {
    setmaxnreg_inc<232>();
    const int cw = wg - 1;
    const int warp = tid / 32, lane = tid % 32;
    float d2[MS][BN / 2];
    float(&d)[BN / 2] = d2[0];  // the accumulators of slab 0 (the only one unless PINGPONG)
    int stage = 0;
    unsigned phase = 0, order_phase = 0, dmul_phase = 0;
    int seq = 0;  // this block's unit count so far (PINGPONG: unit seq belongs to consumer seq % NC)
    // the low and high words of the descriptors of ring stage 0 (A: 16-B leading offset; B
    // MN-major: a whole K-tile of 64-column boxes); the high word (1024-B stride, 128-B
    // swizzle) is the same for both
    const uint32_t a_lo0 = (uint32_t)smem_desc(smem_addr(sa), 16, 1024);
    const uint32_t b_lo0 = (uint32_t)smem_desc(smem_addr(sb), TRANS_B ? BK * 128 : 16, 1024);
    const uint32_t desc_hi = (uint32_t)(smem_desc(0, 16, 1024) >> 32);
    UnitWalk<CLUSTER, SPLIT, STREAM> walk(tiles, ktiles, rank);
    for (Unit w; walk.next(w); ++seq) {
      const bool own = w.own;  // else: the peer's tile, not stored
      const int u = w.u, t = w.t;
      int cb, mb, nb;
      unit_coords<SHARE_A>(t, mblocks, nblocks, s.group_m, cb, mb, nb);
      int prev = -1;  // the stage whose wgmma group may still be reading it
      const int k0 = w.k0, k1 = w.k1;
      if constexpr (PINGPONG) {
        if (seq % NC != cw) {  // the other consumer's tile: pass over its k-tiles in the ring
          phase ^= ((stage + k1 - k0) / STAGES) & 1;
          stage = (stage + k1 - k0) % STAGES;
          continue;
        }
        if (seq > 0) {  // the other consumer has passed the ring waits of the previous tile
          mbar_wait(&order[cw], order_phase);
          order_phase ^= 1;
        }
      }
      for (int kt = k0; kt < k1; ++kt) {
        if constexpr (MUL) {
          if (own && kt == (k1 - k0 > MUL_PREFETCH_KTILES ? k1 - MUL_PREFETCH_KTILES : k0)) {
            const int ci = cb % s.batch_inner, co = cb / s.batch_inner;
            if constexpr (MUL_TMA) {
              if (tid == 0) {
                bulk_wait_read0();  // this thread's stores of the previous tile have read the staging tiles
                mbar_expect_tx(&dmul[cw], MS * C_BYTES);
#pragma unroll
                for (int ms = 0; ms < MS; ++ms) {
#pragma unroll
                  for (int j = 0; j < BN / 64; ++j)
                    tma_load_4d(sc + (cw * MS + ms) * C_BYTES + j * 64 * 128, tmd, &dmul[cw], nb * BN + 64 * j,
                                mb * BM + (PINGPONG ? ms : cw * MS + ms) * 64, ci, co);
                }
              }
            } else {
#pragma unroll
              for (int ms = 0; ms < MS; ++ms)
                prefetch_mul_slab<T, BN>(mul + ci * s.c_inner_stride + co * s.c_outer_stride, s,
                                         mb * BM + (PINGPONG ? ms : cw * MS + ms) * 64, nb * BN, tid);
            }
          }
        }
        mbar_wait(&full[stage], phase);
        // descriptors: the ring's first ones advanced by the stage's, slab's and k-step's byte
        // offsets / 16 in the start-address field (no carry out of it: shared addresses < 256 KB)
        const uint32_t b_lo = b_lo0 + stage * (B_BYTES / 16);
        wgmma_fence();
#pragma unroll
        for (int ms = 0; ms < MS; ++ms) {
          const uint32_t a_lo = a_lo0 + stage * (A_BYTES / 16) + (PINGPONG ? ms : cw * MS + ms) * (64 * BK * (int)sizeof(T) / 16);
#pragma unroll
          for (int kk = 0; kk < BK / 16; ++kk) {
            const uint64_t da = (uint64_t)desc_hi << 32 | (a_lo + kk * 2);
            const uint64_t db = (uint64_t)desc_hi << 32 | (b_lo + (TRANS_B ? kk * 16 * 128 / 16 : kk * 2));
            Wgmma<BN>::template run<TRANS_B, T>(d2[ms], da, db, (kt > k0 || kk > 0) ? 1 : 0);
          }
        }
        wgmma_commit();
        // keep this k-tile's group in flight; the previous one is done, so free its buffer
        wgmma_wait<1>();
        if (prev >= 0 && lane == 0) release<CLUSTER>(&empty[prev], rank);
        prev = stage;
        if (++stage == STAGES) {
          stage = 0;
          phase ^= 1;
        }
      }
      if constexpr (PINGPONG) {
        if (tid == 0) mbar_arrive(&order[cw ^ 1]);  // thread 0 has passed every ring wait of this tile
      }
      wgmma_wait<0>();
      if (prev >= 0 && lane == 0) release<CLUSTER>(&empty[prev], rank);
      if (!own) continue;
      if constexpr (SPLIT > 1) {
        // this unit's partial tile, register order: float i of thread tid at i * 128 + tid
        float* slab = ws + ((long long)u * NC + cw) * (64 * BN);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) __stcg(slab + i * 128 + tid, d[i]);
        __threadfence();
        named_barrier(1 + cw, 128);
        if (tid == 0) split_ticket[cw] = (int)atomicAdd(cnt + t * NC + cw, 1u);
        named_barrier(1 + cw, 128);
        if (split_ticket[cw] != SPLIT - 1) continue;  // another unit of the tile finishes it
        __threadfence();
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
        for (int p = 0; p < SPLIT; ++p) {
          const float* q = ws + ((long long)(t * SPLIT + p) * NC + cw) * (64 * BN);
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) d[i] += __ldcg(q + i * 128 + tid);
        }
        if (tid == 0) cnt[t * NC + cw] = 0u;  // re-armed for the next launch
      }
      if constexpr (STREAM > 0) {
        if (k0 > 0 || k1 < ktiles) {  // a piece of a tile shared with other blocks
          const long long total = (long long)tiles * ktiles;
          const int first = stream_owner((long long)t * ktiles, total, gridDim.x);
          const int parts = stream_owner((long long)t * ktiles + ktiles - 1, total, gridDim.x) - first + 1;
          float* slab = ws + (((long long)t * STREAM + ((int)blockIdx.x - first)) * NC + cw) * (64 * BN);
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) __stcg(slab + i * 128 + tid, d[i]);
          __threadfence();
          named_barrier(1 + cw, 128);
          if (tid == 0) split_ticket[cw] = (int)atomicAdd(cnt + t * NC + cw, 1u);
          named_barrier(1 + cw, 128);
          if (split_ticket[cw] != parts - 1) continue;  // another block finishes the tile
          __threadfence();
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
          for (int p = 0; p < parts; ++p) {
            const float* q = ws + (((long long)t * STREAM + p) * NC + cw) * (64 * BN);
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) d[i] += __ldcg(q + i * 128 + tid);
          }
          if (tid == 0) cnt[t * NC + cw] = 0u;  // re-armed for the next launch
        }
      }
      const int ci = cb % s.batch_inner, co = cb / s.batch_inner;
#pragma unroll
      for (int ms = 0; ms < MS; ++ms) {  // the consumer's slabs: one, CSLABS, or NC under PINGPONG
        float(&acc)[BN / 2] = d2[ms];
        const int slab = PINGPONG ? ms : cw * MS + ms;  // the slab's 64-row block of the BM-row tile
        // Epilogue: accumulator fragment (PTX ISA, wgmma m64nNk16 D layout): register 4j+r holds
        // row 16*warp + lane/4 + 8*(r/2), column 8j + 2*(lane%4) + r%2.
        if constexpr (!ACT::kIdentity) {
#pragma unroll
          for (int i = 0; i < BN / 2; ++i) acc[i] = ACT::apply(acc[i]);
        }
        if constexpr (MUL_TMA) {  // the factor's slab, swizzled like the staging tile C goes through
          if (ms == 0) {
            mbar_wait(&dmul[cw], dmul_phase);
            dmul_phase ^= 1;
          }
          const unsigned char* dtile = sc + (cw * MS + ms) * C_BYTES;
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int r = warp * 16 + lane / 4 + 8 * h;  // acc[4j + 2h + e]: row r, column 8j + 2 (lane % 4) + e
              const uint32_t w = *reinterpret_cast<const uint32_t*>(dtile + (j / 8) * 64 * 128 + r * 128 +
                                                                    (((j % 8) ^ (r & 7)) * 16) + (lane % 4) * 4);
              acc[4 * j + 2 * h] *= static_cast<float>(reinterpret_cast<const T*>(&w)[0]);
              acc[4 * j + 2 * h + 1] *= static_cast<float>(reinterpret_cast<const T*>(&w)[1]);
            }
          }
          __syncwarp();  // every lane has read its factors before the quad's C chunks overwrite them
        } else if constexpr (MUL) {  // acc[4j + 2h + e] is row row0 + 8h, column col0 + 8j + e
          const T* mbase = mul + ci * s.c_inner_stride + co * s.c_outer_stride;
          const int row0 = mb * BM + slab * 64 + warp * 16 + lane / 4;
          const int col0 = nb * BN + 2 * (lane % 4);
#pragma unroll
          for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int row = row0 + 8 * h;
              const int col = col0 + 8 * j;
              const T* p = mbase + (long long)row * s.ldc + col;
              if constexpr (EPI != kStore4) {  // n and the strides are multiples of 8: aligned pairs
                if (row < s.m && col < s.n) {
                  const uint32_t w = __ldg(reinterpret_cast<const unsigned int*>(p));
                  acc[4 * j + 2 * h] *= static_cast<float>(reinterpret_cast<const T*>(&w)[0]);
                  acc[4 * j + 2 * h + 1] *= static_cast<float>(reinterpret_cast<const T*>(&w)[1]);
                }
              } else {
                if (row < s.m && col < s.n) acc[4 * j + 2 * h] *= static_cast<float>(p[0]);
                if (row < s.m && col + 1 < s.n) acc[4 * j + 2 * h + 1] *= static_cast<float>(p[1]);
              }
            }
          }
        }
        if constexpr (EPI == kTmaStore) {
          // the staging tiles are free once the previous tile's TMA stores have read them
          if (ms == 0) {
            if (tid == 0) bulk_wait_read0();
            named_barrier(1 + cw, 128);
          }
          unsigned char* stile = sc + (cw * MS + ms) * C_BYTES;
#pragma unroll
          for (int jg = 0; jg < BN / 32; ++jg) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const uint4 v = quad_row16<T>(acc, jg, h, lane);
              const int j = 4 * jg + (lane & 3);  // n8 block: box j / 8, 16-byte chunk j % 8
              const int r = warp * 16 + lane / 4 + 8 * h;
              *reinterpret_cast<uint4*>(stile + (j / 8) * 64 * 128 + r * 128 + (((j % 8) ^ (r & 7)) * 16)) = v;
            }
          }
          fence_async_smem();
          named_barrier(1 + cw, 128);
          if (tid == 0) {
#pragma unroll
            for (int j = 0; j < BN / 64; ++j) tma_store_4d(tmc, stile + j * 64 * 128, nb * BN + 64 * j, mb * BM + slab * 64, ci, co);
            bulk_commit();
          }
        } else {
          T* cbase = c + ci * s.c_inner_stride + co * s.c_outer_stride;
          const int row0 = mb * BM + slab * 64 + warp * 16 + lane / 4;
          if constexpr (EPI == kStore16) {
#pragma unroll
            for (int jg = 0; jg < BN / 32; ++jg) {
#pragma unroll
              for (int h = 0; h < 2; ++h) {
                const uint4 v = quad_row16<T>(acc, jg, h, lane);
                const int row = row0 + 8 * h;
                const int col = nb * BN + 32 * jg + 8 * (lane & 3);
                if (row < s.m && col < s.n) {
#ifdef MX_HOPPER_STORE_CS
                  asm volatile("st.global.cs.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(cbase + (long long)row * s.ldc + col),
                               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                               : "memory");
#else
                  st_global_16(cbase + (long long)row * s.ldc + col, v);
#endif
                }
              }
            }
          } else {
            const int col0 = nb * BN + 2 * (lane % 4);
#pragma unroll
            for (int j = 0; j < BN / 8; ++j) {
              const int col = col0 + 8 * j;
              if (col < s.n) {
                if (row0 < s.m) store_pair<T>(cbase + (long long)row0 * s.ldc + col, acc[4 * j], acc[4 * j + 1]);
                if (row0 + 8 < s.m) store_pair<T>(cbase + (long long)(row0 + 8) * s.ldc + col, acc[4 * j + 2], acc[4 * j + 3]);
              }
            }
          }
        }
      }
    }
    if (EPI == kTmaStore && tid == 0) bulk_wait0();
  }
  if constexpr (CLUSTER > 1) cluster_sync();  // no CTA leaves while its peer may still signal it
}

}  // namespace hopper
}  // namespace mx
#endif  // MX_HOST
