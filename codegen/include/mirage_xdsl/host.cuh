// mirage_xdsl host emulation: run generated kernels on the CPU (tests without a GPU).
//
// Compiled with a host C++ compiler and -DMX_HOST, the generated translation unit becomes
// plain C++: every CUDA thread of a block is a cooperative fiber (ucontext), barriers and
// warp collectives (__syncthreads, __shfl_xor_sync, mma.sync) switch fibers until every
// participant has arrived, cp.async copies land only when cp.async.wait_group retires their
// group (the latest moment the hardware allows), and half/bfloat16 conversions
// are done in software (round to nearest even).  Blocks run one after another; shared memory
// is poisoned (NaN bytes) before each block.  The mma.sync emulation decodes the operand
// fragments with the PTX ISA layout (mma.m16n8k16 / m16n8k8, .f16/.bf16, fp32 accumulate),
// written independently of the encoder in mma.cuh, so a fragment-mapping bug shows up as a
// wrong result.  Slow but exact enough; never used for device code.
#pragma once
#ifdef MX_HOST

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict

struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
struct mxh_dim3 {
  unsigned x, y, z;
};

namespace mxh {

// A cp.async copy in flight: the 16 source bytes (read at issue; global inputs do not change
// during a kernel) land in shared memory only when a cp.async.wait_group retires its group,
// so a wait that is too weak reads stale (poisoned) shared memory in the emulation too.
struct AsyncCopy {
  void* dst;
  unsigned char data[16];
};

struct Fiber {
  ucontext_t ctx;  // first entry only
  jmp_buf jb;      // later switches: _setjmp/_longjmp (no signal-mask syscalls)
  mxh_dim3 tid;
  int flat = 0;
  bool started = false;
  bool done = false;
  std::vector<AsyncCopy> copies;  // issued, not yet landed (oldest first)
  std::vector<size_t> groups;     // end (in `copies`) of each committed, pending group
};

struct Warp {
  int count = 0;
  unsigned gen = 0;
  int size = 32;
  float fslot[32];
  unsigned a[32][4];
  unsigned b[32][2];
  const void* rows[32];
};

struct State {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  std::vector<char*> stacks;  // reused across blocks
  ucontext_t main_ctx;
  jmp_buf main_jb;
  int cur = 0;
  int nt = 0;
  int arrived = 0;
  unsigned gen = 0;
  mxh_dim3 block_idx{0, 0, 0};
  mxh_dim3 block_dim{1, 1, 1};
  std::function<void()> body;
};

inline State& st() {
  static State s;
  return s;
}

constexpr size_t kStackBytes = 256 * 1024;

inline void yield() {
  State& s = st();
  if (_setjmp(s.fibers[s.cur].jb) == 0) _longjmp(s.main_jb, 1);
}

inline void block_barrier() {
  State& s = st();
  const unsigned g = s.gen;
  if (++s.arrived == s.nt) {
    s.arrived = 0;
    ++s.gen;
    return;
  }
  while (s.gen == g) yield();
}

inline void warp_barrier() {
  State& s = st();
  Warp& w = s.warps[s.fibers[s.cur].flat / 32];
  const unsigned g = w.gen;
  if (++w.count == w.size) {
    w.count = 0;
    ++w.gen;
    return;
  }
  while (w.gen == g) yield();
}

inline void cp_async_issue(void* dst, const void* src) {
  Fiber& f = st().fibers[st().cur];
  AsyncCopy c;
  c.dst = dst;
  std::memcpy(c.data, src, 16);
  f.copies.push_back(c);
}
inline void cp_async_commit_group() {
  Fiber& f = st().fibers[st().cur];
  f.groups.push_back(f.copies.size());
}
// Land every committed group but the newest `pending` ones (copies issued after the last
// commit belong to no group and stay in flight, as in PTX).
inline void cp_async_wait_group(int pending) {
  Fiber& f = st().fibers[st().cur];
  const int retire = (int)f.groups.size() - pending;
  if (retire <= 0) return;
  const size_t end = f.groups[retire - 1];
  for (size_t i = 0; i < end; ++i) std::memcpy(f.copies[i].dst, f.copies[i].data, 16);
  f.copies.erase(f.copies.begin(), f.copies.begin() + (long)end);
  f.groups.erase(f.groups.begin(), f.groups.begin() + retire);
  for (size_t& g : f.groups) g -= end;
}

inline int lane() { return st().fibers[st().cur].flat % 32; }
inline Warp& warp() { return st().warps[st().fibers[st().cur].flat / 32]; }

inline float shfl_xor(float v, int mask) {
  Warp& w = warp();
  const int l = lane();
  w.fslot[l] = v;
  warp_barrier();
  const float r = w.fslot[(l ^ mask) % w.size];
  warp_barrier();
  return r;
}

inline float shfl_idx(float v, int src) {
  Warp& w = warp();
  w.fslot[lane()] = v;
  warp_barrier();
  const float r = w.fslot[src % w.size];
  warp_barrier();
  return r;
}

inline bool any(bool v) {
  Warp& w = warp();
  w.fslot[lane()] = v ? 1.0f : 0.0f;
  warp_barrier();
  bool r = false;
  for (int l = 0; l < w.size; ++l) r = r || w.fslot[l] != 0.0f;
  warp_barrier();
  return r;
}

// ---- numbers ---------------------------------------------------------------------------

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float half_to_float(unsigned short h) {
  const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_to_float(sign);
    const float v = std::ldexp((float)mant, -24);
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((uint32_t)(exp - 15 + 127) << 23) | (mant << 13));
}

inline unsigned short float_to_half(float f) {
  const uint32_t u = float_to_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000;
  const float a = std::fabs(f);
  if (std::isnan(f)) return (unsigned short)(sign | 0x7e00);
  if (a >= 65520.0f) return (unsigned short)(sign | 0x7c00);  // rounds to inf
  if (a < 6.103515625e-05f) {                                  // subnormal: multiple of 2^-24
    const float q = std::nearbyint(a * 16777216.0f);           // round half to even
    return (unsigned short)(sign | (uint32_t)q);
  }
  int e;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // 11 significant bits: scale to [1024, 2048)
  float q = std::nearbyint(std::ldexp(m, 11));
  if (q >= 2048.0f) {
    q = 1024.0f;
    ++e;
  }
  const int exp = e - 1 + 15;
  if (exp >= 31) return (unsigned short)(sign | 0x7c00);
  return (unsigned short)(sign | ((uint32_t)exp << 10) | ((uint32_t)q - 1024));
}

inline unsigned short float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if (std::isnan(f)) return (unsigned short)((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return (unsigned short)(u >> 16);
}

inline float elem_to_float(unsigned short v, bool bf16) {
  return bf16 ? bits_to_float((uint32_t)v << 16) : half_to_float(v);
}

// D = A*B + C for this lane's fragment: stage every lane's A/B, decode what this lane needs.
inline void mma(float (&d)[4], const unsigned* a, const unsigned* b, bool bf16, int k) {
  Warp& w = warp();
  const int l = lane();
  for (int i = 0; i < 4; ++i) w.a[l][i] = a[i];
  for (int i = 0; i < 2; ++i) w.b[l][i] = b[i];
  warp_barrier();
  // A(r, kk): lane (r % 8) * 4 + (kk % 8) / 2, register (r >= 8) + 2 * (kk >= 8), half kk % 2
  auto A = [&](int r, int kk) {
    const unsigned reg = w.a[(r % 8) * 4 + (kk % 8) / 2][(r >= 8 ? 1 : 0) + (kk >= 8 ? 2 : 0)];
    return elem_to_float((unsigned short)((kk % 2) ? (reg >> 16) : (reg & 0xffff)), bf16);
  };
  // B(kk, c): lane c * 4 + (kk % 8) / 2, register kk >= 8, half kk % 2
  auto B = [&](int kk, int c) {
    const unsigned reg = w.b[c * 4 + (kk % 8) / 2][kk >= 8 ? 1 : 0];
    return elem_to_float((unsigned short)((kk % 2) ? (reg >> 16) : (reg & 0xffff)), bf16);
  };
  float out[4];
  for (int i = 0; i < 4; ++i) {
    const int r = l / 4 + (i >= 2 ? 8 : 0);
    const int c = (l % 4) * 2 + (i & 1);
    double acc = 0.0;
    for (int kk = 0; kk < k; ++kk) acc += (double)A(r, kk) * (double)B(kk, c);
    out[i] = d[i] + (float)acc;
  }
  warp_barrier();
  for (int i = 0; i < 4; ++i) d[i] = out[i];
}

// ldmatrix: lane l's address is row l % 8 of matrix l / 8 (ptx ISA, ldmatrix).
inline void ldmatrix(unsigned* r, int n, bool trans, const void* row) {
  Warp& w = warp();
  const int l = lane();
  w.rows[l] = row;
  warp_barrier();
  auto elem = [&](int q, int i, int j) { return (unsigned)static_cast<const unsigned short*>(w.rows[8 * q + i])[j]; };
  for (int q = 0; q < n; ++q) {
    const int g = l / 4, t = l % 4;
    r[q] = trans ? (elem(q, 2 * t, g) | (elem(q, 2 * t + 1, g) << 16)) : (elem(q, g, 2 * t) | (elem(q, g, 2 * t + 1) << 16));
  }
  warp_barrier();
}

inline void fiber_entry() {
  State& s = st();
  s.body();
  s.fibers[s.cur].done = true;
  _longjmp(s.main_jb, 1);
}

// Run `body` as one block of `block` threads (fibers), for block index `bidx`.
inline void run_block(mxh_dim3 bidx, mxh_dim3 block, const std::function<void()>& body) {
  State& s = st();
  s.nt = (int)(block.x * block.y * block.z);
  s.block_idx = bidx;
  s.block_dim = block;
  s.body = body;
  s.arrived = 0;
  s.fibers.assign(s.nt, Fiber());
  s.warps.assign((s.nt + 31) / 32, Warp());
  for (int w = 0; w < (int)s.warps.size(); ++w) s.warps[w].size = std::min(32, s.nt - 32 * w);
  while ((int)s.stacks.size() < s.nt) s.stacks.push_back(new char[kStackBytes]);
  for (int t = 0; t < s.nt; ++t) {
    Fiber& f = s.fibers[t];
    f.flat = t;
    f.tid = mxh_dim3{(unsigned)(t % block.x), (unsigned)((t / block.x) % block.y), (unsigned)(t / (block.x * block.y))};
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = s.stacks[t];
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_entry, 0);
  }
  int live = s.nt;
  while (live > 0) {
    live = 0;
    for (int t = 0; t < s.nt; ++t) {
      Fiber& f = s.fibers[t];
      if (f.done) continue;
      s.cur = t;
      if (_setjmp(s.main_jb) == 0) {
        if (!f.started) {
          f.started = true;
          swapcontext(&s.main_ctx, &f.ctx);
        } else {
          _longjmp(f.jb, 1);
        }
      }
      if (!f.done) ++live;
    }
  }
}

// ---- a checked launch: grid of blocks, one after another, with shared-memory bounds ----
//
// The GPU faults (cudaErrorIllegalAddress) when a block touches shared memory past the
// dynamic size of its launch; the emulation's `smem` array is larger, so it checks instead:
// the pages after the launch's size (rounded up to a page) are made inaccessible, any fault
// is caught and reported, and the bytes between the size and that page are filled with
// kGuard and must be unchanged afterwards.  A read in those few bytes goes unnoticed.
constexpr unsigned char kGuard = 0xa5;
constexpr int kLaunchOk = 0, kSmemWrite = -2, kSmemFault = -3, kGlobalFault = -4;

inline sigjmp_buf& fault_jb() {
  static sigjmp_buf jb;
  return jb;
}
inline volatile void*& fault_addr() {
  static volatile void* addr = nullptr;
  return addr;
}
inline void on_fault(int, siginfo_t* info, void*) {
  fault_addr() = info->si_addr;
  siglongjmp(fault_jb(), 1);
}

// Run `fn(args)` over the grid; `smem` holds `cap` bytes, page aligned.  Returns kLaunchOk,
// kSmemWrite (*bad: the first byte written past `smem_bytes`), kSmemFault (*bad: the faulting
// byte's offset from `smem`) or kGlobalFault (*bad: the faulting address; the emulator's
// global buffers end at an inaccessible page, runtime/guarded_memory.py).
inline int launch_checked(void (*fn)(void**), void** args, mxh_dim3 grid, mxh_dim3 block, size_t smem_bytes,
                          unsigned char* smem, size_t cap, long* bad) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t fence = std::min(cap, (smem_bytes + page - 1) / page * page);
  std::memset(smem + smem_bytes, kGuard, fence - smem_bytes);
  struct sigaction handler {}, old_segv {}, old_bus {};
  handler.sa_sigaction = on_fault;
  handler.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&handler.sa_mask);
  sigaction(SIGSEGV, &handler, &old_segv);
  sigaction(SIGBUS, &handler, &old_bus);
  if (fence < cap) mprotect(smem + fence, cap - fence, PROT_NONE);
  int rc = kLaunchOk;
  if (sigsetjmp(fault_jb(), 1) == 0) {
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) {
          std::memset(smem, 0xff, smem_bytes);  // poison: NaN in f16/f32
          run_block(mxh_dim3{x, y, z}, block, [&] { fn(args); });
        }
  } else {
    const unsigned char* at = (const unsigned char*)fault_addr();
    const bool shared = at >= smem && at < smem + cap;
    *bad = shared ? (long)(at - smem) : (long)(uintptr_t)at;
    rc = shared ? kSmemFault : kGlobalFault;
  }
  if (fence < cap) mprotect(smem + fence, cap - fence, PROT_READ | PROT_WRITE);
  sigaction(SIGSEGV, &old_segv, nullptr);
  sigaction(SIGBUS, &old_bus, nullptr);
  if (rc == kLaunchOk)
    for (size_t i = smem_bytes; i < fence; ++i)
      if (smem[i] != kGuard) {
        *bad = (long)i;
        return kSmemWrite;
      }
  return rc;
}

}  // namespace mxh

#define threadIdx (mxh::st().fibers[mxh::st().cur].tid)
#define blockIdx (mxh::st().block_idx)
#define blockDim (mxh::st().block_dim)

inline void __syncthreads() { mxh::block_barrier(); }
// Blocks run one after another on the host: global memory is coherent and atomics are plain.
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
inline unsigned atomicExch(unsigned* p, unsigned v) {
  const unsigned old = *p;
  *p = v;
  return old;
}
inline float __ldcg(const float* p) { return *p; }
inline float __shfl_xor_sync(unsigned, float v, int mask) { return mxh::shfl_xor(v, mask); }
inline float __int_as_float(int i) { return mxh::bits_to_float((uint32_t)i); }
inline float __uint_as_float(unsigned u) { return mxh::bits_to_float(u); }
inline unsigned __float_as_uint(float f) { return mxh::float_to_bits(f); }
inline float __shfl_sync(unsigned, float v, int src) { return mxh::shfl_idx(v, src); }
inline int __any_sync(unsigned, int pred) { return mxh::any(pred != 0) ? 1 : 0; }

#endif  // MX_HOST
