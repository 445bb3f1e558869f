// RUN: mirage-opt %s -p tb-decompose-accumulators,tb-fusion-chains,tb-resolve-layout,tb-compute-strides,kn-plan-workspace --split-input-file | filecheck %s

// Lifetimes in program order (def .. last use, inclusive): %a [0,1], %b [1,3], %c [2,3],
// %d [3,4]; %e is a graph output (never in the workspace).  Each buffer is 64*64*2 = 8192 B.
// Largest first, best fit: %a at 0; %b overlaps %a -> 8192; %c overlaps only %b -> reuses 0;
// %d overlaps %b and %c -> 16384.  24576 B instead of Mirage's 32768 B bump allocation
// (mirage-notes 3.4 never reuses memory).
func.func @reuse(%x: tensor<64x64xf16> {kn.strides = array<i64: 64, 1>}) -> tensor<64x64xf16> {
  %a = kn.exp %x : tensor<64x64xf16>
  %b = kn.sqrt %a : tensor<64x64xf16>
  %c = kn.relu %b : tensor<64x64xf16>
  %d = kn.add %c, %b : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf16>
  %e = kn.exp %d : tensor<64x64xf16>
  func.return %e : tensor<64x64xf16>
}

// CHECK-LABEL: func.func @reuse
// CHECK-SAME:    kn.workspace_size = 24576 : i64
// CHECK-NEXT:  %a = kn.exp {{.*}}kn.workspace_offset = array<i64: 0>}
// CHECK-NEXT:  %b = kn.sqrt {{.*}}kn.workspace_offset = array<i64: 8192>}
// CHECK-NEXT:  %c = kn.relu {{.*}}kn.workspace_offset = array<i64: 0>}
// CHECK-NEXT:  %d = kn.add {{.*}}kn.workspace_offset = array<i64: 16384>}
// CHECK-NEXT:  %e = kn.exp %d {kn.innermost = array<i64: 1>} :

// -----

// A customized op with one intermediate and one graph output: -1 marks the output.  Sizes use
// the padded strides: [2,1] is one 16-byte chunk, rounded up to the 128-byte alignment.
func.func @mixed(%x: tensor<2x64xf16> {kn.strides = array<i64: 64, 1>}) -> (tensor<2x64xf16>, tensor<2x1xf16>) {
  %p, %q = kn.customized(%x) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<2x64xf16>) -> (tensor<2x1xf16>, tensor<2x64xf16>) {
  ^bb0(%xx: tensor<2x64xf16>):
    %t = tb.input %xx {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<2x64xf16> -> !tb.stensor<2x64xf16>
    %s = tb.forloop_accum red_ld_sum %t : !tb.stensor<2x64xf16> -> !tb.stensor<2x1xf16, after_accum>
    %k = tb.forloop_accum nored %t : !tb.stensor<2x64xf16> -> !tb.stensor<2x64xf16, after_accum>
    tb.output %s {output_map = array<i64: -1, -1, -1>} : !tb.stensor<2x1xf16, after_accum>
    tb.output %k {output_map = array<i64: -1, -1, -1>} : !tb.stensor<2x64xf16, after_accum>
  }
  %r = kn.sqrt %p : tensor<2x1xf16>
  func.return %q, %r : tensor<2x64xf16>, tensor<2x1xf16>
}

// CHECK-LABEL: func.func @mixed
// CHECK-SAME:    kn.workspace_size = 128 : i64
// CHECK:       kn.customized(%x) attributes {{.*}}kn.workspace_offset = array<i64: 0, -1>
// CHECK:       %r = kn.sqrt %p {kn.innermost = array<i64: {{[01]}}>} :

// -----

// rmsnorm_bs1.json graph 0: the only DTensors are graph inputs and outputs.
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
// CHECK-SAME:    kn.workspace_size = 0 : i64
// CHECK-NOT:   kn.workspace_offset
