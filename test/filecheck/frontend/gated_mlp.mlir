// RUN: mirage-opt %mugraphs/gated_mlp.json | filecheck %s

// silu(X @ W1) * (X @ W2): one customized kernel with two outputs, then a kernel-level mul.

// CHECK-LABEL: func.func @graph_0(
// CHECK-SAME:    tensor<8x4096xf16>
// CHECK-SAME:    tensor<4096x4096xf16>
// CHECK-SAME:    tensor<4096x4096xf16>
// CHECK-NEXT:    [[A:%[0-9]+]], [[B:%[0-9]+]] = kn.customized
// CHECK-SAME:      grid_dim = array<i64: 128, 1, 1>
// CHECK-SAME:      forloop_range = 64 : i64
// CHECK-SAME:      -> (tensor<8x4096xf16>, tensor<8x4096xf16>)
// CHECK:           tb.input {{%[0-9]+}} {{.*}} -> !tb.stensor<8x64xf16>
// CHECK:           tb.input {{%[0-9]+}} {{.*}} -> !tb.stensor<64x32xf16>
// CHECK:           tb.input {{%[0-9]+}} {{.*}} -> !tb.stensor<64x32xf16>
// CHECK:           [[N1:%[0-9]+]] = tb.forloop_accum nored
// CHECK:           [[S:%[0-9]+]] = tb.silu [[N1]] : !tb.stensor<8x32xf16, after_accum>
// CHECK:           tb.output [[S]] {output_map = array<i64: 1, -1, -1>}
// CHECK:         [[M:%[0-9]+]] = kn.mul [[A]], [[B]] : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
// CHECK-NEXT:    func.return [[M]] : tensor<8x4096xf16>
// CHECK:       func.func @graph_31(
// CHECK-NOT:   func.func @graph_32(
