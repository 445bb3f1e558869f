// mirage_xdsl device library: split-K combine across the blocks of one kernel (tb.grid_sum).
//
// The blocks of a split group (they differ only in one grid index) each hold partial tiles.
// Every block writes its tiles as fp32 to its slot of a global scratch and arrives at the
// group's counter; the last block to arrive sums the group's slots in split order (so the
// result does not depend on arrival order) and runs the rest of the kernel; the others
// return.  The pattern is the "last block" reduction of the CUDA samples'
// threadFenceReduction (CUDA C++ Programming Guide, "Memory Fence Functions"), with the
// release/acquire ordering of the PTX memory model instead of its fences.
#pragma once
#include "core.cuh"

namespace mx {

// part[i] = in[L(i)] for every logical element i of the tile (fp32, coalesced).
template <int NT, class L, class T>
__device__ __forceinline__ void grid_partial_store(float* part, const T* in, int tid) {
  for_each_mine<NT, L::size>(tid, [&](int i) { part[i] = to_f(in[L::off(i)]); });
}

// Arrive at `counter` (one of `n` blocks); true in the last block to arrive, which re-arms the
// counter for the next launch.  Every thread of the block calls it; `flag` is 4 bytes of
// shared memory.  Ordering as in CUTLASS's generic barrier (cutlass/barrier.h): the block
// barrier orders every thread's partial stores before thread 0's arrival, an acq_rel atomic
// at GPU scope publishes them (release) and, in the last block, orders the partial loads
// after the other blocks' arrivals (acquire) -- no sequentially consistent __threadfence.
__device__ __forceinline__ unsigned atomic_add_acq_rel_gpu(unsigned* counter, unsigned v) {
#ifdef MX_HOST
  return atomicAdd(counter, v);
#else
  unsigned old;
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], %2;" : "=r"(old) : "l"(counter), "r"(v) : "memory");
  return old;
#endif
}

__device__ __forceinline__ bool grid_arrive(unsigned* counter, unsigned n, unsigned* flag, int tid) {
  __syncthreads();
  if (tid == 0) {
    const bool last = atomic_add_acq_rel_gpu(counter, 1u) == n - 1;
    if (last) atomicExch(counter, 0u);  // every block of the group has arrived
    *flag = last ? 1u : 0u;
  }
  __syncthreads();
  return *flag != 0u;
}

// Elements tid + (j0 + b) * NT, b < B, of grid_partial_sum: every load before any store,
// no bounds tests (the caller passes whole trips).
template <int NT, int S, int SLOT, int B, class L, class T>
__device__ __forceinline__ void grid_partial_sum_trips(T* out, const float* parts, int tid, int j0) {
  float acc[B];
#pragma unroll
  for (int b = 0; b < B; ++b) acc[b] = 0.0f;
#pragma unroll
  for (int s = 0; s < S; ++s) {
#pragma unroll
    for (int b = 0; b < B; ++b) acc[b] += __ldcg(parts + s * SLOT + tid + (j0 + b) * NT);
  }
#pragma unroll
  for (int b = 0; b < B; ++b) out[L::off(tid + (j0 + b) * NT)] = from_f<T>(acc[b]);
}

// out[L(i)] = sum over s < S of parts[s * SLOT + i]: the group's partials, in split order.
// The loads go through L2 (`ld.global.cg`): other SMs wrote them, and L1 is not coherent.
// A thread's elements are summed in batches of up to 8, every load of a batch issued before
// its first store: the compiler cannot move a load above a store to `out` (it may alias), so
// element by element each one waited a full L2 round trip.  Batches have a compile-time size
// and the last, partial trip (L::size % NT elements) runs under ONE branch: loads guarded
// one by one by bounds tests were issued one after another, an L2 round trip apiece (a
// [2, 1] fp32 tile over 8 splits took 1.5 µs on an H200, 2026-11-24).
template <int NT, int S, int SLOT, class L, class T>
__device__ __forceinline__ void grid_partial_sum(T* out, const float* parts, int tid) {
  constexpr int kFull = L::size / NT;  // trips every thread makes
  constexpr int kBatch = 8;
#pragma unroll 1
  for (int q = 0; q < kFull / kBatch; ++q) grid_partial_sum_trips<NT, S, SLOT, kBatch, L>(out, parts, tid, q * kBatch);
  if constexpr (kFull % kBatch != 0)
    grid_partial_sum_trips<NT, S, SLOT, kFull % kBatch, L>(out, parts, tid, kFull / kBatch * kBatch);
  if constexpr (L::size % NT != 0) {
    if (tid < L::size % NT) {
      const int i = tid + kFull * NT;
      float acc = 0.0f;
#pragma unroll
      for (int s = 0; s < S; ++s) acc += __ldcg(parts + s * SLOT + i);
      out[L::off(i)] = from_f<T>(acc);
    }
  }
}

// This thread's elements tid + j * NT (j < TRIPS) of the group's sums of one tile, in split
// order, into registers: the grid-sum epilogue that codegen/grid_sum_epilogue.py fuses with
// the elementwise ops after it, so the sums never round-trip through shared memory.  Every
// load is issued before any sum is used (no stores in between); the caller guarantees that
// each of its elements exists (TRIPS * NT == size, or one trip under `tid < size`).
template <int NT, int S, int SLOT, int TRIPS>
__device__ __forceinline__ void grid_partial_sum_mine(float (&v)[TRIPS], const float* parts, int tid) {
#pragma unroll
  for (int j = 0; j < TRIPS; ++j) v[j] = 0.0f;
#pragma unroll
  for (int s = 0; s < S; ++s) {
#pragma unroll
    for (int j = 0; j < TRIPS; ++j) v[j] += __ldcg(parts + s * SLOT + tid + j * NT);
  }
}

// The group's partials are dead once its last block has summed them: drop their L2 lines
// without writing them back (`discard.global.L2`, PTX ISA 7.4, sm_80+; older targets keep
// the write-back).  Left dirty, they are evicted to HBM by the streaming weights and cost
// HBM time every launch -- rmsnorm bs8's 96 x 4 grid writes 1.5 MB of partials, and
// discarding them took 15.4-15.5 -> 15.1-15.2 µs on an H200 (2026-11-25).  Only lines wholly inside
// [group, group + floats) go: a line shared with a neighbouring group may still hold
// partials that group's last block has not read.  The leading barrier orders every thread's
// partial loads, whose values the caller has already used, before any discard.  On the host
// (-DMX_HOST) the lines are poisoned with NaN instead, so that a read after the discard
// shows up in the emulator's results.
template <int NT>
__device__ __forceinline__ void grid_discard_partials(const float* group, int floats, int tid) {
  __syncthreads();
  using addr_t = unsigned long long;  // a global address (no <cstdint> in device builds)
  const addr_t begin = reinterpret_cast<addr_t>(group), end = begin + addr_t(floats) * 4u;
  for (addr_t line = ((begin + 127u) & ~addr_t(127)) + addr_t(tid) * 128u; line + 128u <= end; line += NT * 128u) {
#ifdef MX_HOST
    float* poisoned = reinterpret_cast<float*>(line);
    for (int i = 0; i < 32; ++i) poisoned[i] = __builtin_nanf("");
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("discard.global.L2 [%0], 128;" :: "l"(line) : "memory");
#endif
  }
}

// ---- The late finisher: a split group combined without a flag (cute.grid_sum partner_trips) ----
//
// The group's blocks but the last along the split axis (the "partners") run fewer K stages
// than the last one (the "finisher", dispatched last), store their partials and leave; the
// finisher adds them to its own, so no arrival atomic and no L2 round trip after the last
// loop end is left on the grid's tail.  A partner stores each partial word as ~bits
// (`publish_word`) into the zeroed, persistent counter buffer with a relaxed GPU-scope store;
// a word reads non-zero once its store has landed.  ~bits is zero only for the NaN
// 0xffffffff, which fp32 arithmetic on NVIDIA GPUs does not produce (their NaNs are the
// canonical 0x7fffffff; the partials are sums of products).  The finisher loads its words
// before its loop ends, re-reads those still zero, writes zeros back for the next launch and
// sums in split order, so results do not depend on timing.  Progress needs the partners,
// which have lower block indices, to be resident or done while the finisher waits; blocks are
// dispatched in index order, and a one-wave grid holds every block at once.  The words carry
// an L2 evict_last policy so they stay in L2 under the streaming weights.  Measured on
// rmsnorm bs8 (H200, 2026-11-25, hand-written): 13.3-13.4 µs against 14.9-15.1 for the equal
// split-K grid sum (c0xr) in the same runs; with equal splits the same protocol took 15.7.

__device__ __forceinline__ unsigned publish_word(float v) { return ~__float_as_uint(v); }
__device__ __forceinline__ float published_value(unsigned w) { return __uint_as_float(~w); }

// Relaxed GPU-scope 32-bit load / store with an L2 evict_last policy (PTX ISA, "ld", "st",
// .L2::cache_hint).  On the host (-DMX_HOST) blocks run one after another, partners first.
__device__ __forceinline__ unsigned ld_word_keep(const unsigned* p) {
#ifdef MX_HOST
  return *reinterpret_cast<const volatile unsigned*>(p);
#else
  unsigned v;
  asm volatile(
      "{\n .reg .b64 pol;\n createpolicy.fractional.L2::evict_last.b64 pol, 1.0;\n"
      " ld.relaxed.gpu.global.L2::cache_hint.u32 %0, [%1], pol;\n}"
      : "=r"(v)
      : "l"(p)
      : "memory");
  return v;
#endif
}
__device__ __forceinline__ void st_word_keep(unsigned* p, unsigned v) {
#ifdef MX_HOST
  *reinterpret_cast<volatile unsigned*>(p) = v;
#else
  asm volatile(
      "{\n .reg .b64 pol;\n createpolicy.fractional.L2::evict_last.b64 pol, 1.0;\n"
      " st.relaxed.gpu.global.L2::cache_hint.u32 [%0], %1, pol;\n}" ::"l"(p),
      "r"(v)
      : "memory");
#endif
}

// A partner's tile, element i = in[L(i)] (logical order) to words[i].
template <int NT, class L, class T>
__device__ __forceinline__ void grid_publish(unsigned* words, const T* in, int tid) {
  for_each_mine<NT, L::size>(tid, [&](int i) { st_word_keep(words + i, publish_word(to_f(in[L::off(i)]))); });
}

// The finisher's view of one tile of N elements in its PARTNERS partners' slots of SLOT
// words (slot p at words + p * SLOT): this thread's elements tid + j * NT.
template <int NT, int PARTNERS, int SLOT, int N>
struct PartnerWords {
  static constexpr int kTrips = (N + NT - 1) / NT;
  unsigned w[PARTNERS][kTrips];

  static __device__ __forceinline__ bool mine(int tid, int j) { return N % NT == 0 || tid + j * NT < N; }
  // Issue every load at once (one L2 round trip); words not this thread's read as landed.
  __device__ __forceinline__ void load(const unsigned* words, int tid) {
#pragma unroll
    for (int p = 0; p < PARTNERS; ++p)
#pragma unroll
      for (int j = 0; j < kTrips; ++j) w[p][j] = mine(tid, j) ? ld_word_keep(words + p * SLOT + tid + j * NT) : 1u;
  }
  // Re-read the words still zero, all of a round in flight together, until none is.
  __device__ __forceinline__ void wait(const unsigned* words, int tid) {
#ifndef MX_HOST
    for (;;) {
      bool landed = true;
#pragma unroll
      for (int p = 0; p < PARTNERS; ++p)
#pragma unroll
        for (int j = 0; j < kTrips; ++j) landed &= w[p][j] != 0u;
      if (landed) return;
#pragma unroll
      for (int p = 0; p < PARTNERS; ++p)
#pragma unroll
        for (int j = 0; j < kTrips; ++j)
          if (w[p][j] == 0u) w[p][j] = ld_word_keep(words + p * SLOT + tid + j * NT);
    }
#endif  // the host ran the partners first: a zero is a NaN partial (0xffffffff), left as is
  }
  // Zeros back for the next launch, whose partners store only after its PDL wait, i.e. after
  // this grid is complete.
  __device__ __forceinline__ void rearm(unsigned* words, int tid) const {
#pragma unroll
    for (int p = 0; p < PARTNERS; ++p)
#pragma unroll
      for (int j = 0; j < kTrips; ++j)
        if (mine(tid, j)) st_word_keep(words + p * SLOT + tid + j * NT, 0u);
  }
  // v[j] = the partners' elements, in split order, plus the finisher's own own[L(i)].
  template <class L, class T>
  __device__ __forceinline__ void finish(float (&v)[kTrips], const T* own, int tid) const {
#pragma unroll
    for (int j = 0; j < kTrips; ++j) {
      v[j] = 0.0f;
      if (!mine(tid, j)) continue;
#pragma unroll
      for (int p = 0; p < PARTNERS; ++p) v[j] += published_value(w[p][j]);
      v[j] += to_f(own[L::off(tid + j * NT)]);
    }
  }
};

// out[L(i)] = v[j] for this thread's elements i = tid + j * NT of an N-element tile.
template <int NT, int N, class L, class T, int TRIPS>
__device__ __forceinline__ void store_mine(T* out, const float (&v)[TRIPS], int tid) {
#pragma unroll
  for (int j = 0; j < TRIPS; ++j)
    if (N % NT == 0 || tid + j * NT < N) out[L::off(tid + j * NT)] = from_f<T>(v[j]);
}

// x rounded to T and back (the value a consumer would read from a T tile).
template <class T>
__device__ __forceinline__ float round_as(float x) {
  return to_f(from_f<T>(x));
}

// bf16: packed with a zero low half, the rounded bf16 is already its fp32 bit pattern (one
// conversion instead of a conversion, a widening and a shift).
template <>
__device__ __forceinline__ float round_as<bf16>(float x) {
  return __uint_as_float(pack2<bf16>(0.0f, x));
}

}  // namespace mx
