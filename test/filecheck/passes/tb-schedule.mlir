// RUN: mirage-opt %s -p tb-schedule --split-input-file | filecheck %s

// rmsnorm_bs1 graph 0 (mirage-notes 2.3) after tb-decompose-accumulators, tb-fusion-chains,
// tb-resolve-layout and tb-compute-strides. Expected (notes 2.3): no pre-loop ops; loop
// level 0 = both inputs (chunked, pipelined), one barrier, level 1 = the chains
// [square, mul_scalar, nored] and [matmul, nored] (both accumulators in registers: the
// matmul's by Mirage's rule, the fp32 sum of squares by ours); post-loop
// [reduction, sqrt] | [div] | [output], two barriers: 3 in all.

// CHECK-LABEL: func.func @graph_0
// CHECK:         kn.customized
// CHECK-SAME:      tb.num_barriers = 3 : i64
// CHECK:         %t1 = tb.input %x {{{.*}}tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64
// CHECK-NEXT:    %t2 = tb.input %w {{{.*}}tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64
// CHECK-NEXT:    %t3 = tb.square %t1 {{{.*}}tb.stage = "loop", tb.level = 1 : i64
// CHECK-NEXT:    %t3_1 = tb.mul_scalar %t3 {{{.*}}tb.stage = "loop", tb.level = 1 : i64
// CHECK-NEXT:    %t3_2 = tb.forloop_accum nored %t3_1 {{{.*}}tb.num_phy_elems = array<i64: 256>, tb.accum_in_reg, tb.stage = "loop", tb.level = 1 : i64
// CHECK-NEXT:    %t4 = tb.matmul %t1, %t2 {{{.*}}tb.stage = "loop", tb.level = 1 : i64
// CHECK-NEXT:    %t5 = tb.forloop_accum nored %t4 {{{.*}}tb.accum_in_reg, tb.stage = "loop", tb.level = 1 : i64
// CHECK-NEXT:    %t3_3 = tb.reduction %t3_2 {{{.*}}tb.stage = "post", tb.level = 1 : i64
// CHECK-NEXT:    %t3_4 = tb.sqrt %t3_3 {{{.*}}tb.stage = "post", tb.level = 1 : i64
// CHECK-NEXT:    %t6 = tb.div %t5, %t3_4 {{{.*}}tb.stage = "post", tb.level = 2 : i64
// CHECK-NEXT:    tb.output %t6 {{{.*}}tb.chunked, tb.stage = "post", tb.level = 3 : i64

func.func @graph_0(%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>}) -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>}) {
  %O = kn.customized(%X, %W) attributes {grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64, reduction_dimx = 64 : i64} : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
  ^bb0(%x: tensor<2x4096xf16>, %w: tensor<4096x6144xf16>):
    %t1 = tb.input %x {tb.chain = 0 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>, input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x128xf16>
    %t2 = tb.input %w {tb.chain = 1 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 3072>, input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<128x24xf16>
    %t3 = tb.square %t1 {tb.chain = 2 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.iter_dim = 1 : i64, tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>} : !tb.stensor<2x128xf16>
    %t3_1 = tb.mul_scalar %t3 {tb.chain = 2 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>, scalar = 0.000244140625 : f64} : !tb.stensor<2x128xf16>
    %t3_2 = tb.forloop_accum nored %t3_1 {tb.chain = 2 : i64, tb.chain_pos = 2 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>} : !tb.stensor<2x128xf16> -> !tb.stensor<2x128xf16, after_accum>
    %t3_3 = tb.reduction %t3_2 {tb.chain = 5 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 0>, tb.swizzled = array<i64: -1>, tb.iter_dim = 0 : i64, tb.strides = [array<i64: 1, 8>], tb.num_phy_elems = array<i64: 8>, dim = 1 : i64} : !tb.stensor<2x128xf16, after_accum> -> !tb.stensor<2x1xf16, after_accum>
    %t3_4 = tb.sqrt %t3_3 {tb.chain = 5 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 0>, tb.swizzled = array<i64: -1>, tb.strides = [array<i64: 1, 8>], tb.num_phy_elems = array<i64: 8>} : !tb.stensor<2x1xf16, after_accum>
    %t4 = tb.matmul %t1, %t2 {tb.chain = 7 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 48>} : !tb.stensor<2x128xf16>, !tb.stensor<128x24xf16> -> !tb.stensor<2x24xf16>
    %t5 = tb.forloop_accum nored %t4 {tb.chain = 7 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 48>} : !tb.stensor<2x24xf16> -> !tb.stensor<2x24xf16, after_accum>
    %t6 = tb.div %t5, %t3_4 {tb.chain = 9 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: -1>, tb.iter_dim = 1 : i64, tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 48>} : !tb.stensor<2x24xf16, after_accum>, !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x24xf16, after_accum>
    tb.output %t6 {tb.chain = 10 : i64, tb.chain_pos = 0 : i64, output_map = array<i64: 1, -1, -1>} : !tb.stensor<2x24xf16, after_accum>
  }
  func.return %O : tensor<2x6144xf16>
}

// -----

// Without the earlier passes' attributes every op is its own chain and tiles are row-major.
// %ta: loaded once before the loop; its row stride (60 halves = 120 B) is not a multiple of
// 16 B, so no chunked copy. %tb: chunked (block offset 256, loop step 64, stride 4096) and
// pipelined. The [matmul, nored] accumulator needs 16*64/128 = 8 registers per thread.
// The second output stores the fp32 accumulator tile into an fp16 tensor: element-wise
// conversion, not chunked. The outputs keep their order (result k = k-th tb.output) even
// though the second one could run a level earlier.

// CHECK-LABEL: func.func @pre_loop
// CHECK:         kn.customized
// CHECK-SAME:      tb.num_barriers = 2 : i64
// CHECK:         %ta = tb.input %a {tb.stage = "pre", tb.level = 0 : i64, input_map
// CHECK-NEXT:    %tb = tb.input %b {tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64
// CHECK-NEXT:    %m = tb.matmul %ta, %tb {tb.stage = "loop", tb.level = 1 : i64}
// CHECK-NEXT:    %acc = tb.forloop_accum nored %m {tb.accum_in_reg, tb.stage = "loop", tb.level = 1 : i64}
// CHECK-NEXT:    %e = tb.exp %acc {tb.stage = "post", tb.level = 1 : i64}
// CHECK-NEXT:    tb.output %e {tb.chunked, tb.stage = "post", tb.level = 2 : i64
// CHECK-NEXT:    tb.output %acc {tb.stage = "post", tb.level = 2 : i64

func.func @pre_loop(%A: tensor<16x60xf16> {kn.strides = array<i64: 60, 1>}, %B: tensor<60x4096xf16> {kn.strides = array<i64: 4096, 1>}) -> (tensor<16x1024xf16>, tensor<16x1024xf16>) {
  %O:2 = kn.customized(%A, %B) attributes {grid_dim = array<i64: 16, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<16x60xf16>, tensor<60x4096xf16>) -> (tensor<16x1024xf16>, tensor<16x1024xf16>) {
  ^bb0(%a: tensor<16x60xf16>, %b: tensor<60x4096xf16>):
    %ta = tb.input %a {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<16x60xf16> -> !tb.stensor<16x60xf16>
    %tb = tb.input %b {input_map = array<i64: 1, -1, -1>, forloop_dim = 1 : i64} : tensor<60x4096xf16> -> !tb.stensor<60x64xf16>
    %m = tb.matmul %ta, %tb : !tb.stensor<16x60xf16>, !tb.stensor<60x64xf16> -> !tb.stensor<16x64xf16>
    %acc = tb.forloop_accum nored %m : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    %e = tb.exp %acc : !tb.stensor<16x64xf16, after_accum>
    tb.output %e {output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
    tb.output %acc {output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
  }
  func.return %O#0, %O#1 : tensor<16x1024xf16>, tensor<16x1024xf16>
}

// -----

// Register budget: a [matmul, nored] accumulator of 128x256 elements needs 256 fp32
// registers per thread (> 192): it stays in shared memory.

// CHECK-LABEL: func.func @big_accum
// CHECK:         %acc = tb.forloop_accum nored %m {tb.stage = "loop", tb.level = 1 : i64}

func.func @big_accum(%A: tensor<128x256xf16>, %B: tensor<256x256xf16>) -> tensor<128x256xf16> {
  %O = kn.customized(%A, %B) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<128x256xf16>, tensor<256x256xf16>) -> tensor<128x256xf16> {
  ^bb0(%a: tensor<128x256xf16>, %b: tensor<256x256xf16>):
    %ta = tb.input %a {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<128x256xf16> -> !tb.stensor<128x64xf16>
    %tb = tb.input %b {input_map = array<i64: -1, -1, -1>, forloop_dim = 0 : i64} : tensor<256x256xf16> -> !tb.stensor<64x256xf16>
    %m = tb.matmul %ta, %tb : !tb.stensor<128x64xf16>, !tb.stensor<64x256xf16> -> !tb.stensor<128x256xf16>
    %acc = tb.forloop_accum nored %m : !tb.stensor<128x256xf16> -> !tb.stensor<128x256xf16, after_accum>
    tb.output %acc {output_map = array<i64: -1, -1, -1>} : !tb.stensor<128x256xf16, after_accum>
  }
  func.return %O : tensor<128x256xf16>
}

// -----

// Fewest barriers, then the lowest peak: %q (a 64x256 broadcast, 32 KiB) may run at post
// level 1 or 2 without adding a barrier. At level 1 it would coexist with the 16 KiB fp32
// accumulator %big (freed after %r at the end of level 1); the schedule puts it at level 2.

// CHECK-LABEL: func.func @slack
// CHECK:         tb.num_barriers = 5 : i64
// CHECK:         %r = tb.reduction %big {{{.*}}tb.stage = "post", tb.level = 1 : i64
// CHECK-NEXT:    %v = tb.add %r, %acs {{{.*}}tb.level = 2 : i64
// CHECK-NEXT:    %q = tb.add %acs, %acr {{{.*}}tb.level = 2 : i64
// CHECK-NEXT:    %w = tb.add %v, %v {{{.*}}tb.level = 3 : i64
// CHECK-NEXT:    %s = tb.reduction %q {{{.*}}tb.level = 3 : i64
// CHECK-NEXT:    %f = tb.add %w, %s {{{.*}}tb.level = 4 : i64
// CHECK-NEXT:    tb.output %f {{{.*}}tb.level = 5 : i64

func.func @slack(%X: tensor<64x256xf16>, %Y: tensor<4x256xf16>) -> tensor<64x1xf16> {
  %O = kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<64x256xf16>, tensor<4x256xf16>) -> tensor<64x1xf16> {
  ^bb0(%x: tensor<64x256xf16>, %y: tensor<4x256xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<64x256xf16> -> !tb.stensor<64x64xf16>
    %u = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = 0 : i64} : tensor<4x256xf16> -> !tb.stensor<1x256xf16>
    %big = tb.forloop_accum nored %t : !tb.stensor<64x64xf16> -> !tb.stensor<64x64xf16, after_accum>
    %rs = tb.reduction %t {dim = 1 : i64} : !tb.stensor<64x64xf16> -> !tb.stensor<64x1xf16>
    %acs = tb.forloop_accum nored %rs : !tb.stensor<64x1xf16> -> !tb.stensor<64x1xf16, after_accum>
    %acr = tb.forloop_accum nored %u : !tb.stensor<1x256xf16> -> !tb.stensor<1x256xf16, after_accum>
    %r = tb.reduction %big {dim = 1 : i64} : !tb.stensor<64x64xf16, after_accum> -> !tb.stensor<64x1xf16, after_accum>
    %v = tb.add %r, %acs : !tb.stensor<64x1xf16, after_accum>, !tb.stensor<64x1xf16, after_accum> -> !tb.stensor<64x1xf16, after_accum>
    %w = tb.add %v, %v : !tb.stensor<64x1xf16, after_accum>, !tb.stensor<64x1xf16, after_accum> -> !tb.stensor<64x1xf16, after_accum>
    %q = tb.add %acs, %acr : !tb.stensor<64x1xf16, after_accum>, !tb.stensor<1x256xf16, after_accum> -> !tb.stensor<64x256xf16, after_accum>
    %s = tb.reduction %q {dim = 1 : i64} : !tb.stensor<64x256xf16, after_accum> -> !tb.stensor<64x1xf16, after_accum>
    %f = tb.add %w, %s : !tb.stensor<64x1xf16, after_accum>, !tb.stensor<64x1xf16, after_accum> -> !tb.stensor<64x1xf16, after_accum>
    tb.output %f {output_map = array<i64: -1, -1, -1>} : !tb.stensor<64x1xf16, after_accum>
  }
  func.return %O : tensor<64x1xf16>
}
