// RUN: mirage-opt %s -p cute-weight-prefetch --split-input-file | filecheck %s
// RUN: not mirage-opt %s -p 'cute-decisions{without=cute-weight-prefetch}' -t cuda --split-input-file 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: mirage-opt %s -p 'cute-weight-prefetch{inputs-ready=true}' --split-input-file | filecheck %s --check-prefix=INPUTS
// RUN: mirage-opt %s -p 'cute-weight-prefetch{inputs-ready=true},cute-weight-prefetch' --split-input-file | filecheck %s --check-prefix=AGAIN

// cute-weight-prefetch: the cp.async loads of kn.weight parameters in a ring prologue, with
// the shared-memory pointers and accumulator initialisations, are printed before the PDL
// wait (`cute.before_pdl_wait`); a kernel streaming a weight in its loop triggers its
// dependents at its start and launches one wave at a time (`cute.trigger_dependents`);
// every kernel gets `cute.pdl_prefetch` (weight loads hoisted).
// Inputs: examples/rmsnorm_linear.mlir and examples/lora.mlir after `mirage-transpile{decide=false}`.

// rmsnorm_linear: W (%i1) is a kn.weight, X (%i0) is not; 4 prologue stages of W hoisted.
// CHECK: cute.kernel{{.*}}cute.trigger_dependents, {{.*}}cute.pdl_prefetch = 4 : i64, kernel_name = "rmsnorm_linear_k0"
// CHECK: %s0 = cute.smem_alloc [128, 384, 640, 896, 1152] {cute.before_pdl_wait}
// CHECK: cute.fill %s2, 0.0 {cute.accum_in_reg}
// CHECK: %racc0 = cute.mma_init {cute.before_pdl_wait}
// CHECK: cute.copy_g2s "async" %i0 -> %s0 {tile
// CHECK: cute.copy_g2s "async" %i1 -> %s1 {cute.before_pdl_wait, tile
// CHECK-NEXT: cute.cp_async_commit
// CHECK: cute.for %it = 0 to 16 {
// CHECK-NOT: cute.before_pdl_wait
// CHECK-LABEL: func.func @lora

// With `inputs-ready` (mirage-megakernel: nothing in the launch writes a graph input), X's
// prologue loads are hoisted beside W's: 4 + 4 loads.  Only W's (a kn.weight, which no
// earlier launch writes either) go before a worker's wait for the previous grid too
// (`cute.before_grid_wait`), with the pointers and the accumulator initialisation.
// INPUTS: cute.kernel{{.*}}cute.pdl_prefetch = 8 : i64, kernel_name = "rmsnorm_linear_k0"
// INPUTS: %s0 = cute.smem_alloc [128, 384, 640, 896, 1152] {cute.before_pdl_wait, cute.before_grid_wait}
// INPUTS: %racc0 = cute.mma_init {cute.before_pdl_wait, cute.before_grid_wait}
// INPUTS: cute.copy_g2s "async" %i0 -> %s0 {cute.before_pdl_wait, tile
// INPUTS: cute.copy_g2s "async" %i1 -> %s1 {cute.before_pdl_wait, cute.before_grid_wait, tile
// INPUTS: cute.for %it = 0 to 16 {
// INPUTS-NOT: cute.before_grid_wait
// INPUTS-LABEL: func.func @lora

// A second run decides anew: after the inputs-ready run, the plain run leaves X's loads
// unmarked again (its marks replace the first run's).
// AGAIN-NOT: cute.before_grid_wait
// AGAIN: cute.kernel{{.*}}cute.pdl_prefetch = 4 : i64, kernel_name = "rmsnorm_linear_k0"
// AGAIN: cute.copy_g2s "async" %i0 -> %s0 {tile
// AGAIN: cute.copy_g2s "async" %i1 -> %s1 {cute.before_pdl_wait, tile

// MISSING: cuda target: cute.kernel: no 'cute.pdl_prefetch' attribute; run cute-weight-prefetch first (mirage-transpile runs it)

builtin.module {
  func.func @rmsnorm_linear(%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.innermost = 1 : i64}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>, kn.weight, kn.innermost = 1 : i64}) -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>}) attributes {mirage.layout_cost = 13800 : i64, mirage.layout_status = "optimal", kn.workspace_size = 199680 : i64} {
    %o = cute.kernel(%X, %W) attributes {kn.template = "split_k_grid_sum", kn.smem_estimate = 19136 : i64, kn.cost_estimate_us = 1.772700e+01 : f64, kn.innermost = array<i64: 1>, kn.grid_sum_scratch_offset = 0 : i64, kernel_name = "rmsnorm_linear_k0", grid_dim = array<i64: 96, 4, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 42368 : i64, forloop_range = 16 : i64, arg_strides = [array<i64: 6144, 1>, array<i64: 4096, 1>, array<i64: 6144, 1>]} : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
    ^bb0(%o0: tensor<2x6144xf16>, %i0: tensor<2x4096xf16>, %i1: tensor<4096x6144xf16>):
      %s0 = cute.smem_alloc [128, 384, 640, 896, 1152] : !cute.smem<f16, (2,64):(64,1), xor<3,3,3>>
      %s1 = cute.smem_alloc [1408, 9600, 17792, 25984, 34176] : !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      %s2 = cute.smem_alloc [128] : !cute.smem<f32, (2,64):(1,4)>
      %s3 = cute.smem_alloc [1152] : !cute.smem<f32, (2,64):(64,1), xor<3,2,4>>
      %s4 = cute.smem_alloc [1664] : !cute.smem<f32, (2,1):(1,4)>
      %s5 = cute.smem_alloc [128] : !cute.smem<f32, (2,1):(1,4)>
      %s6 = cute.smem_alloc [144] : !cute.smem<f32, (2,64):(64,1)>
      %s7 = cute.smem_alloc [656] : !cute.smem<f16, (2,1):(1,8)>
      %s8 = cute.smem_alloc [672] : !cute.smem<f16, (2,64):(64,1)>
      cute.fill %s2, 0.0 {cute.accum_in_reg} : !cute.smem<f32, (2,64):(1,4)>
      %racc0 = cute.mma_init : !cute.frag<2x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(2,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 0 : i64} : tensor<2x4096xf16> -> !cute.smem<f16, (2,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 0 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(2,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 1 : i64} : tensor<2x4096xf16> -> !cute.smem<f16, (2,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 1 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(2,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 2 : i64} : tensor<2x4096xf16> -> !cute.smem<f16, (2,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 2 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(2,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 3 : i64} : tensor<2x4096xf16> -> !cute.smem<f16, (2,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 3 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 16 {
        cute.copy_g2s "async" %i0[%it] -> %s0 {tile = #cute.layout<(2,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 4 : i64} : tensor<2x4096xf16> -> !cute.smem<f16, (2,64):(64,1), xor<3,3,3>>
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 4 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
        cute.cp_async_commit
        cute.cp_async_wait 4
        cute.barrier
        cute.elementwise "id"(%s0) [#cute.fn<square>, #cute.fn<mul_scalar(0.000244140625)>] "add" %s2 {order = array<i64: 0, 1>} : !cute.smem<f16, (2,64):(64,1), xor<3,3,3>> -> !cute.smem<f32, (2,64):(1,4)>
        cute.mma %racc0, %s0, %s1 : !cute.frag<2x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (2,64):(64,1), xor<3,3,3>>, !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s3 : !cute.frag<2x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (2,64):(64,1), xor<3,2,4>>
      cute.barrier
      cute.reduce "sum" %s2 [] "store" %s4 {dim = 1 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 0, 1>} : !cute.smem<f32, (2,64):(1,4)> -> !cute.smem<f32, (2,1):(1,4)>
      cute.barrier
      cute.grid_sum(%s4, %s3) -> (%s5, %s6) {dim = 1 : i64} : !cute.smem<f32, (2,1):(1,4)>, !cute.smem<f32, (2,64):(64,1), xor<3,2,4>> -> !cute.smem<f32, (2,1):(1,4)>, !cute.smem<f32, (2,64):(64,1)>
      cute.barrier
      cute.elementwise "id"(%s5) [#cute.fn<sqrt>] "store" %s7 {order = array<i64: 0, 1>} : !cute.smem<f32, (2,1):(1,4)> -> !cute.smem<f16, (2,1):(1,8)>
      cute.barrier
      cute.elementwise "div"(%s6, %s7) [] "store" %s8 {order = array<i64: 1, 0>} : !cute.smem<f32, (2,64):(64,1)>, !cute.smem<f16, (2,1):(1,8)> -> !cute.smem<f16, (2,64):(64,1)>
      cute.barrier
      cute.copy_s2g "chunked" %s8 -> %o0 {tile = #cute.layout<(2,64):(6144,1)>, block_offset = array<i64: 64, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (2,64):(64,1)> -> tensor<2x6144xf16>
    }
    func.return %o : tensor<2x6144xf16>
  }
}


// -----

// lora: no kn.weight stream in a loop: nothing hoisted, no trigger.
// CHECK: cute.kernel{{.*}}cute.pdl_prefetch = 0 : i64
// CHECK-NOT: cute.trigger_dependents
// CHECK-NOT: cute.before_pdl_wait

builtin.module {
  func.func @lora(%X: tensor<16x256xf16> {kn.strides = array<i64: 256, 1>, kn.innermost = 1 : i64}, %W: tensor<256x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight, kn.innermost = 1 : i64}, %A: tensor<256x16xf16> {kn.strides = array<i64: 16, 1>, kn.weight, kn.innermost = 1 : i64}, %B: tensor<16x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight, kn.innermost = 1 : i64}) -> (tensor<16x4096xf16> {kn.strides = array<i64: 4096, 1>}) attributes {mirage.layout_cost = 34136 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %o = cute.kernel(%X, %W, %A, %B) attributes {kn.template = "multi_matmul_shared_operand", kn.smem_estimate = 28288 : i64, kn.cost_estimate_us = 3.486000e+00 : f64, kn.innermost = array<i64: 1>, kernel_name = "lora_k0", grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 27264 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 4096, 1>, array<i64: 256, 1>, array<i64: 4096, 1>, array<i64: 16, 1>, array<i64: 4096, 1>]} : (tensor<16x256xf16>, tensor<256x4096xf16>, tensor<256x16xf16>, tensor<16x4096xf16>) -> tensor<16x4096xf16> {
    ^bb0(%o0: tensor<16x4096xf16>, %i0: tensor<16x256xf16>, %i1: tensor<256x4096xf16>, %i2: tensor<256x16xf16>, %i3: tensor<16x4096xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (16,256):(256,1), xor<3,3,5>>
      %s1 = cute.smem_alloc [8320] : !cute.smem<f16, (256,16):(16,1), xor<1,3,3>>
      %s2 = cute.smem_alloc [16512] : !cute.smem<f16, (256,16):(16,1), xor<1,3,3>>
      %s3 = cute.smem_alloc [24704] : !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>
      %s4 = cute.smem_alloc [25728] : !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>
      %s5 = cute.smem_alloc [26240] : !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>
      %s6 = cute.smem_alloc [26752] : !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>
      %s7 = cute.smem_alloc [25216] : !cute.smem<f16, (16,16):(16,1)>
      cute.copy_g2s "chunked" %i0 -> %s0 {tile = #cute.layout<(16,256):(256,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<16x256xf16> -> !cute.smem<f16, (16,256):(256,1), xor<3,3,5>>
      cute.copy_g2s "chunked" %i1 -> %s1 {tile = #cute.layout<(256,16):(4096,1)>, block_offset = array<i64: 16, 0, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<256x4096xf16> -> !cute.smem<f16, (256,16):(16,1), xor<1,3,3>>
      cute.copy_g2s "chunked" %i2 -> %s2 {tile = #cute.layout<(256,16):(16,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<256x16xf16> -> !cute.smem<f16, (256,16):(16,1), xor<1,3,3>>
      cute.copy_g2s "chunked" %i3 -> %s3 {tile = #cute.layout<(16,16):(4096,1)>, block_offset = array<i64: 16, 0, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>
      cute.fill %s7, 0.0 : !cute.smem<f16, (16,16):(16,1)>
      cute.barrier
      cute.for %it = 0 to 1 {
        %acc = cute.mma_init : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>>
        cute.mma %acc, %s0, %s1 : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>>, !cute.smem<f16, (16,256):(256,1), xor<3,3,5>>, !cute.smem<f16, (256,16):(16,1), xor<1,3,3>>
        cute.frag_store %acc [] "store" %s4 : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>> -> !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>
        %acc_1 = cute.mma_init : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>>
        cute.mma %acc_1, %s0, %s2 : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>>, !cute.smem<f16, (16,256):(256,1), xor<3,3,5>>, !cute.smem<f16, (256,16):(16,1), xor<1,3,3>>
        cute.frag_store %acc_1 [] "store" %s5 : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>> -> !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>
        cute.barrier
        %acc_2 = cute.mma_init : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>>
        cute.mma %acc_2, %s5, %s3 : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>>, !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>, !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>
        cute.frag_store %acc_2 [] "store" %s6 : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>> -> !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>
        cute.barrier
        cute.elementwise "add"(%s4, %s6) [] "add" %s7 {order = array<i64: 1, 0>} : !cute.smem<f16, (16,16):(16,1), xor<1,3,3>>, !cute.smem<f16, (16,16):(16,1), xor<1,3,3>> -> !cute.smem<f16, (16,16):(16,1)>
        cute.barrier
      }
      cute.copy_s2g "chunked" %s7 -> %o0 {tile = #cute.layout<(16,16):(4096,1)>, block_offset = array<i64: 16, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (16,16):(16,1)> -> tensor<16x4096xf16>
    }
    func.return %o : tensor<16x4096xf16>
  }
}

