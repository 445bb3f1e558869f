// convert-contraction-permute-to-cute: each contraction.permute becomes one cute.permute_copy
// kernel; a moved innermost axis takes the 64 x 64 shared-memory transpose (tile = 64), a kept
// one the straight copy, 16 bytes per thread when the inner extent is a multiple of 8 (vec = 8),
// else one element (vec = 1).
// RUN: mirage-opt %s -p convert-contraction-permute-to-cute | filecheck %s
// RUN: mirage-opt %s -p kn-plan-workspace,convert-contraction-permute-to-cute -t cuda | filecheck %s --check-prefix=CUDA

func.func @perms(%x: tensor<8x96x40xf16>, %y: tensor<6x5x7xbf16>) -> (tensor<40x8x96xf16>, tensor<96x8x40xf16>, tensor<5x6x7xbf16>) {
  %t = contraction.permute %x {permutation = array<i64: 2, 0, 1>} : tensor<8x96x40xf16> -> tensor<40x8x96xf16>
  %s = contraction.permute %x {permutation = array<i64: 1, 0, 2>} : tensor<8x96x40xf16> -> tensor<96x8x40xf16>
  %u = contraction.permute %y {permutation = array<i64: 1, 0, 2>} : tensor<6x5x7xbf16> -> tensor<5x6x7xbf16>
  func.return %t, %s, %u : tensor<40x8x96xf16>, tensor<96x8x40xf16>, tensor<5x6x7xbf16>
}
// CHECK: cute.permute_copy(%x) {kernel_name = "perms_permute_0", permutation = array<i64: 2, 0, 1>, tile = 64 : i64, vec = 1 : i64} : (tensor<8x96x40xf16>) -> tensor<40x8x96xf16>
// CHECK: cute.permute_copy(%x) {kernel_name = "perms_permute_1", permutation = array<i64: 1, 0, 2>, tile = 0 : i64, vec = 8 : i64}
// CHECK: cute.permute_copy(%y) {kernel_name = "perms_permute_2", permutation = array<i64: 1, 0, 2>, tile = 0 : i64, vec = 1 : i64}
// CHECK-NOT: contraction.permute

// CUDA: void __launch_bounds__(256) perms_permute_0(
// CUDA-NEXT: unsigned short* __restrict__ out, const unsigned short* __restrict__ in) {
// CUDA: const int p0 = (int)(rest % 1) * 64;
// CUDA: const int q0 = (int)(rest % 2) * 64;
// CUDA: if (p < 40 && q < 96) tile[y * 66 + x] = in[ib + p + (long long)q * 40LL];
// CUDA: if (p < 40 && q < 96) out[ob + q + (long long)p * 768LL] = tile[x * 66 + y];
// CUDA: void __launch_bounds__(256) perms_permute_1(
// CUDA: if (v >= 3840LL) return;
// CUDA: *reinterpret_cast<uint4*>(out + ob)
// CUDA: void __launch_bounds__(256) perms_permute_2(
// CUDA: for (int e = 0; e < 1; ++e) out[ob + e] = in[ib + e];
