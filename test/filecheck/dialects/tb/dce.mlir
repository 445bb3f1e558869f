// tb.output stores into the kernel's output: a dead-code elimination keeps it and the
// threadblock graph that feeds it (all other tb ops are pure).
// RUN: mirage-opt %s -p dce | filecheck %s

func.func @graph_0(%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>}) -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>}) {
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
// CHECK: tb.forloop_accum red_ld_rms
// CHECK: tb.matmul
// CHECK: tb.div
// CHECK: tb.output
