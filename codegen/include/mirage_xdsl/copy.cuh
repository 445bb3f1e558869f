// mirage_xdsl device library: global <-> shared tile copies.
//
// Layout arguments list the tile's modes in copy order (mode 0 = the DTensor's unit-stride
// dim, so consecutive threads touch consecutive addresses).  For the 16-byte variants the
// layouts count VECTORS: mode 0 has size D0/V and stride V on both sides.
#pragma once
#include <type_traits>
#include "core.cuh"

namespace mx {

#ifdef MX_HOST
__device__ __forceinline__ void cp_async16(void* smem_ptr, const void* gmem_ptr) { mxh::cp_async_issue(smem_ptr, gmem_ptr); }
__device__ __forceinline__ void cp_async_commit() { mxh::cp_async_commit_group(); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { mxh::cp_async_wait_group(N); }
#else
__device__ __forceinline__ void cp_async16(void* smem_ptr, const void* gmem_ptr) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem_ptr));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem_ptr) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

// Element by element, any layouts.
template <int NT, class LG, class LS, class T>
__device__ __forceinline__ void g2s_sync(T* s, const T* g, int tid) {
  for_each_mine<NT, LG::size>(tid, [&](int i) { s[LS::off(i)] = g[LG::raw(i)]; });
}

// 16-byte vectors from global memory.  SVEC: the vector is contiguous and 16-B aligned in
// shared memory too (one 16-B store); otherwise its elements are scattered with stride SS0.
template <int NT, class LG, class LS, int V, bool SVEC, int SS0, class T>
__device__ __forceinline__ void g2s_chunked(T* s, const T* g, int tid) {
  for_each_mine<NT, LG::size>(tid, [&](int i) {
    const uint4 v = *reinterpret_cast<const uint4*>(g + LG::raw(i));
    if constexpr (SVEC) {
      *reinterpret_cast<uint4*>(s + LS::off(i)) = v;
    } else {
      T e[16 / sizeof(T)];
      __builtin_memcpy(e, &v, 16);  // not a pointer cast (strict aliasing)
      const int b = LS::raw(i);
#pragma unroll
      for (int j = 0; j < V; ++j) s[LS::swz(b + j * SS0)] = e[j];
    }
  });
}

// 16-byte cp.async (the shared side must be vector-contiguous).
template <int NT, class LG, class LS, class T>
__device__ __forceinline__ void g2s_async(T* s, const T* g, int tid) {
  for_each_mine<NT, LG::size>(tid, [&](int i) { cp_async16(s + LS::off(i), g + LG::raw(i)); });
}

// g2s_async with an L2 evict_first policy (PTX ISA, "createpolicy", cp.async .L2::cache_hint):
// for a stream read once per launch (a kn.weight), so that it does not displace lines other
// blocks will read again (the late finisher's partial words, codegen/include/mirage_xdsl/grid.cuh).
// Measured on rmsnorm bs8: 0.3-0.4 us in the generated late-finisher kernel, 0.1 us in the
// hand-written one (H200, 2026-11-25).
template <int NT, class LG, class LS, class T>
__device__ __forceinline__ void g2s_async_evict_first(T* s, const T* g, int tid) {
#ifdef MX_HOST
  g2s_async<NT, LG, LS>(s, g, tid);
#else
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  for_each_mine<NT, LG::size>(tid, [&](int i) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(s + LS::off(i)));
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(d), "l"(g + LG::raw(i)),
                 "l"(policy)
                 : "memory");
  });
#endif
}

// Shared -> global, element by element, converting the element type (accumulators are fp32).
template <int NT, class LG, class LS, class TG, class TS>
__device__ __forceinline__ void s2g_sync(TG* g, const TS* s, int tid) {
  for_each_mine<NT, LG::size>(tid, [&](int i) { g[LG::raw(i)] = from_f<TG>(to_f(s[LS::off(i)])); });
}
template <int NT, class LG, class LS, class T>
__device__ __forceinline__ void s2g_sync(T* g, const T* s, int tid) {
  for_each_mine<NT, LG::size>(tid, [&](int i) { g[LG::raw(i)] = s[LS::off(i)]; });
}

// Shared -> global with one 16-byte store per vector of V global elements.
template <int NT, class LG, class LS, int V, bool SVEC, int SS0, class TG, class TS>
__device__ __forceinline__ void s2g_chunked(TG* g, const TS* s, int tid) {
  for_each_mine<NT, LG::size>(tid, [&](int i) {
    if constexpr (SVEC) {
      *reinterpret_cast<uint4*>(g + LG::raw(i)) = *reinterpret_cast<const uint4*>(s + LS::off(i));
    } else {
      uint4 v;
      TG* e = reinterpret_cast<TG*>(&v);
      const int b = LS::raw(i);
#pragma unroll
      for (int j = 0; j < V; ++j) e[j] = from_f<TG>(to_f(s[LS::swz(b + j * SS0)]));
      st_global_16(g + LG::raw(i), v);  // assembled from scalars (st_global_16 says why)
    }
  });
}

// T fp32 registers <-> T / PER 16-byte vectors of E (PER = 16 / sizeof(E)), vector c at the
// pointer at(c): a row chain whose threads own interleaved vectors (vector c of thread tid holds
// flat elements (c * NT + tid) * PER ...), so that one warp-wide access covers 32 consecutive
// vectors, whole 32-byte sectors (codegen/row_chain_printer.py, RowOwnership).
template <int T, class At>
__device__ __forceinline__ void load_vectors(float (&x)[T], At at) {
  using E = std::remove_cv_t<std::remove_pointer_t<decltype(at(0))>>;
  constexpr int PER = 16 / sizeof(E);
  static_assert(T % PER == 0, "whole 16-byte vectors");
#pragma unroll
  for (int c = 0; c < T / PER; ++c) {
    const uint4 v = *reinterpret_cast<const uint4*>(at(c));
    if constexpr (std::is_same_v<E, bf16>) {
      const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) unpack_bf16x2(w[q], x[c * PER + 2 * q], x[c * PER + 2 * q + 1]);
    } else {
      E e[PER];
      __builtin_memcpy(e, &v, 16);  // not a pointer cast: that breaks strict aliasing (host g++ -O2)
#pragma unroll
      for (int k = 0; k < PER; ++k) x[c * PER + k] = to_f(e[k]);
    }
  }
}

template <int T, class At>
__device__ __forceinline__ void store_vectors(At at, const float (&x)[T]) {
  using E = std::remove_cv_t<std::remove_pointer_t<decltype(at(0))>>;
  constexpr int PER = 16 / sizeof(E);
  static_assert(T % PER == 0, "whole 16-byte vectors");
#pragma unroll
  for (int c = 0; c < T / PER; ++c) {
    unsigned w[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float* y = x + c * PER + q * (PER / 4);
      if constexpr (sizeof(E) == 2) {
        w[q] = pack2<E>(y[0], y[1]);
      } else {
        static_assert(sizeof(E) == 4, "2- or 4-byte elements");
        const E e = from_f<E>(y[0]);
        __builtin_memcpy(&w[q], &e, 4);
      }
    }
    st_global_16(at(c), make_uint4(w[0], w[1], w[2], w[3]));
  }
}

// T consecutive global elements at p <-> fp32 registers, in 16-byte vectors (p 16-byte
// aligned, T * sizeof(E) a multiple of 16): the rows of a register-resident row chain whose
// threads own consecutive elements.
template <int T, class E>
__device__ __forceinline__ void load_row(float (&x)[T], const E* p) {
  load_vectors<T>(x, [p](int c) { return p + c * (16 / static_cast<int>(sizeof(E))); });
}

template <int T, class E>
__device__ __forceinline__ void store_row(E* p, const float (&x)[T]) {
  store_vectors<T>([p](int c) { return p + c * (16 / static_cast<int>(sizeof(E))); }, x);
}

}  // namespace mx
