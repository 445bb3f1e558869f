// The view rules of tb.input / tb.output (dialects/views.py) and of the kn.customized results
// they assemble: one broken op per chunk, FileCheck matches the message.  The VALID run makes
// sure that no chunk verifies.
// RUN: mirage-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s
// RUN: mirage-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s --check-prefix=VALID
// VALID-NOT: builtin.module {

func.func @view_without_shape(%X: tensor<8x16xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x16xf16>) -> () {
  ^bb0(%x: tensor<8x16xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 8>} : tensor<8x16xf16> -> !tb.stensor<8x8xf16>
  }
  func.return
}
// CHECK: tb.input: a view needs both view_offset and view_shape (elements per dim)

// -----

func.func @view_outside(%X: tensor<8x16xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x16xf16>) -> () {
  ^bb0(%x: tensor<8x16xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 12>, view_shape = array<i64: 8, 8>} : tensor<8x16xf16> -> !tb.stensor<8x8xf16>
  }
  func.return
}
// CHECK: tb.input: view dim 1: elements [12, 20) are not inside [0, 16)

// -----

func.func @view_tile(%X: tensor<8x16xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x16xf16>) -> () {
  ^bb0(%x: tensor<8x16xf16>):
    %t = tb.input %x {input_map = array<i64: 1, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 8>, view_shape = array<i64: 8, 8>} : tensor<8x16xf16> -> !tb.stensor<8x8xf16>
  }
  func.return
}
// CHECK: tb.input: tile shape (8, 8) does not match the inferred shape (8, 4)

// -----

func.func @overlap(%X: tensor<8x16xf16>) -> tensor<8x16xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x16xf16>) -> tensor<8x16xf16> {
  ^bb0(%x: tensor<8x16xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 0>, view_shape = array<i64: 8, 8>} : tensor<8x16xf16> -> !tb.stensor<8x8xf16>
    %s = tb.forloop_accum nored %a : !tb.stensor<8x8xf16> -> !tb.stensor<8x8xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 0>} : !tb.stensor<8x8xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 4>} : !tb.stensor<8x8xf16, after_accum>
  }
  func.return %O : tensor<8x16xf16>
}
// CHECK: kn.customized: result #0: the boxes of its tb.output ops must cover it exactly once: views at offsets (0, 0) and (0, 4) overlap

// -----

func.func @gap(%X: tensor<8x16xf16>) -> tensor<8x16xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x16xf16>) -> tensor<8x16xf16> {
  ^bb0(%x: tensor<8x16xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 0>, view_shape = array<i64: 8, 8>} : tensor<8x16xf16> -> !tb.stensor<8x8xf16>
    %s = tb.forloop_accum nored %a : !tb.stensor<8x8xf16> -> !tb.stensor<8x8xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 8>} : !tb.stensor<8x8xf16, after_accum>
  }
  func.return %O : tensor<8x16xf16>
}
// CHECK: kn.customized: result #0: the boxes of its tb.output ops must cover it exactly once: the views cover 64 of the 128 elements of a tensor of shape (8, 16)

// -----

func.func @box_outside(%X: tensor<8x16xf16>) -> tensor<8x16xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x16xf16>) -> tensor<8x16xf16> {
  ^bb0(%x: tensor<8x16xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 0>, view_shape = array<i64: 8, 8>} : tensor<8x16xf16> -> !tb.stensor<8x8xf16>
    %s = tb.forloop_accum nored %a : !tb.stensor<8x8xf16> -> !tb.stensor<8x8xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 0>} : !tb.stensor<8x8xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>, result_index = 0 : i64, view_offset = array<i64: 0, 9>} : !tb.stensor<8x8xf16, after_accum>
  }
  func.return %O : tensor<8x16xf16>
}
// CHECK: kn.customized: result #0: the boxes of its tb.output ops must cover it exactly once: view dim 1: elements [9, 17) are not inside [0, 16)

// -----

func.func @some_named(%X: tensor<8x16xf16>) -> (tensor<8x8xf16>, tensor<8x8xf16>) {
  %O, %P = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x16xf16>) -> (tensor<8x8xf16>, tensor<8x8xf16>) {
  ^bb0(%x: tensor<8x16xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 0>, view_shape = array<i64: 8, 8>} : tensor<8x16xf16> -> !tb.stensor<8x8xf16>
    %s = tb.forloop_accum nored %a : !tb.stensor<8x8xf16> -> !tb.stensor<8x8xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>, result_index = 1 : i64} : !tb.stensor<8x8xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x8xf16, after_accum>
  }
  func.return %O, %P : tensor<8x8xf16>, tensor<8x8xf16>
}
// CHECK: kn.customized: either every tb.output names its result (result_index) or none does

// -----

func.func @no_such_result(%X: tensor<8x16xf16>) -> tensor<8x8xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x16xf16>) -> tensor<8x8xf16> {
  ^bb0(%x: tensor<8x16xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64, view_offset = array<i64: 0, 0>, view_shape = array<i64: 8, 8>} : tensor<8x16xf16> -> !tb.stensor<8x8xf16>
    %s = tb.forloop_accum nored %a : !tb.stensor<8x8xf16> -> !tb.stensor<8x8xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>, result_index = 1 : i64} : !tb.stensor<8x8xf16, after_accum>
  }
  func.return %O : tensor<8x8xf16>
}
// CHECK: kn.customized: tb.output #0: result_index 1 is not a result (the op has 1)
