// RUN: mirage-opt %s -p cute-fuse-square-sum | filecheck %s
// RUN: mirage-opt %s -p cute-fuse-square-sum -t cuda | filecheck %s --check-prefix=CUDA

// An fp32 source whose squares are stored in an fp16 tile: the rms_norm of a forloop max
// accumulator (kept in fp32) folds like an fp16 one, so the sum squares in fp32 (its values
// near 1e-5 squared to 0 in the fp16 tile and the norm was inf).  Input: fuzz seed 1192 graph
// 2510 (rms_norm(max over the loop of gelu(X / 8)^4)) after
// `mirage-transpile{decide=false},cute-decisions{without=cute-fuse-square-sum}`.

// CHECK-NOT: [#cute.fn<square>] "store"
// CHECK: cute.reduce "sum_squares" %s5 [#cute.fn<mul_scalar(0.03125)>, #cute.fn<sqrt>] "store" %s7
// CUDA: mx::reduce_sum_squares<128, 16, 32,

builtin.module {
  func.func @fuzz_1192_2510(%X: tensor<16x192xf16> {kn.strides = array<i64: 192, 1>, kn.innermost = 1 : i64}, %Y: tensor<16x192xf16> {kn.strides = array<i64: 192, 1>, kn.innermost = 1 : i64}) -> (tensor<16x64xf16> {kn.strides = array<i64: 64, 1>}, tensor<16x64xf16> {kn.strides = array<i64: 64, 1>}) attributes {mirage.layout_cost = 6136 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %0, %1 = cute.kernel(%X, %Y) attributes {kn.innermost = array<i64: 1, 1>, cute.kslice_scratch = array<i64: 4224, 0>, cute.reg_accums = 0 : i64, cute.pdl_prefetch = 0 : i64, cute.row_chains = 0 : i64, kernel_name = "fuzz_1192_2510_k0", grid_dim = array<i64: 2, 2, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 4224 : i64, forloop_range = 3 : i64, arg_strides = [array<i64: 64, 1>, array<i64: 64, 1>, array<i64: 192, 1>, array<i64: 192, 1>]} : (tensor<16x192xf16>, tensor<16x192xf16>) -> (tensor<16x64xf16>, tensor<16x64xf16>) {
    ^bb0(%o0: tensor<16x64xf16>, %o1: tensor<16x64xf16>, %i0: tensor<16x192xf16>, %i1: tensor<16x192xf16>):
      %s0 = cute.smem_alloc [128, 640] : !cute.smem<f16, (8,32):(32,1)>
      %s1 = cute.smem_alloc [1152, 1664] : !cute.smem<f16, (8,32):(32,1)>
      %s2 = cute.smem_alloc [3200] : !cute.smem<f16, (8,32):(32,1)>
      %s3 = cute.smem_alloc [3712] : !cute.smem<f16, (8,32):(32,1)>
      %s4 = cute.smem_alloc [3200] : !cute.smem<f16, (8,32):(32,1)>
      %s5 = cute.smem_alloc [2176] : !cute.smem<f32, (8,32):(32,1)>
      %s6 = cute.smem_alloc [128] : !cute.smem<f16, (8,32):(32,1), xor<4,1,5>>
      %s7 = cute.smem_alloc [640] : !cute.smem<f16, (8,1):(1,8)>
      %s8 = cute.smem_alloc [128] : !cute.smem<f16, (8,32):(32,1)>
      %s9 = cute.smem_alloc [640] : !cute.smem<f16, (8,32):(32,1)>
      cute.fill %s5, -inf : !cute.smem<f32, (8,32):(32,1)>
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(8,32):(192,1)>, block_offset = array<i64: 1536, 96, 0>, vec = 8 : i64, iter_stride = 32 : i64, iter_offset = 0 : i64} : tensor<16x192xf16> -> !cute.smem<f16, (8,32):(32,1)>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(8,32):(192,1)>, block_offset = array<i64: 1536, 96, 0>, vec = 8 : i64, iter_stride = 32 : i64, iter_offset = 0 : i64} : tensor<16x192xf16> -> !cute.smem<f16, (8,32):(32,1)>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 3 {
        cute.copy_g2s "async" %i0[%it] -> %s0 {tile = #cute.layout<(8,32):(192,1)>, block_offset = array<i64: 1536, 96, 0>, vec = 8 : i64, iter_stride = 32 : i64, iter_offset = 1 : i64} : tensor<16x192xf16> -> !cute.smem<f16, (8,32):(32,1)>
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(8,32):(192,1)>, block_offset = array<i64: 1536, 96, 0>, vec = 8 : i64, iter_stride = 32 : i64, iter_offset = 1 : i64} : tensor<16x192xf16> -> !cute.smem<f16, (8,32):(32,1)>
        cute.cp_async_commit
        cute.cp_async_wait 1
        cute.barrier
        cute.elementwise "id"(%s0) [#cute.fn<mul_scalar(0.125)>, #cute.fn<gelu>] "store" %s2 {order = array<i64: 1, 0>} : !cute.smem<f16, (8,32):(32,1)> -> !cute.smem<f16, (8,32):(32,1)>
        cute.barrier
        cute.elementwise "mul"(%s2, %s2) [] "store" %s3 {order = array<i64: 1, 0>} : !cute.smem<f16, (8,32):(32,1)>, !cute.smem<f16, (8,32):(32,1)> -> !cute.smem<f16, (8,32):(32,1)>
        cute.barrier
        cute.elementwise "mul"(%s3, %s3) [] "store" %s4 {order = array<i64: 1, 0>} : !cute.smem<f16, (8,32):(32,1)>, !cute.smem<f16, (8,32):(32,1)> -> !cute.smem<f16, (8,32):(32,1)>
        cute.barrier
        cute.elementwise "id"(%s4) [] "max" %s5 {order = array<i64: 1, 0>} : !cute.smem<f16, (8,32):(32,1)> -> !cute.smem<f32, (8,32):(32,1)>
        cute.barrier
      }
      cute.elementwise "id"(%s5) [#cute.fn<square>] "store" %s6 {order = array<i64: 1, 0>} : !cute.smem<f32, (8,32):(32,1)> -> !cute.smem<f16, (8,32):(32,1), xor<4,1,5>>
      cute.barrier
      cute.reduce "sum" %s6 [#cute.fn<mul_scalar(0.03125)>, #cute.fn<sqrt>] "store" %s7 {cute.reduce_threads = 16 : i64, dim = 1 : i64, group = 1 : i64, threads = 16 : i64, order = array<i64: 0, 1>} : !cute.smem<f16, (8,32):(32,1), xor<4,1,5>> -> !cute.smem<f16, (8,1):(1,8)>
      cute.barrier
      cute.elementwise "div"(%s5, %s7) [] "store" %s8 {order = array<i64: 1, 0>} : !cute.smem<f32, (8,32):(32,1)>, !cute.smem<f16, (8,1):(1,8)> -> !cute.smem<f16, (8,32):(32,1)>
      cute.barrier
      cute.elementwise "mul"(%s5, %s8) [] "store" %s9 {order = array<i64: 1, 0>} : !cute.smem<f32, (8,32):(32,1)>, !cute.smem<f16, (8,32):(32,1)> -> !cute.smem<f16, (8,32):(32,1)>
      cute.barrier
      cute.copy_s2g "chunked" %s9 -> %o0 {tile = #cute.layout<(8,32):(64,1)>, block_offset = array<i64: 512, 32, 0>, vec = 8 : i64} : !cute.smem<f16, (8,32):(32,1)> -> tensor<16x64xf16>
      cute.copy_s2g "sync" %s5 -> %o1 {tile = #cute.layout<(8,32):(64,1)>, block_offset = array<i64: 512, 32, 0>, vec = 1 : i64} : !cute.smem<f32, (8,32):(32,1)> -> tensor<16x64xf16>
    }
    func.return %0, %1 : tensor<16x64xf16>, tensor<16x64xf16>
  }
}

