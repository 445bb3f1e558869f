// RUN: mirage-opt %s -p kn-lift-customized --split-input-file | filecheck %s

// Mirage's single-kernel gated MLP: K walked by the loop (a partial term summed by the
// nored accumulator = the whole matmul), N cut by grid x and stored by grid x.
func.func @gated_mlp(%x: tensor<8x4096xf16>, %w1: tensor<4096x4096xf16>, %w2: tensor<4096x4096xf16>) -> (tensor<8x4096xf16>, tensor<8x4096xf16>) {
  %a, %b = kn.customized(%x, %w1, %w2) attributes {grid_dim = array<i64: 128, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 64 : i64, reduction_dimx = 64 : i64} : (tensor<8x4096xf16>, tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> (tensor<8x4096xf16>, tensor<8x4096xf16>) {
  ^bb0(%bx: tensor<8x4096xf16>, %b1: tensor<4096x4096xf16>, %b2: tensor<4096x4096xf16>):
    %tx = tb.input %bx {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x4096xf16> -> !tb.stensor<8x64xf16>
    %t1 = tb.input %b1 {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x4096xf16> -> !tb.stensor<64x32xf16>
    %t2 = tb.input %b2 {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x4096xf16> -> !tb.stensor<64x32xf16>
    %m1 = tb.matmul %tx, %t1 : !tb.stensor<8x64xf16>, !tb.stensor<64x32xf16> -> !tb.stensor<8x32xf16>
    %m2 = tb.matmul %tx, %t2 : !tb.stensor<8x64xf16>, !tb.stensor<64x32xf16> -> !tb.stensor<8x32xf16>
    %s1 = tb.forloop_accum nored %m1 : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %s2 = tb.forloop_accum nored %m2 : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %g = tb.silu %s1 : !tb.stensor<8x32xf16, after_accum>
    tb.output %s2 {output_map = array<i64: 1, -1, -1>} : !tb.stensor<8x32xf16, after_accum>
    tb.output %g {output_map = array<i64: 1, -1, -1>} : !tb.stensor<8x32xf16, after_accum>
  }
  func.return %a, %b : tensor<8x4096xf16>, tensor<8x4096xf16>
}

// CHECK-LABEL: func.func @gated_mlp
// CHECK-NEXT:    %[[M1:.*]] = kn.matmul %x, %w1 : tensor<8x4096xf16>, tensor<4096x4096xf16> -> tensor<8x4096xf16>
// CHECK-NEXT:    %[[M2:.*]] = kn.matmul %x, %w2 : tensor<8x4096xf16>, tensor<4096x4096xf16> -> tensor<8x4096xf16>
// CHECK-NEXT:    %[[G:.*]] = kn.silu %[[M1]] : tensor<8x4096xf16>
// CHECK-NEXT:    func.return %[[M2]], %[[G]] : tensor<8x4096xf16>, tensor<8x4096xf16>
// CHECK-NOT:     kn.customized

// -----

// A loop-cut dim under a nored accumulator folds: each grid-y slab's loop tiles are summed
// elementwise (a strided kn.reduction inside each slab, kn.reshape around it); the
// red_ld_mean row statistic divides by the block's extent (tile x iterations).
func.func @fold(%e: tensor<4x16x4096xf16>) -> (tensor<4x16x1024xf16>, tensor<4x16x2xf16>) {
  %f, %r = kn.customized(%e) attributes {grid_dim = array<i64: 4, 2, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<4x16x4096xf16>) -> (tensor<4x16x1024xf16>, tensor<4x16x2xf16>) {
  ^bb0(%be: tensor<4x16x4096xf16>):
    %t = tb.input %be {input_map = array<i64: 0, 2, -1>, forloop_dim = 2 : i64} : tensor<4x16x4096xf16> -> !tb.stensor<1x16x512xf16>
    %x = tb.exp %t : !tb.stensor<1x16x512xf16>
    %s = tb.forloop_accum nored %x : !tb.stensor<1x16x512xf16> -> !tb.stensor<1x16x512xf16, after_accum>
    %m = tb.forloop_accum red_ld_mean %x : !tb.stensor<1x16x512xf16> -> !tb.stensor<1x16x1xf16, after_accum>
    tb.output %s {output_map = array<i64: 0, 2, -1>} : !tb.stensor<1x16x512xf16, after_accum>
    tb.output %m {output_map = array<i64: 0, 2, -1>} : !tb.stensor<1x16x1xf16, after_accum>
  }
  func.return %f, %r : tensor<4x16x1024xf16>, tensor<4x16x2xf16>
}

// CHECK-LABEL: func.func @fold
// CHECK-NEXT:    %[[X:.*]] = kn.exp %e : tensor<4x16x4096xf16>
// CHECK-NEXT:    %[[V:.*]] = kn.reshape %[[X]] : tensor<4x16x4096xf16> -> tensor<4x16x2x2048xf16>
// CHECK-NEXT:    %[[R:.*]] = kn.reduction %[[V]] {dim = 3 : i64, size = 512 : i64} : tensor<4x16x2x2048xf16> -> tensor<4x16x2x512xf16>
// CHECK-NEXT:    %[[F:.*]] = kn.reshape %[[R]] : tensor<4x16x2x512xf16> -> tensor<4x16x1024xf16>
// CHECK:         kn.reduction {{.*}} {dim = 3 : i64, size = 1 : i64}
// CHECK:         kn.mul_scalar {{.*}} {scalar = 0.00048828125 : f64}
// CHECK:         func.return %[[F]],

// -----

// K cut by a grid axis: each block holds a partial product that another kernel sums; there
// is no kernel-level form, so the saved kernel stays.
func.func @split_k(%a: tensor<16x4096xf16>, %b: tensor<4096x64xf16>) -> tensor<16x128xf16> {
  %o = kn.customized(%a, %b) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<16x4096xf16>, tensor<4096x64xf16>) -> tensor<16x128xf16> {
  ^bb0(%ba: tensor<16x4096xf16>, %bb: tensor<4096x64xf16>):
    %ta = tb.input %ba {input_map = array<i64: 1, -1, -1>, forloop_dim = 1 : i64} : tensor<16x4096xf16> -> !tb.stensor<16x512xf16>
    %tb = tb.input %bb {input_map = array<i64: 0, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x64xf16> -> !tb.stensor<512x64xf16>
    %p = tb.matmul %ta, %tb : !tb.stensor<16x512xf16>, !tb.stensor<512x64xf16> -> !tb.stensor<16x64xf16>
    %s = tb.forloop_accum nored %p : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    tb.output %s {output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
  }
  func.return %o : tensor<16x128xf16>
}

// CHECK-LABEL: func.func @split_k
// CHECK:         kn.customized
// CHECK:         tb.matmul
// CHECK-NOT:     kn.matmul

// -----

// A loop-invariant tile under a nored accumulator is summed once per iteration: times the
// trip count.
func.func @invariant(%x: tensor<8x64xf16>) -> tensor<8x64xf16> {
  %o = kn.customized(%x) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 3 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf16>) -> tensor<8x64xf16> {
  ^bb0(%bx: tensor<8x64xf16>):
    %t = tb.input %bx {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf16> -> !tb.stensor<8x64xf16>
    %s = tb.forloop_accum nored %t : !tb.stensor<8x64xf16> -> !tb.stensor<8x64xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x64xf16, after_accum>
  }
  func.return %o : tensor<8x64xf16>
}

// CHECK-LABEL: func.func @invariant
// CHECK-NEXT:    %[[S:.*]] = kn.mul_scalar %x {scalar = 3.000000e+00 : f64} : tensor<8x64xf16>
// CHECK-NEXT:    func.return %[[S]] : tensor<8x64xf16>

// -----

// One graph, two kernels: the first sums K across blocks (kept), the second would lift.  By
// default the graph keeps both saved kernels; `partial=true` lifts the second alone.
// RUN: mirage-opt %s -p 'kn-lift-customized{partial=true}' --split-input-file | filecheck %s --check-prefix=PARTIAL
func.func @mixed(%a: tensor<16x4096xf16>, %b: tensor<4096x64xf16>) -> tensor<16x128xf16> {
  %o = kn.customized(%a, %b) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<16x4096xf16>, tensor<4096x64xf16>) -> tensor<16x128xf16> {
  ^bb0(%ba: tensor<16x4096xf16>, %bb: tensor<4096x64xf16>):
    %ta = tb.input %ba {input_map = array<i64: 1, -1, -1>, forloop_dim = 1 : i64} : tensor<16x4096xf16> -> !tb.stensor<16x512xf16>
    %tb = tb.input %bb {input_map = array<i64: 0, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x64xf16> -> !tb.stensor<512x64xf16>
    %p = tb.matmul %ta, %tb : !tb.stensor<16x512xf16>, !tb.stensor<512x64xf16> -> !tb.stensor<16x64xf16>
    %s = tb.forloop_accum nored %p : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    tb.output %s {output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
  }
  %e = kn.customized(%o) attributes {grid_dim = array<i64: 16, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<16x128xf16>) -> tensor<16x128xf16> {
  ^bb0(%bo: tensor<16x128xf16>):
    %t = tb.input %bo {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<16x128xf16> -> !tb.stensor<1x128xf16>
    %x = tb.exp %t : !tb.stensor<1x128xf16>
    %y = tb.forloop_accum nored %x : !tb.stensor<1x128xf16> -> !tb.stensor<1x128xf16, after_accum>
    tb.output %y {output_map = array<i64: 0, -1, -1>} : !tb.stensor<1x128xf16, after_accum>
  }
  func.return %e : tensor<16x128xf16>
}

// CHECK-LABEL: func.func @mixed
// CHECK:         kn.customized
// CHECK:         kn.customized
// CHECK-NOT:     kn.exp
// PARTIAL-LABEL: func.func @mixed
// PARTIAL:         kn.customized
// PARTIAL:         tb.matmul
// PARTIAL:         %[[E:.*]] = kn.exp %o : tensor<16x128xf16>
// PARTIAL-NEXT:    func.return %[[E]] : tensor<16x128xf16>
