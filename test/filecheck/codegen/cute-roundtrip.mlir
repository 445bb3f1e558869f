// RUN: MIRAGE_ROUNDTRIP
// RUN: MIRAGE_GENERIC_ROUNDTRIP

// The cute dialect's custom syntax survives custom -> generic -> custom.

func.func @g(%x: tensor<2x4096xf16>, %w: tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
  %o = cute.kernel(%x, %w) attributes {kernel_name = "g_k0", grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 14464 : i64, forloop_range = 32 : i64, arg_strides = [array<i64: 6144, 1>, array<i64: 4096, 1>, array<i64: 6144, 1>]} : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
  ^bb0(%o0: tensor<2x6144xf16>, %i0: tensor<2x4096xf16>, %i1: tensor<4096x6144xf16>):
    %s0 = cute.smem_alloc [128, 640] : !cute.smem<f16, (2,128):(128,1), xor<3,3,4>>
    %s1 = cute.smem_alloc [1152, 7296] : !cute.smem<f16, (128,24):(24,1), shift>
    %s2 = cute.smem_alloc [13440] : !cute.smem<f32, (2,128):(128,1), xor<5,0,7>>
    %s3 = cute.smem_alloc [128] : !cute.smem<f32, (2,24):(28,1), shift>
    %s4 = cute.smem_alloc [352] : !cute.smem<f16, (2,1):(1,8)>
    %s5 = cute.smem_alloc [368] : !cute.smem<f16, (2,24):(24,1)>
    cute.fill %s2, 0.0 : !cute.smem<f32, (2,128):(128,1), xor<5,0,7>>
    %racc = cute.mma_init : !cute.frag<2x24xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,3)>>
    cute.copy_g2s "async" %i0 -> %s0 {tile = #cute.layout<(2,128):(4096,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 0 : i64} : tensor<2x4096xf16> -> !cute.smem<f16, (2,128):(128,1), xor<3,3,4>>
    cute.cp_async_commit
    cute.barrier
    cute.for %it = 0 to 32 {
      cute.copy_g2s "async" %i0[%it] -> %s0 {tile = #cute.layout<(2,128):(4096,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 128 : i64, iter_offset = 1 : i64} : tensor<2x4096xf16> -> !cute.smem<f16, (2,128):(128,1), xor<3,3,4>>
      cute.copy_g2s "sync" %i1[%it] -> %s1 {tile = #cute.layout<(128,24):(6144,1)>, block_offset = array<i64: 24, 0, 0>, vec = 1 : i64, iter_stride = 786432 : i64, iter_offset = 0 : i64} : tensor<4096x6144xf16> -> !cute.smem<f16, (128,24):(24,1), shift>
      cute.cp_async_commit
      cute.cp_async_wait 1
      cute.barrier
      cute.elementwise "id"(%s0) [#cute.fn<square>, #cute.fn<mul_scalar(0.000244140625)>, #cute.fn<clamp(-1.5,2.0)>] "add" %s2 {order = array<i64: 1, 0>} : !cute.smem<f16, (2,128):(128,1), xor<3,3,4>> -> !cute.smem<f32, (2,128):(128,1), xor<5,0,7>>
      cute.mma %racc, %s0, %s1 : !cute.frag<2x24xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,3)>>, !cute.smem<f16, (2,128):(128,1), xor<3,3,4>>, !cute.smem<f16, (128,24):(24,1), shift>
      cute.barrier
    }
    cute.frag_store %racc [] "store" %s3 : !cute.frag<2x24xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,3)>> -> !cute.smem<f32, (2,24):(28,1), shift>
    cute.barrier
    cute.reduce "sum" %s2 [#cute.fn<sqrt>] "store" %s4 {dim = 1 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 0, 1>} : !cute.smem<f32, (2,128):(128,1), xor<5,0,7>> -> !cute.smem<f16, (2,1):(1,8)>
    cute.barrier
    cute.elementwise "div"(%s3, %s4) [] "store" %s5 {order = array<i64: 1, 0>} : !cute.smem<f32, (2,24):(28,1), shift>, !cute.smem<f16, (2,1):(1,8)> -> !cute.smem<f16, (2,24):(24,1)>
    cute.barrier
    cute.copy_s2g "chunked" %s5 -> %o0 {tile = #cute.layout<(2,24):(6144,1)>, block_offset = array<i64: 24, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (2,24):(24,1)> -> tensor<2x6144xf16>
  }
  func.return %o : tensor<2x6144xf16>
}

// CHECK-LABEL: func.func @g
// CHECK:       %o = cute.kernel(%x, %w) attributes {kernel_name = "g_k0", grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 14464 : i64, forloop_range = 32 : i64
// CHECK-NEXT:  ^bb0(%o0: tensor<2x6144xf16>, %i0: tensor<2x4096xf16>, %i1: tensor<4096x6144xf16>):
// CHECK-NEXT:    %s0 = cute.smem_alloc [128, 640] : !cute.smem<f16, (2,128):(128,1), xor<3,3,4>>
// CHECK-NEXT:    %s1 = cute.smem_alloc [1152, 7296] : !cute.smem<f16, (128,24):(24,1), shift>
// CHECK:         cute.fill %s2, 0.0 : !cute.smem<f32, (2,128):(128,1), xor<5,0,7>>
// CHECK-NEXT:    %racc = cute.mma_init : !cute.frag<2x24xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,3)>>
// CHECK:         cute.for %it = 0 to 32 {
// CHECK-NEXT:      cute.copy_g2s "async" %i0[%it] -> %s0
// CHECK-NEXT:      cute.copy_g2s "sync" %i1[%it] -> %s1
// CHECK-NEXT:      cute.cp_async_commit
// CHECK-NEXT:      cute.cp_async_wait 1
// CHECK-NEXT:      cute.barrier
// CHECK-NEXT:      cute.elementwise "id"(%s0) [#cute.fn<square>, #cute.fn<mul_scalar(0.000244140625)>, #cute.fn<clamp(-1.5,2.0)>] "add" %s2
// CHECK-NEXT:      cute.mma %racc, %s0, %s1
// CHECK-NEXT:      cute.barrier
// CHECK-NEXT:    }
// CHECK-NEXT:    cute.frag_store %racc [] "store" %s3
// CHECK:         cute.reduce "sum" %s2 [#cute.fn<sqrt>] "store" %s4 {dim = 1 : i64, group = 1 : i64, threads = 32 : i64, order = array<i64: 0, 1>}
// CHECK:         cute.copy_s2g "chunked" %s5 -> %o0

// CHECK-GENERIC:       "cute.kernel"(%x, %w) <{kernel_name = "g_k0"
// CHECK-GENERIC:       "cute.smem_alloc"() <{offsets = array<i64: 128, 640>}> : () -> !cute.smem<f16, (2,128):(128,1), xor<3,3,4>>
// CHECK-GENERIC:       "cute.for"() <{upper = 32 : i64}> ({
// CHECK-GENERIC-NEXT:  ^bb0(%it: index):
// CHECK-GENERIC:         "cute.yield"() : () -> ()

// -----

// Running max (online softmax), rescale accumulators, concat and the FMA fallback.
func.func @misc(%x: tensor<4x64xf32>) -> tensor<4x128xf32> {
  %o = cute.kernel(%x) attributes {kernel_name = "misc_k0", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 64, 1, 1>, smem_size = 24576 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 128, 1>, array<i64: 64, 1>]} : (tensor<4x64xf32>) -> tensor<4x128xf32> {
  ^bb0(%o0: tensor<4x128xf32>, %i0: tensor<4x64xf32>):
    %a = cute.smem_alloc [128] : !cute.smem<f32, (4,64):(64,1)>
    %m = cute.smem_alloc [1152] : !cute.smem<f32, (4,1):(1,4)>
    %d = cute.smem_alloc [1168] : !cute.smem<f32, (4,1):(1,4)>
    %c = cute.smem_alloc [2048] : !cute.smem<f32, (4,128):(128,1)>
    %p = cute.smem_alloc [4096] : !cute.smem<f32, (64,64):(64,1)>
    cute.fill %m, -inf : !cute.smem<f32, (4,1):(1,4)>
    cute.copy_g2s "sync" %i0 -> %a {tile = #cute.layout<(4,64):(64,1)>, block_offset = array<i64: 0, 0, 0>, vec = 1 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64} : tensor<4x64xf32> -> !cute.smem<f32, (4,64):(64,1)>
    cute.barrier
    cute.reduce "max" %a [] "store" %m, %d {dim = 1 : i64, group = 1 : i64, threads = 16 : i64, order = array<i64: 0, 1>} : !cute.smem<f32, (4,64):(64,1)> -> !cute.smem<f32, (4,1):(1,4)>, !cute.smem<f32, (4,1):(1,4)>
    cute.elementwise "id"(%a, %m) [#cute.fn<exp>] "rescale" %a {order = array<i64: 1, 0>} : !cute.smem<f32, (4,64):(64,1)>, !cute.smem<f32, (4,1):(1,4)> -> !cute.smem<f32, (4,64):(64,1)>
    cute.concat %a, %a [#cute.fn<relu>] "store" %c {dim = 1 : i64, order = array<i64: 1, 0>} : !cute.smem<f32, (4,64):(64,1)>, !cute.smem<f32, (4,64):(64,1)> -> !cute.smem<f32, (4,128):(128,1)>
    %f = cute.mma_init : !cute.frag<4x64xf32, #cute.tiled_mma<UniversalFMA, (64,1)>>
    cute.mma %f, %a, %p : !cute.frag<4x64xf32, #cute.tiled_mma<UniversalFMA, (64,1)>>, !cute.smem<f32, (4,64):(64,1)>, !cute.smem<f32, (64,64):(64,1)>
    cute.frag_store %f [#cute.fn<gelu>] "add" %a : !cute.frag<4x64xf32, #cute.tiled_mma<UniversalFMA, (64,1)>> -> !cute.smem<f32, (4,64):(64,1)>
    cute.copy_s2g "sync" %c -> %o0 {tile = #cute.layout<(4,128):(128,1)>, block_offset = array<i64: 0, 0, 0>, vec = 1 : i64} : !cute.smem<f32, (4,128):(128,1)> -> tensor<4x128xf32>
  }
  func.return %o : tensor<4x128xf32>
}

// CHECK-LABEL: func.func @misc
// CHECK:       cute.fill %m, -inf : !cute.smem<f32, (4,1):(1,4)>
// CHECK:       cute.reduce "max" %a [] "store" %m, %d
// CHECK:       cute.elementwise "id"(%a, %m) [#cute.fn<exp>] "rescale" %a
// CHECK:       cute.concat %a, %a [#cute.fn<relu>] "store" %c {dim = 1 : i64
// CHECK:       cute.mma_init : !cute.frag<4x64xf32, #cute.tiled_mma<UniversalFMA, (64,1)>>
// CHECK:       cute.frag_store %f [#cute.fn<gelu>] "add" %a

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "misc"
// CHECK-GENERIC:       "cute.fill"(%m) <{value = 0xfff0000000000000 : f64}>

// -----

// A view: the copies start view_offset elements into their DTensor (the second half of X's rows).
func.func @view(%x: tensor<4x64xf16>) -> tensor<4x64xf16> {
  %o = cute.kernel(%x) attributes {kernel_name = "v", grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 1024 : i64, forloop_range = 1 : i64, arg_strides = [array<i64: 64, 1>, array<i64: 64, 1>]} : (tensor<4x64xf16>) -> tensor<4x64xf16> {
  ^bb0(%o0: tensor<4x64xf16>, %i0: tensor<4x64xf16>):
    %s = cute.smem_alloc [128] : !cute.smem<f16, (4,32):(32,1)>
    cute.copy_g2s "chunked" %i0 -> %s {tile = #cute.layout<(4,32):(64,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, iter_stride = 0 : i64, iter_offset = 0 : i64, view_offset = 32 : i64} : tensor<4x64xf16> -> !cute.smem<f16, (4,32):(32,1)>
    cute.barrier
    cute.copy_s2g "chunked" %s -> %o0 {tile = #cute.layout<(4,32):(64,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64} : !cute.smem<f16, (4,32):(32,1)> -> tensor<4x64xf16>
    cute.copy_s2g "chunked" %s -> %o0 {tile = #cute.layout<(4,32):(64,1)>, block_offset = array<i64: 0, 0, 0>, vec = 8 : i64, view_offset = 32 : i64} : !cute.smem<f16, (4,32):(32,1)> -> tensor<4x64xf16>
  }
  func.return %o : tensor<4x64xf16>
}

// CHECK-LABEL: func.func @view
// CHECK:       cute.copy_g2s "chunked" %i0 -> %s {{{.*}}view_offset = 32 : i64}
// CHECK:       cute.copy_s2g "chunked" %s -> %o0 {{{.*}}vec = 8 : i64}
// CHECK:       cute.copy_s2g "chunked" %s -> %o0 {{{.*}}view_offset = 32 : i64}
// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "view"
// CHECK-GENERIC:       "cute.copy_g2s"{{.*}}view_offset = 32 : i64

// -----

// The sm_90a flash-attention kernel (kn-partition's attention groups): operands, scale, the
// optional causal offset and the tile options.
func.func @flash(%q: tensor<2x128x64xbf16>, %k: tensor<2x64x256xbf16>, %v: tensor<2x256x64xbf16>) -> tensor<2x128x64xbf16> {
  %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "flash_attention_0", scale = 1.250000e-01 : f64, consumers = 1 : i64, key_tile = 64 : i64, stages = 2 : i64, causal_offset = 128 : i64} : (tensor<2x128x64xbf16>, tensor<2x64x256xbf16>, tensor<2x256x64xbf16>) -> tensor<2x128x64xbf16>
  func.return %o : tensor<2x128x64xbf16>
}

// CHECK-LABEL: func.func @flash
// CHECK:       %o = cute.hopper_attention(%q, %k, %v) {kernel_name = "flash_attention_0", scale = 1.250000e-01 : f64, consumers = 1 : i64, key_tile = 64 : i64, stages = 2 : i64, causal_offset = 128 : i64}
// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "flash"
// CHECK-GENERIC:       "cute.hopper_attention"(%q, %k, %v) <{kernel_name = "flash_attention_0"

// -----

// The split-key decode kernel (kn-partition's decode attention groups): operands, scale, the
// kernel options and the partials' workspace offset.
func.func @decode(%q: tensor<2x4x64xbf16>, %k: tensor<2x64x1024xbf16>, %v: tensor<2x1024x64xbf16>) -> tensor<2x4x64xbf16> {
  %o = cute.decode_attention(%q, %k, %v) {kernel_name = "decode_attention_0", scale = 1.250000e-01 : f64, splits = 4 : i64, warps = 8 : i64, stages = 3 : i64, scratch_offset = 256 : i64} : (tensor<2x4x64xbf16>, tensor<2x64x1024xbf16>, tensor<2x1024x64xbf16>) -> tensor<2x4x64xbf16>
  func.return %o : tensor<2x4x64xbf16>
}

// CHECK-LABEL: func.func @decode
// CHECK:       %o = cute.decode_attention(%q, %k, %v) {kernel_name = "decode_attention_0", scale = 1.250000e-01 : f64, splits = 4 : i64, warps = 8 : i64, stages = 3 : i64, scratch_offset = 256 : i64}
// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "decode"
// CHECK-GENERIC:       "cute.decode_attention"(%q, %k, %v) <{kernel_name = "decode_attention_0"
