// convert-tb-to-cute lowers every planned kn.customized to a cute.kernel named <func>_k<i>:
// shared tiles become cute.smem_alloc at their tb.smem_offset (a ring of
// tb.smem_offsets_pipeline buffers for cp.async inputs), the matmul + nored accumulator chain
// a register fragment (mma_init / mma in the loop / frag_store after it), the exp epilogue a
// cute.elementwise, the output a copy_s2g. Checked: that program, the SM80 mma.sync atom and
// the UniversalFMA fallback of `tensor-cores=false`, and the located error for pipelined
// inputs whose rings differ in depth.
// RUN: mirage-opt %s -p convert-tb-to-cute --split-input-file --verify-diagnostics | filecheck %s
// RUN: mirage-opt %s -p 'convert-tb-to-cute{tensor-cores=false}' --split-input-file --verify-diagnostics | filecheck %s --check-prefix=FMA

// Input: exp(X @ W), X [16, 128], W [128, 64], grid 2 over N, 2 iterations over K, after
// tb-decompose-accumulators .. tb-plan-smem (every tb.* attribute the pass reads).
func.func @mm(%X: tensor<16x128xf16> {kn.strides = array<i64: 128, 1>, kn.innermost = 1 : i64}, %W: tensor<128x64xf16> {kn.strides = array<i64: 64, 1>, kn.innermost = 1 : i64}) -> (tensor<16x64xf16> {kn.strides = array<i64: 64, 1>}) attributes {mirage.layout_cost = 12216 : i64, mirage.layout_status = "optimal"} {
  %O = kn.customized(%X, %W) attributes {kn.innermost = array<i64: 1>, tb.num_barriers = 2 : i64, tb.smem_size = 12416 : i64, tb.smem_planner = "first-fit", grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 64 : i64} : (tensor<16x128xf16>, tensor<128x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%x: tensor<16x128xf16>, %w: tensor<128x64xf16>):
    %tx = tb.input %x {tb.chain = 0 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 64, 1>], tb.num_phy_elems = array<i64: 1024>, tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["xor<3,3,3>"], tb.stages = 2 : i64, tb.smem_offset = array<i64: 128>, tb.smem_offsets_pipeline = array<i64: 128, 2176>, input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<16x128xf16> -> !tb.stensor<16x64xf16>
    %tw = tb.input %w {tb.chain = 1 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 2048>, tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["xor<2,3,3>"], tb.stages = 2 : i64, tb.smem_offset = array<i64: 4224>, tb.smem_offsets_pipeline = array<i64: 4224, 8320>, input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<128x64xf16> -> !tb.stensor<64x32xf16>
    %mm = tb.matmul %tx, %tw {tb.chain = 2 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>, tb.stage = "loop", tb.level = 1 : i64, tb.swizzle = ["none"], tb.smem_offset = array<i64: -1>} : !tb.stensor<16x64xf16>, !tb.stensor<64x32xf16> -> !tb.stensor<16x32xf16>
    %acc = tb.forloop_accum nored %mm {tb.chain = 2 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>, tb.accum_in_reg, tb.stage = "loop", tb.level = 1 : i64, tb.swizzle = ["xor<3,2,3>"], tb.smem_offset = array<i64: 128>} : !tb.stensor<16x32xf16> -> !tb.stensor<16x32xf16, after_accum>
    %y = tb.exp %acc {tb.chain = 4 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: -1>, tb.iter_dim = 1 : i64, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>, tb.stage = "post", tb.level = 1 : i64, tb.swizzle = ["none"], tb.smem_offset = array<i64: 2176>} : !tb.stensor<16x32xf16, after_accum>
    tb.output %y {tb.chain = 5 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64>, tb.swizzled = array<i64>, tb.strides = [], tb.num_phy_elems = array<i64>, tb.chunked, tb.stage = "post", tb.level = 2 : i64, output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x32xf16, after_accum>
  }
  func.return %O : tensor<16x64xf16>
}

// CHECK-LABEL: func.func @mm
// CHECK:         %O = cute.kernel(%X, %W) attributes {{{.*}}kernel_name = "mm_k0", grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, smem_size = 12416 : i64, forloop_range = 2 : i64
// CHECK-NEXT:    ^bb0(%o0: tensor<16x64xf16>, %i0: tensor<16x128xf16>, %i1: tensor<128x64xf16>):
// CHECK-NEXT:      %s0 = cute.smem_alloc [128, 2176] : !cute.smem<f16, (16,64):(64,1), xor<3,3,3>>
// CHECK-NEXT:      %s1 = cute.smem_alloc [4224, 8320] : !cute.smem<f16, (64,32):(32,1), xor<2,3,3>>
// CHECK-NEXT:      %s2 = cute.smem_alloc [128] : !cute.smem<f32, (16,32):(32,1), xor<3,2,3>>
// CHECK-NEXT:      %s3 = cute.smem_alloc [2176] : !cute.smem<f16, (16,32):(32,1)>
// CHECK-NEXT:      %racc0 = cute.mma_init : !cute.frag<16x32xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
// CHECK-NEXT:      cute.copy_g2s "async" %i0 -> %s0 {{{.*}}iter_stride = 64 : i64, iter_offset = 0 : i64}
// CHECK-NEXT:      cute.copy_g2s "async" %i1 -> %s1 {{{.*}}iter_stride = 4096 : i64, iter_offset = 0 : i64}
// CHECK-NEXT:      cute.cp_async_commit
// CHECK-NEXT:      cute.barrier
// CHECK-NEXT:      cute.for %it = 0 to 2 {
// CHECK-NEXT:        cute.copy_g2s "async" %i0[%it] -> %s0 {{{.*}}iter_offset = 1 : i64}
// CHECK-NEXT:        cute.copy_g2s "async" %i1[%it] -> %s1 {{{.*}}iter_offset = 1 : i64}
// CHECK-NEXT:        cute.cp_async_commit
// CHECK-NEXT:        cute.cp_async_wait 1
// CHECK-NEXT:        cute.barrier
// CHECK-NEXT:        cute.mma %racc0, %s0, %s1
// CHECK-NEXT:        cute.barrier
// CHECK-NEXT:      }
// CHECK-NEXT:      cute.frag_store %racc0 [] "store" %s2
// CHECK-NEXT:      cute.barrier
// CHECK-NEXT:      cute.elementwise "id"(%s2) [#cute.fn<exp>] "store" %s3
// CHECK-NEXT:      cute.barrier
// CHECK-NEXT:      cute.copy_s2g "chunked" %s3 -> %o0
// CHECK-NEXT:    }
// CHECK-NOT:     kn.customized
// CHECK-NOT:     tb.

// FMA-LABEL: func.func @mm
// FMA:         %racc0 = cute.mma_init : !cute.frag<16x32xf32, #cute.tiled_mma<UniversalFMA, (128,1)>>
// FMA-NOT:     SM80_

// -----

// The same graph with a 3-buffer ring on W but 2 on X (one ring index serves both).
func.func @mm(%X: tensor<16x128xf16> {kn.strides = array<i64: 128, 1>, kn.innermost = 1 : i64}, %W: tensor<128x64xf16> {kn.strides = array<i64: 64, 1>, kn.innermost = 1 : i64}) -> (tensor<16x64xf16> {kn.strides = array<i64: 64, 1>}) attributes {mirage.layout_cost = 12216 : i64, mirage.layout_status = "optimal"} {
  %O = kn.customized(%X, %W) attributes {kn.innermost = array<i64: 1>, tb.num_barriers = 2 : i64, tb.smem_size = 12416 : i64, tb.smem_planner = "first-fit", grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 64 : i64} : (tensor<16x128xf16>, tensor<128x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%x: tensor<16x128xf16>, %w: tensor<128x64xf16>):
    %tx = tb.input %x {tb.chain = 0 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 64, 1>], tb.num_phy_elems = array<i64: 1024>, tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["xor<3,3,3>"], tb.stages = 2 : i64, tb.smem_offset = array<i64: 128>, tb.smem_offsets_pipeline = array<i64: 128, 2176>, input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<16x128xf16> -> !tb.stensor<16x64xf16>
    %tw = tb.input %w {tb.chain = 1 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 2048>, tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["xor<2,3,3>"], tb.stages = 2 : i64, tb.smem_offset = array<i64: 4224>, tb.smem_offsets_pipeline = array<i64: 4224, 8320, 12416>, input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<128x64xf16> -> !tb.stensor<64x32xf16>
    %mm = tb.matmul %tx, %tw {tb.chain = 2 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>, tb.stage = "loop", tb.level = 1 : i64, tb.swizzle = ["none"], tb.smem_offset = array<i64: -1>} : !tb.stensor<16x64xf16>, !tb.stensor<64x32xf16> -> !tb.stensor<16x32xf16>
    %acc = tb.forloop_accum nored %mm {tb.chain = 2 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>, tb.accum_in_reg, tb.stage = "loop", tb.level = 1 : i64, tb.swizzle = ["xor<3,2,3>"], tb.smem_offset = array<i64: 128>} : !tb.stensor<16x32xf16> -> !tb.stensor<16x32xf16, after_accum>
    %y = tb.exp %acc {tb.chain = 4 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: -1>, tb.iter_dim = 1 : i64, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>, tb.stage = "post", tb.level = 1 : i64, tb.swizzle = ["none"], tb.smem_offset = array<i64: 2176>} : !tb.stensor<16x32xf16, after_accum>
    tb.output %y {tb.chain = 5 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64>, tb.swizzled = array<i64>, tb.strides = [], tb.num_phy_elems = array<i64>, tb.chunked, tb.stage = "post", tb.level = 2 : i64, output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x32xf16, after_accum>
  }
  func.return %O : tensor<16x64xf16>
}

// CHECK:       convert-tb-to-cute: pipelined inputs of one graph need the same number of stages (3 != 2)
// CHECK:       %tw = "tb.input"(%w)
// CHECK-NEXT:  ^^^^^^^^^^^^^^^^-
// CHECK-NEXT:  | convert-tb-to-cute: pipelined inputs of one graph need the same number of stages (3 != 2); run tb-plan-pipeline and tb-plan-smem
