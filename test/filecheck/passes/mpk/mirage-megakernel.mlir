// RUN: mirage-opt %s -p 'mirage-megakernel{workers=2 trace=true watchdog-ms=100}' | filecheck %s
// RUN: mirage-opt %s -p 'mirage-megakernel{workers=2}' -t cuda | filecheck %s --check-prefix=CUDA
// RUN: mirage-opt %s -p 'mirage-megakernel' | filecheck %s --check-prefix=SMIR
// RUN: mirage-opt %s -p 'mirage-megakernel' -t cuda | filecheck %s --check-prefix=SMCUDA

// The pipeline: one kernel per op (the matmul too, not a cuBLAS call), 128 threads each,
// then the task graph; the cuda target prints ONE persistent kernel running the per-op
// kernels' bodies as __device__ task functions.
func.func @pair(%X: tensor<8x64xf16> {kn.strides = array<i64: 64, 1>},
                %W: tensor<64x64xf16> {kn.strides = array<i64: 64, 1>, kn.weight}) -> tensor<8x64xf16> {
  %h = kn.matmul %X, %W : tensor<8x64xf16>, tensor<64x64xf16> -> tensor<8x64xf16>
  %o = kn.relu %h : tensor<8x64xf16>
  func.return %o : tensor<8x64xf16>
}

// CHECK:      cute.kernel(%X, %W) {{.*}}kernel_name = "pair_k0"{{.*}}block_dim = array<i64: 128, 1, 1>
// CHECK:      cute.kernel(%h) {{.*}}kernel_name = "pair_k1"{{.*}}block_dim = array<i64: 128, 1, 1>
// CHECK:      mpk.task_graph attributes {{{.*}}mpk.watchdog_ns = 100000000 : i64, mpk.trace, workers = 2 : i64, threads = 128 : i64

// CUDA:       static __device__ __noinline__ void pair_k0_task(
// CUDA:         const uint3 mpk_block,
// CUDA-NEXT:    const mx::MpkGate mpk_gate) {
// CUDA-NOT:   griddepcontrol
// CUDA:         if (!mpk_gate.pass()) return;
// CUDA:       static __device__ __noinline__ void pair_k1_task(
// CUDA:       extern "C" __global__ void __launch_bounds__(128, 1) pair_mpk(
// CUDA:         mx::MpkGate gate{e >= 0 ? events + e : nullptr, gen * n, n, state, t, (unsigned)e, 500000000ull, &mpk_abort, nullptr};
// CUDA:         pair_k0_task(
// CUDA-SAME:      gate);
// CUDA-NEXT:      if (mpk_abort) return;
// CUDA:       (void)mx::mpk_add_release(events + trig[t0], 1ull);
// CUDA:       if (tid == 0) mx::mpk_finish(state, gen, 2u);
// CUDA:       /* mirage-launch-plan @pair
// CUDA:       "kernel": "pair_mpk",
// CUDA-NEXT:  "grid": [
// CUDA-NEXT:   2,

// By default as many workers per SM as the tasks' shared memory allows, at most four (these tiny
// tasks: four), in SM-major order (worker w runs on SM
// w % 132), each worker taking its index from its SM id and a per-SM slot counter at launch.
// SMIR:       mpk.task_graph attributes {{{.*}}mpk.sm_major = 132 : i64{{.*}}workers = 528 : i64
// SMCUDA:     mpk_w = mx::mpk_place(mpk_counters + {{[0-9]+}}, mpk_gen, 4u, 132u, state);
// SMCUDA:     const unsigned w = mpk_w;
