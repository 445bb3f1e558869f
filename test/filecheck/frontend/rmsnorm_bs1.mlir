// RUN: mirage-opt %mugraphs/rmsnorm_bs1.json | filecheck %s
// RUN: mirage-opt %mugraphs/rmsnorm_bs1.json | filecheck %s --check-prefix=COUNT

// Graph 0 of rmsnorm_bs1.json, fully decoded in mirage-notes 2.3: X [2,4096] tiles 2x128
// along the for-loop, W [4096,6144] tiles 128x24 (grid x -> dim 1, loop -> dim 0),
// rms(X) by a red_ld_rms accumulator, X@W by matmul + nored, div, output omap x -> 1.

// CHECK-LABEL: func.func @graph_0(
// CHECK-SAME:    [[X:%[0-9]+]]: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>}
// CHECK-SAME:    [[W:%[0-9]+]]: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>}
// CHECK-SAME:    -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>})
// CHECK-NEXT:    [[O:%[0-9]+]] = kn.customized([[X]], [[W]])
// CHECK-SAME:      grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64, reduction_dimx = 64 : i64
// CHECK-SAME:      : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16>
// CHECK-NEXT:    ^bb0([[BX:%[0-9]+]]: tensor<2x4096xf16>, [[BW:%[0-9]+]]: tensor<4096x6144xf16>):
// CHECK-NEXT:      [[T1:%[0-9]+]] = tb.input [[BX]] {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x128xf16>
// CHECK-NEXT:      [[T2:%[0-9]+]] = tb.input [[BW]] {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<128x24xf16>
// CHECK-NEXT:      [[T3:%[0-9]+]] = tb.forloop_accum red_ld_rms [[T1]] : !tb.stensor<2x128xf16> -> !tb.stensor<2x1xf16, after_accum>
// CHECK-NEXT:      [[T4:%[0-9]+]] = tb.matmul [[T1]], [[T2]] : !tb.stensor<2x128xf16>, !tb.stensor<128x24xf16> -> !tb.stensor<2x24xf16>
// CHECK-NEXT:      [[T5:%[0-9]+]] = tb.forloop_accum nored [[T4]] : !tb.stensor<2x24xf16> -> !tb.stensor<2x24xf16, after_accum>
// CHECK-NEXT:      [[T6:%[0-9]+]] = tb.div [[T5]], [[T3]] : !tb.stensor<2x24xf16, after_accum>, !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x24xf16, after_accum>
// CHECK-NEXT:      tb.output [[T6]] {output_map = array<i64: 1, -1, -1>} : !tb.stensor<2x24xf16, after_accum>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return [[O]] : tensor<2x6144xf16>
// CHECK-NEXT:  }
// CHECK-LABEL: func.func @graph_1(

// 18 candidate graphs; the last one is @graph_17.
// COUNT:     func.func @graph_17(
// COUNT-NOT: func.func @graph_18(
