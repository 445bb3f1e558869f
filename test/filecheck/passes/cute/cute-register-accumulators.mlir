// RUN: mirage-opt %s -p cute-register-accumulators --split-input-file --verify-diagnostics | filecheck %s
// RUN: not mirage-opt %s -p 'cute-decisions{without=cute-register-accumulators}' -t cuda --split-input-file 2>&1 | filecheck %s --check-prefix=MISSING

// cute-register-accumulators: a shared fp32 tile cleared before the loop, added into by one
// elementwise op per iteration and read only after it stays in registers (`cute.reg_accum =
// registers per thread` on its fill); every kernel gets `cute.reg_accums` (how many).
// Input: examples/rmsnorm_linear_bs8.mlir after `mirage-transpile{decide=false}`.

// rms_norm's [16, 64] fp32 sum of squares over 128 threads: 8 registers per thread.
// CHECK: cute.kernel{{.*}}cute.reg_accums = 1 : i64{{.*}}kernel_name = "rmsnorm_linear_bs8_k0"
// CHECK: cute.fill %s2, 0.0 {cute.accum_in_reg, cute.reg_accum = 8 : i64} : !cute.smem<f32, (16,64):(1,16)>
// CHECK-NOT: cute.reg_accum =

// MISSING: cuda target: cute.kernel: no 'cute.reg_accums' attribute; run cute-register-accumulators first (mirage-transpile runs it)

builtin.module {
  func.func @rmsnorm_linear_bs8(%X: tensor<16x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.innermost = 1 : i64}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>, kn.weight, kn.innermost = 1 : i64}) -> (tensor<16x6144xf16> {kn.strides = array<i64: 6144, 1>}) attributes {mirage.layout_cost = 27736 : i64, mirage.layout_status = "optimal", kn.workspace_size = 1597440 : i64} {
    %o = cute.kernel(%X, %W) attributes {kn.template = "split_k_grid_sum", kn.smem_estimate = 37136 : i64, kn.cost_estimate_us = 1.808000e+01 : f64, kn.innermost = array<i64: 1>, kn.grid_sum_scratch_offset = 0 : i64, kernel_name = "rmsnorm_linear_bs8_k0", grid_dim = array<i64: 96, 4, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 51328 : i64, forloop_range = 16 : i64, arg_strides = [array<i64: 6144, 1>, array<i64: 4096, 1>, array<i64: 6144, 1>]} : (tensor<16x4096xf16>, tensor<4096x6144xf16>) -> tensor<16x6144xf16> {
    ^bb0(%o0: tensor<16x6144xf16>, %i0: tensor<16x4096xf16>, %i1: tensor<4096x6144xf16>):
      %s0 = cute.smem_alloc [128, 2176, 4224, 6272, 8320] : !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      %s1 = cute.smem_alloc [10368, 18560, 26752, 34944, 43136] : !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      %s2 = cute.smem_alloc [128] : !cute.smem<f32, (16,64):(1,16)>
      %s3 = cute.smem_alloc [4224] : !cute.smem<f32, (16,64):(64,1), xor<3,2,4>>
      %s4 = cute.smem_alloc [8320] : !cute.smem<f32, (16,1):(1,16)>
      %s5 = cute.smem_alloc [128] : !cute.smem<f32, (16,1):(1,16)>
      %s6 = cute.smem_alloc [8384] : !cute.smem<f32, (16,64):(64,1)>
      %s7 = cute.smem_alloc [192] : !cute.smem<f16, (16,1):(1,16)>
      %s8 = cute.smem_alloc [224] : !cute.smem<f16, (16,64):(64,1)>
      cute.fill %s2, 0.0 {cute.accum_in_reg} : !cute.smem<f32, (16,64):(1,16)>
      %racc0 = cute.mma_init : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 0 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 0 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 1 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 1 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 2 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 2 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 3 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 3 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 16 {
        cute.copy_g2s "async" %i0[%it] -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 4 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 4 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
        cute.cp_async_commit
        cute.cp_async_wait 4
        cute.barrier
        cute.elementwise "id"(%s0) [#cute.fn<square>, #cute.fn<mul_scalar(0.000244140625)>] "add" %s2 {order = array<i64: 0, 1>} : !cute.smem<f16, (16,64):(64,1), xor<3,3,3>> -> !cute.smem<f32, (16,64):(1,16)>
        cute.mma %racc0, %s0, %s1 : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>, !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s3 : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (16,64):(64,1), xor<3,2,4>>
      cute.barrier
      cute.reduce "sum" %s2 [] "store" %s4 {dim = 1 : i64, group = 1 : i64, threads = 8 : i64, order = array<i64: 0, 1>} : !cute.smem<f32, (16,64):(1,16)> -> !cute.smem<f32, (16,1):(1,16)>
      cute.barrier
      cute.grid_sum(%s4, %s3) -> (%s5, %s6) {dim = 1 : i64} : !cute.smem<f32, (16,1):(1,16)>, !cute.smem<f32, (16,64):(64,1), xor<3,2,4>> -> !cute.smem<f32, (16,1):(1,16)>, !cute.smem<f32, (16,64):(64,1)>
      cute.barrier
      cute.elementwise "id"(%s5) [#cute.fn<sqrt>] "store" %s7 {order = array<i64: 0, 1>} : !cute.smem<f32, (16,1):(1,16)> -> !cute.smem<f16, (16,1):(1,16)>
      cute.barrier
      cute.elementwise "div"(%s6, %s7) [] "store" %s8 {order = array<i64: 1, 0>} : !cute.smem<f32, (16,64):(64,1)>, !cute.smem<f16, (16,1):(1,16)> -> !cute.smem<f16, (16,64):(64,1)>
      cute.barrier
      cute.copy_s2g "chunked" %s8 -> %o0 {tile = #cute.layout<(16,64):(6144,1)>, block_offset = array<i64: 64, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (16,64):(64,1)> -> tensor<16x6144xf16>
    }
    func.return %o : tensor<16x6144xf16>
  }
}


// -----

// The same kernel with the accumulator cleared to 1: tb-plan-smem planned it in registers
// (cute.accum_in_reg, its tile may overlap the rings), so keeping it in shared memory is an error.
// CHECK: cute-register-accumulators: kernel rmsnorm_linear_bs8_k0: the accumulator filled by this cute.fill is planned in registers (cute.accum_in_reg: its shared tile may overlap the loop's buffers) but is not updated by exactly one elementwise add or rescale per iteration, or takes more than 32 registers per thread; drop the attribute and re-run tb-plan-smem

builtin.module {
  func.func @rmsnorm_linear_bs8(%X: tensor<16x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.innermost = 1 : i64}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>, kn.weight, kn.innermost = 1 : i64}) -> (tensor<16x6144xf16> {kn.strides = array<i64: 6144, 1>}) attributes {mirage.layout_cost = 27736 : i64, mirage.layout_status = "optimal", kn.workspace_size = 1597440 : i64} {
    %o = cute.kernel(%X, %W) attributes {kn.template = "split_k_grid_sum", kn.smem_estimate = 37136 : i64, kn.cost_estimate_us = 1.808000e+01 : f64, kn.innermost = array<i64: 1>, kn.grid_sum_scratch_offset = 0 : i64, kernel_name = "rmsnorm_linear_bs8_k0", grid_dim = array<i64: 96, 4, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 51328 : i64, forloop_range = 16 : i64, arg_strides = [array<i64: 6144, 1>, array<i64: 4096, 1>, array<i64: 6144, 1>]} : (tensor<16x4096xf16>, tensor<4096x6144xf16>) -> tensor<16x6144xf16> {
    ^bb0(%o0: tensor<16x6144xf16>, %i0: tensor<16x4096xf16>, %i1: tensor<4096x6144xf16>):
      %s0 = cute.smem_alloc [128, 2176, 4224, 6272, 8320] : !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      %s1 = cute.smem_alloc [10368, 18560, 26752, 34944, 43136] : !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      %s2 = cute.smem_alloc [128] : !cute.smem<f32, (16,64):(1,16)>
      %s3 = cute.smem_alloc [4224] : !cute.smem<f32, (16,64):(64,1), xor<3,2,4>>
      %s4 = cute.smem_alloc [8320] : !cute.smem<f32, (16,1):(1,16)>
      %s5 = cute.smem_alloc [128] : !cute.smem<f32, (16,1):(1,16)>
      %s6 = cute.smem_alloc [8384] : !cute.smem<f32, (16,64):(64,1)>
      %s7 = cute.smem_alloc [192] : !cute.smem<f16, (16,1):(1,16)>
      %s8 = cute.smem_alloc [224] : !cute.smem<f16, (16,64):(64,1)>
      cute.fill %s2, 1.0 {cute.accum_in_reg} : !cute.smem<f32, (16,64):(1,16)>
      %racc0 = cute.mma_init : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 0 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 0 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 1 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 1 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 2 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 2 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 3 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 3 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 16 {
        cute.copy_g2s "async" %i0[%it] -> %s0 {tile = #cute.layout<(16,64):(4096,1)>, block_offset = array<i64: 0, 1024, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 4 : i64} : tensor<16x4096xf16> -> !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(64,64):(6144,1)>, block_offset = array<i64: 64, 6291456, 0>, vec = 8 : i64, iter_stride = 393216 : i64, iter_offset = 4 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
        cute.cp_async_commit
        cute.cp_async_wait 4
        cute.barrier
        cute.elementwise "id"(%s0) [#cute.fn<square>, #cute.fn<mul_scalar(0.000244140625)>] "add" %s2 {order = array<i64: 0, 1>} : !cute.smem<f16, (16,64):(64,1), xor<3,3,3>> -> !cute.smem<f32, (16,64):(1,16)>
        cute.mma %racc0, %s0, %s1 : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>, !cute.smem<f16, (64,64):(64,1), xor<3,3,3>>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s3 : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (16,64):(64,1), xor<3,2,4>>
      cute.barrier
      cute.reduce "sum" %s2 [] "store" %s4 {dim = 1 : i64, group = 1 : i64, threads = 8 : i64, order = array<i64: 0, 1>} : !cute.smem<f32, (16,64):(1,16)> -> !cute.smem<f32, (16,1):(1,16)>
      cute.barrier
      cute.grid_sum(%s4, %s3) -> (%s5, %s6) {dim = 1 : i64} : !cute.smem<f32, (16,1):(1,16)>, !cute.smem<f32, (16,64):(64,1), xor<3,2,4>> -> !cute.smem<f32, (16,1):(1,16)>, !cute.smem<f32, (16,64):(64,1)>
      cute.barrier
      cute.elementwise "id"(%s5) [#cute.fn<sqrt>] "store" %s7 {order = array<i64: 0, 1>} : !cute.smem<f32, (16,1):(1,16)> -> !cute.smem<f16, (16,1):(1,16)>
      cute.barrier
      cute.elementwise "div"(%s6, %s7) [] "store" %s8 {order = array<i64: 1, 0>} : !cute.smem<f32, (16,64):(64,1)>, !cute.smem<f16, (16,1):(1,16)> -> !cute.smem<f16, (16,64):(64,1)>
      cute.barrier
      cute.copy_s2g "chunked" %s8 -> %o0 {tile = #cute.layout<(16,64):(6144,1)>, block_offset = array<i64: 64, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (16,64):(64,1)> -> tensor<16x6144xf16>
    }
    func.return %o : tensor<16x6144xf16>
  }
}


// -----

// A rescaled sum in registers: the cross-entropy's `sum(exp(x - max))` over 32 loop tiles of
// 1024 (examples/suite/suite_cross_entropy_f16.mlir after `mirage-transpile{decide=false}`):
// tb-fusion-chains fused `exp(x - max)` into its `nored_rescale` accumulator, so one
// `cute.elementwise "sub"(x, max, scale) [exp] "rescale"` per iteration updates it, and the
// scale is another tile: 8 registers per thread, like the two sums of P and P * X.
// CHECK: cute.kernel{{.*}}cute.reg_accums = 3 : i64{{.*}}kernel_name = "suite_cross_entropy_f16_k0"
// CHECK: cute.fill %s4, 0.0 {cute.reg_accum = 8 : i64}
// CHECK: cute.fill %s5, 0.0 {cute.accum_in_reg, cute.reg_accum = 8 : i64}
// CHECK: cute.fill %s8, 0.0 {cute.accum_in_reg, cute.reg_accum = 8 : i64}
// CHECK: cute.elementwise "sub"(%s0, %s2, %s6) [#cute.fn<exp>] "rescale" %s8

builtin.module {
  func.func @suite_cross_entropy_f16(%X: tensor<1024x32768xf16> {kn.strides = array<i64: 32768, 1>, kn.innermost = 1 : i64}, %P: tensor<1024x32768xf16> {kn.strides = array<i64: 32768, 1>, kn.innermost = 1 : i64}) -> (tensor<1024x1xf16> {kn.strides = array<i64: 1, 1>}) attributes {mirage.layout_cost = 16544 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %0 = cute.kernel(%X, %P) attributes {kn.template = "rowwise", kn.smem_estimate = 24848 : i64, kn.cost_estimate_us = 7.193300e+01 : f64, kn.innermost = array<i64: 1>, kernel_name = "suite_cross_entropy_f16_k0", grid_dim = array<i64: 1024, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 12480 : i64, forloop_range = 32 : i64, arg_strides = [array<i64: 1, 1>, array<i64: 32768, 1>, array<i64: 32768, 1>]} : (tensor<1024x32768xf16>, tensor<1024x32768xf16>) -> tensor<1024x1xf16> {
    ^bb0(%o0: tensor<1024x1xf16>, %i0: tensor<1024x32768xf16>, %i1: tensor<1024x32768xf16>):
      %s0 = cute.smem_alloc [128, 2176] : !cute.smem<f16, (1,1024):(1024,1)>
      %s1 = cute.smem_alloc [4224, 6272] : !cute.smem<f16, (1,1024):(1024,1)>
      %s2 = cute.smem_alloc [8320] : !cute.smem<f16, (1,1):(1,1)>
      %s3 = cute.smem_alloc [12448] : !cute.smem<f16, (1,1):(1,1)>
      %s4 = cute.smem_alloc [8336] : !cute.smem<f32, (1,1024):(1024,1)>
      %s5 = cute.smem_alloc [128] : !cute.smem<f32, (1,1024):(1024,1)>
      %s6 = cute.smem_alloc [12464] : !cute.smem<f16, (1,1):(1,1)>
      %s7 = cute.smem_alloc [12432] : !cute.smem<f32, (1,1):(1,1)>
      %s8 = cute.smem_alloc [4224] : !cute.smem<f32, (1,1024):(1024,1)>
      %s9 = cute.smem_alloc [8320] : !cute.smem<f32, (1,1):(1,1)>
      %s10 = cute.smem_alloc [12448] : !cute.smem<f32, (1,1):(1,1)>
      %s11 = cute.smem_alloc [12464] : !cute.smem<f32, (1,1):(1,1)>
      %s12 = cute.smem_alloc [128] : !cute.smem<f16, (1,1):(1,1)>
      %s13 = cute.smem_alloc [144] : !cute.smem<f16, (1,1):(1,1)>
      %s14 = cute.smem_alloc [128] : !cute.smem<f16, (1,1):(1,1)>
      cute.fill %s2, -inf : !cute.smem<f16, (1,1):(1,1)>
      cute.fill %s4, 0.0 : !cute.smem<f32, (1,1024):(1024,1)>
      cute.fill %s5, 0.0 {cute.accum_in_reg} : !cute.smem<f32, (1,1024):(1024,1)>
      cute.fill %s7, -inf : !cute.smem<f32, (1,1):(1,1)>
      cute.fill %s8, 0.0 {cute.accum_in_reg} : !cute.smem<f32, (1,1024):(1024,1)>
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(1,1024):(32768,1)>, block_offset = array<i64: 32768, 0, 0>, vec = 8 : i64, iter_stride = 1024 : i64, iter_offset = 0 : i64} : tensor<1024x32768xf16> -> !cute.smem<f16, (1,1024):(1024,1)>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(1,1024):(32768,1)>, block_offset = array<i64: 32768, 0, 0>, vec = 8 : i64, iter_stride = 1024 : i64, iter_offset = 0 : i64} : tensor<1024x32768xf16> -> !cute.smem<f16, (1,1024):(1024,1)>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 32 {
        cute.copy_g2s "async" %i0[%it] -> %s0 {tile = #cute.layout<(1,1024):(32768,1)>, block_offset = array<i64: 32768, 0, 0>, vec = 8 : i64, iter_stride = 1024 : i64, iter_offset = 1 : i64} : tensor<1024x32768xf16> -> !cute.smem<f16, (1,1024):(1024,1)>
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(1,1024):(32768,1)>, block_offset = array<i64: 32768, 0, 0>, vec = 8 : i64, iter_stride = 1024 : i64, iter_offset = 1 : i64} : tensor<1024x32768xf16> -> !cute.smem<f16, (1,1024):(1024,1)>
        cute.cp_async_commit
        cute.cp_async_wait 1
        cute.barrier
        cute.reduce "max" %s0 [] "store" %s2, %s3 {dim = 1 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 0, 1>} : !cute.smem<f16, (1,1024):(1024,1)> -> !cute.smem<f16, (1,1):(1,1)>, !cute.smem<f16, (1,1):(1,1)>
        cute.elementwise "id"(%s1) [] "add" %s4 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,1024):(1024,1)> -> !cute.smem<f32, (1,1024):(1024,1)>
        cute.elementwise "mul"(%s1, %s0) [] "add" %s5 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,1024):(1024,1)>, !cute.smem<f16, (1,1024):(1024,1)> -> !cute.smem<f32, (1,1024):(1024,1)>
        cute.barrier
        cute.elementwise "id"(%s3) [#cute.fn<exp>] "store" %s6 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,1):(1,1)> -> !cute.smem<f16, (1,1):(1,1)>
        cute.elementwise "id"(%s2) [] "max" %s7 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,1):(1,1)> -> !cute.smem<f32, (1,1):(1,1)>
        cute.barrier
        cute.elementwise "sub"(%s0, %s2, %s6) [#cute.fn<exp>] "rescale" %s8 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,1024):(1024,1)>, !cute.smem<f16, (1,1):(1,1)>, !cute.smem<f16, (1,1):(1,1)> -> !cute.smem<f32, (1,1024):(1024,1)>
        cute.barrier
      }
      cute.reduce "sum" %s8 [#cute.fn<log>] "store" %s9 {dim = 1 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 0, 1>} : !cute.smem<f32, (1,1024):(1024,1)> -> !cute.smem<f32, (1,1):(1,1)>
      cute.reduce "sum" %s4 [] "store" %s10 {dim = 1 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 0, 1>} : !cute.smem<f32, (1,1024):(1024,1)> -> !cute.smem<f32, (1,1):(1,1)>
      cute.reduce "sum" %s5 [] "store" %s11 {dim = 1 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 0, 1>} : !cute.smem<f32, (1,1024):(1024,1)> -> !cute.smem<f32, (1,1):(1,1)>
      cute.barrier
      cute.elementwise "add"(%s7, %s9) [] "store" %s12 {order = array<i64: 1, 0>} : !cute.smem<f32, (1,1):(1,1)>, !cute.smem<f32, (1,1):(1,1)> -> !cute.smem<f16, (1,1):(1,1)>
      cute.barrier
      cute.elementwise "mul"(%s12, %s10) [] "store" %s13 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,1):(1,1)>, !cute.smem<f32, (1,1):(1,1)> -> !cute.smem<f16, (1,1):(1,1)>
      cute.barrier
      cute.elementwise "sub"(%s13, %s11) [] "store" %s14 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,1):(1,1)>, !cute.smem<f32, (1,1):(1,1)> -> !cute.smem<f16, (1,1):(1,1)>
      cute.barrier
      cute.copy_s2g "sync" %s14 -> %o0 {tile = #cute.layout<(1,1):(1,1)>, block_offset = array<i64: 1, 0, 0>, vec = 1 : i64} : !cute.smem<f16, (1,1):(1,1)> -> tensor<1024x1xf16>
    }
    func.return %0 : tensor<1024x1xf16>
  }
}
