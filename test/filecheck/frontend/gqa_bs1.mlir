// RUN: mirage-opt %mugraphs/gqa_bs1.json | filecheck %s

// Split-KV attention: kernel 1 (grid 2x8x16, 3-D imaps, two outputs concatenated via omap
// (0,2,1)), kernel 2 sums the partials with red_ld_sum / redtox_ld_sum and divides.

// CHECK-LABEL: func.func @graph_0(
// CHECK-SAME:    tensor<2x256x64xf16> {kn.strides = array<i64: 16384, 64, 1>}
// CHECK-SAME:    tensor<2x64x4096xf16> {kn.strides = array<i64: 262144, 4096, 1>}
// CHECK-SAME:    tensor<2x4096x64xf16> {kn.strides = array<i64: 262144, 64, 1>}
// CHECK-NEXT:    [[P:%[0-9]+]], [[Q:%[0-9]+]] = kn.customized
// CHECK-SAME:      grid_dim = array<i64: 2, 8, 16>
// CHECK-SAME:      forloop_range = 4 : i64
// CHECK-SAME:      -> (tensor<2x256x1024xf16>, tensor<2x256x512xf16>)
// CHECK:           tb.input {{%[0-9]+}} {input_map = array<i64: 0, -1, 1>, forloop_dim = -1 : i64} : tensor<2x256x64xf16> -> !tb.stensor<1x16x64xf16>
// CHECK-NEXT:      tb.input {{%[0-9]+}} {input_map = array<i64: 0, 2, -1>, forloop_dim = 2 : i64} : tensor<2x64x4096xf16> -> !tb.stensor<1x64x128xf16>
// CHECK-NEXT:      tb.input {{%[0-9]+}} {input_map = array<i64: 0, 1, -1>, forloop_dim = 1 : i64} : tensor<2x4096x64xf16> -> !tb.stensor<1x128x64xf16>
// CHECK:           tb.exp
// CHECK:           tb.output {{%[0-9]+}} {output_map = array<i64: 0, 2, 1>} : !tb.stensor<1x16x128xf16, after_accum>
// CHECK-NEXT:      tb.output {{%[0-9]+}} {output_map = array<i64: 0, 2, 1>} : !tb.stensor<1x16x64xf16, after_accum>
// CHECK:         kn.customized([[P]], [[Q]])
// CHECK-SAME:      grid_dim = array<i64: 2, 16, 1>
// CHECK:           tb.forloop_accum red_ld_sum {{%[0-9]+}} : !tb.stensor<1x16x1024xf16> -> !tb.stensor<1x16x1xf16, after_accum>
// CHECK-NEXT:      tb.forloop_accum redtox_ld_sum {{%[0-9]+}} : !tb.stensor<1x16x512xf16> -> !tb.stensor<1x16x64xf16, after_accum>
// CHECK-NEXT:      tb.div
// CHECK:       func.func @graph_27(
// CHECK-NOT:   func.func @graph_28(
