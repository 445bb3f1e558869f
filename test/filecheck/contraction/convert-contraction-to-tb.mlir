// convert-contraction-to-tb after contraction-make-executable: PAR -> grid (x = N tiles,
// y = M tiles, z = batch), SEQ K -> the for-loop, PRIM -> the tb.matmul tile with a nored
// accumulator.  cmk,ckn->cmn with c = 2, m = 64, k = 128, n = 96: PRIM 64 x 32 x 128.
// RUN: mirage-opt %s -p contraction-make-executable,convert-contraction-to-tb | filecheck %s
// RUN: not mirage-opt %s -p convert-contraction-to-tb 2>&1 | filecheck %s --check-prefix=ERR

func.func @bmm(%a: tensor<2x64x128xf16>, %b: tensor<2x128x96xf16>) -> tensor<2x64x96xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 2, 64, 96, 128>, strides = [array<i64: 8192, 128, 0, 1>, array<i64: 12288, 0, 1, 96>, array<i64: 6144, 96, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"}> : (tensor<2x64x128xf16>, tensor<2x128x96xf16>) -> tensor<2x64x96xf16>
  func.return %c : tensor<2x64x96xf16>
}
// CHECK: kn.customized(%{{.*}}, %{{.*}}) attributes {grid_dim = array<i64: 3, 1, 2>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64
// CHECK: tb.input %{{.*}} {input_map = array<i64: -1, 1, 0>, forloop_dim = 2 : i64} : tensor<2x64x128xf16> -> !tb.stensor<1x64x128xf16>
// CHECK: tb.input %{{.*}} {input_map = array<i64: 2, -1, 0>, forloop_dim = 1 : i64} : tensor<2x128x96xf16> -> !tb.stensor<1x128x32xf16>
// CHECK: tb.matmul
// CHECK: tb.forloop_accum nored
// CHECK: tb.output %{{.*}} {output_map = array<i64: 2, 1, 0>}
// CHECK-NOT: contraction.contract

// ERR: convert-contraction-to-tb: contraction.contract: the op has no exec types; run contraction-make-executable first

// ELWISE_MUL: the factor D is a third kn.customized input, loaded once per block (forloop_dim
// -1) with the output's map; each step's product is multiplied by its tile before the nored
// accumulator (sum_t (A_t B_t) * D = (A B) * D).
func.func @bmm_mul(%a: tensor<2x64x128xf16>, %b: tensor<2x128x96xf16>, %d: tensor<2x64x96xf16>) -> tensor<2x64x96xf16> {
  %c = "contraction.contract"(%a, %b, %d) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 2, 64, 96, 128>, strides = [array<i64: 8192, 128, 0, 1>, array<i64: 12288, 0, 1, 96>, array<i64: 6144, 96, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "ELWISE_MUL", prim_first = "ZERO"}> : (tensor<2x64x128xf16>, tensor<2x128x96xf16>, tensor<2x64x96xf16>) -> tensor<2x64x96xf16>
  func.return %c : tensor<2x64x96xf16>
}
// CHECK-LABEL: func.func @bmm_mul
// CHECK: kn.customized(%a, %b, %d)
// CHECK: %[[MM:.*]] = tb.matmul
// CHECK: %[[D:.*]] = tb.input %{{.*}} {input_map = array<i64: 2, 1, 0>, forloop_dim = -1 : i64} : tensor<2x64x96xf16> -> !tb.stensor<1x64x32xf16>
// CHECK: %[[P:.*]] = tb.mul %[[MM]], %[[D]]
// CHECK: tb.forloop_accum nored %[[P]]
