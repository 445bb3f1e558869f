// RUN: mirage-opt %s -p kn-simplify --split-input-file | filecheck %s

// A row factor (constant along the contracted dim) moves from the lhs to the matmul result:
// (X / r) @ W -> (X @ W) / r.
func.func @div_lhs(%x: tensor<2x4096xf16>, %r: tensor<2x1xf16>, %w: tensor<4096x64xf16>) -> tensor<2x64xf16> {
  %n = kn.div %x, %r : tensor<2x4096xf16>, tensor<2x1xf16> -> tensor<2x4096xf16>
  %o = kn.matmul %n, %w : tensor<2x4096xf16>, tensor<4096x64xf16> -> tensor<2x64xf16>
  func.return %o : tensor<2x64xf16>
}
// CHECK-LABEL: func.func @div_lhs
// CHECK-NEXT:    %[[MM:.*]] = kn.matmul %x, %w : tensor<2x4096xf16>, tensor<4096x64xf16> -> tensor<2x64xf16>
// CHECK-NEXT:    %[[D:.*]] = kn.div %[[MM]], %r : tensor<2x64xf16>, tensor<2x1xf16> -> tensor<2x64xf16>
// CHECK-NEXT:    func.return %[[D]]

// -----

// mul with the factor first, and a column factor (constant along W's contracted rows) on the rhs.
func.func @mul_both_sides(%x: tensor<8x256xf32>, %r: tensor<8x1xf32>, %w: tensor<256x32xf32>, %c: tensor<1x32xf32>) -> tensor<8x32xf32> {
  %a = kn.mul %r, %x : tensor<8x1xf32>, tensor<8x256xf32> -> tensor<8x256xf32>
  %b = kn.div %w, %c : tensor<256x32xf32>, tensor<1x32xf32> -> tensor<256x32xf32>
  %o = kn.matmul %a, %b : tensor<8x256xf32>, tensor<256x32xf32> -> tensor<8x32xf32>
  func.return %o : tensor<8x32xf32>
}
// CHECK-LABEL: func.func @mul_both_sides
// CHECK-NEXT:    %[[MM:.*]] = kn.matmul %x, %w
// CHECK-NEXT:    %[[D:.*]] = kn.div %[[MM]], %c : tensor<8x32xf32>, tensor<1x32xf32> -> tensor<8x32xf32>
// CHECK-NEXT:    %[[M:.*]] = kn.mul %[[D]], %r : tensor<8x32xf32>, tensor<8x1xf32> -> tensor<8x32xf32>
// CHECK-NEXT:    func.return %[[M]]

// -----

// Softmax then matmul: exp(a) / sum(exp(a)) @ V -> (exp(a) @ V) / sum(exp(a)) (batched).
func.func @softmax_matmul(%s: tensor<2x16x512xf16>, %v: tensor<2x512x64xf16>) -> tensor<2x16x64xf16> {
  %e = kn.exp %s : tensor<2x16x512xf16>
  %z = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<2x16x512xf16> -> tensor<2x16x1xf16>
  %p = kn.div %e, %z : tensor<2x16x512xf16>, tensor<2x16x1xf16> -> tensor<2x16x512xf16>
  %o = kn.matmul %p, %v : tensor<2x16x512xf16>, tensor<2x512x64xf16> -> tensor<2x16x64xf16>
  func.return %o : tensor<2x16x64xf16>
}
// CHECK-LABEL: func.func @softmax_matmul
// CHECK-NEXT:    %[[E:.*]] = kn.exp %s
// CHECK-NEXT:    %[[Z:.*]] = kn.reduction %[[E]] {dim = 2 : i64, size = 1 : i64}
// CHECK-NEXT:    %[[MM:.*]] = kn.matmul %[[E]], %v : tensor<2x16x512xf16>, tensor<2x512x64xf16> -> tensor<2x16x64xf16>
// CHECK-NEXT:    %[[O:.*]] = kn.div %[[MM]], %[[Z]] : tensor<2x16x64xf16>, tensor<2x16x1xf16> -> tensor<2x16x64xf16>
// CHECK-NEXT:    func.return %[[O]]

// -----

// mul_scalar moves across the matmul and folds with the next one; x * 1.0 disappears.
func.func @scalars(%x: tensor<4x64xf32>, %w: tensor<64x16xf32>) -> tensor<4x16xf32> {
  %a = kn.mul_scalar %x {scalar = 2.0 : f64} : tensor<4x64xf32>
  %o = kn.matmul %a, %w : tensor<4x64xf32>, tensor<64x16xf32> -> tensor<4x16xf32>
  %p = kn.mul_scalar %o {scalar = 0.25 : f64} : tensor<4x16xf32>
  %q = kn.mul_scalar %p {scalar = 1.0 : f64} : tensor<4x16xf32>
  func.return %q : tensor<4x16xf32>
}
// CHECK-LABEL: func.func @scalars
// CHECK-NEXT:    %[[MM:.*]] = kn.matmul %x, %w
// CHECK-NEXT:    %[[S:.*]] = kn.mul_scalar %[[MM]] {scalar = 5.000000e-01 : f64}
// CHECK-NEXT:    func.return %[[S]]

// -----

// CSE merges equal ops; dead ops are erased.
func.func @cse(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %a = kn.exp %x : tensor<4x64xf32>
  %b = kn.exp %x : tensor<4x64xf32>
  %dead = kn.sqrt %x : tensor<4x64xf32>
  %c = kn.add %a, %b : tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
  func.return %c : tensor<4x64xf32>
}
// CHECK-LABEL: func.func @cse
// CHECK-NEXT:    %[[A:.*]] = kn.exp %x
// CHECK-NEXT:    %[[C:.*]] = kn.add %[[A]], %[[A]]
// CHECK-NEXT:    func.return %[[C]]

// -----

// No rewrite: the factor varies along the contracted dim, or the scaled value has another use.
func.func @negative(%x: tensor<2x64xf32>, %r: tensor<1x64xf32>, %s: tensor<2x1xf32>, %w: tensor<64x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x64xf32>) {
  %a = kn.div %x, %r : tensor<2x64xf32>, tensor<1x64xf32> -> tensor<2x64xf32>
  %o = kn.matmul %a, %w : tensor<2x64xf32>, tensor<64x8xf32> -> tensor<2x8xf32>
  %b = kn.div %x, %s : tensor<2x64xf32>, tensor<2x1xf32> -> tensor<2x64xf32>
  %p = kn.matmul %b, %w : tensor<2x64xf32>, tensor<64x8xf32> -> tensor<2x8xf32>
  func.return %o, %p, %b : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x64xf32>
}
// CHECK-LABEL: func.func @negative
// CHECK-NEXT:    %a = kn.div %x, %r
// CHECK-NEXT:    %o = kn.matmul %a, %w
// CHECK-NEXT:    %b = kn.div %x, %s
// CHECK-NEXT:    %p = kn.matmul %b, %w

// -----

// A row statistic shared by two matmuls (one RMSNorm feeding two projections): each matmul gets
// its own copy of the statistic's ops and of the division, moved past it, so that each
// consumer kernel computes its statistic beside its loop (no kernel of its own for it).
func.func @shared_row_scale(%x: tensor<1x256xf16>, %wq: tensor<256x64xf16>, %wk: tensor<256x32xf16>) -> (tensor<1x64xf16>, tensor<1x32xf16>) {
  %s = kn.square %x : tensor<1x256xf16>
  %m = kn.mul_scalar %s {scalar = 3.906250e-03 : f64} : tensor<1x256xf16>
  %r = kn.reduction %m {dim = 1 : i64, size = 1 : i64} : tensor<1x256xf16> -> tensor<1x1xf16>
  %q = kn.sqrt %r : tensor<1x1xf16>
  %n = kn.div %x, %q : tensor<1x256xf16>, tensor<1x1xf16> -> tensor<1x256xf16>
  %a = kn.matmul %n, %wq : tensor<1x256xf16>, tensor<256x64xf16> -> tensor<1x64xf16>
  %b = kn.matmul %n, %wk : tensor<1x256xf16>, tensor<256x32xf16> -> tensor<1x32xf16>
  func.return %a, %b : tensor<1x64xf16>, tensor<1x32xf16>
}
// CHECK-LABEL: func.func @shared_row_scale
// CHECK-COUNT-2: kn.square %x
// CHECK-DAG:     %[[A:.*]] = kn.matmul %x, %wq
// CHECK-DAG:     %[[B:.*]] = kn.matmul %x, %wk
// CHECK-DAG:     %[[DA:.*]] = kn.div %[[A]], %{{.*}} : tensor<1x64xf16>, tensor<1x1xf16>
// CHECK-DAG:     %[[DB:.*]] = kn.div %[[B]], %{{.*}} : tensor<1x32xf16>, tensor<1x1xf16>
// CHECK:         func.return %[[DA]], %[[DB]]

// -----

// A row factor that is not a statistic of the scaled tensor stays shared.
func.func @shared_foreign_scale(%x: tensor<1x256xf16>, %r: tensor<1x1xf16>, %wq: tensor<256x64xf16>, %wk: tensor<256x32xf16>) -> (tensor<1x64xf16>, tensor<1x32xf16>) {
  %n = kn.div %x, %r : tensor<1x256xf16>, tensor<1x1xf16> -> tensor<1x256xf16>
  %a = kn.matmul %n, %wq : tensor<1x256xf16>, tensor<256x64xf16> -> tensor<1x64xf16>
  %b = kn.matmul %n, %wk : tensor<1x256xf16>, tensor<256x32xf16> -> tensor<1x32xf16>
  func.return %a, %b : tensor<1x64xf16>, tensor<1x32xf16>
}
// CHECK-LABEL: func.func @shared_foreign_scale
// CHECK-NEXT:    %[[N:.*]] = kn.div %x, %r
// CHECK-NEXT:    kn.matmul %[[N]], %wq
// CHECK-NEXT:    kn.matmul %[[N]], %wk

// -----

// add_scalar chains fold into one (scalars added); x + 0.0 disappears.
func.func @add_scalar_chain(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %a = kn.add_scalar %x {scalar = 1.5 : f64} : tensor<4x16xf32>
  %b = kn.add_scalar %a {scalar = 2.0 : f64} : tensor<4x16xf32>
  %c = kn.add_scalar %b {scalar = 0.0 : f64} : tensor<4x16xf32>
  func.return %c : tensor<4x16xf32>
}
// CHECK-LABEL: func.func @add_scalar_chain
// CHECK-NEXT:    %[[A:.*]] = kn.add_scalar %x {scalar = 3.500000e+00 : f64} : tensor<4x16xf32>
// CHECK-NEXT:    func.return %[[A]] : tensor<4x16xf32>
