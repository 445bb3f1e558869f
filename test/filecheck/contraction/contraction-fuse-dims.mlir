// contraction-fuse-dims{a b} fuses dimensions a and b of every contraction.contract into one
// of size size[a] * size[b] at a's position, with a's dim/exec type and the inner one's stride;
// b is removed. Checked: undoing a split of M (b outer, a inner), exec types of a scheduled
// op, and the errors for dimensions not contiguous in every tensor (the default a=0 b=1 here)
// and for a fused scheduled op that breaks the executability rules.
// RUN: mirage-opt %s -p 'contraction-fuse-dims{a=2 b=1}' | filecheck %s
// RUN: not mirage-opt %s -p contraction-fuse-dims 2>&1 | filecheck %s --check-prefix=APART
// RUN: not mirage-opt %s -p 'contraction-fuse-dims{a=1 b=2}' 2>&1 | filecheck %s --check-prefix=RULE

// cmk,ckn->cmn with c = 2, m = 2 x 4, n = 4, k = 16: M split into outer (1) and inner (2).
func.func @plain(%a: tensor<2x8x16xf16>, %b: tensor<2x16x4xf16>) -> tensor<2x8x4xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "M", "N", "K"], dim_sizes = array<i64: 2, 2, 4, 4, 16>, strides = [array<i64: 128, 64, 16, 0, 1>, array<i64: 64, 0, 0, 1, 4>, array<i64: 32, 16, 4, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"}> : (tensor<2x8x16xf16>, tensor<2x16x4xf16>) -> tensor<2x8x4xf16>
  func.return %c : tensor<2x8x4xf16>
}
// CHECK-LABEL: func.func @plain
// CHECK:       dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 2, 8, 4, 16>
// CHECK-SAME:  strides = [array<i64: 128, 16, 0, 1>, array<i64: 64, 0, 1, 4>, array<i64: 32, 4, 1, 0>]
// CHECK-NOT:   exec_types
// CHECK-LABEL: func.func @sched

// Scheduled: the outer M is PAR, the inner PRIM; the fused M takes a's (the inner's) PRIM.
func.func @sched(%a: tensor<2x8x16xf16>, %b: tensor<2x16x4xf16>) -> tensor<2x8x4xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "M", "N", "K"], dim_sizes = array<i64: 2, 2, 4, 4, 16>, strides = [array<i64: 128, 64, 16, 0, 1>, array<i64: 64, 0, 0, 1, 4>, array<i64: 32, 16, 4, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO", exec_types = ["PAR", "PAR", "PRIM", "PRIM", "PRIM"]}> : (tensor<2x8x16xf16>, tensor<2x16x4xf16>) -> tensor<2x8x4xf16>
  func.return %c : tensor<2x8x4xf16>
}
// CHECK:       dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 2, 8, 4, 16>
// CHECK-SAME:  exec_types = ["PAR", "PRIM", "PRIM", "PRIM"]

// C indexes B, the outer M does not: no fused index could address B.
// APART: contraction-fuse-dims: contraction.contract: fuse_dims: cannot fuse dimension 0 (C, size 2) with dimension 1 (M, size 2): only dimension 0 indexes tensor B (the other has stride 0 there)

// a = the outer (PAR) M: the fused M is PAR and no PRIM M is left (rule 4).
// RULE: contraction-fuse-dims: contraction.contract: rule 4 violated (the rightmost dimensions must be PRIM and include an M, an N and a K dimension): the PRIM dimensions (dimension 2 (N, size 4), dimension 3 (K, size 16)) include no M dimension
