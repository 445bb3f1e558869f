// RUN: mirage-opt %mugraphs/rmsnorm_bs8.json | filecheck %s

// X [16,4096]: forloop 4 gives 16x1024 tiles of X and 1024x24 tiles of W.

// CHECK-LABEL: func.func @graph_0(
// CHECK-SAME:    tensor<16x4096xf16> {kn.strides = array<i64: 4096, 1>}
// CHECK:         kn.customized
// CHECK-SAME:      grid_dim = array<i64: 256, 1, 1>
// CHECK-SAME:      forloop_range = 4 : i64
// CHECK:           tb.input {{%[0-9]+}} {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<16x4096xf16> -> !tb.stensor<16x1024xf16>
// CHECK-NEXT:      tb.input {{%[0-9]+}} {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<1024x24xf16>
// CHECK-NEXT:      tb.forloop_accum red_ld_rms {{%[0-9]+}} : !tb.stensor<16x1024xf16> -> !tb.stensor<16x1xf16, after_accum>
// CHECK:           tb.output {{%[0-9]+}} {output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x24xf16, after_accum>
// CHECK:         func.return {{%[0-9]+}} : tensor<16x6144xf16>
// CHECK:       func.func @graph_19(
// CHECK-NOT:   func.func @graph_20(
