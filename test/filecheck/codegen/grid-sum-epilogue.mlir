// RUN: mirage-opt %s -p 'mirage-transpile{tuning="late_finisher=0"}' -t cuda | filecheck %s

// The grid-sum epilogue in registers, with equal splits (late-finisher=0) (passes/cute/grid_sum_epilogue.py): after the arrival the
// last block of each group loads the group's partial sums of both matmul tiles into
// registers, applies silu and the product there, and writes the result straight to global
// memory -- no shared tile for the sums, no elementwise pass, no output copy.
// test_grid_sum_epilogue.py runs the same graph (test/data/split_k_gated.mlir) in the host
// emulator against the op-by-op print.
func.func @split_k_gated(%X: tensor<8x256xf16> {kn.strides = array<i64: 256, 1>}, %W1: tensor<256x64xf16> {kn.strides = array<i64: 64, 1>}, %W2: tensor<256x64xf16> {kn.strides = array<i64: 64, 1>}) -> (tensor<8x64xf16> {kn.strides = array<i64: 64, 1>}) {
  %O = kn.customized(%X, %W1, %W2) attributes {grid_dim = array<i64: 2, 4, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 64 : i64} : (tensor<8x256xf16>, tensor<256x64xf16>, tensor<256x64xf16>) -> tensor<8x64xf16> {
  ^bb0(%x: tensor<8x256xf16>, %w1: tensor<256x64xf16>, %w2: tensor<256x64xf16>):
    %tx = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = 1 : i64} : tensor<8x256xf16> -> !tb.stensor<8x32xf16>
    %t1 = tb.input %w1 {input_map = array<i64: 1, 0, -1>, forloop_dim = 0 : i64} : tensor<256x64xf16> -> !tb.stensor<32x32xf16>
    %t2 = tb.input %w2 {input_map = array<i64: 1, 0, -1>, forloop_dim = 0 : i64} : tensor<256x64xf16> -> !tb.stensor<32x32xf16>
    %m1 = tb.matmul %tx, %t1 : !tb.stensor<8x32xf16>, !tb.stensor<32x32xf16> -> !tb.stensor<8x32xf16>
    %m2 = tb.matmul %tx, %t2 : !tb.stensor<8x32xf16>, !tb.stensor<32x32xf16> -> !tb.stensor<8x32xf16>
    %a1 = tb.forloop_accum nored %m1 : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %a2 = tb.forloop_accum nored %m2 : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %g1 = tb.grid_sum %a1 {dim = 1 : i64} : !tb.stensor<8x32xf16, after_accum> -> !tb.stensor<8x32xf16, after_accum>
    %g2 = tb.grid_sum %a2 {dim = 1 : i64} : !tb.stensor<8x32xf16, after_accum> -> !tb.stensor<8x32xf16, after_accum>
    %s = tb.silu %g1 : !tb.stensor<8x32xf16, after_accum>
    %y = tb.mul %s, %g2 : !tb.stensor<8x32xf16, after_accum>, !tb.stensor<8x32xf16, after_accum> -> !tb.stensor<8x32xf16, after_accum>
    tb.output %y {output_map = array<i64: 1, -1, -1>} : !tb.stensor<8x32xf16, after_accum>
  }
  func.return %O : tensor<8x64xf16>
}

// CHECK-LABEL: split_k_gated_k0: grid (2, 4, 1), block (128, 1, 1)
// CHECK:         if (!mx::grid_arrive(gs_counters + gs_group, 4u,
// CHECK-NEXT:    const float* gs_all = gs_scratch + (size_t)gs_group * 2048;
// CHECK-NEXT:    float g0[2];
// CHECK-NEXT:    mx::grid_partial_sum_mine<128, 4, 512, 2>(g0, gs_all + 0, tid);
// CHECK-NEXT:    float g1[2];
// CHECK-NEXT:    mx::grid_partial_sum_mine<128, 4, 512, 2>(g1, gs_all + 256, tid);
// CHECK:         mx::f_silu(a)
// CHECK-NEXT:    return a * b; }(0.0f, r2, r1, 0.0f));
// CHECK-NEXT:    (o0 + blockIdx.x * 32)[mx::L<32,8,1,1,1,64,0,0>::raw(i)] = mx::from_f<mx::f16>(r3);
// CHECK-NOT:     mx::elementwise<
// CHECK-NOT:     s2g_
// CHECK:       }
