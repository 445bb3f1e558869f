// RUN: mirage-opt %s -p cute-causal-skip --split-input-file | filecheck %s
// RUN: mirage-opt %s -p 'cute-causal-skip{heavy-first=false}' --split-input-file | filecheck %s --check-prefix=NATURAL
// RUN: mirage-opt %s -p cute-decisions -t cuda --split-input-file | filecheck %s --check-prefix=CUDA

// cute-causal-skip: a causal flash kernel (one online cute.mma_chain with a causal mask alone
// in its loop) walks only the key tiles up to each query block's diagonal
// (`cute.causal_trips` on the loop: min(R, ceil((128 by + 128 + 0) / 32))), runs the tiles
// fully below it without the mask (`cute.mask_from`: floor((128 by + 1) / 32)) and, its
// 8 x 32 = 256 blocks exceeding the 132 SMs, dispatches the heavy query blocks (grid axis y)
// first (`cute.heavy_first = 1`).  A kernel without a causal mask is left alone.
// Inputs: examples/suite/suite_prefill_causal_s4096_f16.mlir and suite_prefill_s1024_f16.mlir
// after `mirage-transpile{decide=false}`.

// CHECK: cute.kernel{{.*}}cute.heavy_first = 1 : i64
// CHECK: cute.mma_chain {{.*}} online {cute.mask_from = array<i64: 0, 128, 0, 1, 32>,
// CHECK: } {cute.causal_trips = array<i64: 0, 128, 0, 128, 32>}
// CHECK-LABEL: func.func @suite_prefill_s1024_f16
// CHECK-NOT: cute.causal_trips
// CHECK-NOT: cute.mask_from
// CHECK-NOT: cute.heavy_first

// NATURAL-NOT: cute.heavy_first
// NATURAL: cute.causal_trips

// CUDA: const unsigned mx_by = blockIdx.y < 16u ? 31u - blockIdx.y : blockIdx.y - 16u;  // cute.heavy_first
// CUDA-NEXT: const int cs_tiles = ((int)mx_by * 128 + 159) / 32;
// CUDA-NEXT: const int cs_trips = cs_tiles < 128 ? cs_tiles : 128;
// CUDA-NEXT: const int cs_unmasked0 = ((int)mx_by * 128 + 1) / 32;
// CUDA: i0 + blockIdx.x * 524288 + mx_by * 16384
// CUDA: for (int it = 0; it < cs_trips; ++it) {
// CUDA-NEXT: if (it + 1 < cs_trips) mx::g2s_async
// CUDA: if (it < cs_unmasked0) {
// CUDA-NEXT: mx::mma_chain_online_run
// CUDA-NEXT: [](float v) { return (v) * 0.08838834764831843f; });
// CUDA-NEXT: } else {
// CUDA-NEXT: mx::mma_chain_online_run
// CUDA-NEXT: [](float v)
// CUDA-NEXT: mx::CausalMask{(int)mx_by * 128 + 0 - (it * 32)});
// CUDA: o0 + blockIdx.x * 524288 + mx_by * 16384
// CUDA-LABEL: suite_prefill_s1024_f16_k0
// CUDA-NOT: cs_trips
// CUDA: for (int it = 0; it < 16; ++it) {

builtin.module {
  func.func @suite_prefill_causal_s4096_f16(%Q: tensor<8x4096x128xf16> {kn.strides = array<i64: 524288, 128, 1>, kn.innermost = 2 : i64}, %K: tensor<8x128x4096xf16> {kn.strides = array<i64: 524288, 1, 128>, kn.innermost = 1 : i64}, %V: tensor<8x4096x128xf16> {kn.strides = array<i64: 524288, 128, 1>, kn.innermost = 2 : i64}) -> (tensor<8x4096x128xf16> {kn.strides = array<i64: 524288, 128, 1>}) attributes {mirage.layout_cost = 228208 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %0 = cute.kernel(%Q, %K, %V) attributes {kn.template = "attention", kn.smem_estimate = 98432 : i64, kn.cost_estimate_us = 2.584200e+02 : f64, kn.innermost = array<i64: 2>, kernel_name = "suite_prefill_causal_s4096_f16_k0", grid_dim = array<i64: 8, 32, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 98688 : i64, forloop_range = 128 : i64, arg_strides = [array<i64: 524288, 128, 1>, array<i64: 524288, 128, 1>, array<i64: 524288, 1, 128>, array<i64: 524288, 128, 1>]} : (tensor<8x4096x128xf16>, tensor<8x128x4096xf16>, tensor<8x4096x128xf16>) -> tensor<8x4096x128xf16> {
    ^bb0(%o0: tensor<8x4096x128xf16>, %i0: tensor<8x4096x128xf16>, %i1: tensor<8x128x4096xf16>, %i2: tensor<8x4096x128xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (1,128,128):(16384,128,1), xor<3,3,4>>
      %s1 = cute.smem_alloc [49280, 57472] : !cute.smem<f16, (1,128,32):(4096,1,128), xor<3,3,4>>
      %s2 = cute.smem_alloc [32896, 41088] : !cute.smem<f16, (1,32,128):(4096,128,1), xor<3,3,4>>
      %s3 = cute.smem_alloc [65920] : !cute.smem<f32, (1,128,32):(4096,1,128)>
      %s4 = cute.smem_alloc [384] : !cute.smem<f32, (1,128,128):(16384,128,1)>
      %s5 = cute.smem_alloc [128] : !cute.smem<f16, (1,128,1):(128,1,128)>
      %s6 = cute.smem_alloc [65920] : !cute.smem<f16, (1,128,128):(16384,128,1)>
      cute.copy_g2s "chunked" %i0 -> %s0 {tile = #cute.layout<(1,128,128):(524288,128,1)>, block_offset = array<i64: 524288, 16384, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<8x4096x128xf16> -> !cute.smem<f16, (1,128,128):(16384,128,1), xor<3,3,4>>
      %psum0 = cute.mma_init : !cute.frag<128x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>
      %racc0 = cute.mma_init : !cute.frag<128x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(1,128,32):(524288,1,128)>, block_offset = array<i64: 524288, 0, 0>, vec = 8 : i64, iter_stride = 4096 : i64, iter_offset = 0 : i64} : tensor<8x128x4096xf16> -> !cute.smem<f16, (1,128,32):(4096,1,128), xor<3,3,4>>
      cute.copy_g2s "async" %i2 -> %s2 {tile = #cute.layout<(1,32,128):(524288,128,1)>, block_offset = array<i64: 524288, 0, 0>, vec = 8 : i64, iter_stride = 4096 : i64, iter_offset = 0 : i64} : tensor<8x4096x128xf16> -> !cute.smem<f16, (1,32,128):(4096,128,1), xor<3,3,4>>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 128 {
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(1,128,32):(524288,1,128)>, block_offset = array<i64: 524288, 0, 0>, vec = 8 : i64, iter_stride = 4096 : i64, iter_offset = 1 : i64} : tensor<8x128x4096xf16> -> !cute.smem<f16, (1,128,32):(4096,1,128), xor<3,3,4>>
        cute.copy_g2s "async" %i2[%it] -> %s2 {tile = #cute.layout<(1,32,128):(524288,128,1)>, block_offset = array<i64: 524288, 0, 0>, vec = 8 : i64, iter_stride = 4096 : i64, iter_offset = 1 : i64} : tensor<8x4096x128xf16> -> !cute.smem<f16, (1,32,128):(4096,128,1), xor<3,3,4>>
        cute.cp_async_commit
        cute.cp_async_wait 1
        cute.barrier
        cute.mma_chain %racc0, %psum0, %s0, %s1, %s2 [#cute.fn<mul_scalar(0.08838834764831843)>] online {mask_offset = 0 : i64, mask_rows = array<i64: 0, 128, 0, 0>, mask_cols = array<i64: 0, 0, 0, 32>} : !cute.frag<128x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>, !cute.frag<128x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>, !cute.smem<f16, (1,128,128):(16384,128,1), xor<3,3,4>>, !cute.smem<f16, (1,128,32):(4096,1,128), xor<3,3,4>>, !cute.smem<f16, (1,32,128):(4096,128,1), xor<3,3,4>>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s4 : !cute.frag<128x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>> -> !cute.smem<f32, (1,128,128):(16384,128,1)>
      cute.frag_store %psum0 [] "store" %s3 : !cute.frag<128x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>> -> !cute.smem<f32, (1,128,32):(4096,1,128)>
      cute.barrier
      cute.reduce "sum" %s3 [] "store" %s5 {dim = 2 : i64, group = 1 : i64, threads = 1 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f32, (1,128,32):(4096,1,128)> -> !cute.smem<f16, (1,128,1):(128,1,128)>
      cute.barrier
      cute.elementwise "div"(%s4, %s5) [] "store" %s6 {order = array<i64: 2, 1, 0>} : !cute.smem<f32, (1,128,128):(16384,128,1)>, !cute.smem<f16, (1,128,1):(128,1,128)> -> !cute.smem<f16, (1,128,128):(16384,128,1)>
      cute.barrier
      cute.copy_s2g "chunked" %s6 -> %o0 {tile = #cute.layout<(1,128,128):(524288,128,1)>, block_offset = array<i64: 524288, 16384, 0>, vec = 8 : i64} : !cute.smem<f16, (1,128,128):(16384,128,1)> -> tensor<8x4096x128xf16>
    }
    func.return %0 : tensor<8x4096x128xf16>
  }
}

// -----

builtin.module {
  func.func @suite_prefill_s1024_f16(%Q: tensor<8x1024x128xf16> {kn.strides = array<i64: 131072, 128, 1>, kn.innermost = 2 : i64}, %K: tensor<8x128x1024xf16> {kn.strides = array<i64: 131072, 1, 128>, kn.innermost = 1 : i64}, %V: tensor<8x1024x128xf16> {kn.strides = array<i64: 131072, 128, 1>, kn.innermost = 2 : i64}) -> (tensor<8x1024x128xf16> {kn.strides = array<i64: 131072, 128, 1>}) attributes {mirage.layout_cost = 153968 : i64, mirage.layout_status = "optimal", kn.workspace_size = 0 : i64} {
    %0 = cute.kernel(%Q, %K, %V) attributes {kn.template = "attention", kn.smem_estimate = 98432 : i64, kn.cost_estimate_us = 3.195200e+01 : f64, kn.innermost = array<i64: 2>, kernel_name = "suite_prefill_s1024_f16_k0", grid_dim = array<i64: 8, 16, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 82048 : i64, forloop_range = 16 : i64, arg_strides = [array<i64: 131072, 128, 1>, array<i64: 131072, 128, 1>, array<i64: 131072, 1, 128>, array<i64: 131072, 128, 1>]} : (tensor<8x1024x128xf16>, tensor<8x128x1024xf16>, tensor<8x1024x128xf16>) -> tensor<8x1024x128xf16> {
    ^bb0(%o0: tensor<8x1024x128xf16>, %i0: tensor<8x1024x128xf16>, %i1: tensor<8x128x1024xf16>, %i2: tensor<8x1024x128xf16>):
      %s0 = cute.smem_alloc [128] : !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      %s1 = cute.smem_alloc [16512, 32896] : !cute.smem<f16, (1,128,64):(8192,1,128), xor<3,3,4>>
      %s2 = cute.smem_alloc [49280, 65664] : !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      %s3 = cute.smem_alloc [128] : !cute.smem<f32, (1,64,64):(4096,1,64)>
      %s4 = cute.smem_alloc [16512] : !cute.smem<f32, (1,64,128):(8192,128,1)>
      %s5 = cute.smem_alloc [49280] : !cute.smem<f16, (1,64,1):(64,1,64)>
      %s6 = cute.smem_alloc [128] : !cute.smem<f16, (1,64,128):(8192,128,1)>
      cute.copy_g2s "chunked" %i0 -> %s0 {tile = #cute.layout<(1,64,128):(131072,128,1)>, block_offset = array<i64: 131072, 8192, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<8x1024x128xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      %psum0 = cute.mma_init : !cute.frag<64x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>
      %racc0 = cute.mma_init : !cute.frag<64x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>
      cute.copy_g2s "async" %i1 -> %s1 {tile = #cute.layout<(1,128,64):(131072,1,128)>, block_offset = array<i64: 131072, 0, 0>, vec = 8 : i64, iter_stride = 8192 : i64, iter_offset = 0 : i64} : tensor<8x128x1024xf16> -> !cute.smem<f16, (1,128,64):(8192,1,128), xor<3,3,4>>
      cute.copy_g2s "async" %i2 -> %s2 {tile = #cute.layout<(1,64,128):(131072,128,1)>, block_offset = array<i64: 131072, 0, 0>, vec = 8 : i64, iter_stride = 8192 : i64, iter_offset = 0 : i64} : tensor<8x1024x128xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
      cute.cp_async_commit
      cute.barrier
      cute.for %it = 0 to 16 {
        cute.copy_g2s "async" %i1[%it] -> %s1 {tile = #cute.layout<(1,128,64):(131072,1,128)>, block_offset = array<i64: 131072, 0, 0>, vec = 8 : i64, iter_stride = 8192 : i64, iter_offset = 1 : i64} : tensor<8x128x1024xf16> -> !cute.smem<f16, (1,128,64):(8192,1,128), xor<3,3,4>>
        cute.copy_g2s "async" %i2[%it] -> %s2 {tile = #cute.layout<(1,64,128):(131072,128,1)>, block_offset = array<i64: 131072, 0, 0>, vec = 8 : i64, iter_stride = 8192 : i64, iter_offset = 1 : i64} : tensor<8x1024x128xf16> -> !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.cp_async_commit
        cute.cp_async_wait 1
        cute.barrier
        cute.mma_chain %racc0, %psum0, %s0, %s1, %s2 [#cute.fn<mul_scalar(0.08838834764831843)>] online : !cute.frag<64x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>, !cute.frag<64x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>, !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>, !cute.smem<f16, (1,128,64):(8192,1,128), xor<3,3,4>>, !cute.smem<f16, (1,64,128):(8192,128,1), xor<3,3,4>>
        cute.barrier
      }
      cute.frag_store %racc0 [] "store" %s4 : !cute.frag<64x128xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>> -> !cute.smem<f32, (1,64,128):(8192,128,1)>
      cute.frag_store %psum0 [] "store" %s3 : !cute.frag<64x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>> -> !cute.smem<f32, (1,64,64):(4096,1,64)>
      cute.barrier
      cute.reduce "sum" %s3 [] "store" %s5 {dim = 2 : i64, group = 1 : i64, threads = 2 : i64, order = array<i64: 1, 2, 0>} : !cute.smem<f32, (1,64,64):(4096,1,64)> -> !cute.smem<f16, (1,64,1):(64,1,64)>
      cute.barrier
      cute.elementwise "div"(%s4, %s5) [] "store" %s6 {order = array<i64: 2, 1, 0>} : !cute.smem<f32, (1,64,128):(8192,128,1)>, !cute.smem<f16, (1,64,1):(64,1,64)> -> !cute.smem<f16, (1,64,128):(8192,128,1)>
      cute.barrier
      cute.copy_s2g "chunked" %s6 -> %o0 {tile = #cute.layout<(1,64,128):(131072,128,1)>, block_offset = array<i64: 131072, 8192, 0>, vec = 8 : i64} : !cute.smem<f16, (1,64,128):(8192,128,1)> -> tensor<8x1024x128xf16>
    }
    func.return %0 : tensor<8x1024x128xf16>
  }
}

