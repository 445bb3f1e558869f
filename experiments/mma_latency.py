"""Latency of a dependent chain of mma.sync.m16n8k16 (f16 in, f32 accumulate) on one warp."""
import cupy as cp
src = r'''
extern "C" __global__ void chain(float* out, long long* cycles, int n) {
  unsigned a0 = 0x3c003c00u, a1 = a0, a2 = a0, a3 = a0, b0 = 0x00000000u, b1 = b0;
  float c0 = threadIdx.x, c1 = 0.f, c2 = 0.f, c3 = 0.f;
  __syncwarp();
  long long t0 = clock64();
  for (int i = 0; i < n; ++i) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  long long t1 = clock64();
  out[threadIdx.x] = c0 + c1 + c2 + c3;
  if (threadIdx.x == 0) cycles[0] = t1 - t0;
}
'''
k = cp.RawKernel(src, "chain", options=("-arch=sm_90",))
out = cp.zeros(32, cp.float32); cyc = cp.zeros(1, cp.int64)
res = []
for n in (256, 1024, 4096):
    for _ in range(3):
        k((1,), (32,), (out, cyc, cp.int32(n)))
    cp.cuda.runtime.deviceSynchronize()
    res.append((n, int(cyc.get()[0]) / n))
clock_khz = cp.cuda.runtime.deviceGetAttribute(cp.cuda.runtime.cudaDevAttrClockRate, 0)
ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
ev0.record(); k((1,), (32,), (out, cyc, cp.int32(1 << 16))); ev1.record(); ev1.synchronize()
ms = cp.cuda.get_elapsed_time(ev0, ev1)
print("cycles per dependent mma:", res, "max clock MHz", clock_khz / 1000,
      "wall ns per mma (65536 chain):", round(ms * 1e6 / (1 << 16), 2), "-> effective MHz", round(int(cyc.get()[0]) / (ms * 1e3), 1))
