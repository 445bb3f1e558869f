// mirage_xdsl device library: elementwise chains, reductions, accumulator initialisation.
//
// A fusion chain is one call: the generated lambda `f(o, a, b, c)` gets the old output value
// (when READ) and up to three inputs, all fp32, and returns the value to store.  Inputs
// are described by layouts with the OUTPUT's mode sizes (broadcast modes have stride 0),
// so one flat index addresses every operand.
#pragma once
#include "core.cuh"

namespace mx {

template <int NT, class LO, class T>
__device__ __forceinline__ void fill(T* o, float v, int tid) {
  const T x = from_f<T>(v);
  for_each_mine<NT, LO::size>(tid, [&](int i) { o[LO::off(i)] = x; });
}

// o[OBASE + LO(i)] = f(o, a[LA(i)], b[LB(i)], c[LC(i)]) for every i of LO.
template <int NT, int OBASE, class LO, class LA, class LB, class LC, bool READ, class TO, class TA, class TB, class TC,
          class F>
__device__ __forceinline__ void elementwise(TO* o, const TA* a, const TB* b, const TC* c, int tid, F f) {
  for_each_mine<NT, LO::size>(tid, [&](int i) {
    float va = 0.0f, vb = 0.0f, vc = 0.0f, vo = 0.0f;
    if constexpr (LA::size != 0) va = to_f(a[LA::off(i)]);
    if constexpr (LB::size != 0) vb = to_f(b[LB::off(i)]);
    if constexpr (LC::size != 0) vc = to_f(c[LC::off(i)]);
    const int oo = LO::swz(OBASE + LO::raw(i));
    if constexpr (READ) vo = to_f(o[oo]);
    o[oo] = from_f<TO>(f(vo, va, vb, vc));
  });
}

// The causal mask of a tile (cute.causal_mask, dialects/cute/mask_ops.py):
// o[LO(i)] = f(o, a[LA(i)]) where element i's global column col0 + (i / CDIV) % CN is at most
// its global row row0 + (i / RDIV) % RN + offset, f(o, -inf) elsewhere.  RDIV / CDIV are the
// products of the modes of LO before the row / column mode (LO walks the tile in its order).
template <int NT, class LO, class LA, int RDIV, int RN, int CDIV, int CN, bool READ, class TO, class TA, class F>
__device__ __forceinline__ void causal_mask(TO* o, const TA* a, int row0, int col0, int offset, int tid, F f) {
  for_each_mine<NT, LO::size>(tid, [&](int i) {
    const int r = row0 + (i / RDIV) % RN, c = col0 + (i / CDIV) % CN;
    const float va = c <= r + offset ? to_f(a[LA::off(i)]) : neg_inf();
    const int oo = LO::swz(LO::raw(i));
    float vo = 0.0f;
    if constexpr (READ) vo = to_f(o[oo]);
    o[oo] = from_f<TO>(f(vo, va));
  });
}

// How reduce_rows / block_reduce combine values: a sum (identity 0), a sum of squares (each
// element squared in fp32 as it is read) or a max (identity -inf).  `in` maps an element read
// from the tile; `apply` combines values, partial results included.
struct SumOp {
  __device__ __forceinline__ static float identity() { return 0.0f; }
  __device__ __forceinline__ static float in(float x) { return x; }
  __device__ __forceinline__ static float apply(float a, float b) { return a + b; }
};
struct SumSquaresOp {
  __device__ __forceinline__ static float identity() { return 0.0f; }
  __device__ __forceinline__ static float in(float x) { return x * x; }
  __device__ __forceinline__ static float apply(float a, float b) { return a + b; }
};
struct MaxOp {
  __device__ __forceinline__ static float identity() { return neg_inf(); }
  __device__ __forceinline__ static float in(float x) { return x; }
  __device__ __forceinline__ static float apply(float a, float b) { return fmaxf(a, b); }
};

// Reduce K strided group members per output with C (SumOp, MaxOp): v(out) = C_k in[LI.raw(out)
// + k*KS] (LI has the output's mode sizes and the input's strides; KS = group * input stride
// of the reduced dim), then o = f(o, v).  G threads (a power of two) share one output and
// combine partial values with warp shuffles; every thread runs the same number of rounds so
// the shuffles are warp-uniform.  G > 32 (few outputs per block): each warp's shuffled value
// goes to `scratch` (NT/32 floats) and the first lane of the group combines them -- every
// thread of the block must call it then (barriers).
template <class C, int NT, int G, int K, int KS, class LO, class LI, bool READ, class TO, class TI, class F>
__device__ __forceinline__ void reduce_rows(TO* o, const TI* in, float* scratch, int tid, F f) {
  constexpr int PER = NT / G;
  const int lane = tid % G;
  const int slot = tid / G;
#pragma unroll 1
  for (int base = 0; base < LO::size; base += PER) {
    const int oi = base + slot;
    const bool valid = oi < LO::size;
    float acc = C::identity();
    if (valid) {
      const int b = LI::raw(oi);
#pragma unroll 4
      for (int k = lane; k < K; k += G) acc = C::apply(acc, C::in(to_f(in[LI::swz(b + k * KS)])));
    }
    if constexpr (G > 32) {
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) acc = C::apply(acc, __shfl_xor_sync(0xffffffffu, acc, s));
      if ((tid & 31) == 0) scratch[tid >> 5] = acc;
      __syncthreads();
      if (valid && lane == 0) {
        acc = C::identity();
#pragma unroll
        for (int w = 0; w < G / 32; ++w) acc = C::apply(acc, scratch[(tid >> 5) + w]);
      }
    } else {
      static_cast<void>(scratch);
      if constexpr (G > 1) {
#pragma unroll
        for (int s = G / 2; s > 0; s >>= 1) acc = C::apply(acc, __shfl_xor_sync(0xffffffffu, acc, s));
      }
    }
    if (valid && lane == 0) {
      const int oo = LO::off(oi);
      float vo = 0.0f;
      if constexpr (READ) vo = to_f(o[oo]);
      o[oo] = from_f<TO>(f(vo, acc));
    }
    if constexpr (G > 32) __syncthreads();  // the scratch is reused by the next round
  }
}

// The sums of reduce_rows (tb.reduction, strided groups) and its plain max (tb.reduce_max).
template <int NT, int G, int K, int KS, class LO, class LI, bool READ, class TO, class TI, class F>
__device__ __forceinline__ void reduce_sum(TO* o, const TI* in, float* scratch, int tid, F f) {
  reduce_rows<SumOp, NT, G, K, KS, LO, LI, READ>(o, in, scratch, tid, f);
}
template <int NT, int G, int K, int KS, class LO, class LI, bool READ, class TO, class TI, class F>
__device__ __forceinline__ void reduce_sum_squares(TO* o, const TI* in, float* scratch, int tid, F f) {
  reduce_rows<SumSquaresOp, NT, G, K, KS, LO, LI, READ>(o, in, scratch, tid, f);
}
template <int NT, int G, int K, int KS, class LO, class LI, bool READ, class TO, class TI, class F>
__device__ __forceinline__ void reduce_max(TO* o, const TI* in, float* scratch, int tid, F f) {
  reduce_rows<MaxOp, NT, G, K, KS, LO, LI, READ>(o, in, scratch, tid, f);
}

// Running max over calls (Mirage reduction_max): m = max_k in, new = max(old, m),
// mx = new, diff = old - new.  `mx` starts at -inf (fill before the loop).  G threads per
// output as in reduce_rows: G > 32 (one output for the whole block, a cross-entropy row) combines
// the warps' maxima through `scratch` (NT/32 floats), and every thread of the block must call it.
template <int NT, int G, int K, int KS, class LO, class LD, class LI, class TO, class TD, class TI>
__device__ __forceinline__ void reduce_max_running(TO* mxp, TD* diff, const TI* in, float* scratch, int tid) {
  constexpr int PER = NT / G;
  const int lane = tid % G;
  const int slot = tid / G;
#pragma unroll 1
  for (int base = 0; base < LO::size; base += PER) {
    const int oi = base + slot;
    const bool valid = oi < LO::size;
    float acc = neg_inf();
    if (valid) {
      const int b = LI::raw(oi);
#pragma unroll 4
      for (int k = lane; k < K; k += G) acc = fmaxf(acc, to_f(in[LI::swz(b + k * KS)]));
    }
    if constexpr (G > 32) {
#pragma unroll
      for (int s = 16; s > 0; s >>= 1) acc = fmaxf(acc, __shfl_xor_sync(0xffffffffu, acc, s));
      if ((tid & 31) == 0) scratch[tid >> 5] = acc;
      __syncthreads();
      if (valid && lane == 0) {
        acc = neg_inf();
#pragma unroll
        for (int w = 0; w < G / 32; ++w) acc = fmaxf(acc, scratch[(tid >> 5) + w]);
      }
    } else {
      static_cast<void>(scratch);
      if constexpr (G > 1) {
#pragma unroll
        for (int s = G / 2; s > 0; s >>= 1) acc = fmaxf(acc, __shfl_xor_sync(0xffffffffu, acc, s));
      }
    }
    if (valid && lane == 0) {
      const int oo = LO::off(oi);
      const float old = to_f(mxp[oo]);
      const float nw = fmaxf(old, acc);
      mxp[oo] = from_f<TO>(nw);
      diff[LD::off(oi)] = from_f<TD>(old - nw);
    }
    if constexpr (G > 32) __syncthreads();  // the scratch is reused by the next round
  }
}

// ---- register-resident accumulators ------------------------------------------------------
// An fp32 tile that a for-loop only accumulates into (filled with 0 before the loop, written
// by one elementwise "add" per iteration, read after the loop) lives in registers: thread tid
// keeps the elements tid + j*NT of the update's layout LO, exactly the ones it would update
// in shared memory, and stores them once after the loop (reg_store).
template <int PER>
struct RegTile {
  float r[PER];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int j = 0; j < PER; ++j) r[j] = 0.0f;
  }
};

template <int NT, class LO, class LA, class LB, class LC, int PER, class TA, class TB, class TC, class F>
__device__ __forceinline__ void elementwise_reg(RegTile<PER>& acc, const TA* a, const TB* b, const TC* c, int tid, F f) {
  static_assert(PER * NT >= LO::size, "RegTile too small for the layout");
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = tid + j * NT;
    if (LO::size % NT == 0 || i < LO::size) {
      float va = 0.0f, vb = 0.0f, vc = 0.0f;
      if constexpr (LA::size != 0) va = to_f(a[LA::off(i)]);
      if constexpr (LB::size != 0) vb = to_f(b[LB::off(i)]);
      if constexpr (LC::size != 0) vc = to_f(c[LC::off(i)]);
      acc.r[j] = f(acc.r[j], va, vb, vc);
    }
  }
}

template <int NT, class LO, int PER, class TO>
__device__ __forceinline__ void reg_store(TO* o, const RegTile<PER>& acc, int tid) {
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = tid + j * NT;
    if (LO::size % NT == 0 || i < LO::size) o[LO::off(i)] = from_f<TO>(acc.r[j]);
  }
}

// C (SumOp, MaxOp) of v over the whole block (NT threads, a multiple of 32), returned in
// every thread: warp shuffles, then the warps' values in warp order -- the order in which
// reduce_rows with G = NT combines (passes/cute/row_chains.py relies on it for bit-identical
// results).  `scratch`: NT / 32 floats of shared memory, free again when it returns.
template <class C, int NT>
__device__ __forceinline__ float block_reduce(float v, float* scratch, int tid) {
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) v = C::apply(v, __shfl_xor_sync(0xffffffffu, v, s));
  if ((tid & 31) == 0) scratch[tid >> 5] = v;
  __syncthreads();
  float total = C::identity();
#pragma unroll
  for (int w = 0; w < NT / 32; ++w) total = C::apply(total, scratch[w]);
  __syncthreads();
  return total;
}
template <int NT>
__device__ __forceinline__ float block_sum(float v, float* scratch, int tid) {
  return block_reduce<SumOp, NT>(v, scratch, tid);
}
// The max of `v` over the block's NT threads, in every thread.
template <int NT>
__device__ __forceinline__ float block_max(float v, float* scratch, int tid) {
  return block_reduce<MaxOp, NT>(v, scratch, tid);
}

}  // namespace mx
