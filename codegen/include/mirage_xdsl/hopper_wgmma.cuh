// mirage_xdsl device library: sm_90a warpgroup MMA (`wgmma.mma_async`) wrappers.
//
// Shared-memory matrix descriptors (PTX ISA 8.x, "Matrix Descriptor Format"), the
// fence / commit / wait of asynchronous warpgroup MMA, `setmaxnreg`, and m64nNk16 wrappers
// (N = 64, 128, 192, 256; fp16 or bf16 operands, fp32 accumulators) with A and B read from shared
// memory, A K-major, B K-major (TransB = 0) or MN-major (TransB = 1), and (N = 64, 128) with A
// from registers.  `Wgmma<N>::run` / `WgmmaRs<N>::run` pick the wrapper of a tile width.  Used
// by hopper_gemm.cuh and hopper_attention.cuh; needs the sm_90a target.
#pragma once
#ifndef MX_HOST
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mx {
namespace hopper {

// Shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address,
// leading- and stride-dimension byte offsets (all >> 4), swizzle mode 1 = 128 B.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
         ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// The warpgroup of the calling thread (threadIdx.x / 128), read back from lane 0 of its warp:
// nvcc treats a shuffle from a constant lane as warp-uniform (CUTLASS reads its warpgroup index
// the same way), so the producer / consumer branches on it are uniform and the consumer's ring
// index, phase and wgmma descriptors stay in uniform registers, where HGMMA reads them; from
// threadIdx.x directly they are computed per thread and moved over (R2UR) before every HGMMA
// (nvdisasm of the sm_90a GEMM: 36 R2UR, 5 with this).  Call with the whole warp converged.
__device__ __forceinline__ int warpgroup_index() { return __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0); }

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}

// The accumulators of an m64nNk16 wgmma: N/2 fp32 registers per thread, named %0 .. %(N/2 - 1)
// in the instruction (`MX_WGMMA_NAMES_<N/2>`) and bound to d[0] .. d[N/2 - 1]
// (`MX_WGMMA_OUTS_<N/2>`); each list extends the previous one (the preprocessor has no loops).
#define MX_WGMMA_NAMES_32 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MX_WGMMA_OUTS_32 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define MX_WGMMA_NAMES_64 \
  MX_WGMMA_NAMES_32 ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define MX_WGMMA_OUTS_64 MX_WGMMA_OUTS_32, \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define MX_WGMMA_NAMES_96 \
  MX_WGMMA_NAMES_64 ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define MX_WGMMA_OUTS_96 MX_WGMMA_OUTS_64, \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define MX_WGMMA_NAMES_128 \
  MX_WGMMA_NAMES_96 ", " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define MX_WGMMA_OUTS_128 MX_WGMMA_OUTS_96, \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// wgmma.mma_async m64nNk16, fp32 accumulators d, A and B from shared memory (descriptors),
// A K-major, B K-major (TransB = 0) or MN-major (TransB = 1); accumulate = 0 overwrites d.
// A = NACC, B = NACC + 1, P = NACC + 2, T = NACC + 3: the operand numbers after the accumulators.
#define MX_WGMMA_SS(N, NACC, TYPE, PTX, A, B, P, T)                                                   \
  template <int TransB>                                                                               \
  __device__ __forceinline__ void wgmma_m64n##N##k16(float(&d)[NACC], uint64_t da, uint64_t db,       \
                                                     int accumulate, TYPE) {                          \
    asm volatile(                                                                                     \
        "{\n.reg .pred p;\n"                                                                           \
        "setp.ne.b32 p, %" #P ", 0;\n"                                                                 \
        "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " "                             \
        "{" MX_WGMMA_NAMES_##NACC "}, %" #A ", %" #B ", p, 1, 1, 0, %" #T ";\n}\n"                      \
        : MX_WGMMA_OUTS_##NACC                                                                        \
        : "l"(da), "l"(db), "r"(accumulate), "n"(TransB));                                          \
  }

// wgmma.mma_async m64nNk16 with A from registers (PTX ISA, "Register Fragments and Shared Memory
// Matrix Layouts": per warp of the warpgroup, 16 rows in the m16n8k16 A-fragment layout, four
// .b32 registers of two 16-bit elements each), B from shared memory (descriptor, TransB as
// above), fp32 accumulators d; accumulate = 0 overwrites d.  Used for P @ V in a flash chain,
// P being the score accumulators rounded to 16 bits in registers.  A0 .. A3, B, P, T: the
// operand numbers after the accumulators.
#define MX_WGMMA_RS(N, NACC, TYPE, PTX, A0, A1, A2, A3, B, P, T)                                      \
  template <int TransB>                                                                               \
  __device__ __forceinline__ void wgmma_rs_m64n##N##k16(float(&d)[NACC], const uint32_t(&a)[4],       \
                                                        uint64_t db, int accumulate, TYPE) {          \
    asm volatile(                                                                                     \
        "{\n.reg .pred p;\n"                                                                           \
        "setp.ne.b32 p, %" #P ", 0;\n"                                                                 \
        "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." PTX "." PTX " "                             \
        "{" MX_WGMMA_NAMES_##NACC "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #B ", p, 1, 1, %" #T \
        ";\n}\n"                                                                                       \
        : MX_WGMMA_OUTS_##NACC                                                                        \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(TransB));       \
  }

MX_WGMMA_SS(64, 32, half, "f16", 32, 33, 34, 35)
MX_WGMMA_SS(64, 32, __nv_bfloat16, "bf16", 32, 33, 34, 35)
MX_WGMMA_SS(128, 64, half, "f16", 64, 65, 66, 67)
MX_WGMMA_SS(128, 64, __nv_bfloat16, "bf16", 64, 65, 66, 67)
MX_WGMMA_SS(192, 96, half, "f16", 96, 97, 98, 99)
MX_WGMMA_SS(192, 96, __nv_bfloat16, "bf16", 96, 97, 98, 99)
MX_WGMMA_SS(256, 128, half, "f16", 128, 129, 130, 131)
MX_WGMMA_SS(256, 128, __nv_bfloat16, "bf16", 128, 129, 130, 131)
MX_WGMMA_RS(64, 32, half, "f16", 32, 33, 34, 35, 36, 37, 38)
MX_WGMMA_RS(64, 32, __nv_bfloat16, "bf16", 32, 33, 34, 35, 36, 37, 38)
MX_WGMMA_RS(128, 64, half, "f16", 64, 65, 66, 67, 68, 69, 70)
MX_WGMMA_RS(128, 64, __nv_bfloat16, "bf16", 64, 65, 66, 67, 68, 69, 70)
#undef MX_WGMMA_SS
#undef MX_WGMMA_RS

template <int BN>
struct Wgmma;
template <>
struct Wgmma<64> {
  template <int TB, class T>
  __device__ __forceinline__ static void run(float (&d)[32], uint64_t a, uint64_t b, int acc) {
    wgmma_m64n64k16<TB>(d, a, b, acc, T());
  }
};
template <>
struct Wgmma<128> {
  template <int TB, class T>
  __device__ __forceinline__ static void run(float (&d)[64], uint64_t a, uint64_t b, int acc) {
    wgmma_m64n128k16<TB>(d, a, b, acc, T());
  }
};
template <>
struct Wgmma<192> {
  template <int TB, class T>
  __device__ __forceinline__ static void run(float (&d)[96], uint64_t a, uint64_t b, int acc) {
    wgmma_m64n192k16<TB>(d, a, b, acc, T());
  }
};
template <>
struct Wgmma<256> {
  template <int TB, class T>
  __device__ __forceinline__ static void run(float (&d)[128], uint64_t a, uint64_t b, int acc) {
    wgmma_m64n256k16<TB>(d, a, b, acc, T());
  }
};

// `WgmmaRs<N>::run`: the A-from-registers wrapper of a tile width.
template <int BN>
struct WgmmaRs;
template <>
struct WgmmaRs<64> {
  template <int TB, class T>
  __device__ __forceinline__ static void run(float (&d)[32], const uint32_t (&a)[4], uint64_t b, int acc) {
    wgmma_rs_m64n64k16<TB>(d, a, b, acc, T());
  }
};
template <>
struct WgmmaRs<128> {
  template <int TB, class T>
  __device__ __forceinline__ static void run(float (&d)[64], const uint32_t (&a)[4], uint64_t b, int acc) {
    wgmma_rs_m64n128k16<TB>(d, a, b, acc, T());
  }
};

}  // namespace hopper
}  // namespace mx
#endif  // MX_HOST
