// RUN: mirage-opt %s -p mirage-transpile | mirage-opt | filecheck %s --check-prefix=CUTE
// RUN: mirage-opt %s -p mirage-transpile -t cuda | filecheck %s

// Attention for decoding (Mirage's form: exp(Q @ K) / sum(exp(Q @ K)) @ V) with 16 query
// rows per block: convert-tb-to-cute keeps P = exp(Q @ K) in registers (cute.mma_chain)
// instead of a shared tile, the row sums accumulate in P's fragment layout and are stored
// once after the loop, and the four warps split the keys of P @ V (sliced K).
// test_codegen.py runs this graph in the host emulator against the reference.
func.func @attn(%Q: tensor<2x16x64xf16>, %K: tensor<2x64x256xf16>, %V: tensor<2x256x64xf16>) -> tensor<2x16x64xf16> {
  %o = kn.customized(%Q, %K, %V) attributes {grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<2x16x64xf16>, tensor<2x64x256xf16>, tensor<2x256x64xf16>) -> tensor<2x16x64xf16> {
  ^bb0(%q: tensor<2x16x64xf16>, %k: tensor<2x64x256xf16>, %v: tensor<2x256x64xf16>):
    %0 = tb.input %q {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<2x16x64xf16> -> !tb.stensor<1x16x64xf16>
    %1 = tb.input %k {input_map = array<i64: 0, -1, -1>, forloop_dim = 2 : i64} : tensor<2x64x256xf16> -> !tb.stensor<1x64x64xf16>
    %2 = tb.input %v {input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64} : tensor<2x256x64xf16> -> !tb.stensor<1x64x64xf16>
    %3 = tb.matmul %0, %1 : !tb.stensor<1x16x64xf16>, !tb.stensor<1x64x64xf16> -> !tb.stensor<1x16x64xf16>
    %4 = tb.exp %3 : !tb.stensor<1x16x64xf16>
    %5 = tb.forloop_accum red_ld_sum %4 : !tb.stensor<1x16x64xf16> -> !tb.stensor<1x16x1xf16, after_accum>
    %6 = tb.matmul %4, %2 : !tb.stensor<1x16x64xf16>, !tb.stensor<1x64x64xf16> -> !tb.stensor<1x16x64xf16>
    %7 = tb.forloop_accum nored %6 : !tb.stensor<1x16x64xf16> -> !tb.stensor<1x16x64xf16, after_accum>
    %8 = tb.div %7, %5 : !tb.stensor<1x16x64xf16, after_accum>, !tb.stensor<1x16x1xf16, after_accum> -> !tb.stensor<1x16x64xf16, after_accum>
    tb.output %8 {output_map = array<i64: 0, -1, -1>} : !tb.stensor<1x16x64xf16, after_accum>
  }
  func.return %o : tensor<2x16x64xf16>
}

// CUTE-LABEL: func.func @attn
// CUTE:         %psum0 = cute.mma_init : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,4)>>
// CUTE:         %racc0 = cute.mma_init {cute.kslices = 4 : i64, cute.kslice_offset = {{[0-9]+}} : i64} : !cute.frag<16x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (1,1)>>
// CUTE:         cute.for %it = 0 to 4 {
// CUTE:           cute.barrier
// CUTE-NEXT:      cute.mma_chain %racc0, %psum0, {{%[a-z0-9_]+}}, {{%[a-z0-9_]+}}, {{%[a-z0-9_]+}} [#cute.fn<exp>]
// CUTE-NEXT:      cute.barrier
// CUTE-NEXT:    }
// CUTE:         cute.frag_store %racc0 [] "store"
// CUTE-NEXT:    cute.frag_store %psum0 [] "store"

// CHECK:       mx::MmaAcc<16, 64, 1, 4, 16> f0;
// CHECK:       mx::MmaAcc<16, 64, 1, 1, 16, 4> f1;  // {{.*}} K sliced over 4 warp groups
// CHECK:       mx::mma_chain_run<128, decltype(f1), decltype(f0), 16, 64, 64, 64, 1, 4, false,
// CHECK-NEXT:      [](float v) { return mx::f_exp(v); });
