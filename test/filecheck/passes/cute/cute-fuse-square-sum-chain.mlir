// RUN: mirage-opt %s -p cute-fuse-square-sum | filecheck %s
// RUN: mirage-opt %s -p cute-fuse-square-sum -t cuda | filecheck %s --check-prefix=CUDA

// A square that ends an elementwise register chain (cute-row-chains) and that only a sum
// outside the chain reads: the chain stored it rounded to fp16 (0 beyond |x| > 256), so it
// leaves the chain and the sum squares the chain's stored operand %s3 in fp32.  Input: fuzz
// seed 1134 graph 1579 (silu(X * silu(s)) -> rms_norm -> silu over 4-row tiles of 256)
// after `mirage-transpile{decide=false},cute-decisions{without=cute-fuse-square-sum}`.

// CHECK:      cute.elementwise "mul"(%s1, %s2) [#cute.fn<silu>] "store" %s3 {cute.row_chain_run = 0 : i64, cute.row_chain = 0 : i64, cute.row_chain_stored
// CHECK-NEXT: cute.barrier
// CHECK-NEXT: cute.reduce "sum_squares" %s3 [#cute.fn<mul_scalar(0.00390625)>, #cute.fn<sqrt>] "store" %s5
// CHECK-NOT:  #cute.fn<square>
// CUDA:       mx::reduce_sum_squares<512, 128, 256, 1,

builtin.module {
  func.func @fuzz_1134_1579(%X: tensor<3x32x256xf16> {kn.strides = array<i64: 8192, 256, 1>, kn.innermost = 2 : i64}, %0: tensor<3x32x1xf16> {kn.strides = array<i64: 32, 1, 1>, kn.innermost = 2 : i64}) -> (tensor<3x32x256xf16> {kn.strides = array<i64: 8192, 256, 1>}) attributes {mirage.layout_cost = 10240 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %1 = cute.kernel(%0, %X) attributes {kn.template = "rowwise", kn.smem_estimate = 10400 : i64, kn.cost_estimate_us = 8.277000e+00 : f64, kn.innermost = array<i64: 2>, cute.kslice_scratch = array<i64: 8352, 0>, cute.reg_accums = 0 : i64, cute.pdl_prefetch = 0 : i64, cute.row_chains = 1 : i64, kernel_name = "fuzz_1134_1579_k0", grid_dim = array<i64: 3, 8, 1>, block_dim = array<i64: 512, 1, 1>, smem_size = 8352 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 8192, 256, 1>, array<i64: 32, 1, 1>, array<i64: 8192, 256, 1>]} : (tensor<3x32x1xf16>, tensor<3x32x256xf16>) -> tensor<3x32x256xf16> {
    ^bb0(%o0: tensor<3x32x256xf16>, %i0: tensor<3x32x1xf16>, %i1: tensor<3x32x256xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (1,4,1):(8,1,1)>
      %s1 = cute.smem_alloc [144] : !cute.smem<f16, (1,4,256):(1024,256,1)>
      %s2 = cute.smem_alloc [4240] : !cute.smem<f16, (1,4,1):(8,1,8)>
      %s3 = cute.smem_alloc [4256] : !cute.smem<f16, (1,4,256):(1024,256,1)>
      %s4 = cute.smem_alloc [6304] : !cute.smem<f16, (1,4,256):(1024,256,1), xor<5,1,7>>
      %s5 = cute.smem_alloc [4240] : !cute.smem<f16, (1,4,1):(8,1,8)>
      %s6 = cute.smem_alloc [2192] : !cute.smem<f16, (1,4,256):(1024,256,1)>
      cute.copy_g2s "sync" %i0 -> %s0 {tile = #cute.layout<(1,4,1):(32,1,1)>, block_offset = array<i64: 32, 4, 0>, vec = 1 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<3x32x1xf16> -> !cute.smem<f16, (1,4,1):(8,1,1)>
      cute.copy_g2s "chunked" %i1 -> %s1 {cute.row_chain_global, cute.row_chain_vectors = false, tile = #cute.layout<(1,4,256):(8192,256,1)>, block_offset = array<i64: 8192, 1024, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<3x32x256xf16> -> !cute.smem<f16, (1,4,256):(1024,256,1)>
      cute.fill %s6, 0.0 : !cute.smem<f16, (1,4,256):(1024,256,1)>
      cute.barrier
      cute.for %it = 0 to 1 {
        cute.elementwise "id"(%s0) [#cute.fn<silu>] "store" %s2 {order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,4,1):(8,1,1)> -> !cute.smem<f16, (1,4,1):(8,1,8)>
        cute.barrier
        cute.elementwise "mul"(%s1, %s2) [#cute.fn<silu>] "store" %s3 {cute.row_chain_run = 0 : i64, cute.row_chain = 0 : i64, cute.row_chain_stored, order = array<i64: 2, 1, 0>} : !cute.smem<f16, (1,4,256):(1024,256,1)>, !cute.smem<f16, (1,4,1):(8,1,8)> -> !cute.smem<f16, (1,4,256):(1024,256,1)>
        cute.barrier
        cute.elementwise "id"(%s3) [#cute.fn<square>] "store" %s4 {cute.row_chain = 0 : i64, cute.row_chain_stored, order = array<i64: 2, 1, 0>} : !cute.smem<f16, (1,4,256):(1024,256,1)> -> !cute.smem<f16, (1,4,256):(1024,256,1), xor<5,1,7>>
        cute.barrier
        cute.reduce "sum" %s4 [#cute.fn<mul_scalar(0.00390625)>, #cute.fn<sqrt>] "store" %s5 {cute.reduce_threads = 128 : i64, dim = 2 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,4,256):(1024,256,1), xor<5,1,7>> -> !cute.smem<f16, (1,4,1):(8,1,8)>
        cute.barrier
        cute.elementwise "div"(%s3, %s5) [#cute.fn<silu>] "add" %s6 {order = array<i64: 2, 1, 0>} : !cute.smem<f16, (1,4,256):(1024,256,1)>, !cute.smem<f16, (1,4,1):(8,1,8)> -> !cute.smem<f16, (1,4,256):(1024,256,1)>
        cute.barrier
      }
      cute.copy_s2g "chunked" %s6 -> %o0 {tile = #cute.layout<(1,4,256):(8192,256,1)>, block_offset = array<i64: 8192, 1024, 0>, vec = 8 : i64} : !cute.smem<f16, (1,4,256):(1024,256,1)> -> tensor<3x32x256xf16>
    }
    func.return %1 : tensor<3x32x256xf16>
  }
}

