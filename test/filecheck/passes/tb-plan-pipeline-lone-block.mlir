// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-pipeline,tb-plan-smem' --split-input-file | filecheck %s

// tb-plan-pipeline on lone blocks: gated_mlp on 128 blocks (at most one per SM) of 512
// threads, for-loop 32; per stage X [8,128] (2 KiB) + W1, W2 [128,32] (8 KiB each) = 18 KiB.
// Alone on its SM a block keeps (N-1) * 18 KiB in flight: 64 KiB would need 5 stages, the
// lone-block cap (lone-block-max-stages, default 4) gives 4. The same graph with 128-thread
// blocks keeps the default max-stages=2.

// CHECK-LABEL: func.func @lone
// CHECK:       tb.input %x {{{.*}}tb.stages = 4 : i64
// CHECK-NEXT:  tb.input %w1 {{{.*}}tb.stages = 4 : i64
// CHECK-NEXT:  tb.input %w2 {{{.*}}tb.stages = 4 : i64

func.func @lone(%X: tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>},
                   %W1: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>},
                   %W2: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>})
    -> (tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>}) {
  %O = kn.customized(%X, %W1, %W2) attributes {grid_dim = array<i64: 128, 1, 1>, block_dim = array<i64: 512, 1, 1>,
                                         forloop_range = 32 : i64, reduction_dimx = 64 : i64}
      : (tensor<8x4096xf16>, tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> tensor<8x4096xf16> {
  ^bb0(%x: tensor<8x4096xf16>, %w1: tensor<4096x4096xf16>, %w2: tensor<4096x4096xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x4096xf16> -> !tb.stensor<8x128xf16>
    %b = tb.input %w1 {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x4096xf16> -> !tb.stensor<128x32xf16>
    %c = tb.input %w2 {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x4096xf16> -> !tb.stensor<128x32xf16>
    %d = tb.matmul %a, %b : !tb.stensor<8x128xf16>, !tb.stensor<128x32xf16> -> !tb.stensor<8x32xf16>
    %e = tb.matmul %a, %c : !tb.stensor<8x128xf16>, !tb.stensor<128x32xf16> -> !tb.stensor<8x32xf16>
    %f = tb.forloop_accum nored %d : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %g = tb.forloop_accum nored %e : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %h = tb.silu %f : !tb.stensor<8x32xf16, after_accum>
    %i = tb.mul %h, %g : !tb.stensor<8x32xf16, after_accum>, !tb.stensor<8x32xf16, after_accum> -> !tb.stensor<8x32xf16, after_accum>
    tb.output %i {output_map = array<i64: 1, -1, -1>} : !tb.stensor<8x32xf16, after_accum>
  }
  func.return %O : tensor<8x4096xf16>
}

// -----

func.func @narrow(%X: tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>},
                   %W1: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>},
                   %W2: tensor<4096x4096xf16> {kn.strides = array<i64: 4096, 1>})
    -> (tensor<8x4096xf16> {kn.strides = array<i64: 4096, 1>}) {
  %O = kn.customized(%X, %W1, %W2) attributes {grid_dim = array<i64: 128, 1, 1>, block_dim = array<i64: 128, 1, 1>,
                                         forloop_range = 32 : i64, reduction_dimx = 64 : i64}
      : (tensor<8x4096xf16>, tensor<4096x4096xf16>, tensor<4096x4096xf16>) -> tensor<8x4096xf16> {
  ^bb0(%x: tensor<8x4096xf16>, %w1: tensor<4096x4096xf16>, %w2: tensor<4096x4096xf16>):
    %a = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x4096xf16> -> !tb.stensor<8x128xf16>
    %b = tb.input %w1 {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x4096xf16> -> !tb.stensor<128x32xf16>
    %c = tb.input %w2 {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x4096xf16> -> !tb.stensor<128x32xf16>
    %d = tb.matmul %a, %b : !tb.stensor<8x128xf16>, !tb.stensor<128x32xf16> -> !tb.stensor<8x32xf16>
    %e = tb.matmul %a, %c : !tb.stensor<8x128xf16>, !tb.stensor<128x32xf16> -> !tb.stensor<8x32xf16>
    %f = tb.forloop_accum nored %d : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %g = tb.forloop_accum nored %e : !tb.stensor<8x32xf16> -> !tb.stensor<8x32xf16, after_accum>
    %h = tb.silu %f : !tb.stensor<8x32xf16, after_accum>
    %i = tb.mul %h, %g : !tb.stensor<8x32xf16, after_accum>, !tb.stensor<8x32xf16, after_accum> -> !tb.stensor<8x32xf16, after_accum>
    tb.output %i {output_map = array<i64: 1, -1, -1>} : !tb.stensor<8x32xf16, after_accum>
  }
  func.return %O : tensor<8x4096xf16>
}

// CHECK-LABEL: func.func @narrow
// CHECK:       tb.input %x {{{.*}}tb.stages = 2 : i64
// CHECK-NEXT:  tb.input %w1 {{{.*}}tb.stages = 2 : i64
// CHECK-NEXT:  tb.input %w2 {{{.*}}tb.stages = 2 : i64
