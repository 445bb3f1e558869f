// RUN: mirage-opt %s -p 'mirage-transpile{to-cute=false tuning="stages=6"}' | filecheck %s
// RUN: mirage-opt %mugraphs/rmsnorm_bs1.json -p 'mirage-transpile{lift=false to-cute=false smem-limit=300000 tuning="stages=6"}' | filecheck %s --check-prefix=JSON
// RUN: mirage-opt %mugraphs/rmsnorm_bs1.json -p 'mirage-transpile{lift=false to-cute=false}' 2>&1 | filecheck %s --check-prefix=LIMIT

// rmsnorm_bs1 graph 0 through passes 1-9 reaches the decisions of mirage-notes 2.3:
// * chains [square, nored] (the fp16 red_ld_rms decomposed: square -> nored in f32 ->
//   reduction -> mul_scalar(1/4096) -> sqrt rounding to f16) and [matmul, nored] with the
//   accumulator in registers; post-loop [reduction, mul_scalar, sqrt], [div], [output];
// * schedule: loop level 0 = both inputs (chunked, pipelined), barrier, level 1 = both chains;
//   post-loop levels 1, 2, 3 (3 barriers between levels in all);
// * XOR Swizzle<3,3,4> for the X tile [2,128]; shift without padding for the W tile [128,24].
// Deliberate differences: accumulators are fp32 (passes/README.md), so the register
// accumulator's [2,24] write-back has rows of 6 chunks of 16 B and the shift pads them to 7
// (28 floats, Mirage: 3 fp16 chunks, no padding); the rms accumulator [2,128] is fp32 too
// and, like the matmul's, lives in registers through the loop (Mirage: shared memory), so
// its tile only takes shared memory after the loop.
// Mirage double-buffers the pipelined inputs; tb-plan-pipeline loads them 6 stages deep
// (2 blocks per SM x 5 tiles of 6656 B in flight >= 64 KiB), hence 40064 B of shared memory.

// CHECK-LABEL: func.func @graph_0
// CHECK:         kn.customized
// CHECK-SAME:      tb.num_barriers = 3 : i64, tb.smem_size = 40064 : i64
// CHECK:         %t1 = tb.input %x {tb.chain = 0 : i64, tb.chain_pos = 0 : i64
// CHECK-SAME:      tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["xor<3,3,4>"], tb.stages = 6 : i64, tb.smem_offset = array<i64: 128>, tb.smem_offsets_pipeline = array<i64: 128, 640, 1152, 1664, 2176, 2688>
// CHECK-NEXT:    %t2 = tb.input %w {tb.chain = 1 : i64, tb.chain_pos = 0 : i64
// CHECK-SAME:      tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 3072>, tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["shift"]
// CHECK-NEXT:    %[[SQ:.*]] = tb.square %t1 {tb.chain = [[C1:[0-9]+]] : i64, tb.chain_pos = 0 : i64
// CHECK-SAME:      tb.stage = "loop", tb.level = 1 : i64, tb.swizzle = ["none"], tb.smem_offset = array<i64: -1>
// CHECK-NEXT:    %[[RMS:.*]] = tb.forloop_accum nored %[[SQ]] {tb.chain = [[C1]] : i64, tb.chain_pos = 1 : i64
// CHECK-SAME:      tb.accum_in_reg, tb.stage = "loop", tb.level = 1 : i64
// CHECK-NEXT:    %t4 = tb.matmul %t1, %t2 {tb.chain = [[C2:[0-9]+]] : i64, tb.chain_pos = 0 : i64
// CHECK-SAME:      tb.level = 1 : i64, tb.swizzle = ["none"], tb.smem_offset = array<i64: -1>
// CHECK-NEXT:    %t5 = tb.forloop_accum nored %t4 {tb.chain = [[C2]] : i64, tb.chain_pos = 1 : i64
// CHECK-SAME:      tb.strides = [array<i64: 28, 1>], tb.num_phy_elems = array<i64: 56>, tb.accum_in_reg, tb.stage = "loop", tb.level = 1 : i64, tb.swizzle = ["shift"]
// CHECK-NEXT:    %[[RED:.*]] = tb.reduction %[[RMS]] {tb.chain = [[C3:[0-9]+]] : i64, tb.chain_pos = 0 : i64
// CHECK-SAME:      tb.stage = "post", tb.level = 1 : i64
// CHECK-NEXT:    %[[MEAN:.*]] = tb.mul_scalar %[[RED]] {tb.chain = [[C3]] : i64, tb.chain_pos = 1 : i64
// CHECK-SAME:      tb.stage = "post", tb.level = 1 : i64, tb.swizzle = ["none"], tb.smem_offset = array<i64: -1>, scalar = 0.000244140625 : f64
// CHECK-NEXT:    %[[SQRT:.*]] = tb.sqrt %[[MEAN]] {tb.chain = [[C3]] : i64, tb.chain_pos = 2 : i64
// CHECK-SAME:      tb.stage = "post", tb.level = 1 : i64
// CHECK-NEXT:    %t6 = tb.div %t5, %[[SQRT]] {{{.*}}tb.stage = "post", tb.level = 2 : i64
// CHECK-NEXT:    tb.output %t6 {{{.*}}tb.chunked, tb.stage = "post", tb.level = 3 : i64

func.func @graph_0(%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>}) -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>}) {
  %O = kn.customized(%X, %W) attributes {grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64, reduction_dimx = 64 : i64} : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
  ^bb0(%x: tensor<2x4096xf16>, %w: tensor<4096x6144xf16>):
    %t1 = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x128xf16>
    %t2 = tb.input %w {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<128x24xf16>
    %t3 = tb.forloop_accum red_ld_rms %t1 : !tb.stensor<2x128xf16> -> !tb.stensor<2x1xf16, after_accum>
    %t4 = tb.matmul %t1, %t2 : !tb.stensor<2x128xf16>, !tb.stensor<128x24xf16> -> !tb.stensor<2x24xf16>
    %t5 = tb.forloop_accum nored %t4 : !tb.stensor<2x24xf16> -> !tb.stensor<2x24xf16, after_accum>
    %t6 = tb.div %t5, %t3 : !tb.stensor<2x24xf16, after_accum>, !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x24xf16, after_accum>
    tb.output %t6 {output_map = array<i64: 1, -1, -1>} : !tb.stensor<2x24xf16, after_accum>
  }
  func.return %O : tensor<2x6144xf16>
}

// The saved muGraph file itself: graph 0 decides the same.
// JSON-LABEL: func.func @graph_0
// JSON:         tb.num_barriers = 3 : i64, tb.smem_size = 40064 : i64
// JSON:         tb.input {{.*}}tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["xor<3,3,4>"], tb.stages = 6 : i64
// JSON-NEXT:    tb.input {{.*}}tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["shift"], tb.stages = 6 : i64
// JSON:         tb.forloop_accum nored {{.*}}tb.accum_in_reg, tb.stage = "loop", tb.level = 1 : i64
// JSON-LABEL: func.func @graph_1

// Graph 14 (forloop_range 1: whole 2x4096 and 4096x8 tiles copied into accumulators) would
// need 272 KiB with fp32 accumulator tiles, more than sm_90's 227 KiB. With a single
// iteration nothing accumulates, so its accumulators keep their declared type
// (layout_math.stores_fp32): fp16, except the rms statistic's sum of squares, f32 by
// tb-decompose-accumulators (2x4096 fp32, 16 KiB more), and the plan fits.
// LIMIT-LABEL: func.func @graph_14
// LIMIT:         tb.smem_size = 196736 : i64
