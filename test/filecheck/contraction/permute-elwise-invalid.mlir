// Verifier rules of contraction.permute, cute.permute_copy and the ELWISE_MUL factor of
// contraction.contract / cute.hopper_gemm: one broken op per chunk.
// RUN: mirage-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: mirage-opt %s --split-input-file --verify-diagnostics | filecheck %s --check-prefix=VALID
// VALID-NOT: builtin.module {

func.func @not_a_permutation(%a: tensor<4x8xf16>) -> tensor<8x4xf16> {
  %t = contraction.permute %a {permutation = array<i64: 1, 1>} : tensor<4x8xf16> -> tensor<8x4xf16>
  func.return %t : tensor<8x4xf16>
}
// CHECK: contraction.permute: permutation [1, 1] must name each axis 0..1 of a rank-2 tensor once

// -----

func.func @wrong_result(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %t = contraction.permute %a {permutation = array<i64: 1, 0>} : tensor<4x8xf16> -> tensor<4x8xf16>
  func.return %t : tensor<4x8xf16>
}
// CHECK: contraction.permute: the result must be tensor<8x4xf16> (the operand's axes in the order [1, 0]), got tensor<4x8xf16>

// -----

func.func @copy_tile(%a: tensor<4x8xf16>) -> tensor<8x4xf16> {
  %t = cute.permute_copy(%a) {kernel_name = "k", permutation = array<i64: 1, 0>, tile = 0 : i64, vec = 1 : i64} : (tensor<4x8xf16>) -> tensor<8x4xf16>
  func.return %t : tensor<8x4xf16>
}
// CHECK: cute.permute_copy: tile must be 64 when the innermost axis moves and 0 when it stays, got 0

// -----

func.func @copy_vec(%a: tensor<4x6xf16>) -> tensor<4x6xf16> {
  %t = cute.permute_copy(%a) {kernel_name = "k", permutation = array<i64: 0, 1>, tile = 0 : i64, vec = 8 : i64} : (tensor<4x6xf16>) -> tensor<4x6xf16>
  func.return %t : tensor<4x6xf16>
}
// CHECK: cute.permute_copy: vec must be 1, or 8 for a kept innermost axis of a multiple of 8 elements

// -----

func.func @mul_missing(%a: tensor<64x16xf16>, %b: tensor<16x32xf16>) -> tensor<64x32xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["M", "N", "K"], dim_sizes = array<i64: 64, 32, 16>, strides = [array<i64: 16, 0, 1>, array<i64: 0, 1, 32>, array<i64: 32, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "ELWISE_MUL", prim_first = "ZERO"}> : (tensor<64x16xf16>, tensor<16x32xf16>) -> tensor<64x32xf16>
  func.return %c : tensor<64x32xf16>
}
// CHECK: contraction.contract: prim_last ELWISE_MUL multiplies the result by a third operand, but the op has two; pass the factor D (of the result's type) as the third operand

// -----

func.func @mul_type(%a: tensor<64x16xf16>, %b: tensor<16x32xf16>, %d: tensor<32x64xf16>) -> tensor<64x32xf16> {
  %c = "contraction.contract"(%a, %b, %d) <{dim_types = ["M", "N", "K"], dim_sizes = array<i64: 64, 32, 16>, strides = [array<i64: 16, 0, 1>, array<i64: 0, 1, 32>, array<i64: 32, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "ELWISE_MUL", prim_first = "ZERO"}> : (tensor<64x16xf16>, tensor<16x32xf16>, tensor<32x64xf16>) -> tensor<64x32xf16>
  func.return %c : tensor<64x32xf16>
}
// CHECK: contraction.contract: the ELWISE_MUL factor has type tensor<32x64xf16> but the result is tensor<64x32xf16>; D must have the result's shape and element type

// -----

func.func @mul_unused(%a: tensor<64x16xf16>, %b: tensor<16x32xf16>, %d: tensor<64x32xf16>) -> tensor<64x32xf16> {
  %c = "contraction.contract"(%a, %b, %d) <{dim_types = ["M", "N", "K"], dim_sizes = array<i64: 64, 32, 16>, strides = [array<i64: 16, 0, 1>, array<i64: 0, 1, 32>, array<i64: 32, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"}> : (tensor<64x16xf16>, tensor<16x32xf16>, tensor<64x32xf16>) -> tensor<64x32xf16>
  func.return %c : tensor<64x32xf16>
}
// CHECK: contraction.contract: a third operand is the ELWISE_MUL factor, but prim_last is NONE; set prim_last = "ELWISE_MUL" or drop the operand
