// RUN: mirage-opt %mugraphs/gqa_bs8.json | filecheck %s

// CHECK-LABEL: func.func @graph_0(
// CHECK-SAME:    tensor<16x256x64xf16>
// CHECK-NEXT:    [[P:%[0-9]+]], [[Q:%[0-9]+]] = kn.customized
// CHECK-SAME:      grid_dim = array<i64: 16, 16, 4>
// CHECK-SAME:      -> (tensor<16x256x1024xf16>, tensor<16x256x1024xf16>)
// CHECK:           tb.input {{%[0-9]+}} {input_map = array<i64: 0, -1, 1>, forloop_dim = -1 : i64} : tensor<16x256x64xf16> -> !tb.stensor<1x64x64xf16>
// CHECK:         kn.customized([[P]], [[Q]])
// CHECK-SAME:      grid_dim = array<i64: 16, 16, 1>
// CHECK:           tb.forloop_accum redtox_ld_sum {{%[0-9]+}} : !tb.stensor<1x16x1024xf16> -> !tb.stensor<1x16x64xf16, after_accum>
// CHECK:         func.return {{%[0-9]+}} : tensor<16x256x64xf16>
// CHECK:       func.func @graph_9(
// CHECK-NOT:   func.func @graph_10(
