// RUN: mirage-opt %s -p cute-block-reduce | filecheck %s
// RUN: not mirage-opt %s -p 'cute-decisions{without=cute-block-reduce}' -t cuda 2>&1 | filecheck %s --check-prefix=MISSING

// cute-block-reduce writes the threads per output of every cute.reduce
// (`cute.reduce_threads`): the op's own `threads` unless its outputs would keep at most a
// quarter of the block's warps busy, then the whole block (a power of two >= 128).
// Input: examples/gqa.mlir after `mirage-transpile{decide=false}` (flash decoding and its
// combine kernel, 128 threads each).

// The 32 row sums of the first kernel keep 32 warps' worth of threads busy: 4 stay.
// CHECK: cute.reduce "sum" %s4 {{.*}} {cute.reduce_threads = 4 : i64, {{.*}} threads = 4 : i64
// The combine kernel's one-element sum takes the whole block.
// CHECK: cute.reduce "sum" %s0 {{.*}} {cute.reduce_threads = 128 : i64, {{.*}} threads = 16 : i64
// 64 outputs: the op's own 2 threads each.
// CHECK: cute.reduce "sum" %s1 {{.*}} {cute.reduce_threads = 2 : i64, {{.*}} threads = 2 : i64

// The printer refuses a reduce whose decision is missing, naming the pass.
// MISSING: cuda target: cute.reduce: no 'cute.reduce_threads' attribute; run cute-block-reduce first (mirage-transpile runs it)

builtin.module {
  func.func @gqa(%Q: tensor<2x256x64xf16> {kn.strides = array<i64: 16384, 64, 1>, kn.innermost = 2 : i64}, %K: tensor<2x64x4096xf16> {kn.strides = array<i64: 262144, 4096, 1>, kn.innermost = 2 : i64}, %V: tensor<2x4096x64xf16> {kn.strides = array<i64: 262144, 64, 1>, kn.innermost = 2 : i64}) -> (tensor<2x256x64xf16> {kn.strides = array<i64: 16384, 64, 1>}) attributes {mirage.layout_cost = 77048 : i64, mirage.layout_status = "optimal", kn.workspace_size = 1064960 : i64} {
    %o_part0, %o_part1 = cute.kernel(%Q, %K, %V) attributes {kn.template = "flash_decoding", kn.smem_estimate = 102592 : i64, kn.cost_estimate_us = 5.855000e+00 : f64, kn.innermost = array<i64: 1, 2>, kn.strides = [array<i64: 4096, 1, 256>, array<i64: 262144, 1024, 1>], kn.workspace_offset = array<i64: 1048576, 0>, kernel_name = "gqa_k0", grid_dim = array<i64: 2, 8, 16>, block_dim = array<i64: 128, 1, 1>, smem_size = 94336 : i64, forloop_range = 2 : i64, arg_strides = [array<i64: 4096, 1, 256>, array<i64: 262144, 1024, 1>, array<i64: 16384, 64, 1>, array<i64: 262144, 4096, 1>, array<i64: 262144, 64, 1>]} : (tensor<2x256x64xf16>, tensor<2x64x4096xf16>, tensor<2x4096x64xf16>) -> (tensor<2x256x16xf16>, tensor<2x256x1024xf16>) {
    ^bb0(%o0: tensor<2x256x16xf16>, %o1: tensor<2x256x1024xf16>, %i0: tensor<2x256x64xf16>, %i1: tensor<2x64x4096xf16>, %i2: tensor<2x4096x64xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (1,32,64):(2048,64,1), xor<3,3,3>>
      %s1 = cute.smem_alloc [4224, 20608] : !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      %s2 = cute.smem_alloc [36992, 53376] : !cute.smem<f16, (1,128,64):(8192,64,1), xor<3,3,3>>
      %s4 = cute.smem_alloc [69760] : !cute.smem<f32, (1,32,128):(4096,1,32)>
      %s5 = cute.smem_alloc [128] : !cute.smem<f32, (1,32,64):(2048,64,1), xor<3,2,4>>
      %s6 = cute.smem_alloc [8320] : !cute.smem<f16, (1,32,1):(32,1,32)>
      cute.copy_g2s "chunked" %i0 -> %s0 {tile = #cute.layout<(1,32,64):(16384,64,1)>, block_offset = array<i64: 16384, 2048, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<2x256x64xf16> -> !cute.smem<f16, (1,32,64):(2048,64,1), xor<3,3,3>>
      %psum0 = cute.mma_init : !cute.frag<32x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (2,2)>>
      %racc0 = cute.mma_init : !cute.frag<32x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (2,1)>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(1,64,128):(262144,4096,1)>, block_offset = array<i64: 262144, 0, 256>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 0 : i64} : tensor<2x64x4096xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      cute.copy_g2s "async" %i2 -> %s2 {tile = #cute.layout<(1,128,64):(262144,64,1)>, block_offset = array<i64: 262144, 0, 16384>, vec = 8 : i64, iter_stride = 8192 : i64, iter_offset = 0 : i64} : tensor<2x4096x64xf16> -> !cute.smem<f16, (1,128,64):(8192,64,1), xor<3,3,3>>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 2 {
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(1,64,128):(262144,4096,1)>, block_offset = array<i64: 262144, 0, 256>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 1 : i64} : tensor<2x64x4096xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.copy_g2s "async" %i2[%it] -> %s2 {tile = #cute.layout<(1,128,64):(262144,64,1)>, block_offset = array<i64: 262144, 0, 16384>, vec = 8 : i64, iter_stride = 8192 : i64, iter_offset = 1 : i64} : tensor<2x4096x64xf16> -> !cute.smem<f16, (1,128,64):(8192,64,1), xor<3,3,3>>
        cute.cp_async_commit
        cute.cp_async_wait 1
        cute.barrier
        cute.mma_chain %racc0, %psum0, %s0, %s1, %s2 [#cute.fn<exp>] : !cute.frag<32x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (2,1)>>, !cute.frag<32x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (2,2)>>, !cute.smem<f16, (1,32,64):(2048,64,1), xor<3,3,3>>, !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>, !cute.smem<f16, (1,128,64):(8192,64,1), xor<3,3,3>>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s5 : !cute.frag<32x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (2,1)>> -> !cute.smem<f32, (1,32,64):(2048,64,1), xor<3,2,4>>
      cute.frag_store %psum0 [] "store" %s4 : !cute.frag<32x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (2,2)>> -> !cute.smem<f32, (1,32,128):(4096,1,32)>
      cute.barrier
      cute.reduce "sum" %s4 [] "store" %s6 {dim = 2 : i64, group = 1 : i64, threads = 4 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f32, (1,32,128):(4096,1,32)> -> !cute.smem<f16, (1,32,1):(32,1,32)>
      cute.barrier
      cute.copy_s2g "chunked" %s6 -> %o0 {tile = #cute.layout<(1,32,1):(4096,1,256)>, block_offset = array<i64: 4096, 32, 256>, vec = 8 : i64} : !cute.smem<f16, (1,32,1):(32,1,32)> -> tensor<2x256x16xf16>
      cute.copy_s2g "sync" %s5 -> %o1 {tile = #cute.layout<(1,32,64):(262144,1024,1)>, block_offset = array<i64: 262144, 32768, 64>, vec = 1 : i64} : !cute.smem<f32, (1,32,64):(2048,64,1), xor<3,2,4>> -> tensor<2x256x1024xf16>
    }
    %o = cute.kernel(%o_part0, %o_part1) attributes {kn.template = "split_reduce", kn.smem_estimate = 2736 : i64, kn.cost_estimate_us = 3.297000e+00 : f64, kn.innermost = array<i64: 2>, kernel_name = "gqa_k1", grid_dim = array<i64: 2, 256, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 2480 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 16384, 64, 1>, array<i64: 4096, 1, 256>, array<i64: 262144, 1024, 1>]} : (tensor<2x256x16xf16>, tensor<2x256x1024xf16>) -> tensor<2x256x64xf16> {
    ^bb0(%o0: tensor<2x256x64xf16>, %i0: tensor<2x256x16xf16>, %i1: tensor<2x256x1024xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (1,1,16):(16,1,1)>
      %s1 = cute.smem_alloc [160] : !cute.smem<f16, (1,1,1024):(1024,1024,1)>
      %s2 = cute.smem_alloc [2336] : !cute.smem<f16, (1,1,1):(1,1,1)>
      %s3 = cute.smem_alloc [2352] : !cute.smem<f16, (1,1,64):(64,64,1)>
      %s4 = cute.smem_alloc [2208] : !cute.smem<f16, (1,1,64):(64,64,1)>
      cute.copy_g2s "sync" %i0 -> %s0 {tile = #cute.layout<(1,1,16):(4096,1,256)>, block_offset = array<i64: 4096, 1, 0>, vec = 1 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<2x256x16xf16> -> !cute.smem<f16, (1,1,16):(16,1,1)>
      cute.copy_g2s "chunked" %i1 -> %s1 {tile = #cute.layout<(1,1,1024):(262144,1024,1)>, block_offset = array<i64: 262144, 1024, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<2x256x1024xf16> -> !cute.smem<f16, (1,1,1024):(1024,1024,1)>
      cute.fill %s4, 0.0 : !cute.smem<f16, (1,1,64):(64,64,1)>
      cute.barrier
      cute.for %it = 0 to 1 {
        cute.reduce "sum" %s0 [] "store" %s2 {dim = 2 : i64, group = 1 : i64, threads = 16 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,1,16):(16,1,1)> -> !cute.smem<f16, (1,1,1):(1,1,1)>
        cute.reduce "sum" %s1 [] "store" %s3 {dim = 2 : i64, group = 64 : i64, threads = 2 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f16, (1,1,1024):(1024,1024,1)> -> !cute.smem<f16, (1,1,64):(64,64,1)>
        cute.barrier
        cute.elementwise "div"(%s3, %s2) [] "add" %s4 {order = array<i64: 2, 1, 0>} : !cute.smem<f16, (1,1,64):(64,64,1)>, !cute.smem<f16, (1,1,1):(1,1,1)> -> !cute.smem<f16, (1,1,64):(64,64,1)>
        cute.barrier
      }
      cute.copy_s2g "chunked" %s4 -> %o0 {tile = #cute.layout<(1,1,64):(16384,64,1)>, block_offset = array<i64: 16384, 64, 0>, vec = 8 : i64} : !cute.smem<f16, (1,1,64):(64,64,1)> -> tensor<2x256x64xf16>
    }
    func.return %o : tensor<2x256x64xf16>
  }
}

