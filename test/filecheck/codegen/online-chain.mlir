// RUN: mirage-opt %s -p 'mirage-transpile{to-cute=false}' | filecheck %s --check-prefix=TB
// RUN: mirage-opt %s -p mirage-transpile | mirage-opt | filecheck %s --check-prefix=CUTE
// RUN: mirage-opt %s -p mirage-transpile -t cuda | filecheck %s

// Prefill attention as kn-partition plans it when its grid over query rows fills the SMs
// (online softmax: Mirage's running tb.reduction_max with rescaled accumulators), 64 query
// rows per block, 4 warps, 64-key tiles.  tb-schedule finds the flash register chain and
// marks its scores, maxima, rescale factor, P and P @ V tb.in_registers (tb-plan-smem gives
// them no tile) and its two nored_rescale accumulators tb.accum_in_reg; convert-tb-to-cute
// lowers the loop body to one `cute.mma_chain ... online` (warps side by side along the
// rows, thr_layout (4,1)) whose running row max the printer declares beside the row-sum
// fragment.  test/test_online_chain.py runs such graphs in the host emulator.
func.func @attn(%Q: tensor<2x256x64xf16> {kn.strides = array<i64: 16384, 64, 1>}, %K: tensor<2x64x256xf16> {kn.strides = array<i64: 16384, 1, 64>}, %V: tensor<2x256x64xf16> {kn.strides = array<i64: 16384, 64, 1>}) -> tensor<2x256x64xf16> {
  %o = kn.customized(%Q, %K, %V) attributes {grid_dim = array<i64: 2, 4, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<2x256x64xf16>, tensor<2x64x256xf16>, tensor<2x256x64xf16>) -> tensor<2x256x64xf16> {
  ^bb0(%q: tensor<2x256x64xf16>, %k: tensor<2x64x256xf16>, %v: tensor<2x256x64xf16>):
    %1 = tb.input %q {input_map = array<i64: 0, 1, -1>, forloop_dim = -1 : i64} : tensor<2x256x64xf16> -> !tb.stensor<1x64x64xf16>
    %2 = tb.input %k {input_map = array<i64: 0, -1, -1>, forloop_dim = 2 : i64} : tensor<2x64x256xf16> -> !tb.stensor<1x64x64xf16>
    %3 = tb.input %v {input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64} : tensor<2x256x64xf16> -> !tb.stensor<1x64x64xf16>
    %4 = tb.matmul %1, %2 : !tb.stensor<1x64x64xf16>, !tb.stensor<1x64x64xf16> -> !tb.stensor<1x64x64xf16>
    %5 = tb.mul_scalar %4 {scalar = 1.250000e-01 : f64} : !tb.stensor<1x64x64xf16>
    %6, %7 = tb.reduction_max %5 {dim = 2 : i64} : !tb.stensor<1x64x64xf16> -> !tb.stensor<1x64x1xf16>, !tb.stensor<1x64x1xf16>
    %8 = tb.exp %7 : !tb.stensor<1x64x1xf16>
    %9 = tb.sub %5, %6 : !tb.stensor<1x64x64xf16>, !tb.stensor<1x64x1xf16> -> !tb.stensor<1x64x64xf16>
    %10 = tb.exp %9 : !tb.stensor<1x64x64xf16>
    %11 = tb.forloop_accum red_ld_sum_rescale %10, %8 : !tb.stensor<1x64x64xf16>, !tb.stensor<1x64x1xf16> -> !tb.stensor<1x64x1xf16, after_accum>
    %12 = tb.matmul %10, %3 : !tb.stensor<1x64x64xf16>, !tb.stensor<1x64x64xf16> -> !tb.stensor<1x64x64xf16>
    %13 = tb.forloop_accum nored_rescale %12, %8 : !tb.stensor<1x64x64xf16>, !tb.stensor<1x64x1xf16> -> !tb.stensor<1x64x64xf16, after_accum>
    %14 = tb.div %13, %11 : !tb.stensor<1x64x64xf16, after_accum>, !tb.stensor<1x64x1xf16, after_accum> -> !tb.stensor<1x64x64xf16, after_accum>
    tb.output %14 {output_map = array<i64: 0, 1, -1>} : !tb.stensor<1x64x64xf16, after_accum>
  }
  func.return %o : tensor<2x256x64xf16>
}

// TB-LABEL: func.func @attn
// TB:         tb.mul_scalar {{.*}}tb.in_registers
// TB:         tb.reduction_max {{.*}}tb.in_registers
// TB:         tb.exp {{.*}}tb.in_registers
// TB:         tb.exp {{.*}}tb.in_registers
// TB:         tb.forloop_accum nored_rescale {{.*}}tb.accum_in_reg
// TB:         tb.matmul {{.*}}tb.in_registers
// TB:         tb.forloop_accum nored_rescale {{.*}}tb.accum_in_reg

// CUTE-LABEL: func.func @attn
// CUTE:         %psum0 = cute.mma_init : !cute.frag<64x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>
// CUTE-NEXT:    %racc0 = cute.mma_init : !cute.frag<64x64xf32, #cute.tiled_mma<SM80_16x8x16_F32F16F16F32_TN, (4,1)>>
// CUTE:         cute.for %it = 0 to 4 {
// CUTE:           cute.barrier
// CUTE-NEXT:      cute.mma_chain %racc0, %psum0, %{{.*}}, %{{.*}}, %{{.*}} [#cute.fn<mul_scalar(0.125)>] online
// CUTE-NEXT:      cute.barrier
// CUTE-NEXT:    }
// CUTE-NEXT:    cute.frag_store %racc0 [] "store"
// CUTE-NEXT:    cute.frag_store %psum0 [] "store"

// CHECK:       float f0_max[2];  // running row max (online softmax)
// CHECK:       mx::mma_chain_online_run<128, decltype(f1), decltype(f0), 64, 64, 64, 64, 4, false,
// CHECK-SAME:    (f1, f0, f0_max,
// CHECK-NOT:   mx::reduce_max_running
