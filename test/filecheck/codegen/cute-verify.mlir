// RUN: mirage-opt %s --split-input-file --verify-diagnostics | filecheck %s

// Every cute verifier names the op and the broken rule.

func.func @smem_overflow(%x: tensor<64x64xf16>) -> tensor<64x64xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 4096 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 64, 1>, array<i64: 64, 1>]} : (tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%o0: tensor<64x64xf16>, %i0: tensor<64x64xf16>):
    %s = cute.smem_alloc [128] : !cute.smem<f16, (64,64):(64,1)>
  }
  func.return %o : tensor<64x64xf16>
}
// CHECK: cute.smem_alloc: tile [128, 8320) does not fit in the kernel's 4096 B of shared memory

// -----

// The stage buffers of a pipelined tile (a ring) must not overlap.
func.func @ring_overlap(%x: tensor<64x64xf16>) -> tensor<64x64xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 65536 : i64, forloop_range = 4 : i64, arg_strides = [array<i64: 64, 1>, array<i64: 64, 1>]} : (tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%o0: tensor<64x64xf16>, %i0: tensor<64x64xf16>):
    %s = cute.smem_alloc [128, 8320, 12416] : !cute.smem<f16, (64,64):(64,1)>
  }
  func.return %o : tensor<64x64xf16>
}
// CHECK: cute.smem_alloc: stage buffers at 8320 and 12416 overlap (8192 B each)

// -----

func.func @ring_too_deep(%x: tensor<8x8xf16>) -> tensor<8x8xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 4096 : i64, forloop_range = 16 : i64, arg_strides = [array<i64: 8, 1>, array<i64: 8, 1>]} : (tensor<8x8xf16>) -> tensor<8x8xf16> {
  ^bb0(%o0: tensor<8x8xf16>, %i0: tensor<8x8xf16>):
    %s = cute.smem_alloc [128, 256, 384, 512, 640, 768, 896, 1024, 1152] : !cute.smem<f16, (8,8):(8,1)>
  }
  func.return %o : tensor<8x8xf16>
}
// CHECK: cute.smem_alloc: needs one offset (or 2..8 for the stage buffers of a pipelined tile)

// -----

func.func @too_many_threads(%x: tensor<64xf32>) -> tensor<64xf32> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 64, 32, 1>, smem_size = 128 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%o0: tensor<64xf32>, %i0: tensor<64xf32>):
  }
  func.return %o : tensor<64xf32>
}
// CHECK: cute.kernel: block_dim (64, 32, 1) has 2048 threads, more than 1024

// -----

func.func @bad_args(%x: tensor<64xf32>) -> tensor<64xf32> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 64, 1, 1>, smem_size = 128 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%i0: tensor<64xf32>):
  }
  func.return %o : tensor<64xf32>
}
// CHECK: cute.kernel: the block arguments must be the result types then the operand types, in order

// -----

func.func @arity(%x: tensor<64xf32>) -> tensor<64xf32> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 64, 1, 1>, smem_size = 1024 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%o0: tensor<64xf32>, %i0: tensor<64xf32>):
    %s = cute.smem_alloc [128] : !cute.smem<f32, (64):(1)>
    cute.elementwise "add"(%s) [] "store" %s {order = array<i64: 0>} : !cute.smem<f32, (64):(1)> -> !cute.smem<f32, (64):(1)>
  }
  func.return %o : tensor<64xf32>
}
// CHECK: cute.elementwise: fn 'add' with mode 'store' takes 2 inputs, got 1

// -----

func.func @broadcast(%x: tensor<64xf32>) -> tensor<64xf32> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 64, 1, 1>, smem_size = 1024 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%o0: tensor<64xf32>, %i0: tensor<64xf32>):
    %s = cute.smem_alloc [128] : !cute.smem<f32, (4,16):(16,1)>
    %t = cute.smem_alloc [384] : !cute.smem<f32, (4,8):(8,1)>
    cute.elementwise "id"(%s) [#cute.fn<exp>] "store" %t {order = array<i64: 1, 0>} : !cute.smem<f32, (4,16):(16,1)> -> !cute.smem<f32, (4,8):(8,1)>
  }
  func.return %o : tensor<64xf32>
}
// CHECK: cute.elementwise: input #0 of shape (4, 16) does not broadcast to the output shape (4, 8)

// -----

func.func @load_dtype(%x: tensor<64xf16>) -> tensor<64xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 64, 1, 1>, smem_size = 1024 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf16>) -> tensor<64xf16> {
  ^bb0(%o0: tensor<64xf16>, %i0: tensor<64xf16>):
    %s = cute.smem_alloc [128] : !cute.smem<f32, (64):(1)>
    cute.copy_g2s "sync" %i0 -> %s {tile = #cute.layout<(64):(1)>, block_offset = array<i64: 0, 0, 0>, vec = 1 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<64xf16> -> !cute.smem<f32, (64):(1)>
  }
  func.return %o : tensor<64xf16>
}
// CHECK: cute.copy_g2s: a load keeps the element type: the DTensor and the shared tile must agree

// -----

func.func @chunk_vec(%x: tensor<64xf16>) -> tensor<64xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 64, 1, 1>, smem_size = 1024 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf16>) -> tensor<64xf16> {
  ^bb0(%o0: tensor<64xf16>, %i0: tensor<64xf16>):
    %s = cute.smem_alloc [128] : !cute.smem<f16, (64):(1)>
    cute.copy_g2s "chunked" %i0 -> %s {tile = #cute.layout<(64):(1)>, block_offset = array<i64: 0, 0, 0>, vec = 4 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<64xf16> -> !cute.smem<f16, (64):(1)>
  }
  func.return %o : tensor<64xf16>
}
// CHECK: cute.copy_g2s: a chunked copy moves 16-byte vectors: vec must be 8

// -----

func.func @chunk_view(%x: tensor<64xf16>) -> tensor<32xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 64, 1, 1>, smem_size = 1024 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf16>) -> tensor<32xf16> {
  ^bb0(%o0: tensor<32xf16>, %i0: tensor<64xf16>):
    %s = cute.smem_alloc [128] : !cute.smem<f16, (32):(1)>
    cute.copy_g2s "chunked" %i0 -> %s {tile = #cute.layout<(32):(1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64, view_offset = 4 : i64} : tensor<64xf16> -> !cute.smem<f16, (32):(1)>
  }
  func.return %o : tensor<32xf16>
}
// CHECK: cute.copy_g2s: a chunked copy needs a view_offset that is a multiple of vec

// -----

func.func @mma_shape(%x: tensor<64xf16>) -> tensor<64xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 8192 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf16>) -> tensor<64xf16> {
  ^bb0(%o0: tensor<64xf16>, %i0: tensor<64xf16>):
    %a = cute.smem_alloc [128] : !cute.smem<f16, (16,32):(32,1)>
    %b = cute.smem_alloc [1152] : !cute.smem<f16, (32,8):(8,1)>
    %f = cute.mma_init : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>>
    cute.mma %f, %a, %b : !cute.frag<16x16xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,2)>>, !cute.smem<f16, (16,32):(32,1)>, !cute.smem<f16, (32,8):(8,1)>
  }
  func.return %o : tensor<64xf16>
}
// CHECK: cute.mma: accumulator (16, 16) does not match the product shape (16, 8)

// -----

func.func @mma_types(%x: tensor<64xf16>) -> tensor<64xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 8192 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf16>) -> tensor<64xf16> {
  ^bb0(%o0: tensor<64xf16>, %i0: tensor<64xf16>):
    %a = cute.smem_alloc [128] : !cute.smem<f32, (16,32):(32,1)>
    %b = cute.smem_alloc [4224] : !cute.smem<f16, (32,8):(8,1)>
    %f = cute.mma_init : !cute.frag<16x8xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,1)>>
    cute.mma %f, %a, %b : !cute.frag<16x8xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,1)>>, !cute.smem<f32, (16,32):(32,1)>, !cute.smem<f16, (32,8):(8,1)>
  }
  func.return %o : tensor<64xf16>
}
// CHECK: cute.mma: atom SM80_16x8x16_F32F16F16F32_TN needs f16 operands, got f32 and f16

// -----

func.func @reduce_group(%x: tensor<64xf32>) -> tensor<64xf32> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 64, 1, 1>, smem_size = 1024 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf32>) -> tensor<64xf32> {
  ^bb0(%o0: tensor<64xf32>, %i0: tensor<64xf32>):
    %s = cute.smem_alloc [128] : !cute.smem<f32, (2,48):(48,1)>
    %t = cute.smem_alloc [512] : !cute.smem<f32, (2,32):(32,1)>
    cute.reduce "sum" %s [] "store" %t {dim = 1 : i64, group = 32 : i64, threads = 1 : i64, order = array<i64: 1, 0>} : !cute.smem<f32, (2,48):(48,1)> -> !cute.smem<f32, (2,32):(32,1)>
  }
  func.return %o : tensor<64xf32>
}
// CHECK: cute.reduce: dim 1 (size 48) is not divisible into groups of 32

// -----

func.func @bad_swizzle(%x: !cute.smem<f16, (8,64):(64,1), xor<3,3,2>>) {
  func.return
}
// CHECK: cute.swizzle: Swizzle<3,3,2> needs B >= 1, M >= 0 and S >= B

// -----

func.func @bad_atom(%x: !cute.frag<16x8xf32, #cute.tiled_mma<SM70_8x8x4, (1,1)>>) {
  func.return
}
// CHECK: cute.tiled_mma: unknown atom 'SM70_8x8x4'

// -----

// cute.mma_chain: the warps of the block are the warps of the first product's thr_layout.
func.func @mma_chain_warps(%x: tensor<64xf16>) -> tensor<64xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 256, 1, 1>, smem_size = 24576 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf16>) -> tensor<64xf16> {
  ^bb0(%o0: tensor<64xf16>, %i0: tensor<64xf16>):
    %a = cute.smem_alloc [128] : !cute.smem<f16, (16,64):(64,1)>
    %b = cute.smem_alloc [2176] : !cute.smem<f16, (64,64):(64,1)>
    %c = cute.smem_alloc [10368] : !cute.smem<f16, (64,64):(64,1)>
    %s = cute.mma_init : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
    %f = cute.mma_init : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,1)>>
    cute.mma_chain %f, %s, %a, %b, %c [#cute.fn<exp>] : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,1)>>, !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (16,64):(64,1)>, !cute.smem<f16, (64,64):(64,1)>, !cute.smem<f16, (64,64):(64,1)>
  }
  func.return %o : tensor<64xf16>
}
// CHECK: cute.mma_chain: the block must have exactly 4 warps (thr_layout of sum), has 256 threads

// -----

// cute.mma_chain: every warp needs whole k16 steps of P (two atom blocks each).
func.func @mma_chain_keys(%x: tensor<64xf16>) -> tensor<64xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "k", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 16384 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 1>, array<i64: 1>]} : (tensor<64xf16>) -> tensor<64xf16> {
  ^bb0(%o0: tensor<64xf16>, %i0: tensor<64xf16>):
    %a = cute.smem_alloc [128] : !cute.smem<f16, (16,64):(64,1)>
    %b = cute.smem_alloc [2176] : !cute.smem<f16, (64,32):(32,1)>
    %c = cute.smem_alloc [6272] : !cute.smem<f16, (32,64):(64,1)>
    %s = cute.mma_init : !cute.frag<16x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
    %f = cute.mma_init : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,1)>>
    cute.mma_chain %f, %s, %a, %b, %c [] : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,1)>>, !cute.frag<16x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>, !cute.smem<f16, (16,64):(64,1)>, !cute.smem<f16, (64,32):(32,1)>, !cute.smem<f16, (32,64):(64,1)>
  }
  func.return %o : tensor<64xf16>
}
// CHECK: cute.mma_chain: N1 = 32 must be a multiple of 16 x 4 key groups (two atom blocks per warp and k16 step)
