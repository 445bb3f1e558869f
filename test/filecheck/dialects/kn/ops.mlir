// Round trip of every `kn` op: custom -> generic -> custom (CHECK) and custom -> generic (CHECK-GENERIC).
// RUN: MIRAGE_ROUNDTRIP
// RUN: MIRAGE_GENERIC_ROUNDTRIP

// CHECK-LABEL: func.func @unary(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
// CHECK-NEXT:    %0 = kn.exp %a : tensor<4x8xf16>
// CHECK-NEXT:    %1 = kn.square %0 : tensor<4x8xf16>
// CHECK-NEXT:    %2 = kn.sqrt %1 : tensor<4x8xf16>
// CHECK-NEXT:    %3 = kn.silu %2 : tensor<4x8xf16>
// CHECK-NEXT:    %4 = kn.sigmoid %3 : tensor<4x8xf16>
// CHECK-NEXT:    %5 = kn.gelu %4 : tensor<4x8xf16>
// CHECK-NEXT:    %6 = kn.relu %5 : tensor<4x8xf16>
// CHECK-NEXT:    %7 = kn.log %6 : tensor<4x8xf16>
// CHECK-NEXT:    %8 = kn.clamp %7 {min_value = -1.000000e+00 : f64, max_value = 2.500000e+00 : f64} : tensor<4x8xf16>
// CHECK-NEXT:    %9 = kn.mul_scalar %8 {scalar = 1.250000e-01 : f64} : tensor<4x8xf16>
// CHECK-NEXT:    %10 = kn.add_scalar %9 {scalar = 1.000000e-05 : f64} : tensor<4x8xf16>
// CHECK-NEXT:    func.return %10 : tensor<4x8xf16>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "unary"
// CHECK-GENERIC:         %0 = "kn.exp"(%a) : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %1 = "kn.square"(%0) : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %2 = "kn.sqrt"(%1) : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %3 = "kn.silu"(%2) : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %4 = "kn.sigmoid"(%3) : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %5 = "kn.gelu"(%4) : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %6 = "kn.relu"(%5) : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %7 = "kn.log"(%6) : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %8 = "kn.clamp"(%7) <{min_value = -1.000000e+00 : f64, max_value = 2.500000e+00 : f64}> : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %9 = "kn.mul_scalar"(%8) <{scalar = 1.250000e-01 : f64}> : (tensor<4x8xf16>) -> tensor<4x8xf16>
// CHECK-GENERIC-NEXT:    %10 = "kn.add_scalar"(%9) <{scalar = 1.000000e-05 : f64}> : (tensor<4x8xf16>) -> tensor<4x8xf16>

func.func @unary(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %0 = kn.exp %a : tensor<4x8xf16>
  %1 = kn.square %0 : tensor<4x8xf16>
  %2 = kn.sqrt %1 : tensor<4x8xf16>
  %3 = kn.silu %2 : tensor<4x8xf16>
  %4 = kn.sigmoid %3 : tensor<4x8xf16>
  %5 = kn.gelu %4 : tensor<4x8xf16>
  %6 = kn.relu %5 : tensor<4x8xf16>
  %7 = kn.log %6 : tensor<4x8xf16>
  %8 = kn.clamp %7 {min_value = -1.0 : f64, max_value = 2.5 : f64} : tensor<4x8xf16>
  %9 = kn.mul_scalar %8 {scalar = 0.125 : f64} : tensor<4x8xf16>
  %10 = kn.add_scalar %9 {scalar = 1.0e-5 : f64} : tensor<4x8xf16>
  func.return %10 : tensor<4x8xf16>
}

// -----

// Binary ops broadcast equal-rank operands (a dim is equal or one side is 1).

// CHECK-LABEL: func.func @binary(
// CHECK-NEXT:    %0 = kn.add %a, %b : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = kn.sub %0, %c : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %2 = kn.mul %b, %c : tensor<4x1xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %3 = kn.div %1, %2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %4 = kn.pow %3, %a : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %4 : tensor<4x8xf32>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "binary"
// CHECK-GENERIC:         %0 = "kn.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC-NEXT:    %1 = "kn.sub"(%0, %c) : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC-NEXT:    %2 = "kn.mul"(%b, %c) : (tensor<4x1xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC-NEXT:    %3 = "kn.div"(%1, %2) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC-NEXT:    %4 = "kn.pow"(%3, %a) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>

func.func @binary(%a: tensor<4x8xf32>, %b: tensor<4x1xf32>, %c: tensor<1x8xf32>) -> tensor<4x8xf32> {
  %0 = kn.add %a, %b : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %1 = kn.sub %0, %c : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %2 = kn.mul %b, %c : tensor<4x1xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %3 = kn.div %1, %2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = kn.pow %3, %a : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %4 : tensor<4x8xf32>
}

// -----

// 2-D and batched matmul (batch dims equal, contraction over lhs[-1] / rhs[-2]).

// CHECK-LABEL: func.func @matmul(
// CHECK-NEXT:    %0 = kn.matmul %a, %b : tensor<16x64xf16>, tensor<64x32xf16> -> tensor<16x32xf16>
// CHECK-NEXT:    %1 = kn.matmul %q, %k : tensor<2x256x64xbf16>, tensor<2x64x4096xbf16> -> tensor<2x256x4096xbf16>
// CHECK-NEXT:    func.return %0, %1 : tensor<16x32xf16>, tensor<2x256x4096xbf16>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "matmul"
// CHECK-GENERIC:         %0 = "kn.matmul"(%a, %b) : (tensor<16x64xf16>, tensor<64x32xf16>) -> tensor<16x32xf16>
// CHECK-GENERIC-NEXT:    %1 = "kn.matmul"(%q, %k) : (tensor<2x256x64xbf16>, tensor<2x64x4096xbf16>) -> tensor<2x256x4096xbf16>

func.func @matmul(%a: tensor<16x64xf16>, %b: tensor<64x32xf16>, %q: tensor<2x256x64xbf16>, %k: tensor<2x64x4096xbf16>) -> (tensor<16x32xf16>, tensor<2x256x4096xbf16>) {
  %0 = kn.matmul %a, %b : tensor<16x64xf16>, tensor<64x32xf16> -> tensor<16x32xf16>
  %1 = kn.matmul %q, %k : tensor<2x256x64xbf16>, tensor<2x64x4096xbf16> -> tensor<2x256x4096xbf16>
  func.return %0, %1 : tensor<16x32xf16>, tensor<2x256x4096xbf16>
}

// -----

// reduction (to size 1 and to a strided size), rms_norm, concat, chunk, all_reduce.

// CHECK-LABEL: func.func @structured(
// CHECK-NEXT:    %0 = kn.reduction %a {dim = 1 : i64, size = 1 : i64} : tensor<8x128xf16> -> tensor<8x1xf16>
// CHECK-NEXT:    %1 = kn.reduction %a {dim = 1 : i64, size = 64 : i64} : tensor<8x128xf16> -> tensor<8x64xf16>
// CHECK-NEXT:    %2 = kn.reduction %a {dim = 0 : i64, size = 1 : i64} : tensor<8x128xf16> -> tensor<1x128xf16>
// CHECK-NEXT:    %3 = kn.rms_norm %a {normalized_shape = array<i64: 128>} : tensor<8x128xf16>
// CHECK-NEXT:    %4 = kn.rms_norm %a {normalized_shape = array<i64: 8, 128>} : tensor<8x128xf16>
// CHECK-NEXT:    %5 = kn.concat %a, %b {dim = 1 : i64} : tensor<8x128xf16>, tensor<8x64xf16> -> tensor<8x192xf16>
// CHECK-NEXT:    %6, %7, %8 = kn.chunk %5 {dim = 1 : i64} : tensor<8x192xf16> -> tensor<8x64xf16>, tensor<8x64xf16>, tensor<8x64xf16>
// CHECK-NEXT:    %9 = kn.all_reduce %6 : tensor<8x64xf16>
// CHECK-NEXT:    %10 = kn.all_reduce %9 {inplace} : tensor<8x64xf16>
// CHECK-NEXT:    func.return %0, %10 : tensor<8x1xf16>, tensor<8x64xf16>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "structured"
// CHECK-GENERIC:         %0 = "kn.reduction"(%a) <{dim = 1 : i64, size = 1 : i64}> : (tensor<8x128xf16>) -> tensor<8x1xf16>
// CHECK-GENERIC-NEXT:    %1 = "kn.reduction"(%a) <{dim = 1 : i64, size = 64 : i64}> : (tensor<8x128xf16>) -> tensor<8x64xf16>
// CHECK-GENERIC-NEXT:    %2 = "kn.reduction"(%a) <{dim = 0 : i64, size = 1 : i64}> : (tensor<8x128xf16>) -> tensor<1x128xf16>
// CHECK-GENERIC-NEXT:    %3 = "kn.rms_norm"(%a) <{normalized_shape = array<i64: 128>}> : (tensor<8x128xf16>) -> tensor<8x128xf16>
// CHECK-GENERIC-NEXT:    %4 = "kn.rms_norm"(%a) <{normalized_shape = array<i64: 8, 128>}> : (tensor<8x128xf16>) -> tensor<8x128xf16>
// CHECK-GENERIC-NEXT:    %5 = "kn.concat"(%a, %b) <{dim = 1 : i64}> : (tensor<8x128xf16>, tensor<8x64xf16>) -> tensor<8x192xf16>
// CHECK-GENERIC-NEXT:    %6, %7, %8 = "kn.chunk"(%5) <{dim = 1 : i64}> : (tensor<8x192xf16>) -> (tensor<8x64xf16>, tensor<8x64xf16>, tensor<8x64xf16>)
// CHECK-GENERIC-NEXT:    %9 = "kn.all_reduce"(%6) : (tensor<8x64xf16>) -> tensor<8x64xf16>
// CHECK-GENERIC-NEXT:    %10 = "kn.all_reduce"(%9) <{inplace}> : (tensor<8x64xf16>) -> tensor<8x64xf16>

func.func @structured(%a: tensor<8x128xf16>, %b: tensor<8x64xf16>) -> (tensor<8x1xf16>, tensor<8x64xf16>) {
  %0 = kn.reduction %a {dim = 1 : i64, size = 1 : i64} : tensor<8x128xf16> -> tensor<8x1xf16>
  %1 = kn.reduction %a {dim = 1 : i64, size = 64 : i64} : tensor<8x128xf16> -> tensor<8x64xf16>
  %2 = kn.reduction %a {dim = 0 : i64, size = 1 : i64} : tensor<8x128xf16> -> tensor<1x128xf16>
  %3 = kn.rms_norm %a {normalized_shape = array<i64: 128>} : tensor<8x128xf16>
  %4 = kn.rms_norm %a {normalized_shape = array<i64: 8, 128>} : tensor<8x128xf16>
  %5 = kn.concat %a, %b {dim = 1 : i64} : tensor<8x128xf16>, tensor<8x64xf16> -> tensor<8x192xf16>
  %6, %7, %8 = kn.chunk %5 {dim = 1 : i64} : tensor<8x192xf16> -> tensor<8x64xf16>, tensor<8x64xf16>, tensor<8x64xf16>
  %9 = kn.all_reduce %6 : tensor<8x64xf16>
  %10 = kn.all_reduce %9 {inplace} : tensor<8x64xf16>
  func.return %0, %10 : tensor<8x1xf16>, tensor<8x64xf16>
}

// -----

// kn.customized holding a threadblock graph; kn.strides argument/result attributes survive.

// CHECK-LABEL: func.func @customized(%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>}) -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>}) {
// CHECK-NEXT:    %O = kn.customized(%X, %W) attributes {grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64, reduction_dimx = 64 : i64} : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
// CHECK-NEXT:    ^bb0(%x: tensor<2x4096xf16>, %w: tensor<4096x6144xf16>):
// CHECK-NEXT:      %t1 = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x128xf16>
// CHECK-NEXT:      %t2 = tb.input %w {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<128x24xf16>
// CHECK-NEXT:      %t3 = tb.forloop_accum red_ld_rms %t1 : !tb.stensor<2x128xf16> -> !tb.stensor<2x1xf16, after_accum>
// CHECK-NEXT:      %t4 = tb.matmul %t1, %t2 : !tb.stensor<2x128xf16>, !tb.stensor<128x24xf16> -> !tb.stensor<2x24xf16>
// CHECK-NEXT:      %t5 = tb.forloop_accum nored %t4 : !tb.stensor<2x24xf16> -> !tb.stensor<2x24xf16, after_accum>
// CHECK-NEXT:      %t6 = tb.div %t5, %t3 : !tb.stensor<2x24xf16, after_accum>, !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x24xf16, after_accum>
// CHECK-NEXT:      tb.output %t6 {output_map = array<i64: 1, -1, -1>} : !tb.stensor<2x24xf16, after_accum>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %O : tensor<2x6144xf16>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "customized"
// CHECK-GENERIC:         %O = "kn.customized"(%X, %W) <{grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64, reduction_dimx = 64 : i64}> ({
// CHECK-GENERIC-NEXT:    ^bb0(%x: tensor<2x4096xf16>, %w: tensor<4096x6144xf16>):
// CHECK-GENERIC:         }) : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16>

func.func @customized(%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>}) -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>}) {
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

// -----

// A kernel with two results: the i-th tb.output produces result i.

// CHECK-LABEL: func.func @two_results(
// CHECK:         %O1, %O2 = kn.customized(%X) attributes {grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 256, 2, 2>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x2xf32>) {
// CHECK:           tb.output %a {output_map = array<i64: -1, 1, -1>} : !tb.stensor<8x32xf32, after_accum>
// CHECK-NEXT:      tb.output %r {output_map = array<i64: -1, 1, -1>} : !tb.stensor<8x1xf32, after_accum>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %O1, %O2 : tensor<8x64xf32>, tensor<8x2xf32>

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "two_results"
// CHECK-GENERIC:         %O1, %O2 = "kn.customized"(%X) <{grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 256, 2, 2>, forloop_range = 1 : i64, reduction_dimx = 64 : i64}> ({

func.func @two_results(%X: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x2xf32>) {
  %O1, %O2 = kn.customized(%X) attributes {grid_dim = array<i64: 1, 2, 1>, block_dim = array<i64: 256, 2, 2>, forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x2xf32>) {
  ^bb0(%x: tensor<8x64xf32>):
    %t = tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = -1 : i64} : tensor<8x64xf32> -> !tb.stensor<8x32xf32>
    %a = tb.forloop_accum nored %t : !tb.stensor<8x32xf32> -> !tb.stensor<8x32xf32, after_accum>
    %r = tb.reduction %a {dim = 1 : i64} : !tb.stensor<8x32xf32, after_accum> -> !tb.stensor<8x1xf32, after_accum>
    tb.output %a {output_map = array<i64: -1, 1, -1>} : !tb.stensor<8x32xf32, after_accum>
    tb.output %r {output_map = array<i64: -1, 1, -1>} : !tb.stensor<8x1xf32, after_accum>
  }
  func.return %O1, %O2 : tensor<8x64xf32>, tensor<8x2xf32>
}
