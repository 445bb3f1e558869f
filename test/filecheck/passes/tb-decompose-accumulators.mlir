// RUN: mirage-opt %s -p tb-decompose-accumulators --split-input-file | filecheck %s

// rmsnorm_bs1.json graph 0 (mirage-notes 2.3): an fp16 red_ld_rms over a [2,128] tile with
// forloop_range 32 becomes square -> nored in f32 -> reduction -> mul_scalar(1/(128*32) =
// 1/4096) -> sqrt rounding to f16: the squares are summed in fp32 and scaled after the sum
// (Mirage scales them before an fp16 sum, which flushes small ones to zero).  The square stays
// in the loop (its tile not after_accum); the nored result and everything after it are after_accum.
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
// CHECK:         %t1 = tb.input
// CHECK-NEXT:    %t2 = tb.input
// CHECK-NEXT:    %[[SQ:.*]] = tb.square %t1 : !tb.stensor<2x128xf16>
// CHECK-NEXT:    %[[ACC:.*]] = tb.forloop_accum nored %[[SQ]] : !tb.stensor<2x128xf16> -> !tb.stensor<2x128xf32, after_accum>
// CHECK-NEXT:    %[[RED:.*]] = tb.reduction %[[ACC]] {dim = 1 : i64} : !tb.stensor<2x128xf32, after_accum> -> !tb.stensor<2x1xf32, after_accum>
// CHECK-NEXT:    %[[MEAN:.*]] = tb.mul_scalar %[[RED]] {scalar = 0.000244140625 : f64} : !tb.stensor<2x1xf32, after_accum>
// CHECK-NEXT:    %[[RMS:.*]] = tb.sqrt %[[MEAN]] : !tb.stensor<2x1xf32, after_accum> -> !tb.stensor<2x1xf16, after_accum>
// CHECK-NEXT:    %t4 = tb.matmul %t1, %t2
// CHECK-NEXT:    %t5 = tb.forloop_accum nored %t4
// CHECK-NEXT:    %t6 = tb.div %t5, %[[RMS]]
// CHECK-NEXT:    tb.output %t6

// -----

// An fp32 red_ld_rms keeps Mirage's order (scale before the sum: the scaled squares are fp32).
func.func @rms_fp32(%X: tensor<8x512xf32>) -> tensor<8x1xf32> {
  %r = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<8x512xf32>) -> tensor<8x1xf32> {
  ^bb0(%x: tensor<8x512xf32>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x512xf32> -> !tb.stensor<8x128xf32>
    %rms = tb.forloop_accum red_ld_rms %t : !tb.stensor<8x128xf32> -> !tb.stensor<8x1xf32, after_accum>
    tb.output %rms {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x1xf32, after_accum>
  }
  func.return %r : tensor<8x1xf32>
}

// CHECK-LABEL: func.func @rms_fp32
// CHECK:         %[[SQ:.*]] = tb.square %t : !tb.stensor<8x128xf32>
// CHECK-NEXT:    %[[SC:.*]] = tb.mul_scalar %[[SQ]] {scalar = 0.001953125 : f64} : !tb.stensor<8x128xf32>
// CHECK-NEXT:    %[[ACC:.*]] = tb.forloop_accum nored %[[SC]] : !tb.stensor<8x128xf32> -> !tb.stensor<8x128xf32, after_accum>
// CHECK-NEXT:    %[[RED:.*]] = tb.reduction %[[ACC]] {dim = 1 : i64}
// CHECK-NEXT:    tb.sqrt %[[RED]] : !tb.stensor<8x1xf32, after_accum>{{$}}

// -----

// Every reducing accumulator kind (n = 128, R = 4, reduction_dimx = 64).
func.func @all_kinds(%X: tensor<8x512xf32>) -> (tensor<8x1xf32>, tensor<8x1xf32>, tensor<8x64xf32>, tensor<8x1xf32>, tensor<8x128xf32>) {
  %a, %b, %c, %d, %e = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<8x512xf32>) -> (tensor<8x1xf32>, tensor<8x1xf32>, tensor<8x64xf32>, tensor<8x1xf32>, tensor<8x128xf32>) {
  ^bb0(%x: tensor<8x512xf32>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x512xf32> -> !tb.stensor<8x128xf32>
    %s = tb.exp %t : !tb.stensor<8x128xf32>
    %sum = tb.forloop_accum red_ld_sum %t : !tb.stensor<8x128xf32> -> !tb.stensor<8x1xf32, after_accum>
    %mean = tb.forloop_accum red_ld_mean %t : !tb.stensor<8x128xf32> -> !tb.stensor<8x1xf32, after_accum>
    %tox = tb.forloop_accum redtox_ld_sum %t : !tb.stensor<8x128xf32> -> !tb.stensor<8x64xf32, after_accum>
    %rsum = tb.forloop_accum red_ld_sum_rescale %t, %s : !tb.stensor<8x128xf32>, !tb.stensor<8x128xf32> -> !tb.stensor<8x1xf32, after_accum>
    %keep = tb.forloop_accum max %t : !tb.stensor<8x128xf32> -> !tb.stensor<8x128xf32, after_accum>
    tb.output %sum {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x1xf32, after_accum>
    tb.output %mean {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x1xf32, after_accum>
    tb.output %tox {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x64xf32, after_accum>
    tb.output %rsum {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x1xf32, after_accum>
    tb.output %keep {output_map = array<i64: -1, -1, -1>} : !tb.stensor<8x128xf32, after_accum>
  }
  func.return %a, %b, %c, %d, %e : tensor<8x1xf32>, tensor<8x1xf32>, tensor<8x64xf32>, tensor<8x1xf32>, tensor<8x128xf32>
}

// CHECK-LABEL: func.func @all_kinds
// red_ld_sum -> nored -> reduction(last)
// CHECK:         %[[A1:.*]] = tb.forloop_accum nored %t : !tb.stensor<8x128xf32> -> !tb.stensor<8x128xf32, after_accum>
// CHECK-NEXT:    %[[SUM:.*]] = tb.reduction %[[A1]] {dim = 1 : i64} : !tb.stensor<8x128xf32, after_accum> -> !tb.stensor<8x1xf32, after_accum>
// red_ld_mean -> nored -> reduction -> mul_scalar(1/(128*4)) (Mirage: "To be implemented")
// CHECK-NEXT:    %[[A2:.*]] = tb.forloop_accum nored %t : !tb.stensor<8x128xf32> -> !tb.stensor<8x128xf32, after_accum>
// CHECK-NEXT:    %[[R2:.*]] = tb.reduction %[[A2]] {dim = 1 : i64}
// CHECK-NEXT:    %[[MEAN:.*]] = tb.mul_scalar %[[R2]] {scalar = 0.001953125 : f64} : !tb.stensor<8x1xf32, after_accum>
// redtox_ld_sum -> nored -> reduction_to_dimx(last)
// CHECK-NEXT:    %[[A3:.*]] = tb.forloop_accum nored %t
// CHECK-NEXT:    %[[TOX:.*]] = tb.reduction_to_dimx %[[A3]] {dim = 1 : i64} : !tb.stensor<8x128xf32, after_accum> -> !tb.stensor<8x64xf32, after_accum>
// red_ld_sum_rescale -> nored_rescale -> reduction(last)
// CHECK-NEXT:    %[[A4:.*]] = tb.forloop_accum nored_rescale %t, %s : !tb.stensor<8x128xf32>, !tb.stensor<8x128xf32> -> !tb.stensor<8x128xf32, after_accum>
// CHECK-NEXT:    %[[RSUM:.*]] = tb.reduction %[[A4]] {dim = 1 : i64}
// max stays
// CHECK-NEXT:    %keep = tb.forloop_accum max %t
// CHECK-NEXT:    tb.output %[[SUM]]
// CHECK-NEXT:    tb.output %[[MEAN]]
// CHECK-NEXT:    tb.output %[[TOX]]
// CHECK-NEXT:    tb.output %[[RSUM]]
// CHECK-NEXT:    tb.output %keep
// CHECK-NOT:     red_ld

// -----

// tb.rms_norm (after the loop here) -> square -> reduction -> mul_scalar(1/24) -> sqrt -> div
// (the sum before the 1/n: scaled fp16 squares underflow);
// every new tile stays after_accum.
func.func @tb_rms_norm(%X: tensor<2x4096xf16>, %W: tensor<4096x24xf16>) -> tensor<2x24xf16> {
  %O = kn.customized(%X, %W) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64, reduction_dimx = 64 : i64} : (tensor<2x4096xf16>, tensor<4096x24xf16>) -> tensor<2x24xf16> {
  ^bb0(%x: tensor<2x4096xf16>, %w: tensor<4096x24xf16>):
    %t1 = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x128xf16>
    %t2 = tb.input %w {input_map = array<i64: -1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x24xf16> -> !tb.stensor<128x24xf16>
    %t4 = tb.matmul %t1, %t2 : !tb.stensor<2x128xf16>, !tb.stensor<128x24xf16> -> !tb.stensor<2x24xf16>
    %t5 = tb.forloop_accum nored %t4 : !tb.stensor<2x24xf16> -> !tb.stensor<2x24xf16, after_accum>
    %n = tb.rms_norm %t5 : !tb.stensor<2x24xf16, after_accum>
    tb.output %n {output_map = array<i64: -1, -1, -1>} : !tb.stensor<2x24xf16, after_accum>
  }
  func.return %O : tensor<2x24xf16>
}

// CHECK-LABEL: func.func @tb_rms_norm
// CHECK:         %t5 = tb.forloop_accum nored %t4
// CHECK-NEXT:    %[[SQ:.*]] = tb.square %t5 : !tb.stensor<2x24xf16, after_accum>
// CHECK-NEXT:    %[[RED:.*]] = tb.reduction %[[SQ]] {dim = 1 : i64} : !tb.stensor<2x24xf16, after_accum> -> !tb.stensor<2x1xf16, after_accum>
// CHECK-NEXT:    %[[SC:.*]] = tb.mul_scalar %[[RED]] {scalar = 0.041666666666666664 : f64} : !tb.stensor<2x1xf16, after_accum>
// CHECK-NEXT:    %[[RMS:.*]] = tb.sqrt %[[SC]] : !tb.stensor<2x1xf16, after_accum>
// CHECK-NEXT:    %[[N:.*]] = tb.div %t5, %[[RMS]] : !tb.stensor<2x24xf16, after_accum>, !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x24xf16, after_accum>
// CHECK-NEXT:    tb.output %[[N]]
// CHECK-NOT:     tb.rms_norm
