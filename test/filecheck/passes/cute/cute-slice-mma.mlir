// RUN: mirage-opt %s -p cute-slice-mma --split-input-file | filecheck %s
// RUN: not mirage-opt %s -p 'cute-decisions{without=cute-slice-mma}' -t cuda --split-input-file 2>&1 | filecheck %s --check-prefix=MISSING

// cute-slice-mma: a thr_layout of P warps in a block of W warps (W % P == 0) lets the W / P
// warp groups split the k-steps of each call; their partials meet in scratch appended to
// the plan (`cute.kslice_scratch = array<i64: base, bytes>` on the kernel, base = smem_size
// rounded up to 16 B; `cute.kslices` / `cute.kslice_offset` on each sliced cute.mma_init).
// Inputs: examples/gated_mlp.mlir and examples/gqa.mlir after `mirage-transpile{decide=false}`.

// gated_mlp: (1,4) thr_layouts in 16 warps, 2 x 6144 B of optional scratch (under 16 KiB):
// both accumulators take 4 slices, one scratch after the other.
// CHECK: cute.kernel{{.*}}cute.kslice_scratch = array<i64: 147584, 12288>{{.*}}kernel_name = "gated_mlp_k0"
// CHECK: %racc0 = cute.mma_init {cute.kslices = 4 : i64, cute.kslice_offset = 147584 : i64}
// CHECK: %racc1 = cute.mma_init {cute.kslices = 4 : i64, cute.kslice_offset = 153728 : i64}

// MISSING: cuda target: cute.kernel: no 'cute.kslice_scratch' attribute; run cute-slice-mma first (mirage-transpile runs it)

builtin.module {
  func.func @gated_mlp(%X: tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.innermost = 1 : i64}, %W1: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight, kn.innermost = 1 : i64}, %W2: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.weight, kn.innermost = 1 : i64}) -> (tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>}) attributes {mirage.layout_cost = 44936 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %o = cute.kernel(%X, %W1, %W2) attributes {kn.template = "multi_matmul_shared_operand", kn.smem_estimate = 76928 : i64, kn.cost_estimate_us = 2.116900e+01 : f64, kn.innermost = array<i64: 1>, kernel_name = "gated_mlp_k0", grid_dim = array<i64: 128, 1, 1>, block_dim = array<i64: 512, 1, 1>, smem_size = 147584 : i64, forloop_range = 16 : i64, arg_strides = [array<i64: 4096, 1>, array<i64: 4096, 1>, array<i64: 4096, 1>, array<i64: 4096, 1>]} : (tensor<8x4096xf16>, tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> tensor<8x4096xf16> {
    ^bb0(%o0: tensor<8x4096xf16>, %i0: tensor<8x4096xf16>, %i1: tensor<4096x4096xf16>, %i2: tensor<4096x4096xf16>):
      %s0 = cute.smem_alloc [128, 4224, 8320, 12416] : !cute.smem<f16, (8,256):(256,1), xor<3,3,5>>
      %s1 = cute.smem_alloc [16512, 32896, 49280, 65664] : !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
      %s2 = cute.smem_alloc [82048, 98432, 114816, 131200] : !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
      %s3 = cute.smem_alloc [128] : !cute.smem<f32, (8,32):(32,1), xor<3,2,3>>
      %s4 = cute.smem_alloc [1152] : !cute.smem<f32, (8,32):(32,1), xor<3,2,3>>
      %s5 = cute.smem_alloc [2176] : !cute.smem<f16, (8,32):(32,1)>
      %s6 = cute.smem_alloc [128] : !cute.smem<f16, (8,32):(32,1)>
      %racc0 = cute.mma_init : !cute.frag<8x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
      %racc1 = cute.mma_init : !cute.frag<8x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(8,256):(4096,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 256 : i64, iter_offset = 0 : i64} : tensor<8x4096xf16> -> !cute.smem<f16, (8,256):(256,1), xor<3,3,5>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(256,32):(4096,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64, iter_stride = 1048576 : i64, iter_offset = 0 : i64} : tensor<4096x4096xf16> -> !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
      cute.copy_g2s "async" %i2 -> %s2 {tile = #cute.layout<(256,32):(4096,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64, iter_stride = 1048576 : i64, iter_offset = 0 : i64} : tensor<4096x4096xf16> -> !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(8,256):(4096,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 256 : i64, iter_offset = 1 : i64} : tensor<8x4096xf16> -> !cute.smem<f16, (8,256):(256,1), xor<3,3,5>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(256,32):(4096,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64, iter_stride = 1048576 : i64, iter_offset = 1 : i64} : tensor<4096x4096xf16> -> !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
      cute.copy_g2s "async" %i2 -> %s2 {tile = #cute.layout<(256,32):(4096,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64, iter_stride = 1048576 : i64, iter_offset = 1 : i64} : tensor<4096x4096xf16> -> !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
      cute.cp_async_commit
      cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(8,256):(4096,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 256 : i64, iter_offset = 2 : i64} : tensor<8x4096xf16> -> !cute.smem<f16, (8,256):(256,1), xor<3,3,5>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(256,32):(4096,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64, iter_stride = 1048576 : i64, iter_offset = 2 : i64} : tensor<4096x4096xf16> -> !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
      cute.copy_g2s "async" %i2 -> %s2 {tile = #cute.layout<(256,32):(4096,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64, iter_stride = 1048576 : i64, iter_offset = 2 : i64} : tensor<4096x4096xf16> -> !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 16 {
        cute.copy_g2s "async" %i0[%it] -> %s0 {tile = #cute.layout<(8,256):(4096,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 256 : i64, iter_offset = 3 : i64} : tensor<8x4096xf16> -> !cute.smem<f16, (8,256):(256,1), xor<3,3,5>>
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(256,32):(4096,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64, iter_stride = 1048576 : i64, iter_offset = 3 : i64} : tensor<4096x4096xf16> -> !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
        cute.copy_g2s "async" %i2[%it] -> %s2 {tile = #cute.layout<(256,32):(4096,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64, iter_stride = 1048576 : i64, iter_offset = 3 : i64} : tensor<4096x4096xf16> -> !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
        cute.cp_async_commit
        cute.cp_async_wait 3
        cute.barrier
        cute.mma %racc0, %s0, %s1 : !cute.frag<8x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (8,256):(256,1), xor<3,3,5>>, !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
        cute.mma %racc1, %s0, %s2 : !cute.frag<8x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (8,256):(256,1), xor<3,3,5>>, !cute.smem<f16, (256,32):(32,1), xor<2,3,3>>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s3 : !cute.frag<8x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (8,32):(32,1), xor<3,2,3>>
      cute.frag_store %racc1 [] "store" %s4 : !cute.frag<8x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>> -> !cute.smem<f32, (8,32):(32,1), xor<3,2,3>>
      cute.barrier
      cute.elementwise "id"(%s3) [#cute.fn<silu>] "store" %s5 {order = array<i64: 1, 0>} : !cute.smem<f32, (8,32):(32,1), xor<3,2,3>> -> !cute.smem<f16, (8,32):(32,1)>
      cute.barrier
      cute.elementwise "mul"(%s5, %s4) [] "store" %s6 {order = array<i64: 1, 0>} : !cute.smem<f16, (8,32):(32,1)>, !cute.smem<f32, (8,32):(32,1), xor<3,2,3>> -> !cute.smem<f16, (8,32):(32,1)>
      cute.barrier
      cute.copy_s2g "chunked" %s6 -> %o0 {tile = #cute.layout<(8,32):(4096,1)>, block_offset = array<i64: 32, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (8,32):(32,1)> -> tensor<8x4096xf16>
    }
    func.return %o : tensor<8x4096xf16>
  }
}


// -----

// gqa: flash decoding's cute.mma_chain accumulator (2,1) is always sliced (2 groups of 2
// warps own different keys); its (2,2) row-sum fragment fills the 4 warps and is not. The
// combine kernel has no MMA: an empty scratch region at its 16-byte-aligned plan end.
// CHECK: cute.kernel{{.*}}cute.kslice_scratch = array<i64: 94336, 8192>{{.*}}kernel_name = "gqa_k0"
// CHECK: %psum0 = cute.mma_init : !cute.frag<32x128xf32
// CHECK: %racc0 = cute.mma_init {cute.kslices = 2 : i64, cute.kslice_offset = 94336 : i64}
// CHECK: cute.kernel{{.*}}cute.kslice_scratch = array<i64: 2480, 0>{{.*}}kernel_name = "gqa_k1"

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

