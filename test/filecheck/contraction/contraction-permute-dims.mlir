// contraction-permute-dims{permutation} reorders the per-dimension lists (dim types, sizes,
// exec types, every tensor's strides) of every contraction.contract like torch.permute: new
// dimension i is old dimension permutation[i]; negative entries count from the end.
// Checked: the permuted lists (plain and negative entries), exec types of a scheduled op,
// and the errors for a permutation of the wrong length (the default, empty one) and for a
// scheduled op whose permuted form breaks the executability rules.
// RUN: mirage-opt %s -p 'contraction-permute-dims{permutation=0,2,1,3}' | filecheck %s
// RUN: mirage-opt %s -p 'contraction-permute-dims{permutation=-4,2,1,-1}' | filecheck %s
// RUN: not mirage-opt %s -p contraction-permute-dims 2>&1 | filecheck %s --check-prefix=LENGTH
// RUN: not mirage-opt %s -p 'contraction-permute-dims{permutation=3,0,1,2}' 2>&1 | filecheck %s --check-prefix=RULE

// cmk,ckn->cmn with c = 2, m = 8, n = 4, k = 16 (row-major A, B and C).
func.func @plain(%a: tensor<2x8x16xf16>, %b: tensor<2x16x4xf16>) -> tensor<2x8x4xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 2, 8, 4, 16>, strides = [array<i64: 128, 16, 0, 1>, array<i64: 64, 0, 1, 4>, array<i64: 32, 4, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"}> : (tensor<2x8x16xf16>, tensor<2x16x4xf16>) -> tensor<2x8x4xf16>
  func.return %c : tensor<2x8x4xf16>
}
// CHECK-LABEL: func.func @plain
// CHECK:       dim_types = ["C", "N", "M", "K"], dim_sizes = array<i64: 2, 4, 8, 16>
// CHECK-SAME:  strides = [array<i64: 128, 0, 16, 1>, array<i64: 64, 1, 0, 4>, array<i64: 32, 1, 4, 0>]
// CHECK-NOT:   exec_types
// CHECK-LABEL: func.func @sched

// Scheduled: the op keeps its exec types (M and N are both PRIM, so they read the same).
func.func @sched(%a: tensor<2x8x16xf16>, %b: tensor<2x16x4xf16>) -> tensor<2x8x4xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 2, 8, 4, 16>, strides = [array<i64: 128, 16, 0, 1>, array<i64: 64, 0, 1, 4>, array<i64: 32, 4, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO", exec_types = ["PAR", "PRIM", "PRIM", "PRIM"]}> : (tensor<2x8x16xf16>, tensor<2x16x4xf16>) -> tensor<2x8x4xf16>
  func.return %c : tensor<2x8x4xf16>
}
// CHECK:       dim_types = ["C", "N", "M", "K"], dim_sizes = array<i64: 2, 4, 8, 16>
// CHECK-SAME:  exec_types = ["PAR", "PRIM", "PRIM", "PRIM"]

// LENGTH: contraction-permute-dims: contraction.contract: permute_dims: permutation [] has 0 entries; the config has 4 dimensions

// K (PRIM) moved to the left of C (PAR): the scheduled op is no longer executable.
// RULE: contraction-permute-dims: contraction.contract: rule 4 violated (the rightmost dimensions must be PRIM and include an M, an N and a K dimension): dimension 1 (C, size 2) is not PRIM but lies right of PRIM dimension 0 (K, size 16)
