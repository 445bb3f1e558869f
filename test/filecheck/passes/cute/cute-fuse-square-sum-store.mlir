// RUN: mirage-opt %s -p cute-fuse-square-sum | filecheck %s
// RUN: mirage-opt %s -p cute-fuse-square-sum -t cuda | filecheck %s --check-prefix=CUDA

// The rms_norm of a square that is also a graph output: the square's operand %s5 is stored to
// global memory between the elementwise square and the sum, which writes no shared memory, so
// the pass still folds the square into the sum (fp16 squares of values past |x| > 256 were inf
// and the norm 0).  Input: fuzz seed 1139 graph 919 (rms_norm((exp(X) @ W)^2), both returned)
// after `mirage-transpile{decide=false},cute-decisions{without=cute-fuse-square-sum}`.

// CHECK:      cute.elementwise "id"(%s4) [#cute.fn<square>] "store" %s5
// CHECK-NOT:  cute.elementwise "id"(%s5) [#cute.fn<square>]
// CHECK:      cute.copy_s2g "chunked" %s5 -> %o0
// CHECK:      cute.reduce "sum_squares" %s5 [#cute.fn<mul_scalar(0.0078125)>, #cute.fn<sqrt>] "store" %s7
// CUDA:       mx::reduce_sum_squares<128, 8, 128, 16,

builtin.module {
  func.func @fuzz_1139_919(%X: tensor<2x32x256xf16> {kn.strides = array<i64: 8192, 256, 1>, kn.innermost = 2 : i64}, %0: tensor<2x256x128xf16> {kn.strides = array<i64: 32768, 128, 1>, kn.weight, kn.innermost = 2 : i64}) -> (tensor<2x32x128xf16> {kn.strides = array<i64: 4096, 1, 32>}, tensor<2x32x128xf16> {kn.strides = array<i64: 4096, 1, 32>}) attributes {mirage.layout_cost = 43992 : i64, mirage.layout_status = "optimal", kn.workspace_size = 131072 : i64} {
    %1, %2 = cute.kernel(%X, %0) attributes {kn.template = "split_k_grid_sum", kn.smem_estimate = 45200 : i64, kn.cost_estimate_us = 9.926000e+00 : f64, kn.innermost = array<i64: 1, 1>, kn.grid_sum_scratch_offset = 0 : i64, cute.kslice_scratch = array<i64: 20608, 0>, cute.reg_accums = 0 : i64, cute.pdl_prefetch = 0 : i64, cute.row_chains = 0 : i64, kernel_name = "fuzz_1139_919_k0", grid_dim = array<i64: 2, 2, 4>, block_dim = array<i64: 128, 1, 1>, smem_size = 20608 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 4096, 1, 32>, array<i64: 4096, 1, 32>, array<i64: 8192, 256, 1>, array<i64: 32768, 128, 1>]} : (tensor<2x32x256xf16>, tensor<2x256x128xf16>) -> (tensor<2x32x128xf16>, tensor<2x32x128xf16>) {
    ^bb0(%o0: tensor<2x32x128xf16>, %o1: tensor<2x32x128xf16>, %i0: tensor<2x32x256xf16>, %i1: tensor<2x256x128xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (1,16,64):(1024,64,1)>
      %s1 = cute.smem_alloc [2176] : !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      %s2 = cute.smem_alloc [18560] : !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
      %s3 = cute.smem_alloc [128] : !cute.smem<f16, (1,16,128):(2048,128,1), xor<3,3,4>>
      %s4 = cute.smem_alloc [4224] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %s5 = cute.smem_alloc [128] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %s6 = cute.smem_alloc [4224] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %s7 = cute.smem_alloc [8320] : !cute.smem<f16, (1,16,1):(16,1,16)>
      %s8 = cute.smem_alloc [4224] : !cute.smem<f16, (1,16,128):(2048,1,16)>
      %racc0 = cute.mma_init : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
      cute.barrier
      cute.for %it = 0 to 1 {
        cute.copy_g2s "chunked" %i0[%it] -> %s0 {tile = #cute.layout<(1,16,64):(8192,256,1)>, block_offset = array<i64: 8192, 4096, 64>, vec = 8 : i64, iter_stride = 64 : i64, iter_offset = 0 : i64} : tensor<2x32x256xf16> -> !cute.smem<f16, (1,16,64):(1024,64,1)>
        cute.copy_g2s "chunked" %i1[%it] -> %s1 {tile = #cute.layout<(1,64,128):(32768,128,1)>, block_offset = array<i64: 32768, 0, 8192>, vec = 8 : i64, iter_stride = 8192 : i64, iter_offset = 0 : i64} : tensor<2x256x128xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.barrier
        cute.elementwise "id"(%s0) [#cute.fn<exp>] "store" %s2 {order = array<i64: 2, 1, 0>} : !cute.smem<f16, (1,16,64):(1024,64,1)> -> !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>
        cute.barrier
        cute.mma %racc0, %s2, %s1 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (1,16,64):(1024,64,1), xor<3,3,3>>, !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s3 : !cute.frag<16x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f16, (1,16,128):(2048,128,1), xor<3,3,4>>
      cute.barrier
      cute.grid_sum(%s3) -> (%s4) {cute.epilogue_phases = array<i64: -1>, cute.epilogue_stored = array<i64: 0>, dim = 2 : i64} : !cute.smem<f16, (1,16,128):(2048,128,1), xor<3,3,4>> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
      cute.barrier
      cute.elementwise "id"(%s4) [#cute.fn<square>] "store" %s5 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,128):(2048,1,16)> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
      cute.barrier
      cute.elementwise "id"(%s5) [#cute.fn<square>] "store" %s6 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,128):(2048,1,16)> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
      cute.copy_s2g "chunked" %s5 -> %o0 {tile = #cute.layout<(1,16,128):(4096,1,32)>, block_offset = array<i64: 4096, 16, 0>, vec = 8 : i64} : !cute.smem<f16, (1,16,128):(2048,1,16)> -> tensor<2x32x128xf16>
      cute.barrier
      cute.reduce "sum" %s6 [#cute.fn<mul_scalar(0.0078125)>, #cute.fn<sqrt>] "store" %s7 {cute.reduce_threads = 8 : i64, dim = 2 : i64, group = 1 : i64, threads = 8 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,128):(2048,1,16)> -> !cute.smem<f16, (1,16,1):(16,1,16)>
      cute.barrier
      cute.elementwise "div"(%s5, %s7) [] "store" %s8 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,16,128):(2048,1,16)>, !cute.smem<f16, (1,16,1):(16,1,16)> -> !cute.smem<f16, (1,16,128):(2048,1,16)>
      cute.barrier
      cute.copy_s2g "chunked" %s8 -> %o1 {tile = #cute.layout<(1,16,128):(4096,1,32)>, block_offset = array<i64: 4096, 16, 0>, vec = 8 : i64} : !cute.smem<f16, (1,16,128):(2048,1,16)> -> tensor<2x32x128xf16>
    }
    func.return %2, %1 : tensor<2x32x128xf16>, tensor<2x32x128xf16>
  }
}

