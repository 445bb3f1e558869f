// RUN: mirage-opt %s -p kn-widen-sums --split-input-file | filecheck %s

// A softmax's row sum of a 16-bit graph is kept in f32; the division reads it and rounds to f16.
func.func @softmax(%x: tensor<8x131072xf16>) -> tensor<8x131072xf16> {
  %m = kn.reduction_max %x {dim = 1 : i64} : tensor<8x131072xf16> -> tensor<8x1xf16>
  %d = kn.sub %x, %m : tensor<8x131072xf16>, tensor<8x1xf16> -> tensor<8x131072xf16>
  %e = kn.exp %d : tensor<8x131072xf16>
  %s = kn.reduction %e {dim = 1 : i64, size = 1 : i64} : tensor<8x131072xf16> -> tensor<8x1xf16>
  %o = kn.div %e, %s : tensor<8x131072xf16>, tensor<8x1xf16> -> tensor<8x131072xf16>
  func.return %o : tensor<8x131072xf16>
}
// CHECK-LABEL: func.func @softmax
// CHECK:         %m = kn.reduction_max %x {dim = 1 : i64} : tensor<8x131072xf16> -> tensor<8x1xf16>
// CHECK:         %s = kn.reduction %e {dim = 1 : i64, size = 1 : i64} : tensor<8x131072xf16> -> tensor<8x1xf32>
// CHECK-NEXT:    %o = kn.div %e, %s : tensor<8x131072xf16>, tensor<8x1xf32> -> tensor<8x131072xf16>

// -----

// The unary ops over a sum (a mean, its square root) are widened with it, in bf16 too.
func.func @layernorm_stats(%x: tensor<4x4096xbf16>) -> tensor<4x4096xbf16> {
  %s = kn.reduction %x {dim = 1 : i64, size = 1 : i64} : tensor<4x4096xbf16> -> tensor<4x1xbf16>
  %mean = kn.mul_scalar %s {scalar = 0.000244140625 : f64} : tensor<4x1xbf16>
  %r = kn.sqrt %mean : tensor<4x1xbf16>
  %o = kn.div %x, %r : tensor<4x4096xbf16>, tensor<4x1xbf16> -> tensor<4x4096xbf16>
  func.return %o : tensor<4x4096xbf16>
}
// CHECK-LABEL: func.func @layernorm_stats
// CHECK:         %s = kn.reduction %x {dim = 1 : i64, size = 1 : i64} : tensor<4x4096xbf16> -> tensor<4x1xf32>
// CHECK-NEXT:    %mean = kn.mul_scalar %s {scalar = 0.000244140625 : f64} : tensor<4x1xf32>
// CHECK-NEXT:    %r = kn.sqrt %mean : tensor<4x1xf32>
// CHECK-NEXT:    %o = kn.div %x, %r : tensor<4x4096xbf16>, tensor<4x1xf32> -> tensor<4x4096xbf16>

// -----

// Kept as declared: a sum that is a graph output, one a matmul reads, and an fp32 graph's.
func.func @kept(%x: tensor<4x64xf16>, %w: tensor<1x8xf16>, %y: tensor<4x64xf32>) -> (tensor<4x1xf16>, tensor<4x8xf16>, tensor<4x64xf32>) {
  %out = kn.reduction %x {dim = 1 : i64, size = 1 : i64} : tensor<4x64xf16> -> tensor<4x1xf16>
  %t = kn.reduction %x {dim = 1 : i64, size = 1 : i64} : tensor<4x64xf16> -> tensor<4x1xf16>
  %mm = kn.matmul %t, %w : tensor<4x1xf16>, tensor<1x8xf16> -> tensor<4x8xf16>
  %s32 = kn.reduction %y {dim = 1 : i64, size = 1 : i64} : tensor<4x64xf32> -> tensor<4x1xf32>
  %o32 = kn.div %y, %s32 : tensor<4x64xf32>, tensor<4x1xf32> -> tensor<4x64xf32>
  func.return %out, %mm, %o32 : tensor<4x1xf16>, tensor<4x8xf16>, tensor<4x64xf32>
}
// CHECK-LABEL: func.func @kept
// CHECK:         %out = kn.reduction %x {dim = 1 : i64, size = 1 : i64} : tensor<4x64xf16> -> tensor<4x1xf16>
// CHECK-NEXT:    %t = kn.reduction %x {dim = 1 : i64, size = 1 : i64} : tensor<4x64xf16> -> tensor<4x1xf16>
// CHECK:         %s32 = kn.reduction %y {dim = 1 : i64, size = 1 : i64} : tensor<4x64xf32> -> tensor<4x1xf32>

// -----

// A product divided by its row statistic (the records kn-recognize-composites leaves:
// rms_norm_matmul, softmax_matmul) is kept in f32: X @ W is rms(X) times the result, and
// exp(a) @ V sums a row of keys of V; the division rounds it to f16.
func.func @products(%x: tensor<2x512xf16>, %w: tensor<512x64xf16>, %q: tensor<2x1xf16>, %e: tensor<2x512xf16>, %v: tensor<512x64xf16>) -> (tensor<2x64xf16>, tensor<2x64xf16>) {
  %mm = kn.matmul %x, %w : tensor<2x512xf16>, tensor<512x64xf16> -> tensor<2x64xf16>
  %a = kn.div %mm, %q {kn.composite = "rms_norm_matmul"} : tensor<2x64xf16>, tensor<2x1xf16> -> tensor<2x64xf16>
  %pv = kn.matmul %e, %v : tensor<2x512xf16>, tensor<512x64xf16> -> tensor<2x64xf16>
  %s = kn.reduction %e {dim = 1 : i64, size = 1 : i64} : tensor<2x512xf16> -> tensor<2x1xf16>
  %b = kn.div %pv, %s {kn.composite = "softmax_matmul"} : tensor<2x64xf16>, tensor<2x1xf16> -> tensor<2x64xf16>
  func.return %a, %b : tensor<2x64xf16>, tensor<2x64xf16>
}
// CHECK-LABEL: func.func @products
// CHECK:         %mm = kn.matmul %x, %w : tensor<2x512xf16>, tensor<512x64xf16> -> tensor<2x64xf32>
// CHECK-NEXT:    %a = kn.div %mm, %q {kn.composite = "rms_norm_matmul"} : tensor<2x64xf32>, tensor<2x1xf16> -> tensor<2x64xf16>
// CHECK-NEXT:    %pv = kn.matmul %e, %v : tensor<2x512xf16>, tensor<512x64xf16> -> tensor<2x64xf32>
// CHECK:         %b = kn.div %pv, %s {kn.composite = "softmax_matmul"} : tensor<2x64xf32>, tensor<2x1xf32> -> tensor<2x64xf16>

// -----

// Attention scores up to exp: the product, its scale, causal mask and row maximum get f32 (scores
// of +-50 rounded to bf16 are off by 0.125, their exp by 13 %); the sub rounds s - max(s).
func.func @attention_scores(%q: tensor<2x8x64xbf16>, %k: tensor<2x64x256xbf16>) -> tensor<2x8x256xbf16> {
  %s = kn.matmul %q, %k : tensor<2x8x64xbf16>, tensor<2x64x256xbf16> -> tensor<2x8x256xbf16>
  %x = kn.mul_scalar %s {scalar = 0.125 : f64} : tensor<2x8x256xbf16>
  %c = kn.causal_mask %x {offset = 248 : i64} : tensor<2x8x256xbf16>
  %m = kn.reduction_max %c {dim = 2 : i64} : tensor<2x8x256xbf16> -> tensor<2x8x1xbf16>
  %d = kn.sub %c, %m : tensor<2x8x256xbf16>, tensor<2x8x1xbf16> -> tensor<2x8x256xbf16>
  %e = kn.exp %d : tensor<2x8x256xbf16>
  func.return %e : tensor<2x8x256xbf16>
}
// CHECK-LABEL: func.func @attention_scores
// CHECK:         %s = kn.matmul %q, %k : tensor<2x8x64xbf16>, tensor<2x64x256xbf16> -> tensor<2x8x256xf32>
// CHECK-NEXT:    %x = kn.mul_scalar %s {scalar = 1.250000e-01 : f64} : tensor<2x8x256xf32>
// CHECK-NEXT:    %c = kn.causal_mask %x {offset = 248 : i64} : tensor<2x8x256xf32>
// CHECK-NEXT:    %m = kn.reduction_max %c {dim = 2 : i64} : tensor<2x8x256xf32> -> tensor<2x8x1xf32>
// CHECK-NEXT:    %d = kn.sub %c, %m : tensor<2x8x256xf32>, tensor<2x8x1xf32> -> tensor<2x8x256xbf16>

// -----

// Kept as declared: scores without a maximum (exp of the raw product), scores a graph output, and
// scores whose maximum is returned.
func.func @scores_kept(%q: tensor<8x64xf16>, %k: tensor<64x128xf16>) -> (tensor<8x128xf16>, tensor<8x128xf16>, tensor<8x1xf16>) {
  %s0 = kn.matmul %q, %k : tensor<8x64xf16>, tensor<64x128xf16> -> tensor<8x128xf16>
  %e0 = kn.exp %s0 : tensor<8x128xf16>
  %s1 = kn.matmul %q, %k : tensor<8x64xf16>, tensor<64x128xf16> -> tensor<8x128xf16>
  %m1 = kn.reduction_max %s1 {dim = 1 : i64} : tensor<8x128xf16> -> tensor<8x1xf16>
  %d1 = kn.sub %s1, %m1 : tensor<8x128xf16>, tensor<8x1xf16> -> tensor<8x128xf16>
  %s2 = kn.matmul %q, %k : tensor<8x64xf16>, tensor<64x128xf16> -> tensor<8x128xf16>
  %m2 = kn.reduction_max %s2 {dim = 1 : i64} : tensor<8x128xf16> -> tensor<8x1xf16>
  %d2 = kn.sub %s2, %m2 : tensor<8x128xf16>, tensor<8x1xf16> -> tensor<8x128xf16>
  %o = kn.add %d1, %d2 : tensor<8x128xf16>, tensor<8x128xf16> -> tensor<8x128xf16>
  func.return %e0, %s1, %m2 : tensor<8x128xf16>, tensor<8x128xf16>, tensor<8x1xf16>
}
// CHECK-LABEL: func.func @scores_kept
// CHECK:         %s0 = kn.matmul %q, %k : tensor<8x64xf16>, tensor<64x128xf16> -> tensor<8x128xf16>
// CHECK:         %s1 = kn.matmul %q, %k : tensor<8x64xf16>, tensor<64x128xf16> -> tensor<8x128xf16>
// CHECK:         %s2 = kn.matmul %q, %k : tensor<8x64xf16>, tensor<64x128xf16> -> tensor<8x128xf16>
// CHECK-NEXT:    %m2 = kn.reduction_max %s2 {dim = 1 : i64} : tensor<8x128xf16> -> tensor<8x1xf16>
