// Every `tb` / threadblock-graph verifier rule: one broken op per chunk, FileCheck
// matches the message (`<op name>: <rule>`) that --verify-diagnostics or
// --parsing-diagnostics prints.  The VALID run makes sure that no chunk verifies.
// RUN: mirage-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s
// RUN: mirage-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s --check-prefix=VALID
// VALID-NOT: builtin.module {

// ---- tb.input: tiles from grid_dim, input_map, forloop_dim, forloop_range ----

func.func @tile_not_divisible_by_grid(%X: tensor<6x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<6x64xf16>) -> () {
  ^bb0(%x: tensor<6x64xf16>):
    %t = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<6x64xf16> -> !tb.stensor<1x64xf16>
  }
  func.return
}
// CHECK: tb.input: dim 0 (size 6) is not divisible by grid_dim.x = 4

// -----

func.func @tile_not_divisible_by_forloop(%X: tensor<8x96xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 64 : i64, reduction_dimx = 64 : i64} : (tensor<8x96xf16>) -> () {
  ^bb0(%x: tensor<8x96xf16>):
    %t = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64} : tensor<8x96xf16> -> !tb.stensor<4x1xf16>
  }
  func.return
}
// CHECK: tb.input: tile dim 1 (size 96) is not divisible by forloop_range = 64

// -----

// grid.y splits dim 1 first (128 -> 64), then the for-loop must divide the remaining 64.
func.func @grid_then_forloop(%X: tensor<8x128xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 128 : i64, reduction_dimx = 64 : i64} : (tensor<8x128xf16>) -> () {
  ^bb0(%x: tensor<8x128xf16>):
    %t = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = 1 : i64} : tensor<8x128xf16> -> !tb.stensor<8x1xf16>
  }
  func.return
}
// CHECK: tb.input: tile dim 1 (size 64) is not divisible by forloop_range = 128

// -----

// input_map -1 replicates: every block sees the whole dim, so the tile keeps 8x64.
func.func @replicated_tile_shape(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<2x64xf16>
  }
  func.return
}
// CHECK: tb.input: tile shape (2, 64) does not match the inferred shape (8, 64)

// -----

// forloop_dim -1: loaded once before the loop, not divided by forloop_range.
func.func @forloop_dim_minus_one(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x16xf16>
  }
  func.return
}
// CHECK: tb.input: tile shape (8, 16) does not match the inferred shape (8, 64)

// -----

func.func @imap_out_of_range(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: 2, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.input: input_map.x = 2 is not a dimension of a rank-2 tensor (use -1 to replicate)

// -----

func.func @imap_below_minus_one(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -2, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.input: input_map.y = -2 is not a dimension of a rank-2 tensor (use -1 to replicate)

// -----

func.func @imap_two_entries(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: 0, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<4x64xf16>
  }
  func.return
}
// CHECK: tb.input: input_map must have 3 entries (x, y, z), got 2

// -----

func.func @two_grid_axes_one_dim(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 2, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: 0, 0, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<2x64xf16>
  }
  func.return
}
// CHECK: tb.input: input_map maps grid axes x and y to the same tensor dim 0; Mirage's offset arithmetic cannot compose them

// -----

func.func @forloop_dim_out_of_range(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -2 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.input: forloop_dim = -2 is not a dimension of a rank-2 tensor

// -----

func.func @input_after_accum(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.input: a loaded tile is used inside the for-loop: its type must not be after_accum

// -----

func.func @input_element_type(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf32>
  }
  func.return
}
// CHECK: tb.input: tile element type f32 differs from the dtensor's f16

// -----

func.func @input_not_block_argument(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %e = kn.exp %x : tensor<8x64xf16>
    %t = tb.input %e {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.input: the operand must be a block argument of the enclosing kn.customized

// -----

func.func @tb_op_outside_customized(%X: tensor<8x64xf16>) {
  %t = tb.input %X {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
  func.return
}
// CHECK: 'tb.input' expects parent op 'kn.customized'

// ---- tb.output ----

// -----

func.func @output_before_loop(%X: tensor<8x64xf16>) -> tensor<8x64xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> tensor<8x64xf16> {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    tb.output %t {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x64xf16>
  }
  func.return %O : tensor<8x64xf16>
}
// CHECK: tb.output: outputs are stored after the for-loop: the stored tile must be after_accum (produce it with tb.forloop_accum)

// -----

func.func @omap_missing_for_grid_axis(%X: tensor<8x64xf16>) -> tensor<8x64xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> tensor<8x64xf16> {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x32xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    tb.output %a {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x32xf16, after_accum>
  }
  func.return %O : tensor<8x64xf16>
}
// CHECK: tb.output: grid_dim.y = 2 > 1 needs an output_map.y entry >= 0 so that blocks write disjoint regions

// -----

func.func @omap_out_of_range(%X: tensor<8x64xf16>) -> tensor<8x64xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> tensor<8x64xf16> {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    tb.output %a {output_map = array<i64: -1, -1, 3>} : !tb.stensor<8x64xf16, after_accum>
  }
  func.return %O : tensor<8x64xf16>
}
// CHECK: tb.output: output_map.z = 3 is not a dimension of a rank-2 tensor (use -1 only for a grid axis of size 1)

// -----

func.func @omap_two_axes_one_dim(%X: tensor<8x64xf16>) -> tensor<32x64xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 2, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> tensor<32x64xf16> {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    tb.output %a {output_map = array<i64: 0, 0, -1>} : !tb.stensor<8x64xf16, after_accum>
  }
  func.return %O : tensor<32x64xf16>
}
// CHECK: tb.output: output_map maps grid axes x and y to the same tensor dim 0; Mirage's offset arithmetic cannot compose them

// ---- elementwise ops ----

// -----

func.func @binary_after_accum_mismatch(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    %s = tb.add %a, %t : !tb.stensor<8x64xf16, after_accum>, !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.add: operands must agree on after_accum (both before or both after the for-loop)

// -----

func.func @binary_result_after_accum(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.sub %t, %t : !tb.stensor<8x64xf16>, !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.sub: the result's after_accum must equal the operands'

// -----

func.func @binary_broadcast(%X: tensor<8x64xf16>, %Y: tensor<8x2xf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<8x2xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>, %y: tensor<8x2xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %u = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x2xf16> -> !tb.stensor<8x2xf16>
    %s = tb.mul %t, %u : !tb.stensor<8x64xf16>, !tb.stensor<8x2xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.mul: dim 1 cannot broadcast: 64 vs 2

// -----

func.func @binary_result_shape(%X: tensor<8x64xf16>, %Y: tensor<8x1xf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<8x1xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>, %y: tensor<8x1xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %u = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x1xf16> -> !tb.stensor<8x1xf16>
    %s = tb.div %t, %u : !tb.stensor<8x64xf16>, !tb.stensor<8x1xf16> -> !tb.stensor<8x1xf16>
  }
  func.return
}
// CHECK: tb.div: result shape (8, 1) does not match the inferred shape (8, 64)

// -----

func.func @binary_element_type(%X: tensor<8x64xf16>, %Y: tensor<8x64xbf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<8x64xbf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>, %y: tensor<8x64xbf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %u = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xbf16> -> !tb.stensor<8x64xbf16>
    %s = tb.pow %t, %u : !tb.stensor<8x64xf16>, !tb.stensor<8x64xbf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.pow: operands and results must share one element type, got f16, bf16, f16

// -----

func.func @clamp_bounds(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %c = tb.clamp %t {min_value = 1.0 : f64, max_value = -1.0 : f64} : !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.clamp: min_value (1.0) must not exceed max_value (-1.0)

// -----

func.func @unary_changes_after_accum(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %e = "tb.rms_norm"(%t) : (!tb.stensor<8x64xf16>) -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.rms_norm: the result type !tb.stensor<8x64xf16, after_accum> must equal the operand's type !tb.stensor<8x64xf16>{{$}}

// -----

// an elementwise unary op may round an f32 tile to a 16-bit one, never widen one
func.func @unary_widens(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %e = tb.sqrt %t : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf32>
  }
  func.return
}
// CHECK: tb.sqrt: the result type !tb.stensor<8x64xf32> must equal the operand's type !tb.stensor<8x64xf16>, or the same with an f16 / bf16 element type for an f32 operand

// -----

func.func @rounding_changes_after_accum(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf32, after_accum>
    %e = tb.mul_scalar %a {scalar = 2.0 : f64} : !tb.stensor<8x64xf32, after_accum> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.mul_scalar: the result type !tb.stensor<8x64xf16> must equal the operand's type !tb.stensor<8x64xf32, after_accum>, or the same

// ---- matmul ----

// -----

func.func @matmul_leading_dims(%X: tensor<2x8x64xf16>, %Y: tensor<2x64x16xf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<2x8x64xf16>, tensor<2x64x16xf16>) -> () {
  ^bb0(%x: tensor<2x8x64xf16>, %y: tensor<2x64x16xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<2x8x64xf16> -> !tb.stensor<2x8x64xf16>
    %b = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<2x64x16xf16> -> !tb.stensor<2x64x16xf16>
    %c = tb.matmul %a, %b : !tb.stensor<2x8x64xf16>, !tb.stensor<2x64x16xf16> -> !tb.stensor<2x8x16xf16>
  }
  func.return
}
// CHECK: tb.matmul: threadblock matmul needs every leading dim to be 1

// -----

func.func @matmul_contraction(%X: tensor<8x64xf16>, %Y: tensor<32x16xf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<32x16xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>, %y: tensor<32x16xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %b = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<32x16xf16> -> !tb.stensor<32x16xf16>
    %c = tb.matmul %a, %b : !tb.stensor<8x64xf16>, !tb.stensor<32x16xf16> -> !tb.stensor<8x16xf16>
  }
  func.return
}
// CHECK: tb.matmul: contraction dims differ: lhs[-1] = 64 vs rhs[-2] = 32

// -----

func.func @matmul_after_accum(%X: tensor<8x64xf16>, %Y: tensor<64x16xf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<64x16xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>, %y: tensor<64x16xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %b = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<64x16xf16> -> !tb.stensor<64x16xf16>
    %acc = tb.forloop_accum nored %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    %c = tb.matmul %acc, %b : !tb.stensor<8x64xf16, after_accum>, !tb.stensor<64x16xf16> -> !tb.stensor<8x16xf16, after_accum>
  }
  func.return
}
// CHECK: tb.matmul: operands must agree on after_accum (both before or both after the for-loop)

// ---- concat ----

// -----

func.func @concat_after_accum(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %acc = tb.forloop_accum nored %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    %c = tb.concat %acc, %a {dim = 1 : i64} : !tb.stensor<8x64xf16, after_accum>, !tb.stensor<8x64xf16> -> !tb.stensor<8x128xf16, after_accum>
  }
  func.return
}
// CHECK: tb.concat: operands and result must agree on after_accum (both before or both after the for-loop)

// -----

func.func @concat_dims(%X: tensor<8x64xf16>, %Y: tensor<4x64xf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<4x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>, %y: tensor<4x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %b = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<4x64xf16> -> !tb.stensor<4x64xf16>
    %c = tb.concat %a, %b {dim = 1 : i64} : !tb.stensor<8x64xf16>, !tb.stensor<4x64xf16> -> !tb.stensor<8x128xf16>
  }
  func.return
}
// CHECK: tb.concat: dim 0 differs (8 vs 4); only the concat dim may differ

// -----

func.func @concat_element_type(%X: tensor<8x64xf16>, %Y: tensor<8x64xbf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<8x64xbf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>, %y: tensor<8x64xbf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %b = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xbf16> -> !tb.stensor<8x64xbf16>
    %c = tb.concat %a, %b {dim = 0 : i64} : !tb.stensor<8x64xf16>, !tb.stensor<8x64xbf16> -> !tb.stensor<16x64xf16>
  }
  func.return
}
// CHECK: tb.concat: operands and results must share one element type, got f16, bf16, f16

// -----

func.func @concat_dim(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %c = tb.concat %a, %a {dim = 2 : i64} : !tb.stensor<8x64xf16>, !tb.stensor<8x64xf16> -> !tb.stensor<8x128xf16>
  }
  func.return
}
// CHECK: tb.concat: concat dim 2 is not a dimension of a rank-2 tensor

// ---- reductions ----

// -----

func.func @reduction_dim(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %r = tb.reduction %a {dim = 2 : i64} : !tb.stensor<8x64xf16> -> !tb.stensor<8x1xf16>
  }
  func.return
}
// CHECK: tb.reduction: reduction dim 2 is not a dimension of a rank-2 tensor

// -----

func.func @reduction_result(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %r = tb.reduction %a {dim = 0 : i64} : !tb.stensor<8x64xf16> -> !tb.stensor<8x1xf16>
  }
  func.return
}
// CHECK: tb.reduction: result shape (8, 1) does not match the inferred shape (1, 64)

// -----

func.func @reduction_after_accum(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %r = tb.reduction %a {dim = 1 : i64} : !tb.stensor<8x64xf16> -> !tb.stensor<8x1xf16, after_accum>
  }
  func.return
}
// CHECK: tb.reduction: the result's after_accum must equal the operand's

// -----

func.func @reduction_element_type(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %r = tb.reduction %a {dim = 1 : i64} : !tb.stensor<8x64xf16> -> !tb.stensor<8x1xbf16>
  }
  func.return
}
// CHECK: tb.reduction: operands and results must share one element type, got f16, bf16

// -----

func.func @reduction_to_dimx_divisibility(%X: tensor<8x96xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x96xf16>) -> () {
  ^bb0(%x: tensor<8x96xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x96xf16> -> !tb.stensor<8x96xf16>
    %r = tb.reduction_to_dimx %a {dim = 1 : i64} : !tb.stensor<8x96xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.reduction_to_dimx: dim 1 (size 96) is not divisible by the reduced size 64

// -----

// The result size comes from the graph's reduction_dimx (32 here), not from the result type.
func.func @reduction_to_dimx_uses_graph_dimx(%X: tensor<8x128xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 32 : i64} : (tensor<8x128xf16>) -> () {
  ^bb0(%x: tensor<8x128xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x128xf16> -> !tb.stensor<8x128xf16>
    %r = tb.reduction_to_dimx %a {dim = 1 : i64} : !tb.stensor<8x128xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.reduction_to_dimx: result shape (8, 64) does not match the inferred shape (8, 32)

// -----

func.func @reduction_max_second_result(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %m, %d = tb.reduction_max %a {dim = 1 : i64} : !tb.stensor<8x64xf16> -> !tb.stensor<8x1xf16>, !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.reduction_max: result shape (8, 64) does not match the inferred shape (8, 1)

// -----

func.func @reduction_max_dim(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %m, %d = tb.reduction_max %a {dim = -1 : i64} : !tb.stensor<8x64xf16> -> !tb.stensor<8x1xf16>, !tb.stensor<8x1xf16>
  }
  func.return
}
// CHECK: tb.reduction_max: reduction dim -1 is not a dimension of a rank-2 tensor

// ---- for-loop accumulators ----

// -----

func.func @unknown_accumulator_kind(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum red_ld_avg %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x1xf16, after_accum>
  }
  func.return
}
// CHECK: unknown accumulator kind 'red_ld_avg' (expected one of nored, red_ld_sum, red_ld_mean, red_ld_rms, redtox_ld_sum, nored_rescale, red_ld_sum_rescale, max)

// -----

func.func @unknown_accumulator_kind_generic(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = "tb.forloop_accum"(%a) <{kind = "sum"}> : (!tb.stensor<8x64xf16>) -> !tb.stensor<8x1xf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: unknown kind 'sum' (expected one of nored, red_ld_sum, red_ld_mean, red_ld_rms, redtox_ld_sum, nored_rescale, red_ld_sum_rescale, max)

// -----

func.func @accumulate_after_accum(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum nored %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    %t = tb.forloop_accum nored %s : !tb.stensor<8x64xf16, after_accum> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: the accumulated tile must be computed inside the for-loop (not after_accum)

// -----

func.func @accumulator_result_not_after_accum(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum max %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: tb.forloop_accum: an accumulator's result lives after the for-loop: its type must be after_accum

// -----

func.func @accumulator_shape(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum red_ld_rms %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: result shape (8, 64) does not match the inferred shape (8, 1)

// -----

func.func @redtox_divisibility(%X: tensor<8x96xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x96xf16>) -> () {
  ^bb0(%x: tensor<8x96xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x96xf16> -> !tb.stensor<8x96xf16>
    %s = tb.forloop_accum redtox_ld_sum %a : !tb.stensor<8x96xf16> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: dim 1 (size 96) is not divisible by the reduced size 64

// -----

func.func @accumulator_element_type(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum nored %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xbf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: operands and results must share one element type, got f16, bf16

// -----

func.func @rescale_missing(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum nored_rescale %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: kind 'nored_rescale' needs a rescale operand: tb.forloop_accum nored_rescale %x, %rescale

// -----

func.func @rescale_not_taken(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum red_ld_sum %a, %a : !tb.stensor<8x64xf16>, !tb.stensor<8x64xf16> -> !tb.stensor<8x1xf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: kind 'red_ld_sum' takes no rescale operand (only nored_rescale and red_ld_sum_rescale do)

// -----

func.func @rescale_after_accum(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %r = tb.forloop_accum red_ld_sum %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x1xf16, after_accum>
    %s = tb.forloop_accum red_ld_sum_rescale %a, %r : !tb.stensor<8x64xf16>, !tb.stensor<8x1xf16, after_accum> -> !tb.stensor<8x1xf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: the rescale tile must be computed inside the for-loop (not after_accum)

// -----

func.func @rescale_shape(%X: tensor<8x64xf16>, %Y: tensor<4x1xf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<4x1xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>, %y: tensor<4x1xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %r = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<4x1xf16> -> !tb.stensor<4x1xf16>
    %s = tb.forloop_accum nored_rescale %a, %r : !tb.stensor<8x64xf16>, !tb.stensor<4x1xf16> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: rescale shape (4, 1) must broadcast to the accumulated tile's shape (8, 64) (equal rank, each dim equal or 1)

// -----

func.func @rescale_element_type(%X: tensor<8x64xf16>, %Y: tensor<8x1xbf16>) {
  kn.customized(%X, %Y) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>, tensor<8x1xbf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>, %y: tensor<8x1xbf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %r = tb.input %y {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x1xbf16> -> !tb.stensor<8x1xbf16>
    %s = tb.forloop_accum nored_rescale %a, %r : !tb.stensor<8x64xf16>, !tb.stensor<8x1xbf16> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: tb.forloop_accum: operands and results must share one element type, got f16, bf16, f16

// -----

func.func @accumulator_operand_types(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum nored_rescale %a, %a : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
  }
  func.return
}
// CHECK: expected 2 operand types, got 1

// ---- kn.customized: the graph, its results and tb.output ----

// -----

func.func @grid_dim_size(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<4x64xf16>
  }
  func.return
}
// CHECK: kn.customized: grid_dim must be 3 positive sizes (x, y, z), got (2, 1)

// -----

func.func @grid_dim_zero(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 0, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: kn.customized: grid_dim must be 3 positive sizes (x, y, z), got (0, 1, 1)

// -----

func.func @grid_dim_limit(%X: tensor<8x65536xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 65536, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x65536xf16>) -> () {
  ^bb0(%x: tensor<8x65536xf16>):
    %a = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = -1 : i64} : tensor<8x65536xf16> -> !tb.stensor<8x1xf16>
  }
  func.return
}
// CHECK: kn.customized: grid_dim.y = 65536 exceeds CUDA's limit of 65535

// -----

func.func @block_dim_zero(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 0, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
  }
  func.return
}
// CHECK: kn.customized: block_dim must be 3 positive sizes (x, y, z), got (128, 0, 1)

// -----

func.func @block_dim_z_limit(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 1, 1, 128>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
  }
  func.return
}
// CHECK: kn.customized: block_dim.z = 128 exceeds CUDA's limit of 64

// -----

func.func @too_many_threads(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 256, 8, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
  }
  func.return
}
// CHECK: kn.customized: block_dim (256, 8, 1) has 2048 threads, more than 1024

// -----

// xDSL verifies nested ops first; the malformed graph is reported by kn.customized, not
// as a division by zero inside tb.input.
func.func @forloop_range_zero(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 0 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: kn.customized: forloop_range must be >= 1, got 0

// -----

// issue #29: the loop bound of target/device.py (the CUDA loop counter and the reference
// executor's per-iteration step); 2^32 iterations used to reach the generated code.
func.func @forloop_range_too_large(%X: tensor<8x8192xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 8192 : i64, reduction_dimx = 64 : i64} : (tensor<8x8192xf16>) -> () {
  ^bb0(%x: tensor<8x8192xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x8192xf16> -> !tb.stensor<8x1xf16>
  }
  func.return
}
// CHECK: kn.customized: forloop_range = 8192 exceeds 4096 (the most iterations the reference executor checks in seconds, target/device.py); take longer tiles per iteration or split the reduction across the grid

// -----

func.func @reduction_dimx_zero(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 0 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
  }
  func.return
}
// CHECK: kn.customized: reduction_dimx must be >= 1, got 0

// -----

func.func @missing_grid_dim(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %a = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
  }
  func.return
}
// CHECK: property 'grid_dim' expected in operation 'kn.customized'

// -----

func.func @block_arguments(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x32xf16>):
  }
  func.return
}
// CHECK: kn.customized: the region's block arguments (tensor<8x32xf16>) must match the inputs (tensor<8x64xf16>) in number and type

// -----

func.func @kernel_op_in_graph(%X: tensor<8x64xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> () {
  ^bb0(%x: tensor<8x64xf16>):
    %e = kn.exp %x : tensor<8x64xf16>
  }
  func.return
}
// CHECK: kn.customized: kernel op kn.exp cannot appear inside a threadblock graph; use the tb op

// -----

func.func @output_count(%X: tensor<8x64xf16>) -> (tensor<8x64xf16>, tensor<8x64xf16>) {
  %O1, %O2 = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> (tensor<8x64xf16>, tensor<8x64xf16>) {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    tb.output %a {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x64xf16, after_accum>
  }
  func.return %O1, %O2 : tensor<8x64xf16>, tensor<8x64xf16>
}
// CHECK: kn.customized: 1 tb.output ops for 2 results; each result needs one tb.output

// -----

// The output DTensor is the tile concatenated along output_map: 4x64 per block, 2 blocks on dim 0.
func.func @result_shape(%X: tensor<8x64xf16>) -> tensor<4x128xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> tensor<4x128xf16> {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<4x64xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<4x64xf16> -> !tb.stensor<4x64xf16, after_accum>
    tb.output %a {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x64xf16, after_accum>
  }
  func.return %O : tensor<4x128xf16>
}
// CHECK: kn.customized: result #0 shape (4, 128) does not match the inferred shape (8, 64)

// -----

func.func @result_element_type(%X: tensor<8x64xf16>) -> tensor<8x64xf32> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> tensor<8x64xf32> {
  ^bb0(%x: tensor<8x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    tb.output %a {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x64xf16, after_accum>
  }
  func.return %O : tensor<8x64xf32>
}
// CHECK: kn.customized: result #0 element type f32 differs from its tb.output tile's f16

// -----

func.func @customized_static_shapes(%X: tensor<8x?xf16>) {
  kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x?xf16>) -> () {
  ^bb0(%x: tensor<8x?xf16>):
  }
  func.return
}
// CHECK: kn.customized: operand #0 has type tensor<8x?xf16>; device tensors need a static shape of 1 to 4 positive dims

// ---- !tb.stensor type ----

// -----

func.func private @stensor_type(!tb.stensor<4x0xf16>)
// CHECK: tb.stensor dims must be static and positive

// -----

func.func private @stensor_type(!tb.stensor<4x?xf16>)
// CHECK: tb.stensor dims must be static and positive

// -----

func.func private @stensor_type(!tb.stensor<1x2x3x4x5xf16>)
// CHECK: tb.stensor must have 1 to 4 dims, got 5

// -----

func.func private @stensor_type(!tb.stensor<f16>)
// CHECK: tb.stensor must have 1 to 4 dims, got 0

// -----

func.func private @stensor_type(!tb.stensor<4xindex>)
// CHECK: tb.stensor element type index is not a float or integer type

// -----

func.func private @stensor_type(!tb.stensor<4xf16, after_loop>)
// CHECK: expected 'after_accum' (the only flag of a tb.stensor type)

// -----

// ---- tb.grid_sum: split groups summed in one kernel ----

func.func @grid_sum_of_non_accumulator(%X: tensor<2x64xf16>) -> tensor<2x32xf16> {
  %o = kn.customized(%X) attributes {grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<2x64xf16>) -> tensor<2x32xf16> {
  ^bb0(%x: tensor<2x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = -1 : i64} : tensor<2x64xf16> -> !tb.stensor<2x32xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<2x32xf16> -> !tb.stensor<2x32xf16, after_accum>
    %e = tb.exp %a : !tb.stensor<2x32xf16, after_accum>
    %g = tb.grid_sum %e {dim = 1 : i64} : !tb.stensor<2x32xf16, after_accum> -> !tb.stensor<2x32xf16, after_accum>
    tb.output %g {output_map = array<i64: -1, -1, -1>} : !tb.stensor<2x32xf16, after_accum>
  }
  func.return %o : tensor<2x32xf16>
}
// CHECK: tb.grid_sum: the operand must be a tb.forloop_accum result of kind nored, red_ld_sum, redtox_ld_sum

// -----

func.func @grid_sum_of_reduced_max(%X: tensor<2x64xf16>) -> tensor<2x1xf16> {
  %o = kn.customized(%X) attributes {grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<2x64xf16>) -> tensor<2x1xf16> {
  ^bb0(%x: tensor<2x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = -1 : i64} : tensor<2x64xf16> -> !tb.stensor<2x32xf16>
    %a = tb.forloop_accum max %t : !tb.stensor<2x32xf16> -> !tb.stensor<2x32xf16, after_accum>
    %r = tb.reduction %a {dim = 1 : i64} : !tb.stensor<2x32xf16, after_accum> -> !tb.stensor<2x1xf16, after_accum>
    %g = tb.grid_sum %r {dim = 1 : i64} : !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x1xf16, after_accum>
    tb.output %g {output_map = array<i64: -1, -1, -1>} : !tb.stensor<2x1xf16, after_accum>
  }
  func.return %o : tensor<2x1xf16>
}
// CHECK: {{^}}tb.grid_sum: the operand must be a tb.forloop_accum result of kind nored, red_ld_sum, redtox_ld_sum, or a tb.reduction, tb.reduction_to_dimx or tb.mul_scalar of one

// -----

func.func @grid_sum_over_one_block(%X: tensor<2x64xf16>) -> tensor<2x64xf16> {
  %o = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<2x64xf16>) -> tensor<2x64xf16> {
  ^bb0(%x: tensor<2x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<2x64xf16> -> !tb.stensor<2x64xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<2x64xf16> -> !tb.stensor<2x64xf16, after_accum>
    %g = tb.grid_sum %a {dim = 1 : i64} : !tb.stensor<2x64xf16, after_accum> -> !tb.stensor<2x64xf16, after_accum>
    tb.output %g {output_map = array<i64: -1, -1, -1>} : !tb.stensor<2x64xf16, after_accum>
  }
  func.return %o : tensor<2x64xf16>
}
// CHECK: tb.grid_sum: grid_dim.y = 1: a grid sum needs at least 2 blocks along its axis

// -----

func.func @grid_sum_axis_stored(%X: tensor<2x64xf16>) -> tensor<2x64xf16> {
  %o = kn.customized(%X) attributes {grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<2x64xf16>) -> tensor<2x64xf16> {
  ^bb0(%x: tensor<2x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = -1 : i64} : tensor<2x64xf16> -> !tb.stensor<2x32xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<2x32xf16> -> !tb.stensor<2x32xf16, after_accum>
    %g = tb.grid_sum %a {dim = 1 : i64} : !tb.stensor<2x32xf16, after_accum> -> !tb.stensor<2x32xf16, after_accum>
    tb.output %g {output_map = array<i64: -1, 1, -1>} : !tb.stensor<2x32xf16, after_accum>
  }
  func.return %o : tensor<2x64xf16>
}
// CHECK: tb.output: the graph's tb.grid_sum ops reduce grid axis y, so one block per group stores: output_map.y must be -1, got 1

// -----

func.func @grid_sum_output_without_sum(%X: tensor<2x64xf16>) -> (tensor<2x32xf16>, tensor<2x32xf16>) {
  %o:2 = kn.customized(%X) attributes {grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<2x64xf16>) -> (tensor<2x32xf16>, tensor<2x32xf16>) {
  ^bb0(%x: tensor<2x64xf16>):
    %t = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = -1 : i64} : tensor<2x64xf16> -> !tb.stensor<2x32xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<2x32xf16> -> !tb.stensor<2x32xf16, after_accum>
    %g = tb.grid_sum %a {dim = 1 : i64} : !tb.stensor<2x32xf16, after_accum> -> !tb.stensor<2x32xf16, after_accum>
    tb.output %g {output_map = array<i64: -1, -1, -1>} : !tb.stensor<2x32xf16, after_accum>
    tb.output %a {output_map = array<i64: -1, -1, -1>} : !tb.stensor<2x32xf16, after_accum>
  }
  func.return %o#0, %o#1 : tensor<2x32xf16>, tensor<2x32xf16>
}
// CHECK: tb.output: the stored tile does not depend on a tb.grid_sum
