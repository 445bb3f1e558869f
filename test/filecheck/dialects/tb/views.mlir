// Views round-trip: tb.input view_offset / view_shape (a box of the dtensor) and tb.output
// result_index / view_offset (a box of a kn.customized result), here a rotate-half of X:
// the output is concat(x2, x1) of the halves x1, x2 of X's last dim.
// RUN: mirage-opt %s | mirage-opt | filecheck %s

func.func @swap(%X: tensor<8x16xf16>) -> tensor<8x16xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x16xf16>) -> tensor<8x16xf16> {
  ^bb0(%x: tensor<8x16xf16>):
    %a = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 0>, view_shape = array<i64: 8, 8>} : tensor<8x16xf16> -> !tb.stensor<4x8xf16>
    %b = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 8>, view_shape = array<i64: 8, 8>} : tensor<8x16xf16> -> !tb.stensor<4x8xf16>
    %sa = tb.forloop_accum nored %a : !tb.stensor<4x8xf16> -> !tb.stensor<4x8xf16, after_accum>
    %sb = tb.forloop_accum nored %b : !tb.stensor<4x8xf16> -> !tb.stensor<4x8xf16, after_accum>
    tb.output %sb {output_map = array<i64: 0, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 0>} : !tb.stensor<4x8xf16, after_accum>
    tb.output %sa {output_map = array<i64: 0, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 8>} : !tb.stensor<4x8xf16, after_accum>
  }
  func.return %O : tensor<8x16xf16>
}
// CHECK: tb.input %{{.*}} {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 0>, view_shape = array<i64: 8, 8>}
// CHECK: tb.input %{{.*}} {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 8>, view_shape = array<i64: 8, 8>}
// CHECK: tb.output %{{.*}} {output_map = array<i64: 0, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 0>}
// CHECK: tb.output %{{.*}} {output_map = array<i64: 0, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 8>}
