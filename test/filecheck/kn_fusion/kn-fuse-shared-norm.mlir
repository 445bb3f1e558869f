// RUN: mirage-opt %s -p kn-fuse | filecheck %s

// An RMSNorm of a residual that a matmul kernel writes, feeding a gate and an up projection:
// kn-simplify gives each projection its copy of the statistic; kn-partition's greedy growth puts
// the statistic's elementwise head (square, mul_scalar) with the reduction in the projections'
// kernel instead of in the O projection's (which would write h^2 for every block to re-read
// whole), and the two copies that share that kernel are merged: two kernels, no one-block
// statistic kernel, one register sum of squares beside the projections' loop.
func.func @residual_norm_mlp(%x: tensor<1x4096xf16>, %a: tensor<1x4096xf16>, %wo: tensor<4096x4096xf16> {kn.weight}, %w1: tensor<4096x12288xf16> {kn.weight}, %w3: tensor<4096x12288xf16> {kn.weight}) -> tensor<1x12288xf16> {
  %o = kn.matmul %a, %wo : tensor<1x4096xf16>, tensor<4096x4096xf16> -> tensor<1x4096xf16>
  %h = kn.add %x, %o : tensor<1x4096xf16>, tensor<1x4096xf16> -> tensor<1x4096xf16>
  %n = kn.rms_norm %h {normalized_shape = array<i64: 4096>} : tensor<1x4096xf16>
  %g = kn.matmul %n, %w1 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
  %s = kn.silu %g : tensor<1x12288xf16>
  %u = kn.matmul %n, %w3 : tensor<1x4096xf16>, tensor<4096x12288xf16> -> tensor<1x12288xf16>
  %m = kn.mul %s, %u : tensor<1x12288xf16>, tensor<1x12288xf16> -> tensor<1x12288xf16>
  func.return %m : tensor<1x12288xf16>
}
// CHECK:      %h = kn.customized(%a, %wo, %x)
// CHECK-NOT:  tb.square
// CHECK:      %m = kn.customized(%h, %w1, %w3)
// CHECK:      tb.square
// CHECK:      tb.forloop_accum red_ld_sum
// CHECK:      tb.grid_sum
// CHECK-NOT:  tb.square
// CHECK-NOT:  kn.customized
// CHECK:      func.return %m
