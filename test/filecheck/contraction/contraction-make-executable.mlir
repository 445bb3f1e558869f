// contraction-make-executable on the seed's Task-4 contraction (cmk,ckn->cmn, c = 4,
// m = n = k = 4096): PAR batch and L2 groups, SEQ outer K, PRIM M/N/K tiles at the right.
// RUN: mirage-opt %s -p contraction-make-executable | filecheck %s

func.func @bmm(%a: tensor<4x4096x4096xf16>, %b: tensor<4x4096x4096xf16>) -> tensor<4x4096x4096xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 4, 4096, 4096, 4096>, strides = [array<i64: 16777216, 4096, 0, 1>, array<i64: 16777216, 0, 1, 4096>, array<i64: 16777216, 4096, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"}> : (tensor<4x4096x4096xf16>, tensor<4x4096x4096xf16>) -> tensor<4x4096x4096xf16>
  func.return %c : tensor<4x4096x4096xf16>
}
// CHECK: dim_types = ["C", "M", "N", "M", "N", "K", "M", "N", "K"]
// CHECK-SAME: dim_sizes = array<i64: 4, 1, 2, 32, 16, 16, 128, 128, 256>
// CHECK-SAME: exec_types = ["PAR", "PAR", "PAR", "PAR", "PAR", "SEQ", "PRIM", "PRIM", "PRIM"]
