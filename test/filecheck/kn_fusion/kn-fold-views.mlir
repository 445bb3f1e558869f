// RUN: mirage-opt %s -p kn-fold-views --split-input-file | filecheck %s

// kn-fold-views: a kernel input that is a kn.chunk result becomes a view of the chunked tensor
// (tb.input view_offset / view_shape), a kn.concat of two results of one kernel becomes one
// result written through views (tb.output result_index / view_offset).

// Rotary embedding after kn-partition (examples/suite/suite_rotary_f16.mlir at 64 x 8 x 128):
// one kernel reads X twice through views and writes both halves of one result.
// CHECK-LABEL: func.func @rotary
// CHECK-NOT: kn.chunk
// CHECK: kn.customized(%C, %S, %X)
// CHECK-SAME: -> tensor<64x8x128xf16>
// CHECK: tb.input %{{.*}} {{{.*}}view_offset = array<i64: 0, 0, 0>, view_shape = array<i64: 64, 8, 64>}
// CHECK: tb.input %{{.*}} {{{.*}}view_offset = array<i64: 0, 0, 64>, view_shape = array<i64: 64, 8, 64>}
// CHECK: tb.output %{{.*}} {output_map = array<i64: 0, 1, 2>, result_index = 0 : i64, view_offset = array<i64: 0, 0, 0>}
// CHECK: tb.output %{{.*}} {output_map = array<i64: 0, 1, 2>, result_index = 0 : i64, view_offset = array<i64: 0, 0, 64>}
// CHECK-NOT: kn.concat
// CHECK: func.return

func.func @rotary(%X: tensor<64x8x128xf16>, %C: tensor<64x1x64xf16>, %S: tensor<64x1x64xf16>) -> tensor<64x8x128xf16> {
    %0, %1 = kn.chunk %X {dim = 2 : i64} : tensor<64x8x128xf16> -> tensor<64x8x64xf16>, tensor<64x8x64xf16>
    %2, %3 = kn.customized(%0, %C, %1, %S) attributes {kn.template = "rowwise", kn.smem_estimate = 7296 : i64, kn.cost_estimate_us = 3.724000e+00 : f64, grid_dim = array<i64: 8, 8, 2>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<64x8x64xf16>, tensor<64x1x64xf16>, tensor<64x8x64xf16>, tensor<64x1x64xf16>) -> (tensor<64x8x64xf16>, tensor<64x8x64xf16>) {
    ^bb0(%4: tensor<64x8x64xf16>, %c: tensor<64x1x64xf16>, %5: tensor<64x8x64xf16>, %s: tensor<64x1x64xf16>):
      %6 = tb.input %4 {input_map = array<i64: 0, 1, 2>, forloop_dim = -1 : i64} : tensor<64x8x64xf16> -> !tb.stensor<8x1x32xf16>
      %7 = tb.input %c {input_map = array<i64: 0, -1, 2>, forloop_dim = -1 : i64} : tensor<64x1x64xf16> -> !tb.stensor<8x1x32xf16>
      %8 = tb.input %5 {input_map = array<i64: 0, 1, 2>, forloop_dim = -1 : i64} : tensor<64x8x64xf16> -> !tb.stensor<8x1x32xf16>
      %9 = tb.input %s {input_map = array<i64: 0, -1, 2>, forloop_dim = -1 : i64} : tensor<64x1x64xf16> -> !tb.stensor<8x1x32xf16>
      %10 = tb.mul %6, %7 : !tb.stensor<8x1x32xf16>, !tb.stensor<8x1x32xf16> -> !tb.stensor<8x1x32xf16>
      %11 = tb.mul %8, %9 : !tb.stensor<8x1x32xf16>, !tb.stensor<8x1x32xf16> -> !tb.stensor<8x1x32xf16>
      %12 = tb.sub %10, %11 : !tb.stensor<8x1x32xf16>, !tb.stensor<8x1x32xf16> -> !tb.stensor<8x1x32xf16>
      %13 = tb.mul %8, %7 : !tb.stensor<8x1x32xf16>, !tb.stensor<8x1x32xf16> -> !tb.stensor<8x1x32xf16>
      %14 = tb.mul %6, %9 : !tb.stensor<8x1x32xf16>, !tb.stensor<8x1x32xf16> -> !tb.stensor<8x1x32xf16>
      %15 = tb.add %13, %14 : !tb.stensor<8x1x32xf16>, !tb.stensor<8x1x32xf16> -> !tb.stensor<8x1x32xf16>
      %16 = tb.forloop_accum nored %12 : !tb.stensor<8x1x32xf16> -> !tb.stensor<8x1x32xf16, after_accum>
      tb.output %16 {output_map = array<i64: 0, 1, 2>} : !tb.stensor<8x1x32xf16, after_accum>
      %17 = tb.forloop_accum nored %15 : !tb.stensor<8x1x32xf16> -> !tb.stensor<8x1x32xf16, after_accum>
      tb.output %17 {output_map = array<i64: 0, 1, 2>} : !tb.stensor<8x1x32xf16, after_accum>
    }
    %4 = kn.concat %2, %3 {dim = 2 : i64} : tensor<64x8x64xf16>, tensor<64x8x64xf16> -> tensor<64x8x128xf16>
    func.return %4 : tensor<64x8x128xf16>
  }

// -----

// A chunk of a chunk (offsets add up: the second quarter of dim 1 is X[:, 4:8]); a concat part
// that is also returned is kept as a result of its own and stored twice.
// CHECK-LABEL: func.func @nested
// CHECK: %[[O:.*]], %[[C:.*]] = kn.customized(%X)
// CHECK: tb.input %{{.*}} {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 4>, view_shape = array<i64: 8, 4>}
// CHECK: tb.output %{{.*}} {output_map = array<i64: 0, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 0>}
// CHECK: tb.output %{{.*}} {output_map = array<i64: 0, -1, -1>, result_index = 1 : i64, view_offset = array<i64: 0, 4>}
// CHECK: tb.output %{{.*}} {output_map = array<i64: 0, -1, -1>, result_index = 1 : i64, view_offset = array<i64: 0, 0>}
// CHECK: func.return %[[C]], %[[O]]
func.func @nested(%X: tensor<8x16xf16>) -> (tensor<8x8xf16>, tensor<8x4xf16>) {
  %h0, %h1 = kn.chunk %X {dim = 1 : i64} : tensor<8x16xf16> -> tensor<8x8xf16>, tensor<8x8xf16>
  %q0, %q1 = kn.chunk %h0 {dim = 1 : i64} : tensor<8x8xf16> -> tensor<8x4xf16>, tensor<8x4xf16>
  %O, %P = kn.customized(%q1) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x4xf16>) -> (tensor<8x4xf16>, tensor<8x4xf16>) {
  ^bb0(%x: tensor<8x4xf16>):
    %a = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<8x4xf16> -> !tb.stensor<4x4xf16>
    %e = tb.exp %a : !tb.stensor<4x4xf16>
    %ae = tb.forloop_accum nored %e : !tb.stensor<4x4xf16> -> !tb.stensor<4x4xf16, after_accum>
    %aa = tb.forloop_accum nored %a : !tb.stensor<4x4xf16> -> !tb.stensor<4x4xf16, after_accum>
    tb.output %ae {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x4xf16, after_accum>
    tb.output %aa {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x4xf16, after_accum>
  }
  %c = kn.concat %P, %O {dim = 1 : i64} : tensor<8x4xf16>, tensor<8x4xf16> -> tensor<8x8xf16>
  func.return %c, %O : tensor<8x8xf16>, tensor<8x4xf16>
}

// -----

// Not folded: a concat with a function argument (a library copy), a chunk a library op reads.
// CHECK-LABEL: func.func @kept
// CHECK: kn.chunk
// CHECK: kn.customized(%{{.*}}) {{.*}} -> tensor<8x8xf16>
// CHECK-NOT: view_offset
// CHECK: kn.concat
// CHECK: kn.concat
func.func @kept(%X: tensor<8x16xf16>, %Y: tensor<8x8xf16>) -> (tensor<8x16xf16>, tensor<8x16xf16>) {
  %h0, %h1 = kn.chunk %X {dim = 1 : i64} : tensor<8x16xf16> -> tensor<8x8xf16>, tensor<8x8xf16>
  %O = kn.customized(%Y) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x8xf16>) -> tensor<8x8xf16> {
  ^bb0(%y: tensor<8x8xf16>):
    %a = tb.input %y {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<8x8xf16> -> !tb.stensor<4x8xf16>
    %e = tb.exp %a : !tb.stensor<4x8xf16>
    %ae = tb.forloop_accum nored %e : !tb.stensor<4x8xf16> -> !tb.stensor<4x8xf16, after_accum>
    tb.output %ae {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x8xf16, after_accum>
  }
  %c = kn.concat %O, %Y {dim = 1 : i64} : tensor<8x8xf16>, tensor<8x8xf16> -> tensor<8x16xf16>
  %d = kn.concat %h1, %h0 {dim = 1 : i64} : tensor<8x8xf16>, tensor<8x8xf16> -> tensor<8x16xf16>
  func.return %c, %d : tensor<8x16xf16>, tensor<8x16xf16>
}
