// The four executability rules of seed 004 (Task 3e) as the contraction.contract verifier:
// one broken op per chunk, FileCheck matches the rule that --verify-diagnostics prints.
// RUN: mirage-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: mirage-opt %s --split-input-file --verify-diagnostics | filecheck %s --check-prefix=VALID
// VALID-NOT: builtin.module {

func.func @rule1(%a: tensor<4x64x16xf16>, %b: tensor<4x16x32xf16>) -> tensor<4x64x32xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "K", "M", "N"], dim_sizes = array<i64: 4, 64, 32, 16>, strides = [array<i64: 1024, 16, 0, 1>, array<i64: 512, 0, 1, 32>, array<i64: 2048, 32, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO", exec_types = ["PAR", "PAR", "PRIM", "PRIM"]}> : (tensor<4x64x16xf16>, tensor<4x16x32xf16>) -> tensor<4x64x32xf16>
  func.return %c : tensor<4x64x32xf16>
}
// CHECK: rule 1 violated (no K dimension may be PAR): dimension 1 (K, size 64) is PAR

// -----

func.func @rule2(%a: tensor<4x64x16xf16>, %b: tensor<4x16x32xf16>) -> tensor<4x64x32xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 4, 64, 32, 16>, strides = [array<i64: 1024, 16, 0, 1>, array<i64: 512, 0, 1, 32>, array<i64: 2048, 32, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO", exec_types = ["PAR", "PRIM", "SEQ", "PRIM"]}> : (tensor<4x64x16xf16>, tensor<4x16x32xf16>) -> tensor<4x64x32xf16>
  func.return %c : tensor<4x64x32xf16>
}
// CHECK: rule 2 violated (every SEQ dimension must lie left of every PRIM dimension): dimension 2 (N, size 32) is SEQ

// -----

func.func @rule3(%a: tensor<4x64x16xf16>, %b: tensor<4x16x32xf16>) -> tensor<4x64x32xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 4, 64, 32, 16>, strides = [array<i64: 1024, 16, 0, 1>, array<i64: 512, 0, 1, 32>, array<i64: 2048, 32, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO", exec_types = ["SEQ", "PAR", "PRIM", "PRIM"]}> : (tensor<4x64x16xf16>, tensor<4x16x32xf16>) -> tensor<4x64x32xf16>
  func.return %c : tensor<4x64x32xf16>
}
// CHECK: rule 3 violated (every PAR dimension must lie left of every SEQ dimension): dimension 1 (M, size 64) is PAR

// -----

func.func @rule4(%a: tensor<4x64x16xf16>, %b: tensor<4x16x32xf16>) -> tensor<4x64x32xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 4, 64, 32, 16>, strides = [array<i64: 1024, 16, 0, 1>, array<i64: 512, 0, 1, 32>, array<i64: 2048, 32, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO", exec_types = ["PAR", "PAR", "PRIM", "PRIM"]}> : (tensor<4x64x16xf16>, tensor<4x16x32xf16>) -> tensor<4x64x32xf16>
  func.return %c : tensor<4x64x32xf16>
}
// CHECK: rule 4 violated (the rightmost dimensions must be PRIM and include an M, an N and a K dimension): the PRIM dimensions (dimension 2 (N, size 32), dimension 3 (K, size 16)) include no M dimension
