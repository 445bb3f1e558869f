// RUN: mirage-opt %s -p kn-expand-composites --split-input-file | filecheck %s --check-prefix=EXPAND
// RUN: mirage-opt %s -p kn-expand-composites,kn-simplify,kn-recognize-composites --split-input-file | filecheck %s --check-prefix=RECOG

// rms_norm before a matmul: expansion exposes the rms statistic; simplification moves the
// division after the matmul, so recognition does NOT fold it back and records the pattern.
func.func @rms_linear(%x: tensor<2x4096xf16>, %w: tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
  %n = kn.rms_norm %x {normalized_shape = array<i64: 4096>} : tensor<2x4096xf16>
  %o = kn.matmul %n, %w : tensor<2x4096xf16>, tensor<4096x6144xf16> -> tensor<2x6144xf16>
  func.return %o : tensor<2x6144xf16>
}
// EXPAND-LABEL: func.func @rms_linear
// EXPAND-NEXT:    %[[SQ:.*]] = kn.square %x : tensor<2x4096xf16>
// EXPAND-NEXT:    %[[MS:.*]] = kn.mul_scalar %[[SQ]] {scalar = 0.000244140625 : f64}
// EXPAND-NEXT:    %[[R:.*]] = kn.reduction %[[MS]] {dim = 1 : i64, size = 1 : i64} : tensor<2x4096xf16> -> tensor<2x1xf16>
// EXPAND-NEXT:    %[[Q:.*]] = kn.sqrt %[[R]] : tensor<2x1xf16>
// EXPAND-NEXT:    %[[N:.*]] = kn.div %x, %[[Q]] : tensor<2x4096xf16>, tensor<2x1xf16> -> tensor<2x4096xf16>
// EXPAND-NEXT:    kn.matmul %[[N]], %w
// EXPAND-NOT:     kn.rms_norm

// RECOG-LABEL: func.func @rms_linear
// RECOG:         %[[Q:.*]] = kn.sqrt
// RECOG-NEXT:    %[[MM:.*]] = kn.matmul %x, %w
// RECOG-NEXT:    kn.div %[[MM]], %[[Q]] {kn.composite = "rms_norm_matmul"}
// RECOG-NOT:     kn.rms_norm

// -----

// Row-local rms norms (ntrans): nothing moves, so recognition folds them back into one op
// (one tb.rms_norm per row tile instead of five ops).
func.func @rowwise(%h: tensor<8x4096xf16>, %x: tensor<8x4096xf16>) -> tensor<8x4096xf16> {
  %nh = kn.rms_norm %h {normalized_shape = array<i64: 4096>} : tensor<8x4096xf16>
  %a = kn.add %nh, %x : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
  func.return %a : tensor<8x4096xf16>
}
// EXPAND-LABEL: func.func @rowwise
// EXPAND:         kn.square %h
// EXPAND-NOT:     kn.rms_norm
// RECOG-LABEL: func.func @rowwise
// RECOG-NEXT:    %[[N:.*]] = kn.rms_norm %h {normalized_shape = array<i64: 4096>} : tensor<8x4096xf16>
// RECOG-NEXT:    kn.add %[[N]], %x
// RECOG-NOT:     kn.square

// -----

// Two normalized dims stay expanded (tb.rms_norm normalises the last dim only).
func.func @two_dims(%x: tensor<4x8x64xf32>) -> tensor<4x8x64xf32> {
  %y = kn.rms_norm %x {normalized_shape = array<i64: 8, 64>} : tensor<4x8x64xf32>
  func.return %y : tensor<4x8x64xf32>
}
// RECOG-LABEL: func.func @two_dims
// RECOG:         kn.reduction {{.*}}dim = 2
// RECOG:         kn.reduction {{.*}}dim = 1
// RECOG-NOT:     kn.rms_norm

// -----

// Softmax records: the plain softmax and the simplified attention form.
func.func @softmax(%s: tensor<4x128xf32>, %t: tensor<2x16x512xf16>, %v: tensor<2x512x64xf16>) -> (tensor<4x128xf32>, tensor<2x16x64xf16>) {
  %e = kn.exp %s : tensor<4x128xf32>
  %z = kn.reduction %e {dim = 1 : i64, size = 1 : i64} : tensor<4x128xf32> -> tensor<4x1xf32>
  %p = kn.div %e, %z : tensor<4x128xf32>, tensor<4x1xf32> -> tensor<4x128xf32>
  %e2 = kn.exp %t : tensor<2x16x512xf16>
  %z2 = kn.reduction %e2 {dim = 2 : i64, size = 1 : i64} : tensor<2x16x512xf16> -> tensor<2x16x1xf16>
  %p2 = kn.div %e2, %z2 : tensor<2x16x512xf16>, tensor<2x16x1xf16> -> tensor<2x16x512xf16>
  %o = kn.matmul %p2, %v : tensor<2x16x512xf16>, tensor<2x512x64xf16> -> tensor<2x16x64xf16>
  func.return %p, %o : tensor<4x128xf32>, tensor<2x16x64xf16>
}
// RECOG-LABEL: func.func @softmax
// RECOG:         kn.div %e, %z {kn.composite = "softmax"}
// RECOG:         %[[MM:.*]] = kn.matmul %e2, %v
// RECOG-NEXT:    kn.div %[[MM]], %z2 {kn.composite = "softmax_matmul"}
