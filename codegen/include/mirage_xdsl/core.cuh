// mirage_xdsl device library: scalar types, conversions, math, layouts.
//
// Written for the code that `mirage_xdsl.codegen.cuda_printer` generates.  Lean on purpose:
// no <cuda_fp16.h>, no CuTe - half/bfloat16 are 16-bit storage types converted with PTX
// `cvt`, and layouts are tiny templates over compile-time ints, so a translation unit with
// dozens of kernels compiles in seconds.  All arithmetic is fp32.
#pragma once
#include "host.cuh"  // only with -DMX_HOST (CPU emulation for tests)

namespace mx {

// ---------------------------------------------------------------------------------------
// Storage types (kernel parameters are pointers to these; the ABI is a plain pointer).

struct alignas(2) f16 {
  unsigned short bits;
};
struct alignas(2) bf16 {
  unsigned short bits;
};

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(double x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_f(f16 x) {
#ifdef MX_HOST
  return mxh::half_to_float(x.bits);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#endif
}
__device__ __forceinline__ float to_f(bf16 x) { return __uint_as_float(static_cast<unsigned>(x.bits) << 16); }

template <class T>
struct Conv;
template <>
struct Conv<float> {
  __device__ __forceinline__ static float from(float x) { return x; }
};
template <>
struct Conv<double> {
  __device__ __forceinline__ static double from(float x) { return static_cast<double>(x); }
};
template <>
struct Conv<f16> {
  __device__ __forceinline__ static f16 from(float x) {
    f16 r;
#ifdef MX_HOST
    r.bits = mxh::float_to_half(x);
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
#endif
    return r;
  }
};
template <>
struct Conv<bf16> {
  __device__ __forceinline__ static bf16 from(float x) {
    bf16 r;
#ifdef MX_HOST
    r.bits = mxh::float_to_bf16(x);
#else
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.bits) : "f"(x));
#endif
    return r;
  }
};

template <class T>
__device__ __forceinline__ T from_f(float x) {
  return Conv<T>::from(x);
}

// 16-bit payload of a 2-byte element (for packing MMA operands).
__device__ __forceinline__ unsigned bits16(f16 x) { return x.bits; }
__device__ __forceinline__ unsigned bits16(bf16 x) { return x.bits; }

// Two floats rounded to T and packed (lo in the low half): one cvt.rn.{f16,bf16}x2.f32.
__device__ __forceinline__ unsigned pack2_bits(float lo, float hi, f16) {
#ifdef MX_HOST
  return bits16(from_f<f16>(lo)) | (bits16(from_f<f16>(hi)) << 16);
#else
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#endif
}
__device__ __forceinline__ unsigned pack2_bits(float lo, float hi, bf16) {
#ifdef MX_HOST
  return bits16(from_f<bf16>(lo)) | (bits16(from_f<bf16>(hi)) << 16);
#else
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#endif
}
template <class T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  return pack2_bits(lo, hi, T{});
}

// A 32-bit word of two bf16 widened to fp32 (lo: the low half), the inverse of pack2<bf16>:
// bf16 is the high half of its fp32 pattern, so a shift and a mask, without splitting the
// word into 16-bit registers first (f16 needs its cvt either way).
__device__ __forceinline__ void unpack_bf16x2(unsigned w, float& lo, float& hi) {
  lo = __uint_as_float(w << 16);
  hi = __uint_as_float(w & 0xffff0000u);
}

// One 16-byte store to global memory at p (16-byte aligned), for a vector assembled from
// scalars.  Written as PTX because nvcc 13 (sm_90a) splits such a `uint4` into its four
// words and then stores `*reinterpret_cast<uint4*>(p) = v` as four 4-byte stores: the split
// loses the 16-byte alignment the store had, and p's alignment cannot be derived from the
// address arithmetic (seen in the PTX of the row chains' output rows and of the sm_90a
// GEMM's store16 epilogue; `__builtin_assume_aligned` does not restore it).  Four times the
// store instructions, partial-sector writes to L2.  A vector loaded whole (shared -> global
// copies) keeps its one 16-byte store and needs no asm, which would only stop the compiler
// from moving other memory accesses across it.
__device__ __forceinline__ void st_global_16(void* p, uint4 v) {
#ifdef MX_HOST
  __builtin_memcpy(p, &v, 16);
#else
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(__cvta_generic_to_global(p)), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
#endif
}

// ---------------------------------------------------------------------------------------
// Elementwise math (fp32, IEEE semantics; gelu is the erf form, rms has no epsilon).

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float f_exp(float x) { return expf(x); }
__device__ __forceinline__ float f_square(float x) { return x * x; }
__device__ __forceinline__ float f_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ float f_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float f_silu(float x) { return x / (1.0f + expf(-x)); }
// gelu(x) = x/2 (1 + erf(x/sqrt2)) = x/2 erfc(-x/sqrt2): erfc keeps the negative tail exact
// where 1 + erf cancels to 0 in fp32 (x = -7: -9e-12, not -0; fuzz seed 13 graph 7664)
__device__ __forceinline__ float f_gelu(float x) { return 0.5f * x * erfcf(x * -0.70710678118654752440f); }
__device__ __forceinline__ float f_relu(float x) { return fmaxf(x, 0.0f); }
__device__ __forceinline__ float f_log(float x) { return logf(x); }
__device__ __forceinline__ float f_clamp(float x, float lo, float hi) { return fminf(fmaxf(x, lo), hi); }
__device__ __forceinline__ float f_pow(float a, float b) { return powf(a, b); }

// ---------------------------------------------------------------------------------------
// Layouts.  `L<D0..D3, S0..S3, B, M, S>`: four modes, mode 0 fastest (a flat index i is
// split as i = c0 + D0*(c1 + D1*(c2 + D2*c3))), element strides S*, then CuTe's
// Swizzle<B,M,S> on the element offset: o ^ ((o >> S) & (((1 << B) - 1) << M)).
// Unused modes have size 1.  `raw` is the offset before the swizzle (so callers can add a
// base before swizzling), `off` the final offset.

template <int B, int M, int S>
__device__ __forceinline__ int swizzle(int o) {
  if constexpr (B == 0) {
    return o;
  } else {
    return o ^ ((o >> S) & (((1 << B) - 1) << M));
  }
}

template <int D0, int D1, int D2, int D3, int S0, int S1, int S2, int S3, int B = 0, int M = 0, int S = 0>
struct L {
  static constexpr int size = D0 * D1 * D2 * D3;
  // Unsigned division: flat indices are never negative, and for power-of-two mode sizes
  // unsigned / and % are single shifts and masks (signed ones need sign fix-ups).
  __device__ __forceinline__ static int raw(int i) {
    unsigned u = static_cast<unsigned>(i);
    const unsigned c0 = u % D0;
    u /= D0;
    const unsigned c1 = u % D1;
    u /= D1;
    const unsigned c2 = u % D2;
    const unsigned c3 = u / D2;
    return static_cast<int>(c0 * S0 + c1 * S1 + c2 * S2 + c3 * S3);
  }
  __device__ __forceinline__ static int swz(int o) { return swizzle<B, M, S>(o); }
  __device__ __forceinline__ static int off(int i) { return swz(raw(i)); }
};

// `body(i)` for this thread's flat indices i = tid + j * NT < SIZE.  The trip count is a
// compile-time constant, so short loops unroll completely and each trip's index arithmetic
// depends on `tid` only (the compiler hoists it out of an enclosing for-loop).
template <int NT, int SIZE, class Body>
__device__ __forceinline__ void for_each_mine(int tid, Body body) {
  constexpr int TRIPS = (SIZE + NT - 1) / NT;
  if constexpr (TRIPS <= 16) {
#pragma unroll
    for (int j = 0; j < TRIPS; ++j) {
      const int i = tid + j * NT;
      if (SIZE % NT == 0 || i < SIZE) body(i);
    }
  } else {
#pragma unroll 4
    for (int j = 0; j < TRIPS; ++j) {
      const int i = tid + j * NT;
      if (SIZE % NT == 0 || i < SIZE) body(i);
    }
  }
}

// No operand (size 0): elementwise kernels skip it.
struct LNone {
  static constexpr int size = 0;
  __device__ __forceinline__ static int off(int) { return 0; }
};

// A matrix view (rows, cols) of a tile: the last two dims, strides SR/SC, swizzle.
template <int SR, int SC, int B = 0, int M = 0, int S = 0>
struct M2 {
  __device__ __forceinline__ static int off(int r, int c) { return swizzle<B, M, S>(r * SR + c * SC); }
};

}  // namespace mx
