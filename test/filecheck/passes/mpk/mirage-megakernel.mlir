// RUN: mirage-opt %s -p 'mirage-megakernel{workers=2 trace=true watchdog-ms=100}' | filecheck %s
// RUN: mirage-opt %s -p 'mirage-megakernel{workers=2 dispatch=table}' -t cuda | filecheck %s --check-prefix=CUDA
// RUN: mirage-opt %s -p 'mirage-megakernel{workers=2}' -t cuda | filecheck %s --check-prefix=INLINE
// RUN: mirage-opt %s -p 'mirage-megakernel{workers=2 dispatch=straight}' -t cuda | filecheck %s --check-prefix=STRAIGHT
// RUN: mirage-opt %s -p 'mirage-megakernel' | filecheck %s --check-prefix=SMIR
// RUN: mirage-opt %s -p 'mirage-megakernel' -t cuda | filecheck %s --check-prefix=SMCUDA
// RUN: mirage-opt %s -p 'mirage-megakernel{workers=3 dispatch=scheduler}' | filecheck %s --check-prefix=SCHEDIR
// RUN: mirage-opt %s -p 'mirage-megakernel{workers=3 dispatch=scheduler}' -t cuda | filecheck %s --check-prefix=SCHED

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
// CHECK:      mpk.task_graph attributes {{{.*}}mpk.watchdog_ns = 100000000 : i64, mpk.trace, mpk.dispatch = "inline", workers = 2 : i64, threads = 128 : i64

// CUDA:       static __device__ __noinline__ void pair_k0_task(
// CUDA:         const uint3 mpk_block,
// CUDA-NEXT:    const mx::MpkGate mpk_gate) {
// CUDA-NOT:   griddepcontrol
// CUDA:         if (!mpk_gate.launch_sync()) return;
// CUDA:         if (!mpk_gate.pass()) return;
// CUDA:       static __device__ __noinline__ void pair_k1_task(
// CUDA:       extern "C" __global__ void __launch_bounds__(128, 1) pair_mpk(
// CUDA:         mx::allow_dependent_launch();
// CUDA:         mx::MpkGate gate{e >= 0 ? events + e : nullptr, n, state, t, (unsigned)e, 500000000ull, &mpk_abort, nullptr, &mpk_launch,
// CUDA-NEXT:                     q == queue_off[w]};
// CUDA:         pair_k0_task(
// CUDA-SAME:      gate);
// CUDA-NEXT:      if (mpk_abort) return;
// CUDA:       (void)mx::mpk_add_release(events + trig[t0], 1ull);
// CUDA:       if (queue_off[w] == queue_off[w + 1] && !mx::mpk_launch_sync(&mpk_launch, state, &mpk_abort)) return;  // no task
// CUDA-NEXT:  if (tid == 0) mx::mpk_finish(state, mpk_launch.gen, 2u);
// CUDA:       /* mirage-launch-plan @pair
// CUDA:       "kernel": "pair_mpk",
// CUDA-NEXT:  "grid": [
// CUDA-NEXT:   2,

// A graph of a few tasks (passes/mpk/dispatch.py) is printed as straight-line worker programs
// with the task bodies inlined: no tables, every task's event, count and block a literal.  The
// matmul's 8 blocks alternate between the two workers and trigger event 0; the relu task
// waits for all 8 on worker 0.
// INLINE:     static __device__ __forceinline__ void pair_k0_task(
// INLINE:     static __device__ __forceinline__ void pair_k1_task(
// INLINE-NOT: namespace mpk_pair
// INLINE:     // pair_mpk: 9 tasks of 2 kernels on 2 worker CTAs of 128 threads,
// INLINE-NEXT: // {{.*}}; inline dispatch
// INLINE:       switch (w) {
// INLINE-NEXT:    case 0: {
// INLINE-NEXT:      {  // task 0: pair_k0 block 0
// INLINE-NEXT:        mx::MpkGate gate{nullptr, 0ull, state, 0u, 4294967295u, 500000000ull, &mpk_abort, nullptr, &mpk_launch, true};
// INLINE-NEXT:        pair_k0_task({{.*}}, make_uint3(0u, 0u, 0u), gate);
// INLINE-NEXT:        if (mpk_abort) return;
// INLINE-NEXT:        __syncthreads();
// INLINE-NEXT:        if (tid == 0) {
// INLINE-NEXT:          __threadfence();
// INLINE-NEXT:          (void)mx::mpk_add_release(events + 0, 1ull);
// INLINE-NEXT:        }
// INLINE-NEXT:      }
// INLINE-NEXT:      {  // task 2: pair_k0 block 2
// INLINE-NEXT:        mx::MpkGate gate{nullptr, 0ull, state, 2u, 4294967295u, 500000000ull, &mpk_abort, nullptr, &mpk_launch, false};
// INLINE:           {  // task 8: pair_k1 block 0
// INLINE-NEXT:        mx::MpkGate gate{events + 0, 8ull, state, 8u, 0u, 500000000ull, &mpk_abort, nullptr, &mpk_launch, false};
// INLINE-NEXT:        pair_k1_task(o0, {{.*}}, make_uint3(0u, 0u, 0u), gate);
// INLINE-NEXT:        if (mpk_abort) return;
// INLINE-NEXT:        __syncthreads();
// INLINE-NEXT:      }
// INLINE-NEXT:      break;
// INLINE-NEXT:    }
// INLINE-NEXT:    case 1: {
// INLINE-NEXT:      {  // task 1: pair_k0 block 1
// INLINE:           break;
// INLINE-NEXT:    }
// INLINE-NEXT:    default:  // no task
// INLINE-NEXT:      if (!mx::mpk_launch_sync(&mpk_launch, state, &mpk_abort)) return;
// INLINE:       if (tid == 0) mx::mpk_finish(state, mpk_launch.gen, 2u);

// STRAIGHT:   static __device__ __noinline__ void pair_k0_task(
// STRAIGHT-NOT: namespace mpk_pair
// STRAIGHT:   // {{.*}}; straight dispatch
// STRAIGHT:     pair_k0_task({{.*}}, make_uint3(0u, 0u, 0u), gate);

// By default as many workers per SM as the tasks' shared memory allows, at most four (these tiny
// tasks: four), in SM-major order (worker w runs on SM
// w % 132), each worker taking its index from its SM id and a per-SM slot counter at launch
// (before it waits for the previous grid; it triggers the next launch once placed).
// SMIR:       mpk.task_graph attributes {{{.*}}mpk.sm_major = 132 : i64{{.*}}workers = 528 : i64
// SMCUDA:     mpk_launch.ctas = 4u;
// SMCUDA:     mpk_w = mx::mpk_place(reinterpret_cast<unsigned long long*>(mpk_counters + {{[0-9]+}}), &mpk_launch, 132u, state);
// SMCUDA:     mx::allow_dependent_launch();
// SMCUDA:     const unsigned w = mpk_w;

// Scheduler dispatch (codegen/megakernel_scheduler.py): of the 3 CTAs the last schedules, so
// the graph has 2 workers; the scheduler hands the matmul's 8 tasks (no wait) over at its
// start and the relu task once event 0 is reached, slots first, one fence, then the heads;
// each worker pops its queue.
// SCHEDIR:    mpk.task_graph attributes {{{.*}}mpk.dispatch = "scheduler", workers = 2 : i64
// SCHED:      static __constant__ const unsigned sched_initial[8] = {0, 1, 2, 3, 4, 5, 6, 7};
// SCHED-NEXT: static __constant__ const unsigned ev_cons_off[2] = {0, 1};
// SCHED-NEXT: static __constant__ const unsigned ev_cons[1] = {8};
// SCHED:      // pair_mpk: 9 tasks of 2 kernels on 2 worker CTAs + a scheduler CTA of 128 threads,
// SCHED:      extern __shared__ __align__(128) unsigned char mpk_dyn_smem[];
// SCHED:      if (!mx::mpk_launch_sync(&mpk_launch, state, &mpk_abort)) return;
// SCHED-NEXT: const unsigned long long gen = mpk_launch.gen;
// SCHED:      if (w == 2u) {  // the scheduler CTA (mpk.dispatch = scheduler)
// SCHED:          for (unsigned i = lane; i < 8u; i += 32) slot_of(sched_initial[i]);
// SCHED-NEXT:     __syncwarp();
// SCHED-NEXT:     __threadfence();
// SCHED-NEXT:     for (unsigned i = lane; i < 8u; i += 32) head_of(sched_initial[i]);
// SCHED:            const bool ready = live && mx::mpk_ld_acquire(events + e) >= (gen + 1ull) * event_count[e];
// SCHED:          if (lane == 0) mx::mpk_schedule_timeout(
// SCHED:        if (tid == 0) mx::mpk_finish(state, gen, 3u);
// SCHED-NEXT:   return;
// SCHED:        if (tid == 0) mpk_task = mx::mpk_pop(heads + w, slots, gen * n, i, state, w, 1000000000ull);
// SCHED:        mx::MpkGate gate{nullptr, 0ull, state, t, ~0u, 500000000ull, &mpk_abort, nullptr, &mpk_launch, false};
// SCHED:      if (tid == 0) mx::mpk_finish(state, mpk_launch.gen, 3u);
// SCHED:      "grid": [
// SCHED-NEXT:   3,
