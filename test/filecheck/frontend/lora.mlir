// RUN: mirage-opt %mugraphs/lora.json | filecheck %s

// X @ W + (X @ A) @ B in one kernel: three tb.matmul, add, nored.

// CHECK-LABEL: func.func @graph_0(
// CHECK-SAME:    tensor<16x256xf16> {kn.strides = array<i64: 256, 1>}
// CHECK-SAME:    tensor<256x4096xf16>
// CHECK-SAME:    tensor<256x16xf16>
// CHECK-SAME:    tensor<16x4096xf16>
// CHECK-NEXT:    kn.customized
// CHECK-SAME:      grid_dim = array<i64: 64, 1, 1>
// CHECK-SAME:      forloop_range = 1 : i64
// CHECK:           [[X:%[0-9]+]] = tb.input {{.*}} -> !tb.stensor<16x256xf16>
// CHECK-NEXT:      [[W:%[0-9]+]] = tb.input {{.*}} -> !tb.stensor<256x64xf16>
// CHECK-NEXT:      [[A:%[0-9]+]] = tb.input {{.*}} -> !tb.stensor<256x16xf16>
// CHECK-NEXT:      [[B:%[0-9]+]] = tb.input {{.*}} -> !tb.stensor<16x64xf16>
// CHECK-NEXT:      [[XW:%[0-9]+]] = tb.matmul [[X]], [[W]]
// CHECK-NEXT:      [[XA:%[0-9]+]] = tb.matmul [[X]], [[A]]
// CHECK-NEXT:      [[XAB:%[0-9]+]] = tb.matmul [[XA]], [[B]]
// CHECK-NEXT:      [[S:%[0-9]+]] = tb.add [[XAB]], [[XW]]
// CHECK-NEXT:      [[R:%[0-9]+]] = tb.forloop_accum nored [[S]]
// CHECK-NEXT:      tb.output [[R]] {output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
// CHECK:       func.func @graph_3(
// CHECK-NOT:   func.func @graph_4(
