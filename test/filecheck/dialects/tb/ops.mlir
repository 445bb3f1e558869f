// Round trip of every `tb` op inside `kn.customized`: custom -> generic -> custom (CHECK)
// and custom -> generic (CHECK-GENERIC).
// RUN: MIRAGE_ROUNDTRIP
// RUN: MIRAGE_GENERIC_ROUNDTRIP

// Every unary op; tile 4x32 = (16/grid.x) x (64/forloop_range); rms_norm keeps the shape; the
// last exp rounds the fp32 accumulator to f16 (`: T -> R`, the result type printed where it differs).

// CHECK-LABEL: func.func @unary(
// CHECK:         %t0 = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64} : tensor<16x64xf16> -> !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t1 = tb.exp %t0 : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t2 = tb.square %t1 : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t3 = tb.sqrt %t2 : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t4 = tb.silu %t3 : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t5 = tb.sigmoid %t4 : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t6 = tb.gelu %t5 : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t7 = tb.relu %t6 : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t8 = tb.log %t7 : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t9 = tb.clamp %t8 {min_value = 0.000000e+00 : f64, max_value = 1.000000e+00 : f64} : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t10 = tb.mul_scalar %t9 {scalar = 5.000000e-01 : f64} : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t11 = tb.rms_norm %t10 : !tb.stensor<4x32xf16>
// CHECK-NEXT:    %t12 = tb.forloop_accum nored %t11 : !tb.stensor<4x32xf16> -> !tb.stensor<4x32xf32, after_accum>
// CHECK-NEXT:    %t13 = tb.exp %t12 : !tb.stensor<4x32xf32, after_accum> -> !tb.stensor<4x32xf16, after_accum>
// CHECK-NEXT:    tb.output %t13 {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x32xf16, after_accum>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "unary"
// CHECK-GENERIC:         %t0 = "tb.input"(%x) <{input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64}> : (tensor<16x64xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t1 = "tb.exp"(%t0) : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t2 = "tb.square"(%t1) : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t3 = "tb.sqrt"(%t2) : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t4 = "tb.silu"(%t3) : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t5 = "tb.sigmoid"(%t4) : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t6 = "tb.gelu"(%t5) : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t7 = "tb.relu"(%t6) : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t8 = "tb.log"(%t7) : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t9 = "tb.clamp"(%t8) <{min_value = 0.000000e+00 : f64, max_value = 1.000000e+00 : f64}> : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t10 = "tb.mul_scalar"(%t9) <{scalar = 5.000000e-01 : f64}> : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t11 = "tb.rms_norm"(%t10) : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf16>
// CHECK-GENERIC-NEXT:    %t12 = "tb.forloop_accum"(%t11) <{kind = "nored"}> : (!tb.stensor<4x32xf16>) -> !tb.stensor<4x32xf32, after_accum>
// CHECK-GENERIC-NEXT:    %t13 = "tb.exp"(%t12) : (!tb.stensor<4x32xf32, after_accum>) -> !tb.stensor<4x32xf16, after_accum>
// CHECK-GENERIC-NEXT:    "tb.output"(%t13) <{output_map = array<i64: 0, -1, -1>}> : (!tb.stensor<4x32xf16, after_accum>) -> ()
// CHECK-GENERIC-NEXT:  }) : (tensor<16x64xf16>) -> tensor<16x32xf16>

func.func @unary(%X: tensor<16x64xf16>) -> tensor<16x32xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 64 : i64} : (tensor<16x64xf16>) -> tensor<16x32xf16> {
  ^bb0(%x: tensor<16x64xf16>):
    %t0 = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64} : tensor<16x64xf16> -> !tb.stensor<4x32xf16>
    %t1 = tb.exp %t0 : !tb.stensor<4x32xf16>
    %t2 = tb.square %t1 : !tb.stensor<4x32xf16>
    %t3 = tb.sqrt %t2 : !tb.stensor<4x32xf16>
    %t4 = tb.silu %t3 : !tb.stensor<4x32xf16>
    %t5 = tb.sigmoid %t4 : !tb.stensor<4x32xf16>
    %t6 = tb.gelu %t5 : !tb.stensor<4x32xf16>
    %t7 = tb.relu %t6 : !tb.stensor<4x32xf16>
    %t8 = tb.log %t7 : !tb.stensor<4x32xf16>
    %t9 = tb.clamp %t8 {min_value = 0.0 : f64, max_value = 1.0 : f64} : !tb.stensor<4x32xf16>
    %t10 = tb.mul_scalar %t9 {scalar = 0.5 : f64} : !tb.stensor<4x32xf16>
    %t11 = tb.rms_norm %t10 : !tb.stensor<4x32xf16>
    %t12 = tb.forloop_accum nored %t11 : !tb.stensor<4x32xf16> -> !tb.stensor<4x32xf32, after_accum>
    %t13 = tb.exp %t12 : !tb.stensor<4x32xf32, after_accum> -> !tb.stensor<4x32xf16, after_accum>
    tb.output %t13 {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x32xf16, after_accum>
  }
  func.return %O : tensor<16x32xf16>
}

// -----

// Binary ops with broadcast; %y is loaded once (forloop_dim -1), %z is replicated across
// the grid (input_map -1 everywhere).

// CHECK-LABEL: func.func @binary(
// CHECK:         %tx = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64} : tensor<16x64xf32> -> !tb.stensor<4x32xf32>
// CHECK-NEXT:    %ty = tb.input %y {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<16x1xf32> -> !tb.stensor<4x1xf32>
// CHECK-NEXT:    %tz = tb.input %z {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<1x64xf32> -> !tb.stensor<1x32xf32>
// CHECK-NEXT:    %0 = tb.add %tx, %ty : !tb.stensor<4x32xf32>, !tb.stensor<4x1xf32> -> !tb.stensor<4x32xf32>
// CHECK-NEXT:    %1 = tb.sub %0, %tz : !tb.stensor<4x32xf32>, !tb.stensor<1x32xf32> -> !tb.stensor<4x32xf32>
// CHECK-NEXT:    %2 = tb.mul %ty, %tz : !tb.stensor<4x1xf32>, !tb.stensor<1x32xf32> -> !tb.stensor<4x32xf32>
// CHECK-NEXT:    %3 = tb.div %1, %2 : !tb.stensor<4x32xf32>, !tb.stensor<4x32xf32> -> !tb.stensor<4x32xf32>
// CHECK-NEXT:    %4 = tb.pow %3, %tx : !tb.stensor<4x32xf32>, !tb.stensor<4x32xf32> -> !tb.stensor<4x32xf32>
// CHECK-NEXT:    %5 = tb.forloop_accum nored %4 : !tb.stensor<4x32xf32> -> !tb.stensor<4x32xf32, after_accum>
// CHECK-NEXT:    tb.output %5 {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x32xf32, after_accum>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "binary"
// CHECK-GENERIC:         %0 = "tb.add"(%tx, %ty) : (!tb.stensor<4x32xf32>, !tb.stensor<4x1xf32>) -> !tb.stensor<4x32xf32>
// CHECK-GENERIC-NEXT:    %1 = "tb.sub"(%0, %tz) : (!tb.stensor<4x32xf32>, !tb.stensor<1x32xf32>) -> !tb.stensor<4x32xf32>
// CHECK-GENERIC-NEXT:    %2 = "tb.mul"(%ty, %tz) : (!tb.stensor<4x1xf32>, !tb.stensor<1x32xf32>) -> !tb.stensor<4x32xf32>
// CHECK-GENERIC-NEXT:    %3 = "tb.div"(%1, %2) : (!tb.stensor<4x32xf32>, !tb.stensor<4x32xf32>) -> !tb.stensor<4x32xf32>
// CHECK-GENERIC-NEXT:    %4 = "tb.pow"(%3, %tx) : (!tb.stensor<4x32xf32>, !tb.stensor<4x32xf32>) -> !tb.stensor<4x32xf32>

func.func @binary(%X: tensor<16x64xf32>, %Y: tensor<16x1xf32>, %Z: tensor<1x64xf32>) -> tensor<16x32xf32> {
  %O = kn.customized(%X, %Y, %Z) attributes {grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 64 : i64} : (tensor<16x64xf32>, tensor<16x1xf32>, tensor<1x64xf32>) -> tensor<16x32xf32> {
  ^bb0(%x: tensor<16x64xf32>, %y: tensor<16x1xf32>, %z: tensor<1x64xf32>):
    %tx = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64} : tensor<16x64xf32> -> !tb.stensor<4x32xf32>
    %ty = tb.input %y {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<16x1xf32> -> !tb.stensor<4x1xf32>
    %tz = tb.input %z {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<1x64xf32> -> !tb.stensor<1x32xf32>
    %0 = tb.add %tx, %ty : !tb.stensor<4x32xf32>, !tb.stensor<4x1xf32> -> !tb.stensor<4x32xf32>
    %1 = tb.sub %0, %tz : !tb.stensor<4x32xf32>, !tb.stensor<1x32xf32> -> !tb.stensor<4x32xf32>
    %2 = tb.mul %ty, %tz : !tb.stensor<4x1xf32>, !tb.stensor<1x32xf32> -> !tb.stensor<4x32xf32>
    %3 = tb.div %1, %2 : !tb.stensor<4x32xf32>, !tb.stensor<4x32xf32> -> !tb.stensor<4x32xf32>
    %4 = tb.pow %3, %tx : !tb.stensor<4x32xf32>, !tb.stensor<4x32xf32> -> !tb.stensor<4x32xf32>
    %5 = tb.forloop_accum nored %4 : !tb.stensor<4x32xf32> -> !tb.stensor<4x32xf32, after_accum>
    tb.output %5 {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x32xf32, after_accum>
  }
  func.return %O : tensor<16x32xf32>
}

// -----

// Threadblock matmul on rank-3 tiles whose leading dim is 1 (grid.x splits the batch);
// grid.y and the for-loop partition different dims of %k.

// CHECK-LABEL: func.func @matmul(
// CHECK:         %tq = tb.input %q {input_map = array<i64: 0, -1, -1>, forloop_dim = 2 : i64} : tensor<2x64x256xf16> -> !tb.stensor<1x64x64xf16>
// CHECK-NEXT:    %tk = tb.input %k {input_map = array<i64: 0, 2, -1>, forloop_dim = 1 : i64} : tensor<2x256x128xf16> -> !tb.stensor<1x64x32xf16>
// CHECK-NEXT:    %s = tb.matmul %tq, %tk : !tb.stensor<1x64x64xf16>, !tb.stensor<1x64x32xf16> -> !tb.stensor<1x64x32xf16>
// CHECK-NEXT:    %acc = tb.forloop_accum nored %s : !tb.stensor<1x64x32xf16> -> !tb.stensor<1x64x32xf16, after_accum>
// CHECK-NEXT:    tb.output %acc {output_map = array<i64: 0, 2, -1>} : !tb.stensor<1x64x32xf16, after_accum>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "matmul"
// CHECK-GENERIC:         %s = "tb.matmul"(%tq, %tk) : (!tb.stensor<1x64x64xf16>, !tb.stensor<1x64x32xf16>) -> !tb.stensor<1x64x32xf16>

func.func @matmul(%Q: tensor<2x64x256xf16>, %K: tensor<2x256x128xf16>) -> tensor<2x64x128xf16> {
  %O = kn.customized(%Q, %K) attributes {grid_dim = array<i64: 2, 4, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<2x64x256xf16>, tensor<2x256x128xf16>) -> tensor<2x64x128xf16> {
  ^bb0(%q: tensor<2x64x256xf16>, %k: tensor<2x256x128xf16>):
    %tq = tb.input %q {input_map = array<i64: 0, -1, -1>, forloop_dim = 2 : i64} : tensor<2x64x256xf16> -> !tb.stensor<1x64x64xf16>
    %tk = tb.input %k {input_map = array<i64: 0, 2, -1>, forloop_dim = 1 : i64} : tensor<2x256x128xf16> -> !tb.stensor<1x64x32xf16>
    %s = tb.matmul %tq, %tk : !tb.stensor<1x64x64xf16>, !tb.stensor<1x64x32xf16> -> !tb.stensor<1x64x32xf16>
    %acc = tb.forloop_accum nored %s : !tb.stensor<1x64x32xf16> -> !tb.stensor<1x64x32xf16, after_accum>
    tb.output %acc {output_map = array<i64: 0, 2, -1>} : !tb.stensor<1x64x32xf16, after_accum>
  }
  func.return %O : tensor<2x64x128xf16>
}

// -----

// Reductions after the loop, reduction_max (two results) inside it, concat.

// CHECK-LABEL: func.func @reductions(
// CHECK:         %r = tb.reduction %ax {dim = 1 : i64} : !tb.stensor<4x128xf16, after_accum> -> !tb.stensor<4x1xf16, after_accum>
// CHECK-NEXT:    %d = tb.reduction_to_dimx %ax {dim = 1 : i64} : !tb.stensor<4x128xf16, after_accum> -> !tb.stensor<4x64xf16, after_accum>
// CHECK-NEXT:    %m, %diff = tb.reduction_max %tx {dim = 1 : i64} : !tb.stensor<4x128xf16> -> !tb.stensor<4x1xf16>, !tb.stensor<4x1xf16>
// CHECK-NEXT:    %c = tb.concat %ax, %ay {dim = 1 : i64} : !tb.stensor<4x128xf16, after_accum>, !tb.stensor<4x64xf16, after_accum> -> !tb.stensor<4x192xf16, after_accum>
// CHECK-NEXT:    %r0 = tb.reduction %ax {dim = 0 : i64} : !tb.stensor<4x128xf16, after_accum> -> !tb.stensor<1x128xf16, after_accum>
// CHECK-NEXT:    tb.output %r {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x1xf16, after_accum>
// CHECK-NEXT:    tb.output %d {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x64xf16, after_accum>
// CHECK-NEXT:    tb.output %c {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x192xf16, after_accum>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %R, %D, %C : tensor<16x1xf16>, tensor<16x64xf16>, tensor<16x192xf16>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "reductions"
// CHECK-GENERIC:         %r = "tb.reduction"(%ax) <{dim = 1 : i64}> : (!tb.stensor<4x128xf16, after_accum>) -> !tb.stensor<4x1xf16, after_accum>
// CHECK-GENERIC-NEXT:    %d = "tb.reduction_to_dimx"(%ax) <{dim = 1 : i64}> : (!tb.stensor<4x128xf16, after_accum>) -> !tb.stensor<4x64xf16, after_accum>
// CHECK-GENERIC-NEXT:    %m, %diff = "tb.reduction_max"(%tx) <{dim = 1 : i64}> : (!tb.stensor<4x128xf16>) -> (!tb.stensor<4x1xf16>, !tb.stensor<4x1xf16>)
// CHECK-GENERIC-NEXT:    %c = "tb.concat"(%ax, %ay) <{dim = 1 : i64}> : (!tb.stensor<4x128xf16, after_accum>, !tb.stensor<4x64xf16, after_accum>) -> !tb.stensor<4x192xf16, after_accum>

func.func @reductions(%X: tensor<16x128xf16>, %Y: tensor<16x64xf16>) -> (tensor<16x1xf16>, tensor<16x64xf16>, tensor<16x192xf16>) {
  %R, %D, %C = kn.customized(%X, %Y) attributes {grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<16x128xf16>, tensor<16x64xf16>) -> (tensor<16x1xf16>, tensor<16x64xf16>, tensor<16x192xf16>) {
  ^bb0(%x: tensor<16x128xf16>, %y: tensor<16x64xf16>):
    %tx = tb.input %x {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<16x128xf16> -> !tb.stensor<4x128xf16>
    %ty = tb.input %y {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<16x64xf16> -> !tb.stensor<4x64xf16>
    %ax = tb.forloop_accum nored %tx : !tb.stensor<4x128xf16> -> !tb.stensor<4x128xf16, after_accum>
    %ay = tb.forloop_accum nored %ty : !tb.stensor<4x64xf16> -> !tb.stensor<4x64xf16, after_accum>
    %r = tb.reduction %ax {dim = 1 : i64} : !tb.stensor<4x128xf16, after_accum> -> !tb.stensor<4x1xf16, after_accum>
    %d = tb.reduction_to_dimx %ax {dim = 1 : i64} : !tb.stensor<4x128xf16, after_accum> -> !tb.stensor<4x64xf16, after_accum>
    %m, %diff = tb.reduction_max %tx {dim = 1 : i64} : !tb.stensor<4x128xf16> -> !tb.stensor<4x1xf16>, !tb.stensor<4x1xf16>
    %c = tb.concat %ax, %ay {dim = 1 : i64} : !tb.stensor<4x128xf16, after_accum>, !tb.stensor<4x64xf16, after_accum> -> !tb.stensor<4x192xf16, after_accum>
    %r0 = tb.reduction %ax {dim = 0 : i64} : !tb.stensor<4x128xf16, after_accum> -> !tb.stensor<1x128xf16, after_accum>
    tb.output %r {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x1xf16, after_accum>
    tb.output %d {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x64xf16, after_accum>
    tb.output %c {output_map = array<i64: 0, -1, -1>} : !tb.stensor<4x192xf16, after_accum>
  }
  func.return %R, %D, %C : tensor<16x1xf16>, tensor<16x64xf16>, tensor<16x192xf16>
}

// -----

// Every accumulator kind; the two rescale kinds take a second operand (the online-softmax
// rescale factor, broadcast over the last dim).

// CHECK-LABEL: func.func @accumulators(
// CHECK:         %a0 = tb.forloop_accum nored %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x256xf16, after_accum>
// CHECK-NEXT:    %a1 = tb.forloop_accum red_ld_sum %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x1xf16, after_accum>
// CHECK-NEXT:    %a2 = tb.forloop_accum red_ld_mean %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x1xf16, after_accum>
// CHECK-NEXT:    %a3 = tb.forloop_accum red_ld_rms %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x1xf16, after_accum>
// CHECK-NEXT:    %a4 = tb.forloop_accum redtox_ld_sum %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x64xf16, after_accum>
// CHECK-NEXT:    %a5 = tb.forloop_accum nored_rescale %t, %s : !tb.stensor<8x256xf16>, !tb.stensor<8x1xf16> -> !tb.stensor<8x256xf16, after_accum>
// CHECK-NEXT:    %a6 = tb.forloop_accum red_ld_sum_rescale %t, %s : !tb.stensor<8x256xf16>, !tb.stensor<8x1xf16> -> !tb.stensor<8x1xf16, after_accum>
// CHECK-NEXT:    %a7 = tb.forloop_accum max %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x256xf16, after_accum>
// CHECK-NEXT:    %a8 = tb.forloop_accum nored %t {note = "discardable attributes survive"} : !tb.stensor<8x256xf16> -> !tb.stensor<8x256xf16, after_accum>
// CHECK-NEXT:    tb.output %a4 {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x64xf16, after_accum>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "accumulators"
// CHECK-GENERIC:         %a0 = "tb.forloop_accum"(%t) <{kind = "nored"}> : (!tb.stensor<8x256xf16>) -> !tb.stensor<8x256xf16, after_accum>
// CHECK-GENERIC-NEXT:    %a1 = "tb.forloop_accum"(%t) <{kind = "red_ld_sum"}> : (!tb.stensor<8x256xf16>) -> !tb.stensor<8x1xf16, after_accum>
// CHECK-GENERIC-NEXT:    %a2 = "tb.forloop_accum"(%t) <{kind = "red_ld_mean"}> : (!tb.stensor<8x256xf16>) -> !tb.stensor<8x1xf16, after_accum>
// CHECK-GENERIC-NEXT:    %a3 = "tb.forloop_accum"(%t) <{kind = "red_ld_rms"}> : (!tb.stensor<8x256xf16>) -> !tb.stensor<8x1xf16, after_accum>
// CHECK-GENERIC-NEXT:    %a4 = "tb.forloop_accum"(%t) <{kind = "redtox_ld_sum"}> : (!tb.stensor<8x256xf16>) -> !tb.stensor<8x64xf16, after_accum>
// CHECK-GENERIC-NEXT:    %a5 = "tb.forloop_accum"(%t, %s) <{kind = "nored_rescale"}> : (!tb.stensor<8x256xf16>, !tb.stensor<8x1xf16>) -> !tb.stensor<8x256xf16, after_accum>
// CHECK-GENERIC-NEXT:    %a6 = "tb.forloop_accum"(%t, %s) <{kind = "red_ld_sum_rescale"}> : (!tb.stensor<8x256xf16>, !tb.stensor<8x1xf16>) -> !tb.stensor<8x1xf16, after_accum>
// CHECK-GENERIC-NEXT:    %a7 = "tb.forloop_accum"(%t) <{kind = "max"}> : (!tb.stensor<8x256xf16>) -> !tb.stensor<8x256xf16, after_accum>
// CHECK-GENERIC-NEXT:    %a8 = "tb.forloop_accum"(%t) <{kind = "nored"}> {note = "discardable attributes survive"} : (!tb.stensor<8x256xf16>) -> !tb.stensor<8x256xf16, after_accum>

func.func @accumulators(%X: tensor<8x1024xf16>) -> tensor<8x64xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<8x1024xf16>) -> tensor<8x64xf16> {
  ^bb0(%x: tensor<8x1024xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x1024xf16> -> !tb.stensor<8x256xf16>
    %m, %d = tb.reduction_max %t {dim = 1 : i64} : !tb.stensor<8x256xf16> -> !tb.stensor<8x1xf16>, !tb.stensor<8x1xf16>
    %s = tb.exp %d : !tb.stensor<8x1xf16>
    %a0 = tb.forloop_accum nored %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x256xf16, after_accum>
    %a1 = tb.forloop_accum red_ld_sum %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x1xf16, after_accum>
    %a2 = tb.forloop_accum red_ld_mean %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x1xf16, after_accum>
    %a3 = tb.forloop_accum red_ld_rms %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x1xf16, after_accum>
    %a4 = tb.forloop_accum redtox_ld_sum %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x64xf16, after_accum>
    %a5 = tb.forloop_accum nored_rescale %t, %s : !tb.stensor<8x256xf16>, !tb.stensor<8x1xf16> -> !tb.stensor<8x256xf16, after_accum>
    %a6 = tb.forloop_accum red_ld_sum_rescale %t, %s : !tb.stensor<8x256xf16>, !tb.stensor<8x1xf16> -> !tb.stensor<8x1xf16, after_accum>
    %a7 = tb.forloop_accum max %t : !tb.stensor<8x256xf16> -> !tb.stensor<8x256xf16, after_accum>
    %a8 = tb.forloop_accum nored %t {note = "discardable attributes survive"} : !tb.stensor<8x256xf16> -> !tb.stensor<8x256xf16, after_accum>
    tb.output %a4 {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x64xf16, after_accum>
  }
  func.return %O : tensor<8x64xf16>
}
