// RUN: mirage-opt %s -p 'mirage-transpile{decide=false}' | mirage-opt -p cute-block-reduce,cute-slice-mma,cute-register-accumulators,cute-row-chains | filecheck %s

// cute-row-chains keeps the barrier a chain member needs: after the loop of this online
// softmax (fuzz seed 1127 graph 294), the row sums are reduced with 4 threads per row (so
// not a chain member) beside `clamp(acc)`, and the next level divides `acc` by those sums.
// A chain [clamp, div] would run in one piece where the clamp is, before the barrier, and the
// division would read the sums while other threads still write them: the chain ends before
// the barrier, and with one op left there is no chain at all (the ops are printed one by one).
// CHECK: cute.kernel{{.*}}cute.row_chains = 0 : i64
// CHECK: cute.reduce "sum" %[[ACC:s[0-9]+]] [] "store" %[[SUMS:s[0-9]+]] {cute.reduce_threads = 4 : i64
// CHECK-NEXT: cute.elementwise "id"(%[[OUT:s[0-9]+]]) [#cute.fn<clamp(-32.0,64.0)>] "store" %{{s[0-9]+}} {order
// CHECK-NEXT: cute.barrier
// CHECK-NEXT: cute.elementwise "div"(%[[OUT]], %[[SUMS]]) [] "store" %{{s[0-9]+}} {order

builtin.module {
  func.func @fuzz_1127_294(%Q: tensor<4x32x16xf32> {kn.strides = array<i64: 512, 16, 1>}, %K: tensor<4x16x128xf32> {kn.strides = array<i64: 2048, 128, 1>}, %V: tensor<4x128x16xf32> {kn.strides = array<i64: 2048, 16, 1>}) -> (tensor<4x32x16xf32>, tensor<4x32x16xf32>) {
    %0, %1 = kn.customized(%Q, %K, %V) attributes {grid_dim = array<i64: 4, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 32 : i64} : (tensor<4x32x16xf32>, tensor<4x16x128xf32>, tensor<4x128x16xf32>) -> (tensor<4x32x16xf32>, tensor<4x32x16xf32>) {
    ^bb0(%q: tensor<4x32x16xf32>, %k: tensor<4x16x128xf32>, %v: tensor<4x128x16xf32>):
      %2 = tb.input %q {input_map = array<i64: 0, -1, -1>, forloop_dim = -1 : i64} : tensor<4x32x16xf32> -> !tb.stensor<1x32x16xf32>
      %3 = tb.input %k {input_map = array<i64: 0, -1, -1>, forloop_dim = 2 : i64} : tensor<4x16x128xf32> -> !tb.stensor<1x16x32xf32>
      %4 = tb.input %v {input_map = array<i64: 0, -1, -1>, forloop_dim = 1 : i64} : tensor<4x128x16xf32> -> !tb.stensor<1x32x16xf32>
      %5 = tb.matmul %2, %3 : !tb.stensor<1x32x16xf32>, !tb.stensor<1x16x32xf32> -> !tb.stensor<1x32x32xf32>
      %6 = tb.mul_scalar %5 {scalar = 2.500000e-01 : f64} : !tb.stensor<1x32x32xf32>
      %7, %8 = tb.reduction_max %6 {dim = 2 : i64} : !tb.stensor<1x32x32xf32> -> !tb.stensor<1x32x1xf32>, !tb.stensor<1x32x1xf32>
      %9 = tb.sub %6, %7 : !tb.stensor<1x32x32xf32>, !tb.stensor<1x32x1xf32> -> !tb.stensor<1x32x32xf32>
      %10 = tb.exp %9 : !tb.stensor<1x32x32xf32>
      %11 = tb.exp %8 : !tb.stensor<1x32x1xf32>
      %12 = tb.matmul %10, %4 : !tb.stensor<1x32x32xf32>, !tb.stensor<1x32x16xf32> -> !tb.stensor<1x32x16xf32>
      %13 = tb.forloop_accum nored_rescale %12, %11 : !tb.stensor<1x32x16xf32>, !tb.stensor<1x32x1xf32> -> !tb.stensor<1x32x16xf32, after_accum>
      %14 = tb.forloop_accum red_ld_sum_rescale %10, %11 : !tb.stensor<1x32x32xf32>, !tb.stensor<1x32x1xf32> -> !tb.stensor<1x32x1xf32, after_accum>
      %15 = tb.div %13, %14 : !tb.stensor<1x32x16xf32, after_accum>, !tb.stensor<1x32x1xf32, after_accum> -> !tb.stensor<1x32x16xf32, after_accum>
      %16 = tb.clamp %13 {min_value = -3.200000e+01 : f64, max_value = 6.400000e+01 : f64} : !tb.stensor<1x32x16xf32, after_accum>
      tb.output %16 {output_map = array<i64: 0, 1, -1>} : !tb.stensor<1x32x16xf32, after_accum>
      tb.output %15 {output_map = array<i64: 0, 1, -1>} : !tb.stensor<1x32x16xf32, after_accum>
    }
    func.return %0, %1 : tensor<4x32x16xf32>, tensor<4x32x16xf32>
  }
}
