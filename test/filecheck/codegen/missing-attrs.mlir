// RUN: mirage-opt %s -p convert-tb-to-cute --verify-diagnostics --split-input-file | filecheck %s
// RUN: not mirage-opt %s -t cuda 2>&1 | filecheck %s --check-prefix=TARGET

// convert-tb-to-cute needs the attributes of passes 3-9 (passes/README.md); a missing one
// is a located error naming the pass that writes it.

func.func @unplanned(%x: tensor<64x64xf16>) -> tensor<64x64xf16> {
  %y = kn.customized(%x) attributes {grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%0: tensor<64x64xf16>):
    %1 = tb.input %0 {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<64x64xf16> -> !tb.stensor<16x64xf16>
    %2 = tb.forloop_accum nored %1 : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    tb.output %2 {output_map = array<i64: 0, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
  }
  func.return %y : tensor<64x64xf16>
}

// CHECK: convert-tb-to-cute: kn.customized has no 'tb.smem_size' attribute; run tb-plan-smem first (mirage-transpile runs every pass in order)
// TARGET: mirage-opt: error: emit_cuda: the module still holds kn.customized ops; lower them first with convert-tb-to-cute

// -----

func.func @unscheduled(%x: tensor<64x64xf16>) -> tensor<64x64xf16> {
  %y = kn.customized(%x) attributes {tb.smem_size = 4352 : i64, grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<64x64xf16>) -> tensor<64x64xf16> {
  ^bb0(%0: tensor<64x64xf16>):
    %1 = tb.input %0 {tb.smem_offset = array<i64: 128>, tb.strides = [array<i64: 64, 1>], tb.swizzle = ["none"], input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<64x64xf16> -> !tb.stensor<16x64xf16>
    %2 = tb.forloop_accum nored %1 {tb.smem_offset = array<i64: 2176>, tb.strides = [array<i64: 64, 1>], tb.swizzle = ["none"]} : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    tb.output %2 {output_map = array<i64: 0, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
  }
  func.return %y : tensor<64x64xf16>
}

// CHECK: convert-tb-to-cute: tb.input has no 'tb.stage' attribute; run tb-schedule first
