// RUN: mirage-opt %s -p tb-decompose-accumulators,tb-fusion-chains --split-input-file | filecheck %s

// rmsnorm_bs1.json graph 0 (mirage-notes 2.3): chains [square, nored] (square's producer is a
// tb.input, so square leads; the fp16 statistic's squares are summed in fp32 and scaled after
// the sum), [matmul, nored], post-loop [reduction, mul_scalar, sqrt], [div], [output]; the
// chain id is the leader's position in the block.
func.func @rmsnorm_graph_0(%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>}) -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>}) {
  %O = kn.customized(%X, %W) attributes {grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64, reduction_dimx = 64 : i64} : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
  ^bb0(%x: tensor<2x4096xf16>, %w: tensor<4096x6144xf16>):
    %t1 = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x128xf16>
    %t2 = tb.input %w {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<128x24xf16>
    %t3 = tb.forloop_accum red_ld_rms %t1 : !tb.stensor<2x128xf16> -> !tb.stensor<2x1xf16, after_accum>
    %t4 = tb.matmul %t1, %t2 : !tb.stensor<2x128xf16>, !tb.stensor<128x24xf16> -> !tb.stensor<2x24xf16>
    %t5 = tb.forloop_accum nored %t4 : !tb.stensor<2x24xf16> -> !tb.stensor<2x24xf16, after_accum>
    %t6 = tb.div %t5, %t3 : !tb.stensor<2x24xf16, after_accum>, !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x24xf16, after_accum>
    tb.output %t6 {output_map = array<i64: 1, -1, -1>} : !tb.stensor<2x24xf16, after_accum>
  }
  func.return %O : tensor<2x6144xf16>
}

// CHECK-LABEL: func.func @rmsnorm_graph_0
// CHECK:       tb.input %x {tb.chain = 0 : i64, tb.chain_pos = 0 : i64,
// CHECK-NEXT:  tb.input %w {tb.chain = 1 : i64, tb.chain_pos = 0 : i64,
// CHECK-NEXT:  tb.square %t1 {tb.chain = 2 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  tb.forloop_accum nored %{{.*}} {tb.chain = 2 : i64, tb.chain_pos = 1 : i64}
// CHECK-NEXT:  tb.reduction %{{.*}} {tb.chain = 4 : i64, tb.chain_pos = 0 : i64,
// CHECK-NEXT:  tb.mul_scalar %{{.*}} {tb.chain = 4 : i64, tb.chain_pos = 1 : i64,
// CHECK-NEXT:  tb.sqrt %{{.*}} {tb.chain = 4 : i64, tb.chain_pos = 2 : i64}
// CHECK-NEXT:  tb.matmul %t1, %t2 {tb.chain = 7 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  tb.forloop_accum nored %t4 {tb.chain = 7 : i64, tb.chain_pos = 1 : i64}
// CHECK-NEXT:  tb.div %t5, %{{.*}} {tb.chain = 9 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  tb.output %t6 {tb.chain = 10 : i64, tb.chain_pos = 0 : i64,

// -----

// Fusion rules:
// * a matmul-led chain keeps EVERY fused unary op (Mirage's register write-back honoured only
//   exp and the trailing accumulate and silently dropped the rest, mirage-notes 3.1 quirk):
//   [matmul, silu, mul_scalar, sigmoid, log, nored]; sigmoid and log fuse like the other
//   unary ops (Mirage's transpiler rejected them altogether);
// * nothing fuses onto a tb.input ([exp] leads on its own input, then [exp, relu]);
// * a value with two uses ends the chain (%e2 feeds %r, %m2 and %p2; %r feeds %m2 and %p3);
// * nothing fuses onto an in-loop accumulator (nored, max) or a reduction_max;
// * binary ops lead chains; a nored_rescale fuses onto a chain led by an elementwise op
//   ([sub, nored_rescale], its scale a second operand), never onto a matmul's ([matmul]
//   then a lone nored_rescale: the flash register chains and the MMA lowering expect it so).
func.func @rules(%A: tensor<16x64xf16>, %B: tensor<64x64xf16>) -> (tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x1xf16>, tensor<16x64xf16>) {
  %o1, %o2, %o3, %o4, %o5 = kn.customized(%A, %B) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<16x64xf16>, tensor<64x64xf16>) -> (tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x1xf16>, tensor<16x64xf16>) {
  ^bb0(%a: tensor<16x64xf16>, %b: tensor<64x64xf16>):
    %ta = tb.input %a {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<16x64xf16> -> !tb.stensor<16x16xf16>
    %tb = tb.input %b {input_map = array<i64: -1, -1, -1>, forloop_dim = 0 : i64} : tensor<64x64xf16> -> !tb.stensor<16x64xf16>
    %mm = tb.matmul %ta, %tb : !tb.stensor<16x16xf16>, !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16>
    %s1 = tb.silu %mm : !tb.stensor<16x64xf16>
    %s2 = tb.mul_scalar %s1 {scalar = 0.5 : f64} : !tb.stensor<16x64xf16>
    %s3 = tb.sigmoid %s2 : !tb.stensor<16x64xf16>
    %s4 = tb.log %s3 : !tb.stensor<16x64xf16>
    %acc = tb.forloop_accum nored %s4 : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    %post = tb.exp %acc : !tb.stensor<16x64xf16, after_accum>
    %e1 = tb.exp %tb : !tb.stensor<16x64xf16>
    %e2 = tb.relu %e1 : !tb.stensor<16x64xf16>
    %r = tb.sqrt %e2 : !tb.stensor<16x64xf16>
    %m2 = tb.add %e2, %r : !tb.stensor<16x64xf16>, !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16>
    %g = tb.gelu %m2 : !tb.stensor<16x64xf16>
    %mx = tb.forloop_accum max %g : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    %cl = tb.clamp %mx {min_value = 0.0 : f64, max_value = 6.0 : f64} : !tb.stensor<16x64xf16, after_accum>
    %rm, %diff = tb.reduction_max %tb {dim = 1 : i64} : !tb.stensor<16x64xf16> -> !tb.stensor<16x1xf16>, !tb.stensor<16x1xf16>
    %ed = tb.exp %diff : !tb.stensor<16x1xf16>
    %x2 = tb.sub %rm, %ed : !tb.stensor<16x1xf16>, !tb.stensor<16x1xf16> -> !tb.stensor<16x1xf16>
    %nr = tb.forloop_accum nored_rescale %x2, %ed : !tb.stensor<16x1xf16>, !tb.stensor<16x1xf16> -> !tb.stensor<16x1xf16, after_accum>
    %sq = tb.square %nr : !tb.stensor<16x1xf16, after_accum>
    %pv = tb.matmul %ta, %tb : !tb.stensor<16x16xf16>, !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16>
    %nr2 = tb.forloop_accum nored_rescale %pv, %ed : !tb.stensor<16x64xf16>, !tb.stensor<16x1xf16> -> !tb.stensor<16x64xf16, after_accum>
    %p1 = tb.add %post, %cl : !tb.stensor<16x64xf16, after_accum>, !tb.stensor<16x64xf16, after_accum> -> !tb.stensor<16x64xf16, after_accum>
    %p2 = tb.forloop_accum nored %e2 : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    %p3 = tb.forloop_accum nored %r : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    tb.output %p1 {output_map = array<i64: -1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
    tb.output %p2 {output_map = array<i64: -1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
    tb.output %p3 {output_map = array<i64: -1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
    tb.output %sq {output_map = array<i64: -1, -1, -1>} : !tb.stensor<16x1xf16, after_accum>
    tb.output %nr2 {output_map = array<i64: -1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
  }
  func.return %o1, %o2, %o3, %o4, %o5 : tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x64xf16>, tensor<16x1xf16>, tensor<16x64xf16>
}

// CHECK-LABEL: func.func @rules
// CHECK:       %mm = tb.matmul %ta, %tb {tb.chain = 2 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %s1 = tb.silu %mm {tb.chain = 2 : i64, tb.chain_pos = 1 : i64}
// CHECK-NEXT:  %s2 = tb.mul_scalar %s1 {tb.chain = 2 : i64, tb.chain_pos = 2 : i64,
// CHECK-NEXT:  %s3 = tb.sigmoid %s2 {tb.chain = 2 : i64, tb.chain_pos = 3 : i64}
// CHECK-NEXT:  %s4 = tb.log %s3 {tb.chain = 2 : i64, tb.chain_pos = 4 : i64}
// CHECK-NEXT:  %acc = tb.forloop_accum nored %s4 {tb.chain = 2 : i64, tb.chain_pos = 5 : i64}
// CHECK-NEXT:  %post = tb.exp %acc {tb.chain = 8 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %e1 = tb.exp %tb {tb.chain = 9 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %e2 = tb.relu %e1 {tb.chain = 9 : i64, tb.chain_pos = 1 : i64}
// CHECK-NEXT:  %r = tb.sqrt %e2 {tb.chain = 11 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %m2 = tb.add %e2, %r {tb.chain = 12 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %g = tb.gelu %m2 {tb.chain = 12 : i64, tb.chain_pos = 1 : i64}
// CHECK-NEXT:  %mx = tb.forloop_accum max %g {tb.chain = 14 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %cl = tb.clamp %mx {tb.chain = 15 : i64, tb.chain_pos = 0 : i64,
// CHECK-NEXT:  tb.reduction_max %tb {tb.chain = 16 : i64, tb.chain_pos = 0 : i64,
// CHECK-NEXT:  %ed = tb.exp %diff {tb.chain = 17 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %x2 = tb.sub %rm, %ed {tb.chain = 18 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %nr = tb.forloop_accum nored_rescale %x2, %ed {tb.chain = 18 : i64, tb.chain_pos = 1 : i64}
// CHECK-NEXT:  %sq = tb.square %nr {tb.chain = 20 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %pv = tb.matmul %ta, %tb {tb.chain = 21 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %nr2 = tb.forloop_accum nored_rescale %pv, %ed {tb.chain = 22 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %p1 = tb.add %post, %cl {tb.chain = 23 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %p2 = tb.forloop_accum nored %e2 {tb.chain = 24 : i64, tb.chain_pos = 0 : i64}
// CHECK-NEXT:  %p3 = tb.forloop_accum nored %r {tb.chain = 25 : i64, tb.chain_pos = 0 : i64}
