// contraction-split-dim{dim outer inner} splits dimension `dim` of every contraction.contract
// into an outer (left) and an inner (right) dimension of the same dim/exec type: the inner
// keeps the stride s, the outer gets s * inner (0 stays 0). Checked: the split lists, that an
// unscheduled op stays unscheduled and a scheduled one keeps (duplicated) exec types, and the
// error for sizes that do not multiply to the dimension's size.
// RUN: mirage-opt %s -p 'contraction-split-dim{dim=1 outer=2 inner=4}' | filecheck %s
// RUN: mirage-opt %s -p 'contraction-split-dim{dim=3 outer=4 inner=4}' | filecheck %s --check-prefix=SPLITK
// RUN: not mirage-opt %s -p 'contraction-split-dim{dim=1 outer=3 inner=4}' 2>&1 | filecheck %s --check-prefix=ERR

// cmk,ckn->cmn with c = 2, m = 8, n = 4, k = 16 (row-major A, B and C).
func.func @plain(%a: tensor<2x8x16xf16>, %b: tensor<2x16x4xf16>) -> tensor<2x8x4xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 2, 8, 4, 16>, strides = [array<i64: 128, 16, 0, 1>, array<i64: 64, 0, 1, 4>, array<i64: 32, 4, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"}> : (tensor<2x8x16xf16>, tensor<2x16x4xf16>) -> tensor<2x8x4xf16>
  func.return %c : tensor<2x8x4xf16>
}
// CHECK-LABEL: func.func @plain
// CHECK:       dim_types = ["C", "M", "M", "N", "K"], dim_sizes = array<i64: 2, 2, 4, 4, 16>
// CHECK-SAME:  strides = [array<i64: 128, 64, 16, 0, 1>, array<i64: 64, 0, 0, 1, 4>, array<i64: 32, 16, 4, 1, 0>]
// CHECK-NOT:   exec_types
// CHECK-LABEL: func.func @sched

// The same op, scheduled: both halves of M inherit its PRIM exec type.
func.func @sched(%a: tensor<2x8x16xf16>, %b: tensor<2x16x4xf16>) -> tensor<2x8x4xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 2, 8, 4, 16>, strides = [array<i64: 128, 16, 0, 1>, array<i64: 64, 0, 1, 4>, array<i64: 32, 4, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO", exec_types = ["PAR", "PRIM", "PRIM", "PRIM"]}> : (tensor<2x8x16xf16>, tensor<2x16x4xf16>) -> tensor<2x8x4xf16>
  func.return %c : tensor<2x8x4xf16>
}
// CHECK:       dim_types = ["C", "M", "M", "N", "K"], dim_sizes = array<i64: 2, 2, 4, 4, 16>
// CHECK-SAME:  exec_types = ["PAR", "PRIM", "PRIM", "PRIM", "PRIM"]

// K (stride 1 in A, 4 in B, absent in C) split 4 x 4: outer strides 4, 16 and still 0.
// SPLITK-LABEL: func.func @plain
// SPLITK:       dim_types = ["C", "M", "N", "K", "K"], dim_sizes = array<i64: 2, 8, 4, 4, 4>
// SPLITK-SAME:  strides = [array<i64: 128, 16, 0, 4, 1>, array<i64: 64, 0, 1, 16, 4>, array<i64: 32, 4, 1, 0, 0>]
// SPLITK-LABEL: func.func @sched
// SPLITK:       exec_types = ["PAR", "PRIM", "PRIM", "PRIM", "PRIM"]

// ERR: contraction-split-dim: contraction.contract: split_dim: cannot split dimension 1 (M, size 8) into 3 x 4 = 12; outer_size * inner_size must equal 8
