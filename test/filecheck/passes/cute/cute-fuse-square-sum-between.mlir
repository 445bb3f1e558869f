// RUN: mirage-opt %s -p cute-fuse-square-sum --split-input-file | filecheck %s
// RUN: mirage-opt %s -p cute-fuse-square-sum -t cuda --split-input-file | filecheck %s --check-prefix=CUDA

// An rms norm read by two matmuls: the elementwise pass stores x^2 / 64 (%s6, fp16), then the
// first MMA, its accumulator's store and a residual's copy of x run before the sum reads %s6.
// None of them writes %s5's bytes, so the pass folds the square into the sum and moves the
// scale to the start of the sum's epilogue: fp16 squares of rows near 1e-6 were 0 and the
// norm inf.  Input: fuzz seed 1144 graph 2064 (square(s) * X, rms_norm, two matmuls, a row
// sum) after `mirage-transpile{decide=false},cute-decisions{without=cute-fuse-square-sum}`.

// CHECK-LABEL: func.func @fuzz_1144_2064
// CHECK-NOT:   cute.elementwise "id"(%s5) [#cute.fn<square>
// CHECK:       cute.mma %acc, %s5, %s2
// CHECK:       cute.frag_store %acc [] "store" %s7
// CHECK:       cute.elementwise "id"(%s5) [] "add" %s8
// CHECK:       cute.reduce "sum_squares" %s5 [#cute.fn<mul_scalar(0.015625)>, #cute.fn<sqrt>] "store" %s9
// CUDA:        mx::reduce_sum_squares<

// The same kernel with the residual's tile %s8 moved onto %s5's bytes (as tb-plan-smem may
// place a tile once %s5's last planned reader has run): the copy overwrites the squares'
// source before the sum, so the square stays a pass of its own.
// CHECK-LABEL: func.func @overlapping_write
// CHECK:       cute.elementwise "id"(%s5) [#cute.fn<square>, #cute.fn<mul_scalar(0.015625)>] "store" %s6
// CHECK:       cute.reduce "sum" %s6 [#cute.fn<sqrt>] "store" %s9

// A square that starts a register row chain (cute.row_chain_run) whose next member follows it
// stays a pass of its own: erasing it lost the chain's start ("a row chain without
// cute.row_chain_run", fuzz seed 1146 graph 578, a saved-style block graph); the square of
// the 1 x 128 tile, in no chain, folds into its sum past the other sum before it.
// CHECK-LABEL: func.func @fuzz_1146_578
// CHECK:       cute.elementwise "id"(%s0) [#cute.fn<square>] "store" %s4 {cute.row_chain_run = 0 : i64
// CHECK:       cute.reduce "sum" %s4 [#cute.fn<mul_scalar(0.0078125)>, #cute.fn<sqrt>] "store" %s8
// CHECK:       cute.reduce "sum_squares" %s3 [#cute.fn<mul_scalar(0.0078125)>, #cute.fn<sqrt>] "store" %s9
// CUDA-LABEL:  fuzz_1146_578_k0

builtin.module {
  func.func @fuzz_1144_2064(%X: tensor<3x32x64xf16> {kn.strides = array<i64: 2048, 64, 1>, kn.innermost = 2 : i64}, %0: tensor<3x32x1xf16> {kn.strides = array<i64: 32, 1, 1>, kn.innermost = 2 : i64}, %1: tensor<3x64x128xf16> {kn.strides = array<i64: 8192, 128, 1>, kn.weight, kn.innermost = 2 : i64}, %2: tensor<3x64x128xf16> {kn.strides = array<i64: 8192, 128, 1>, kn.weight, kn.innermost = 2 : i64}) -> (tensor<3x32x1xf16> {kn.strides = array<i64: 32, 1, 32>}, tensor<3x32x64xf16> {kn.strides = array<i64: 2048, 64, 1>}) attributes {mirage.layout_cost = 75792 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %3, %4 = cute.kernel(%0, %X, %1, %2) attributes {kn.template = "matmul_row_stats", kn.smem_estimate = 80160 : i64, kn.cost_estimate_us = 1.498900e+01 : f64, kn.innermost = array<i64: 2, 1>, cute.kslice_scratch = array<i64: 53408, 0>, cute.reg_accums = 0 : i64, cute.pdl_prefetch = 0 : i64, cute.row_chains = 0 : i64, kernel_name = "fuzz_1144_2064_k0", grid_dim = array<i64: 3, 2, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 53408 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 2048, 64, 1>, array<i64: 32, 1, 32>, array<i64: 32, 1, 1>, array<i64: 2048, 64, 1>, array<i64: 8192, 128, 1>, array<i64: 8192, 128, 1>]} : (tensor<3x32x1xf16>, tensor<3x32x64xf16>, tensor<3x64x128xf16>, tensor<3x64x128xf16>) -> (tensor<3x32x64xf16>, tensor<3x32x1xf16>) {
    ^bb0(%o0: tensor<3x32x64xf16>, %o1: tensor<3x32x1xf16>, %i0: tensor<3x32x1xf16>, %i1: tensor<3x32x64xf16>, %i2: tensor<3x64x128xf16>, %i3: tensor<3x64x128xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (1,16,1):(16,1,1)>
      %s1 = cute.smem_alloc [51360] : !cute.smem<f16, (1,16,64):(1024,64,1)>
      %s2 = cute.smem_alloc [4256] : !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      %s3 = cute.smem_alloc [20640] : !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      %s4 = cute.smem_alloc [160] : !cute.smem<f16, (1,16,1):(16,1,16)>
      %s5 = cute.smem_alloc [2208] : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
      %s6 = cute.smem_alloc [160] : !cute.smem<f16, (1,16,64):(1024,1,16)>
      %s7 = cute.smem_alloc [37024] : !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>
      %s8 = cute.smem_alloc [49312] : !cute.smem<f16, (1,16,64):(1024,64,1)>
      %s9 = cute.smem_alloc [16544] : !cute.smem<f32, (1,16,1):(16,1,16)>
      %s10 = cute.smem_alloc [8352] : !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>
      %s11 = cute.smem_alloc [4256] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %s12 = cute.smem_alloc [160] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %s13 = cute.smem_alloc [45216] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %s14 = cute.smem_alloc [128] : !cute.smem<f16, (1,16,1):(16,1,16)>
      cute.copy_g2s "chunked" %i0 -> %s0 {tile = #cute.layout<(1,16,1):(32,1,1)>, block_offset = array<i64: 32, 16, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<3x32x1xf16> -> !cute.smem<f16, (1,16,1):(16,1,1)>
      cute.copy_g2s "chunked" %i1 -> %s1 {tile = #cute.layout<(1,16,64):(2048,64,1)>, block_offset = array<i64: 2048, 1024, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<3x32x64xf16> -> !cute.smem<f16, (1,16,64):(1024,64,1)>
      cute.fill %s8, 0.0 : !cute.smem<f16, (1,16,64):(1024,64,1)>
      cute.fill %s13, 0.0 : !cute.smem<f16, (1,16,128):(2048,1,16)>
      cute.barrier
      cute.for %it = 0 to 1 {
        cute.copy_g2s "chunked" %i2[%it] -> %s2 {tile = #cute.layout<(1,64,128):(8192,128,1)>, block_offset = array<i64: 8192, 0, 0>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 0 : i64} : tensor<3x64x128xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.copy_g2s "chunked" %i3[%it] -> %s3 {tile = #cute.layout<(1,64,128):(8192,128,1)>, block_offset = array<i64: 8192, 0, 0>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 0 : i64} : tensor<3x64x128xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.barrier
        cute.elementwise "id"(%s0) [#cute.fn<square>] "store" %s4 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,1):(16,1,1)> -> !cute.smem<f16, (1,16,1):(16,1,16)>
        cute.barrier
        cute.elementwise "mul"(%s4, %s1) [] "store" %s5 {order = array<i64: 2, 1, 0>} : !cute.smem<f16, (1,16,1):(16,1,16)>, !cute.smem<f16, (1,16,64):(1024,64,1)> -> !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
        cute.barrier
        cute.elementwise "id"(%s5) [#cute.fn<square>, #cute.fn<mul_scalar(0.015625)>] "store" %s6 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>> -> !cute.smem<f16, (1,16,64):(1024,1,16)>
        %acc = cute.mma_init : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
        cute.mma %acc, %s5, %s2 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>, !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.frag_store %acc [] "store" %s7 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>
        cute.elementwise "id"(%s5) [] "add" %s8 {order = array<i64: 2, 1, 0>} : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>> -> !cute.smem<f16, (1,16,64):(1024,64,1)>
        cute.barrier
        cute.reduce "sum" %s6 [#cute.fn<sqrt>] "store" %s9 {cute.reduce_threads = 8 : i64, dim = 2 : i64, group = 1 : i64, threads = 8 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,64):(1024,1,16)> -> !cute.smem<f32, (1,16,1):(16,1,16)>
        %acc_1 = cute.mma_init : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
        cute.mma %acc_1, %s5, %s3 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>, !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.frag_store %acc_1 [] "store" %s10 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>
        cute.barrier
        cute.elementwise "div"(%s7, %s9) [#cute.fn<clamp(-9.6,9.6)>] "store" %s11 {order = array<i64: 1, 2, 0>} : !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>, !cute.smem<f32, (1,16,1):(16,1,16)> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
        cute.elementwise "div"(%s10, %s9) [] "store" %s12 {order = array<i64: 1, 2, 0>} : !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>, !cute.smem<f32, (1,16,1):(16,1,16)> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
        cute.barrier
        cute.elementwise "mul"(%s11, %s12) [] "add" %s13 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,128):(2048,1,16)>, !cute.smem<f16, (1,16,128):(2048,1,16)> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
        cute.barrier
      }
      cute.reduce "sum" %s13 [] "store" %s14 {cute.reduce_threads = 8 : i64, dim = 2 : i64, group = 1 : i64, threads = 8 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,128):(2048,1,16)> -> !cute.smem<f16, (1,16,1):(16,1,16)>
      cute.copy_s2g "chunked" %s8 -> %o0 {tile = #cute.layout<(1,16,64):(2048,64,1)>, block_offset = array<i64: 2048, 1024, 0>, vec = 8 : i64} : !cute.smem<f16, (1,16,64):(1024,64,1)> -> tensor<3x32x64xf16>
      cute.barrier
      cute.copy_s2g "chunked" %s14 -> %o1 {tile = #cute.layout<(1,16,1):(32,1,32)>, block_offset = array<i64: 32, 16, 0>, vec = 8 : i64} : !cute.smem<f16, (1,16,1):(16,1,16)> -> tensor<3x32x1xf16>
    }
    func.return %4, %3 : tensor<3x32x1xf16>, tensor<3x32x64xf16>
  }
}

// -----
builtin.module {
  func.func @overlapping_write(%X: tensor<3x32x64xf16> {kn.strides = array<i64: 2048, 64, 1>, kn.innermost = 2 : i64}, %0: tensor<3x32x1xf16> {kn.strides = array<i64: 32, 1, 1>, kn.innermost = 2 : i64}, %1: tensor<3x64x128xf16> {kn.strides = array<i64: 8192, 128, 1>, kn.weight, kn.innermost = 2 : i64}, %2: tensor<3x64x128xf16> {kn.strides = array<i64: 8192, 128, 1>, kn.weight, kn.innermost = 2 : i64}) -> (tensor<3x32x1xf16> {kn.strides = array<i64: 32, 1, 32>}, tensor<3x32x64xf16> {kn.strides = array<i64: 2048, 64, 1>}) attributes {mirage.layout_cost = 75792 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %3, %4 = cute.kernel(%0, %X, %1, %2) attributes {kn.template = "matmul_row_stats", kn.smem_estimate = 80160 : i64, kn.cost_estimate_us = 1.498900e+01 : f64, kn.innermost = array<i64: 2, 1>, cute.kslice_scratch = array<i64: 53408, 0>, cute.reg_accums = 0 : i64, cute.pdl_prefetch = 0 : i64, cute.row_chains = 0 : i64, kernel_name = "overlapping_write_k0", grid_dim = array<i64: 3, 2, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 53408 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 2048, 64, 1>, array<i64: 32, 1, 32>, array<i64: 32, 1, 1>, array<i64: 2048, 64, 1>, array<i64: 8192, 128, 1>, array<i64: 8192, 128, 1>]} : (tensor<3x32x1xf16>, tensor<3x32x64xf16>, tensor<3x64x128xf16>, tensor<3x64x128xf16>) -> (tensor<3x32x64xf16>, tensor<3x32x1xf16>) {
    ^bb0(%o0: tensor<3x32x64xf16>, %o1: tensor<3x32x1xf16>, %i0: tensor<3x32x1xf16>, %i1: tensor<3x32x64xf16>, %i2: tensor<3x64x128xf16>, %i3: tensor<3x64x128xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (1,16,1):(16,1,1)>
      %s1 = cute.smem_alloc [51360] : !cute.smem<f16, (1,16,64):(1024,64,1)>
      %s2 = cute.smem_alloc [4256] : !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      %s3 = cute.smem_alloc [20640] : !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      %s4 = cute.smem_alloc [160] : !cute.smem<f16, (1,16,1):(16,1,16)>
      %s5 = cute.smem_alloc [2208] : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
      %s6 = cute.smem_alloc [160] : !cute.smem<f16, (1,16,64):(1024,1,16)>
      %s7 = cute.smem_alloc [37024] : !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>
      %s8 = cute.smem_alloc [2208] : !cute.smem<f16, (1,16,64):(1024,64,1)>
      %s9 = cute.smem_alloc [16544] : !cute.smem<f32, (1,16,1):(16,1,16)>
      %s10 = cute.smem_alloc [8352] : !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>
      %s11 = cute.smem_alloc [4256] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %s12 = cute.smem_alloc [160] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %s13 = cute.smem_alloc [45216] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %s14 = cute.smem_alloc [128] : !cute.smem<f16, (1,16,1):(16,1,16)>
      cute.copy_g2s "chunked" %i0 -> %s0 {tile = #cute.layout<(1,16,1):(32,1,1)>, block_offset = array<i64: 32, 16, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<3x32x1xf16> -> !cute.smem<f16, (1,16,1):(16,1,1)>
      cute.copy_g2s "chunked" %i1 -> %s1 {tile = #cute.layout<(1,16,64):(2048,64,1)>, block_offset = array<i64: 2048, 1024, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<3x32x64xf16> -> !cute.smem<f16, (1,16,64):(1024,64,1)>
      cute.fill %s8, 0.0 : !cute.smem<f16, (1,16,64):(1024,64,1)>
      cute.fill %s13, 0.0 : !cute.smem<f16, (1,16,128):(2048,1,16)>
      cute.barrier
      cute.for %it = 0 to 1 {
        cute.copy_g2s "chunked" %i2[%it] -> %s2 {tile = #cute.layout<(1,64,128):(8192,128,1)>, block_offset = array<i64: 8192, 0, 0>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 0 : i64} : tensor<3x64x128xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.copy_g2s "chunked" %i3[%it] -> %s3 {tile = #cute.layout<(1,64,128):(8192,128,1)>, block_offset = array<i64: 8192, 0, 0>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 0 : i64} : tensor<3x64x128xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.barrier
        cute.elementwise "id"(%s0) [#cute.fn<square>] "store" %s4 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,1):(16,1,1)> -> !cute.smem<f16, (1,16,1):(16,1,16)>
        cute.barrier
        cute.elementwise "mul"(%s4, %s1) [] "store" %s5 {order = array<i64: 2, 1, 0>} : !cute.smem<f16, (1,16,1):(16,1,16)>, !cute.smem<f16, (1,16,64):(1024,64,1)> -> !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
        cute.barrier
        cute.elementwise "id"(%s5) [#cute.fn<square>, #cute.fn<mul_scalar(0.015625)>] "store" %s6 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>> -> !cute.smem<f16, (1,16,64):(1024,1,16)>
        %acc = cute.mma_init : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
        cute.mma %acc, %s5, %s2 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>, !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.frag_store %acc [] "store" %s7 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>
        cute.elementwise "id"(%s5) [] "add" %s8 {order = array<i64: 2, 1, 0>} : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>> -> !cute.smem<f16, (1,16,64):(1024,64,1)>
        cute.barrier
        cute.reduce "sum" %s6 [#cute.fn<sqrt>] "store" %s9 {cute.reduce_threads = 8 : i64, dim = 2 : i64, group = 1 : i64, threads = 8 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,64):(1024,1,16)> -> !cute.smem<f32, (1,16,1):(16,1,16)>
        %acc_1 = cute.mma_init : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
        cute.mma %acc_1, %s5, %s3 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>, !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.frag_store %acc_1 [] "store" %s10 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>
        cute.barrier
        cute.elementwise "div"(%s7, %s9) [#cute.fn<clamp(-9.6,9.6)>] "store" %s11 {order = array<i64: 1, 2, 0>} : !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>, !cute.smem<f32, (1,16,1):(16,1,16)> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
        cute.elementwise "div"(%s10, %s9) [] "store" %s12 {order = array<i64: 1, 2, 0>} : !cute.smem<f32, (1,16,128):(2048,128,1), xor<3,2,5>>, !cute.smem<f32, (1,16,1):(16,1,16)> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
        cute.barrier
        cute.elementwise "mul"(%s11, %s12) [] "add" %s13 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,128):(2048,1,16)>, !cute.smem<f16, (1,16,128):(2048,1,16)> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
        cute.barrier
      }
      cute.reduce "sum" %s13 [] "store" %s14 {cute.reduce_threads = 8 : i64, dim = 2 : i64, group = 1 : i64, threads = 8 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,128):(2048,1,16)> -> !cute.smem<f16, (1,16,1):(16,1,16)>
      cute.copy_s2g "chunked" %s8 -> %o0 {tile = #cute.layout<(1,16,64):(2048,64,1)>, block_offset = array<i64: 2048, 1024, 0>, vec = 8 : i64} : !cute.smem<f16, (1,16,64):(1024,64,1)> -> tensor<3x32x64xf16>
      cute.barrier
      cute.copy_s2g "chunked" %s14 -> %o1 {tile = #cute.layout<(1,16,1):(32,1,32)>, block_offset = array<i64: 32, 16, 0>, vec = 8 : i64} : !cute.smem<f16, (1,16,1):(16,1,16)> -> tensor<3x32x1xf16>
    }
    func.return %4, %3 : tensor<3x32x1xf16>, tensor<3x32x64xf16>
  }
}


// -----
builtin.module {
  func.func @fuzz_1146_578(%X: tensor<32x128xf16> {kn.strides = array<i64: 128, 1>, kn.innermost = 1 : i64}, %Y: tensor<32x128xf16> {kn.strides = array<i64: 128, 1>, kn.innermost = 1 : i64}, %R: tensor<1x128xf16> {kn.strides = array<i64: 128, 1>, kn.weight, kn.innermost = 1 : i64}, %C: tensor<32x128xf16> {kn.strides = array<i64: 128, 1>, kn.innermost = 1 : i64}) -> (tensor<32x128xf16> {kn.strides = array<i64: 128, 1>}) attributes {mirage.layout_cost = 21504 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %0 = cute.kernel(%X, %Y, %R, %C) attributes {kn.innermost = array<i64: 1>, cute.kslice_scratch = array<i64: 10880, 0>, cute.reg_accums = 0 : i64, cute.pdl_prefetch = 0 : i64, cute.row_chains = 2 : i64, kernel_name = "fuzz_1146_578_k0", grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 10880 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 128, 1>, array<i64: 128, 1>, array<i64: 128, 1>, array<i64: 128, 1>, array<i64: 128, 1>]} : (tensor<32x128xf16>, tensor<32x128xf16>, tensor<1x128xf16>, tensor<32x128xf16>) -> tensor<32x128xf16> {
    ^bb0(%o0: tensor<32x128xf16>, %i0: tensor<32x128xf16>, %i1: tensor<32x128xf16>, %i2: tensor<1x128xf16>, %i3: tensor<32x128xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (8,128):(128,1)>
      %s1 = cute.smem_alloc [6528] : !cute.smem<f16, (8,128):(128,1)>
      %s2 = cute.smem_alloc [8576] : !cute.smem<f16, (8,128):(128,1)>
      %s3 = cute.smem_alloc [10624] : !cute.smem<f16, (1,128):(128,1)>
      %s4 = cute.smem_alloc [8576] : !cute.smem<f16, (8,128):(128,1), xor<5,1,6>>
      %s5 = cute.smem_alloc [2176] : !cute.smem<f16, (8,128):(128,1), xor<5,1,6>>
      %s6 = cute.smem_alloc [4224] : !cute.smem<f16, (1,128):(128,1)>
      %s7 = cute.smem_alloc [6528] : !cute.smem<f16, (1,128):(128,1)>
      %s8 = cute.smem_alloc [6784] : !cute.smem<f16, (8,1):(1,8)>
      %s9 = cute.smem_alloc [6800] : !cute.smem<f16, (1,1):(1,1)>
      %s10 = cute.smem_alloc [6816] : !cute.smem<f16, (8,128):(128,1)>
      %s11 = cute.smem_alloc [6528] : !cute.smem<f16, (1,128):(128,1)>
      %s12 = cute.smem_alloc [4480] : !cute.smem<f16, (8,128):(128,1)>
      %s13 = cute.smem_alloc [128] : !cute.smem<f16, (8,1):(1,8)>
      %s14 = cute.smem_alloc [144] : !cute.smem<f16, (8,128):(128,1)>
      %s15 = cute.smem_alloc [2192] : !cute.smem<f16, (8,128):(128,1)>
      cute.copy_g2s "chunked" %i3 -> %s0 {tile = #cute.layout<(8,128):(128,1)>, block_offset = array<i64: 1024, 0, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<32x128xf16> -> !cute.smem<f16, (8,128):(128,1)>
      cute.fill %s5, 0.0 : !cute.smem<f16, (8,128):(128,1), xor<5,1,6>>
      cute.fill %s6, -inf : !cute.smem<f16, (1,128):(128,1)>
      cute.fill %s12, -inf : !cute.smem<f16, (8,128):(128,1)>
      cute.barrier
      cute.for %it = 0 to 1 {
        cute.copy_g2s "chunked" %i0[%it] -> %s1 {tile = #cute.layout<(8,128):(128,1)>, block_offset = array<i64: 1024, 0, 0>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 0 : i64} : tensor<32x128xf16> -> !cute.smem<f16, (8,128):(128,1)>
        cute.copy_g2s "chunked" %i1[%it] -> %s2 {tile = #cute.layout<(8,128):(128,1)>, block_offset = array<i64: 1024, 0, 0>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 0 : i64} : tensor<32x128xf16> -> !cute.smem<f16, (8,128):(128,1)>
        cute.copy_g2s "chunked" %i2[%it] -> %s3 {tile = #cute.layout<(1,128):(128,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 0 : i64} : tensor<1x128xf16> -> !cute.smem<f16, (1,128):(128,1)>
        cute.barrier
        cute.elementwise "id"(%s0) [#cute.fn<square>] "store" %s4 {cute.row_chain_run = 0 : i64, cute.row_chain = 1 : i64, cute.row_chain_stored, order = array<i64: 1, 0>} : !cute.smem<f16, (8,128):(128,1)> -> !cute.smem<f16, (8,128):(128,1), xor<5,1,6>>
        cute.elementwise "id"(%s1) [#cute.fn<square>, #cute.fn<mul_scalar(0.0078125)>] "add" %s5 {cute.row_chain = 1 : i64, cute.row_chain_stored, order = array<i64: 1, 0>} : !cute.smem<f16, (8,128):(128,1)> -> !cute.smem<f16, (8,128):(128,1), xor<5,1,6>>
        cute.elementwise "id"(%s3) [] "max" %s6 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,128):(128,1)> -> !cute.smem<f16, (1,128):(128,1)>
        cute.barrier
        cute.elementwise "id"(%s3) [#cute.fn<square>] "store" %s7 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,128):(128,1)> -> !cute.smem<f16, (1,128):(128,1)>
        cute.reduce "sum" %s4 [#cute.fn<mul_scalar(0.0078125)>, #cute.fn<sqrt>] "store" %s8 {cute.reduce_threads = 16 : i64, dim = 1 : i64, group = 1 : i64, threads = 16 : i64, order = array<i64: 0, 1>} : !cute.smem<f16, (8,128):(128,1), xor<5,1,6>> -> !cute.smem<f16, (8,1):(1,8)>
        cute.barrier
        cute.reduce "sum" %s7 [#cute.fn<mul_scalar(0.0078125)>, #cute.fn<sqrt>] "store" %s9 {cute.reduce_threads = 128 : i64, dim = 1 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 0, 1>} : !cute.smem<f16, (1,128):(128,1)> -> !cute.smem<f16, (1,1):(1,1)>
        cute.elementwise "div"(%s0, %s8) [] "store" %s10 {order = array<i64: 1, 0>} : !cute.smem<f16, (8,128):(128,1)>, !cute.smem<f16, (8,1):(1,8)> -> !cute.smem<f16, (8,128):(128,1)>
        cute.barrier
        cute.elementwise "div"(%s3, %s9) [] "store" %s11 {order = array<i64: 1, 0>} : !cute.smem<f16, (1,128):(128,1)>, !cute.smem<f16, (1,1):(1,1)> -> !cute.smem<f16, (1,128):(128,1)>
        cute.elementwise "id"(%s10) [] "max" %s12 {order = array<i64: 1, 0>} : !cute.smem<f16, (8,128):(128,1)> -> !cute.smem<f16, (8,128):(128,1)>
        cute.barrier
      }
      cute.reduce "sum" %s5 [#cute.fn<sqrt>] "store" %s13 {cute.reduce_threads = 16 : i64, dim = 1 : i64, group = 1 : i64, threads = 16 : i64, order = array<i64: 0, 1>} : !cute.smem<f16, (8,128):(128,1), xor<5,1,6>> -> !cute.smem<f16, (8,1):(1,8)>
      cute.barrier
      cute.elementwise "add"(%s12, %s13) [] "store" %s14 {cute.row_chain_run = 0 : i64, cute.row_chain = 0 : i64, order = array<i64: 1, 0>} : !cute.smem<f16, (8,128):(128,1)>, !cute.smem<f16, (8,1):(1,8)> -> !cute.smem<f16, (8,128):(128,1)>
      cute.barrier
      cute.elementwise "add"(%s13, %s14) [] "store" %s15 {cute.row_chain = 0 : i64, cute.row_chain_stored, order = array<i64: 1, 0>} : !cute.smem<f16, (8,1):(1,8)>, !cute.smem<f16, (8,128):(128,1)> -> !cute.smem<f16, (8,128):(128,1)>
      cute.barrier
      cute.copy_s2g "chunked" %s15 -> %o0 {tile = #cute.layout<(8,128):(128,1)>, block_offset = array<i64: 1024, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (8,128):(128,1)> -> tensor<32x128xf16>
    }
    func.return %0 : tensor<32x128xf16>
  }
}

