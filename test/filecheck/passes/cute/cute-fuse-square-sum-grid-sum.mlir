// cute-fuse-square-sum runs before cute-grid-sum-epilogue (mirage-transpile's cute decisions):
// the rms_norm of a split-K matmul's result (fuzz seed 1151 graph 833, values near 632 in fp16)
// sums the squares of the stored grid sum in fp32.  Planned after the epilogue, the square sat
// in its register phase and was stored rounded to fp16 (inf) for the sum: the output was 0.
// RUN: mirage-opt %s -p mirage-transpile | filecheck %s

builtin.module {
  func.func @fuzz_1151_833(%X: tensor<2x4x128xf16> {kn.strides = array<i64: 512, 128, 1>}, %0: tensor<2x128x64xf16> {kn.strides = array<i64: 8192, 64, 1>, kn.weight}, %1: tensor<2x128x64xf16> {kn.strides = array<i64: 8192, 64, 1>, kn.weight}, %2: tensor<2x64x128xf16> {kn.strides = array<i64: 8192, 128, 1>, kn.weight}, %3: tensor<2x64x128xf16> {kn.strides = array<i64: 8192, 128, 1>, kn.weight}, %4: tensor<2x128x64xf16> {kn.strides = array<i64: 8192, 64, 1>}) -> (tensor<2x4x64xf16>) {
    %5 = kn.rms_norm %X {normalized_shape = array<i64: 128>} : tensor<2x4x128xf16>
    %6 = kn.matmul %5, %0 : tensor<2x4x128xf16>, tensor<2x128x64xf16> -> tensor<2x4x64xf16>
    %7 = kn.matmul %5, %1 : tensor<2x4x128xf16>, tensor<2x128x64xf16> -> tensor<2x4x64xf16>
    %8 = kn.square %6 : tensor<2x4x64xf16>
    %9 = kn.sub %8, %7 : tensor<2x4x64xf16>, tensor<2x4x64xf16> -> tensor<2x4x64xf16>
    %10 = kn.matmul %9, %2 : tensor<2x4x64xf16>, tensor<2x64x128xf16> -> tensor<2x4x128xf16>
    %11 = kn.matmul %9, %3 : tensor<2x4x64xf16>, tensor<2x64x128xf16> -> tensor<2x4x128xf16>
    %12 = kn.sub %10, %11 : tensor<2x4x128xf16>, tensor<2x4x128xf16> -> tensor<2x4x128xf16>
    %13 = kn.matmul %12, %4 : tensor<2x4x128xf16>, tensor<2x128x64xf16> -> tensor<2x4x64xf16>
    %14 = kn.rms_norm %13 {normalized_shape = array<i64: 64>} : tensor<2x4x64xf16>
    func.return %14 : tensor<2x4x64xf16>
  }
}

// CHECK: cute.kernel
// CHECK: cute.grid_sum(%{{.*}}) -> (%[[SUM:[a-z0-9]+]])
// CHECK-NOT: cute.elementwise "id"(%[[SUM]])
// CHECK: cute.reduce "sum_squares" %[[SUM]] [#cute.fn<mul_scalar(0.015625)>, #cute.fn<sqrt>]
