// kn-partition: the max pass of a softmax over one 131072-wide row. No grid over the one row
// fills the GPU, so the max-reduced axis is split: kernel 1 stores one partial max per block
// side by side along the reduced dim (a `max` accumulator per block), and the combine kernel
// takes the max of the partial maxima (a plain split-K combine would add them).
// RUN: mirage-opt %s -p kn-partition | filecheck %s

func.func @softmax_row(%X: tensor<1x131072xf32>) -> tensor<1x131072xf32> {
  %m = kn.reduction_max %X {dim = 1 : i64} : tensor<1x131072xf32> -> tensor<1x1xf32>
  %d = kn.sub %X, %m : tensor<1x131072xf32>, tensor<1x1xf32> -> tensor<1x131072xf32>
  %e = kn.exp %d : tensor<1x131072xf32>
  %l = kn.reduction %e {dim = 1 : i64, size = 1 : i64} : tensor<1x131072xf32> -> tensor<1x1xf32>
  %r = kn.div %e, %l : tensor<1x131072xf32>, tensor<1x1xf32> -> tensor<1x131072xf32>
  func.return %r : tensor<1x131072xf32>
}
// CHECK-LABEL: func.func @softmax_row
// CHECK:         %[[P:[a-z_0-9]+]] = kn.customized(%X) attributes {kn.template = "split_k"{{.*}}grid_dim = array<i64: [[S:[0-9]+]], 1, 1>{{.*}} -> tensor<1x[[S]]xf32>
// CHECK:           tb.reduce_max %{{.*}} {dim = 1 : i64}
// CHECK-NEXT:      %[[ACC:[0-9]+]] = tb.forloop_accum max
// CHECK-NEXT:      tb.output %[[ACC]] {output_map = array<i64: 1, -1, -1>}
// CHECK:         kn.customized(%[[P]]) attributes {kn.template = "split_reduce"{{.*}} -> tensor<1x1xf32>
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      tb.input
// CHECK-NEXT:      tb.reduce_max %{{.*}} {dim = 1 : i64}
// CHECK-NEXT:      tb.forloop_accum max
// CHECK-NEXT:      tb.output
