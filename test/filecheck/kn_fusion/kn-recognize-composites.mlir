// kn-recognize-composites, on kernel graphs already in expanded form: folds a row-local rms
// norm `div(x, sqrt(reduction(mul_scalar(square(x), 1/n), last)))` with single-use
// intermediates back into `kn.rms_norm x`, and records `kn.composite` on the div that
// completes a softmax, a softmax @ V, or an rms statistic applied after a matmul. Checked:
// each rewrite or record, and the near misses the pass must leave alone.
// RUN: mirage-opt %s -p kn-recognize-composites --split-input-file | filecheck %s

func.func @fold(%x: tensor<8x64xf16>) -> tensor<8x64xf16> {
  %sq = kn.square %x : tensor<8x64xf16>
  %ms = kn.mul_scalar %sq {scalar = 0.015625 : f64} : tensor<8x64xf16>
  %r = kn.reduction %ms {dim = 1 : i64, size = 1 : i64} : tensor<8x64xf16> -> tensor<8x1xf16>
  %q = kn.sqrt %r : tensor<8x1xf16>
  %y = kn.div %x, %q : tensor<8x64xf16>, tensor<8x1xf16> -> tensor<8x64xf16>
  func.return %y : tensor<8x64xf16>
}
// CHECK-LABEL: func.func @fold
// CHECK-NEXT:    %[[N:.*]] = kn.rms_norm %x {normalized_shape = array<i64: 64>} : tensor<8x64xf16>
// CHECK-NEXT:    func.return %[[N]]

// -----

// The statistic is also returned (two uses of sqrt), and the scale is not 1/64: no fold.
func.func @no_fold(%x: tensor<8x64xf16>) -> (tensor<8x64xf16>, tensor<8x1xf16>, tensor<8x64xf16>) {
  %sq = kn.square %x : tensor<8x64xf16>
  %ms = kn.mul_scalar %sq {scalar = 0.015625 : f64} : tensor<8x64xf16>
  %r = kn.reduction %ms {dim = 1 : i64, size = 1 : i64} : tensor<8x64xf16> -> tensor<8x1xf16>
  %q = kn.sqrt %r : tensor<8x1xf16>
  %y = kn.div %x, %q : tensor<8x64xf16>, tensor<8x1xf16> -> tensor<8x64xf16>
  %sq2 = kn.square %x : tensor<8x64xf16>
  %ms2 = kn.mul_scalar %sq2 {scalar = 0.5 : f64} : tensor<8x64xf16>
  %r2 = kn.reduction %ms2 {dim = 1 : i64, size = 1 : i64} : tensor<8x64xf16> -> tensor<8x1xf16>
  %q2 = kn.sqrt %r2 : tensor<8x1xf16>
  %y2 = kn.div %x, %q2 : tensor<8x64xf16>, tensor<8x1xf16> -> tensor<8x64xf16>
  func.return %y, %q, %y2 : tensor<8x64xf16>, tensor<8x1xf16>, tensor<8x64xf16>
}
// CHECK-LABEL: func.func @no_fold
// CHECK-NOT:     kn.rms_norm
// CHECK-NOT:     kn.composite
// CHECK:         kn.div %x, %q : tensor<8x64xf16>
// CHECK:         kn.div %x, %q2 : tensor<8x64xf16>

// -----

// The rms statistic of x divides x @ W (kn-simplify moved the division): recorded, not folded.
func.func @rms_matmul(%x: tensor<2x64xf16>, %w: tensor<64x32xf16>) -> tensor<2x32xf16> {
  %sq = kn.square %x : tensor<2x64xf16>
  %ms = kn.mul_scalar %sq {scalar = 0.015625 : f64} : tensor<2x64xf16>
  %r = kn.reduction %ms {dim = 1 : i64, size = 1 : i64} : tensor<2x64xf16> -> tensor<2x1xf16>
  %q = kn.sqrt %r : tensor<2x1xf16>
  %mm = kn.matmul %x, %w : tensor<2x64xf16>, tensor<64x32xf16> -> tensor<2x32xf16>
  %y = kn.div %mm, %q : tensor<2x32xf16>, tensor<2x1xf16> -> tensor<2x32xf16>
  func.return %y : tensor<2x32xf16>
}
// CHECK-LABEL: func.func @rms_matmul
// CHECK:         kn.div %mm, %q {kn.composite = "rms_norm_matmul"}
// CHECK-NOT:     kn.rms_norm

// -----

// A softmax over dim 0 and the attention form exp(S) @ V / rowsum(exp(S)).
func.func @softmax(%s: tensor<4x16xf32>, %t: tensor<16x32xf16>, %v: tensor<32x8xf16>) -> (tensor<4x16xf32>, tensor<16x8xf16>) {
  %e = kn.exp %s : tensor<4x16xf32>
  %z = kn.reduction %e {dim = 0 : i64, size = 1 : i64} : tensor<4x16xf32> -> tensor<1x16xf32>
  %p = kn.div %e, %z : tensor<4x16xf32>, tensor<1x16xf32> -> tensor<4x16xf32>
  %e2 = kn.exp %t : tensor<16x32xf16>
  %z2 = kn.reduction %e2 {dim = 1 : i64, size = 1 : i64} : tensor<16x32xf16> -> tensor<16x1xf16>
  %o = kn.matmul %e2, %v : tensor<16x32xf16>, tensor<32x8xf16> -> tensor<16x8xf16>
  %p2 = kn.div %o, %z2 : tensor<16x8xf16>, tensor<16x1xf16> -> tensor<16x8xf16>
  func.return %p, %p2 : tensor<4x16xf32>, tensor<16x8xf16>
}
// CHECK-LABEL: func.func @softmax
// CHECK:         kn.div %e, %z {kn.composite = "softmax"}
// CHECK:         kn.div %o, %z2 {kn.composite = "softmax_matmul"}

// -----

// Not recorded: exp(S) @ V divided by a column sum (dim 0), and a div already recorded
// (an rms pattern marked by an earlier run is neither folded nor re-marked).
func.func @kept(%t: tensor<32x32xf16>, %v: tensor<32x32xf16>, %x: tensor<8x64xf16>) -> (tensor<32x32xf16>, tensor<8x64xf16>) {
  %e = kn.exp %t : tensor<32x32xf16>
  %z = kn.reduction %e {dim = 0 : i64, size = 1 : i64} : tensor<32x32xf16> -> tensor<1x32xf16>
  %o = kn.matmul %e, %v : tensor<32x32xf16>, tensor<32x32xf16> -> tensor<32x32xf16>
  %p = kn.div %o, %z : tensor<32x32xf16>, tensor<1x32xf16> -> tensor<32x32xf16>
  %sq = kn.square %x : tensor<8x64xf16>
  %ms = kn.mul_scalar %sq {scalar = 0.015625 : f64} : tensor<8x64xf16>
  %r = kn.reduction %ms {dim = 1 : i64, size = 1 : i64} : tensor<8x64xf16> -> tensor<8x1xf16>
  %q = kn.sqrt %r : tensor<8x1xf16>
  %y = kn.div %x, %q {kn.composite = "mine"} : tensor<8x64xf16>, tensor<8x1xf16> -> tensor<8x64xf16>
  func.return %p, %y : tensor<32x32xf16>, tensor<8x64xf16>
}
// CHECK-LABEL: func.func @kept
// CHECK:         kn.div %o, %z : tensor<32x32xf16>
// CHECK:         kn.div %x, %q {kn.composite = "mine"}
// CHECK-NOT:     kn.rms_norm
