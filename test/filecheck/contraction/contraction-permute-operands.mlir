// contraction-permute-operands: aebf,dfce->abcd (every index 64, coupled-cluster style) has no
// batched-GEMM view: A interleaves its M (a, b) and K (e, f) dims, B its N (d, c) and K (f, e)
// dims.  The pass permutes both operands (A -> a b e f, B -> e f c d: K order of A, B
// N-contiguous; the cheapest candidate), rewrites their strides, and the GEMM view is one
// 4096^3 GEMM; then convert-contraction-to-hopper and convert-contraction-permute-to-cute
// give two copy kernels (a straight 16-byte copy for A, whose inner axis stays, and a 64 x 64
// tiled transpose for B) and the wgmma GEMM.  A contraction that has a view is left alone.
// RUN: mirage-opt %s -p contraction-permute-operands | filecheck %s
// RUN: mirage-opt %s -p contraction-permute-operands,kn-plan-workspace,convert-contraction-to-hopper,convert-contraction-permute-to-cute | filecheck %s --check-prefix=LOW
// RUN: mirage-opt %s -p contraction-permute-operands,kn-plan-workspace,convert-contraction-to-hopper,convert-contraction-permute-to-cute -t cuda | filecheck %s --check-prefix=CUDA

func.func @ccsd(%a: tensor<64x64x64x64xf16>, %b: tensor<64x64x64x64xf16>) -> tensor<64x64x64x64xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["M", "M", "N", "N", "K", "K"], dim_sizes = array<i64: 64, 64, 64, 64, 64, 64>, strides = [array<i64: 262144, 64, 0, 0, 4096, 1>, array<i64: 0, 0, 64, 262144, 1, 4096>, array<i64: 262144, 4096, 64, 1, 0, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"}> : (tensor<64x64x64x64xf16>, tensor<64x64x64x64xf16>) -> tensor<64x64x64x64xf16>
  func.return %c : tensor<64x64x64x64xf16>
}
// CHECK-LABEL: func.func @ccsd
// CHECK: %[[A:.*]] = contraction.permute %a {permutation = array<i64: 0, 2, 1, 3>} : tensor<64x64x64x64xf16> -> tensor<64x64x64x64xf16>
// CHECK: %[[B:.*]] = contraction.permute %b {permutation = array<i64: 3, 1, 2, 0>}
// CHECK: "contraction.contract"(%[[A]], %[[B]])
// CHECK-SAME: strides = [array<i64: 262144, 4096, 0, 0, 64, 1>, array<i64: 0, 0, 64, 1, 262144, 4096>, array<i64: 262144, 4096, 64, 1, 0, 0>]

// LOW: func.func @ccsd{{.*}}kn.workspace_size = 67108864
// LOW: cute.permute_copy(%a) {kn.workspace_offset = array<i64: {{[0-9]+}}>, kernel_name = "ccsd_permute_0", permutation = array<i64: 0, 2, 1, 3>, tile = 0 : i64, vec = 8 : i64}
// LOW: cute.permute_copy(%b) {kn.workspace_offset = array<i64: {{[0-9]+}}>, kernel_name = "ccsd_permute_1", permutation = array<i64: 3, 1, 2, 0>, tile = 64 : i64, vec = 1 : i64}
// LOW: cute.hopper_gemm({{.*}}) {kernel_name = "ccsd_hopper_gemm_0", gemm = array<i64: 4096, 4096, 4096, 1, 1>
// LOW-SAME: trans_b = true

// CUDA: void __launch_bounds__(256) ccsd_permute_0(
// CUDA: *reinterpret_cast<uint4*>(out + ob) = *reinterpret_cast<const uint4*>(in + ib);
// CUDA: void __launch_bounds__(256) ccsd_permute_1(
// CUDA: tile[y * 66 + x] = in[ib + p + (long long)q * 262144LL];
// CUDA: out[ob + q + (long long)p * 262144LL] = tile[x * 66 + y];


func.func @bmm(%a: tensor<4x64x32xf16>, %b: tensor<4x32x16xf16>) -> tensor<4x64x16xf16> {
  %c = "contraction.contract"(%a, %b) <{dim_types = ["C", "M", "N", "K"], dim_sizes = array<i64: 4, 64, 16, 32>, strides = [array<i64: 2048, 32, 0, 1>, array<i64: 512, 0, 1, 16>, array<i64: 1024, 16, 1, 0>], data_type = "FLOAT16", prim_main = "GEMM", prim_last = "NONE", prim_first = "ZERO"}> : (tensor<4x64x32xf16>, tensor<4x32x16xf16>) -> tensor<4x64x16xf16>
  func.return %c : tensor<4x64x16xf16>
}
// CHECK-LABEL: func.func @bmm
// CHECK-NOT: contraction.permute
// CHECK: "contraction.contract"(%a, %b)
