// RUN: mirage-opt %s -p cute-fuse-square-sum | filecheck %s
// RUN: mirage-opt %s -p cute-fuse-square-sum -t cuda | filecheck %s --check-prefix=CUDA

// cute-fuse-square-sum folds an elementwise pass that only squares a tile for the sum that
// alone reads it into that sum (`cute.reduce "sum_squares"`), which squares each element in
// fp32 as it reads it: fp16 squares of values below ~2.4e-4 underflow.  Input: fuzz seed 14
// graph 337 (test/data/fuzz_14_337.mlir: rms_norm(X @ W * s^2)) after
// `mirage-transpile{decide=false},cute-decisions{without=cute-fuse-square-sum}`.

// The square inside the for-loop adds into an accumulator: left alone.
// CHECK: cute.elementwise "id"(%s0) [#cute.fn<square>] "add" %s4
// The rms_norm's squares: no elementwise pass left (nor its second barrier), the reduce reads
// the product tile.
// CHECK: cute.elementwise "mul"(%s5, %s4) [] "store" %s6
// CHECK-NEXT: cute.barrier
// CHECK-NEXT: cute.reduce "sum_squares" %s6 [#cute.fn<mul_scalar(0.015625)>, #cute.fn<sqrt>] "store" %s8 {cute.reduce_threads = 8 : i64
// CUDA: mx::reduce_sum_squares<128, 8, 64,

builtin.module {
  func.func @fuzz_14_337(%X: tensor<3x16x128xf16> {kn.strides = array<i64: 2048, 128, 1>, kn.innermost = 2 : i64}, %0: tensor<3x128x64xf16> {kn.strides = array<i64: 8192, 64, 1>, kn.weight, kn.innermost = 2 : i64}, %1: tensor<3x16x1xf16> {kn.strides = array<i64: 16, 1, 1>, kn.innermost = 2 : i64}) -> (tensor<3x16x64xf16> {kn.strides = array<i64: 1024, 1, 16>}) attributes {mirage.layout_cost = 24576 : i64, mirage.layout_status = "optimal", kn.workspace_size = 24576 : i64} {
    %2 = cute.kernel(%X, %0, %1) attributes {kn.template = "split_k_grid_sum", kn.smem_estimate = 22800 : i64, kn.cost_estimate_us = 1.685300e+01 : f64, kn.innermost = array<i64: 1>, kn.grid_sum_scratch_offset = 0 : i64, cute.kslice_scratch = array<i64: 10432, 0>, cute.reg_accums = 0 : i64, cute.pdl_prefetch = 0 : i64, cute.row_chains = 0 : i64, kernel_name = "fuzz_14_337_k0", grid_dim = array<i64: 3, 2, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 10432 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1024, 1, 16>, array<i64: 2048, 128, 1>, array<i64: 8192, 64, 1>, array<i64: 16, 1, 1>]} : (tensor<3x16x128xf16>, tensor<3x128x64xf16>, tensor<3x16x1xf16>) -> tensor<3x16x64xf16> {
    ^bb0(%o0: tensor<3x16x64xf16>, %i0: tensor<3x16x128xf16>, %i1: tensor<3x128x64xf16>, %i2: tensor<3x16x1xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (1,16,1):(16,1,1)>
      %s1 = cute.smem_alloc [192] : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
      %s2 = cute.smem_alloc [2240] : !cute.smem<f16, (1,64,64):(4096,64,1), xor<3,3,3>>
      %s3 = cute.smem_alloc [192] : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
      %s4 = cute.smem_alloc [160] : !cute.smem<f16, (1,16,1):(16,1,16)>
      %s5 = cute.smem_alloc [2240] : !cute.smem<f16, (1,16,64):(1024,1,16)>
      %s6 = cute.smem_alloc [192] : !cute.smem<f16, (1,16,64):(1024,1,16)>
      %s7 = cute.smem_alloc [2240] : !cute.smem<f16, (1,16,64):(1024,1,16)>
      %s8 = cute.smem_alloc [128] : !cute.smem<f16, (1,16,1):(16,1,16)>
      %s9 = cute.smem_alloc [2240] : !cute.smem<f16, (1,16,64):(1024,1,16)>
      cute.copy_g2s "chunked" %i2 -> %s0 {tile = #cute.layout<(1,16,1):(16,1,1)>, block_offset = array<i64: 16, 0, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<3x16x1xf16> -> !cute.smem<f16, (1,16,1):(16,1,1)>
      %racc0 = cute.mma_init : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
      cute.fill %s4, 0.0 : !cute.smem<f16, (1,16,1):(16,1,16)>
      cute.barrier
      cute.for %it = 0 to 1 {
        cute.copy_g2s "chunked" %i0[%it] -> %s1 {tile = #cute.layout<(1,16,64):(2048,128,1)>, block_offset = array<i64: 2048, 64, 0>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 0 : i64} : tensor<3x16x128xf16> -> !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
        cute.copy_g2s "chunked" %i1[%it] -> %s2 {tile = #cute.layout<(1,64,64):(8192,64,1)>, block_offset = array<i64: 8192, 4096, 0>, vec = 8 : i64, iter_stride = 4096 : i64, iter_offset = 0 : i64} : tensor<3x128x64xf16> -> !cute.smem<f16, (1,64,64):(4096,64,1), xor<3,3,3>>
        cute.barrier
        cute.mma %racc0, %s1, %s2 : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>, !cute.smem<f16, (1,64,64):(4096,64,1), xor<3,3,3>>
        cute.elementwise "id"(%s0) [#cute.fn<square>] "add" %s4 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,1):(16,1,1)> -> !cute.smem<f16, (1,16,1):(16,1,16)>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s3 : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
      cute.barrier
      cute.grid_sum(%s3) -> (%s5) {cute.epilogue_phases = array<i64: -1>, cute.epilogue_stored = array<i64: 0>, dim = 1 : i64} : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>> -> !cute.smem<f16, (1,16,64):(1024,1,16)>
      cute.barrier
      cute.elementwise "mul"(%s5, %s4) [] "store" %s6 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,64):(1024,1,16)>, !cute.smem<f16, (1,16,1):(16,1,16)> -> !cute.smem<f16, (1,16,64):(1024,1,16)>
      cute.barrier
      cute.elementwise "id"(%s6) [#cute.fn<square>] "store" %s7 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,64):(1024,1,16)> -> !cute.smem<f16, (1,16,64):(1024,1,16)>
      cute.barrier
      cute.reduce "sum" %s7 [#cute.fn<mul_scalar(0.015625)>, #cute.fn<sqrt>] "store" %s8 {cute.reduce_threads = 8 : i64, dim = 2 : i64, group = 1 : i64, threads = 8 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,64):(1024,1,16)> -> !cute.smem<f16, (1,16,1):(16,1,16)>
      cute.barrier
      cute.elementwise "div"(%s6, %s8) [] "store" %s9 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,64):(1024,1,16)>, !cute.smem<f16, (1,16,1):(16,1,16)> -> !cute.smem<f16, (1,16,64):(1024,1,16)>
      cute.barrier
      cute.copy_s2g "chunked" %s9 -> %o0 {tile = #cute.layout<(1,16,64):(1024,1,16)>, block_offset = array<i64: 1024, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (1,16,64):(1024,1,16)> -> tensor<3x16x64xf16>
    }
    func.return %2 : tensor<3x16x64xf16>
  }
}

