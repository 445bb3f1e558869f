// RUN: mirage-opt %s -p cute-decisions | filecheck %s
// RUN: mirage-opt %s -p 'cute-decisions{without="cute-slice-mma,cute-weight-prefetch"}' | filecheck %s --check-prefix=WITHOUT
// RUN: mirage-opt %s -p cute-decisions > %t.all
// RUN: mirage-opt %s -p cute-block-reduce,cute-slice-mma,cute-register-accumulators,cute-weight-prefetch,cute-row-chains,cute-grid-sum-epilogue > %t.each
// RUN: diff %t.all %t.each

// cute-decisions runs the six cute decision passes in order (block-reduce, slice-mma,
// register-accumulators, weight-prefetch, row-chains, grid-sum-epilogue); `without` (a quoted comma-separated list) leaves
// some out. Checked: one attribute of each decision, that the result equals running the six
// passes by name, and that `without` leaves exactly the named decisions unwritten.
// Input: test/data/split_k_grid_sum.mlir with W marked kn.weight, after
// `mirage-transpile{decide=false}` (one reduce, one register accumulator, a weight stream).

// CHECK:       cute.kernel(%X, %W) attributes {{{.*}}cute.kslice_scratch = array<i64: 4480, 0>, cute.reg_accums = 1 : i64, cute.trigger_dependents, cute.pdl_prefetch = 1 : i64, cute.row_chains = 0 : i64, kernel_name = "split_k_rms_k0"
// CHECK:       %s0 = cute.smem_alloc [128, 256] {cute.before_pdl_wait}
// CHECK:       cute.fill %s3, 0.0 {cute.accum_in_reg, cute.reg_accum = 1 : i64}
// CHECK:       cute.copy_g2s "async" %i1 -> %s1 {cute.before_pdl_wait, tile
// CHECK:       cute.reduce "sum" %s3 [] "store" %s4 {cute.reduce_threads = 32 : i64

// WITHOUT:     cute.kernel(%X, %W) attributes {kn.innermost = array<i64: 1>, kn.grid_sum_scratch_offset = 0 : i64, cute.reg_accums = 1 : i64, cute.row_chains = 0 : i64, kernel_name = "split_k_rms_k0"
// WITHOUT-NOT: cute.before_pdl_wait
// WITHOUT:     cute.fill %s3, 0.0 {cute.accum_in_reg, cute.reg_accum = 1 : i64}
// WITHOUT-NOT: cute.before_pdl_wait
// WITHOUT:     cute.reduce "sum" %s3 [] "store" %s4 {cute.reduce_threads = 32 : i64
// WITHOUT-NOT: cute.before_pdl_wait

builtin.module {
  func.func @split_k_rms(%X: tensor<2x256xf16> {kn.strides = array<i64: 256, 1>, kn.innermost = 1 : i64}, %W: tensor<256x64xf16> {kn.strides = array<i64: 64, 1>, kn.weight, kn.innermost = 1 : i64}) -> (tensor<2x64xf16> {kn.strides = array<i64: 64, 1>}) attributes {mirage.layout_cost = 6376 : i64, mirage.layout_status = "optimal", kn.workspace_size = 2176 : i64} {
    %O = cute.kernel(%X, %W) attributes {kn.innermost = array<i64: 1>, kn.grid_sum_scratch_offset = 0 : i64, kernel_name = "split_k_rms_k0", grid_dim = array<i64: 2, 4, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 4480 : i64, forloop_range = 2 : i64, arg_strides = [array<i64: 64, 1>, array<i64: 256, 1>, array<i64: 64, 1>]} : (tensor<2x256xf16>, tensor<256x64xf16>) -> tensor<2x64xf16> {
    ^bb0(%o0: tensor<2x64xf16>, %i0: tensor<2x256xf16>, %i1: tensor<256x64xf16>):
      %s0 = cute.smem_alloc [128, 256] : !cute.smem<f16, (2,32):(32,1), xor<2,3,3>>
      %s1 = cute.smem_alloc [384, 2432] : !cute.smem<f16, (32,32):(32,1), xor<2,3,3>>
      %s2 = cute.smem_alloc [128] : !cute.smem<f32, (2,32):(32,1), xor<3,2,3>>
      %s3 = cute.smem_alloc [384] : !cute.smem<f32, (2,32):(1,4)>
      %s4 = cute.smem_alloc [896] : !cute.smem<f32, (2,1):(1,4)>
      %s5 = cute.smem_alloc [384] : !cute.smem<f32, (2,32):(32,1)>
      %s6 = cute.smem_alloc [640] : !cute.smem<f32, (2,1):(1,4)>
      %s7 = cute.smem_alloc [128] : !cute.smem<f16, (2,1):(1,8)>
      %s8 = cute.smem_alloc [144] : !cute.smem<f16, (2,32):(32,1)>
      %racc0 = cute.mma_init : !cute.frag<2x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
      cute.fill %s3, 0.0 {cute.accum_in_reg} : !cute.smem<f32, (2,32):(1,4)>
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(2,32):(256,1)>, block_offset = array<i64: 0, 64, 0>, vec = 8 : i64, iter_stride = 32 : i64, iter_offset = 0 : i64} : tensor<2x256xf16> -> !cute.smem<f16, (2,32):(32,1), xor<2,3,3>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(32,32):(64,1)>, block_offset = array<i64: 32, 4096, 0>, vec = 8 : i64, iter_stride = 2048 : i64, iter_offset = 0 : i64} : tensor<256x64xf16> -> !cute.smem<f16, (32,32):(32,1), xor<2,3,3>>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 2 {
        cute.copy_g2s "async" %i0[%it] -> %s0 {tile = #cute.layout<(2,32):(256,1)>, block_offset = array<i64: 0, 64, 0>, vec = 8 : i64, iter_stride = 32 : i64, iter_offset = 1 : i64} : tensor<2x256xf16> -> !cute.smem<f16, (2,32):(32,1), xor<2,3,3>>
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(32,32):(64,1)>, block_offset = array<i64: 32, 4096, 0>, vec = 8 : i64, iter_stride = 2048 : i64, iter_offset = 1 : i64} : tensor<256x64xf16> -> !cute.smem<f16, (32,32):(32,1), xor<2,3,3>>
        cute.cp_async_commit
        cute.cp_async_wait 1
        cute.barrier
        cute.mma %racc0, %s0, %s1 : !cute.frag<2x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (2,32):(32,1), xor<2,3,3>>, !cute.smem<f16, (32,32):(32,1), xor<2,3,3>>
        cute.elementwise "id"(%s0) [#cute.fn<square>] "add" %s3 {order = array<i64: 0, 1>} : !cute.smem<f16, (2,32):(32,1), xor<2,3,3>> -> !cute.smem<f32, (2,32):(1,4)>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s2 : !cute.frag<2x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (2,32):(32,1), xor<3,2,3>>
      cute.barrier
      cute.reduce "sum" %s3 [] "store" %s4 {dim = 1 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 0, 1>} : !cute.smem<f32, (2,32):(1,4)> -> !cute.smem<f32, (2,1):(1,4)>
      cute.barrier
      cute.grid_sum(%s2, %s4) -> (%s5, %s6) {dim = 1 : i64} : !cute.smem<f32, (2,32):(32,1), xor<3,2,3>>, !cute.smem<f32, (2,1):(1,4)> -> !cute.smem<f32, (2,32):(32,1)>, !cute.smem<f32, (2,1):(1,4)>
      cute.barrier
      cute.elementwise "id"(%s6) [#cute.fn<mul_scalar(0.00390625)>, #cute.fn<sqrt>] "store" %s7 {order = array<i64: 0, 1>} : !cute.smem<f32, (2,1):(1,4)> -> !cute.smem<f16, (2,1):(1,8)>
      cute.barrier
      cute.elementwise "div"(%s5, %s7) [] "store" %s8 {order = array<i64: 1, 0>} : !cute.smem<f32, (2,32):(32,1)>, !cute.smem<f16, (2,1):(1,8)> -> !cute.smem<f16, (2,32):(32,1)>
      cute.barrier
      cute.copy_s2g "chunked" %s8 -> %o0 {tile = #cute.layout<(2,32):(64,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (2,32):(32,1)> -> tensor<2x64xf16>
    }
    func.return %O : tensor<2x64xf16>
  }
}

