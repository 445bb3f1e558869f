// kn-partition: decode attention with one query per KV head (8 heads of 4096 keys) gives too
// few rows to fill the GPU, so the max-reduced key axis is split as flash decoding does. Kernel 1
// runs the online softmax (running tb.reduction_max, rescaled accumulators) over one chunk of the
// keys per block and stores its final max (a max accumulator), row sum and P @ V as the rows of
// [heads, S, n] partials; the combine kernel takes the max of the partial maxima and sums the
// partials weighted by exp(m_s - max).
// RUN: mirage-opt %s -p kn-partition | filecheck %s
// RUN: mirage-opt %s -p 'kn-partition{allow-split=false}' | filecheck %s --check-prefix=NOSPLIT

func.func @decode(%Q: tensor<8x1x128xf16>, %K: tensor<8x128x4096xf16> {kn.strides = array<i64: 524288, 1, 128>}, %V: tensor<8x4096x128xf16>) -> tensor<8x1x128xf16> {
  %s = kn.matmul %Q, %K : tensor<8x1x128xf16>, tensor<8x128x4096xf16> -> tensor<8x1x4096xf16>
  %m = kn.reduction_max %s {dim = 2 : i64} : tensor<8x1x4096xf16> -> tensor<8x1x1xf16>
  %d = kn.sub %s, %m : tensor<8x1x4096xf16>, tensor<8x1x1xf16> -> tensor<8x1x4096xf16>
  %e = kn.exp %d : tensor<8x1x4096xf16>
  %l = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<8x1x4096xf16> -> tensor<8x1x1xf16>
  %o = kn.matmul %e, %V : tensor<8x1x4096xf16>, tensor<8x4096x128xf16> -> tensor<8x1x128xf16>
  %r = kn.div %o, %l : tensor<8x1x128xf16>, tensor<8x1x1xf16> -> tensor<8x1x128xf16>
  func.return %r : tensor<8x1x128xf16>
}
// CHECK-LABEL: func.func @decode
// CHECK:         %[[M:[a-z_0-9]+]], %[[L:[a-z_0-9]+]], %[[O:[a-z_0-9]+]] = kn.customized(%Q, %K, %V) attributes {kn.template = "flash_decoding"{{.*}} -> (tensor<8x[[S:[0-9]+]]x1xf16>, tensor<8x[[S]]x1xf16>, tensor<8x[[S]]x128xf16>)
// CHECK:           tb.reduction_max
// CHECK:           tb.forloop_accum red_ld_sum_rescale
// CHECK:           tb.forloop_accum nored_rescale
// CHECK:           %[[FINAL:[0-9]+]] = tb.forloop_accum max
// CHECK-NEXT:      tb.output %[[FINAL]] {output_map = array<i64: 0, 1, -1>}
// CHECK:         kn.customized(%[[M]], %[[L]], %[[O]]) attributes {kn.template = "split_reduce"
// CHECK:           %[[G:[0-9]+]] = tb.reduce_max %{{.*}} {dim = 1 : i64}
// CHECK:           tb.sub %{{.*}}, %[[G]]
// CHECK-NEXT:      tb.exp
// CHECK:           tb.div
// NOSPLIT-LABEL: func.func @decode
// NOSPLIT-NOT:   flash_decoding

// -----

// Four query rows per KV head whose attention feeds a projection: kernel 1 stores each row's
// partials side by side along the last dim ([8, 4, S * n]); the combine reads them folded as
// [32, S, n] through kn.reshape views and its [32, 1, 128] result is viewed back as [8, 4, 128].
// RUN: mirage-opt %s -p kn-partition --split-input-file | filecheck %s --check-prefix=FOLD
func.func @grouped(%Q: tensor<8x4x128xf16>, %K: tensor<8x128x4096xf16> {kn.strides = array<i64: 524288, 1, 128>}, %V: tensor<8x4096x128xf16>, %W: tensor<128x128xf16>) -> tensor<32x128xf16> {
  %s = kn.matmul %Q, %K : tensor<8x4x128xf16>, tensor<8x128x4096xf16> -> tensor<8x4x4096xf16>
  %m = kn.reduction_max %s {dim = 2 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf16>
  %d = kn.sub %s, %m : tensor<8x4x4096xf16>, tensor<8x4x1xf16> -> tensor<8x4x4096xf16>
  %e = kn.exp %d : tensor<8x4x4096xf16>
  %l = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<8x4x4096xf16> -> tensor<8x4x1xf32>
  %o = kn.matmul %e, %V : tensor<8x4x4096xf16>, tensor<8x4096x128xf16> -> tensor<8x4x128xf16>
  %r = kn.div %o, %l : tensor<8x4x128xf16>, tensor<8x4x1xf32> -> tensor<8x4x128xf16>
  %v = kn.reshape %r : tensor<8x4x128xf16> -> tensor<32x128xf16>
  %p = kn.matmul %v, %W : tensor<32x128xf16>, tensor<128x128xf16> -> tensor<32x128xf16>
  func.return %p : tensor<32x128xf16>
}
// FOLD-LABEL: func.func @grouped
// FOLD:         %[[M:[a-z_0-9]+]], %[[L:[a-z_0-9]+]], %[[O:[a-z_0-9]+]] = kn.customized(%Q, %K, %V) attributes {kn.template = "flash_decoding"{{.*}} -> (tensor<8x4x[[S:[0-9]+]]xf16>, tensor<8x4x[[S]]xf32>, tensor<8x4x[[SN:[0-9]+]]xf16>)
// FOLD:         %[[MV:[a-z_0-9]+]] = kn.reshape %[[M]] : tensor<8x4x[[S]]xf16> -> tensor<32x[[S]]x1xf16>
// FOLD-NEXT:    %[[LV:[a-z_0-9]+]] = kn.reshape %[[L]] : tensor<8x4x[[S]]xf32> -> tensor<32x[[S]]x1xf32>
// FOLD-NEXT:    %[[OV:[a-z_0-9]+]] = kn.reshape %[[O]] : tensor<8x4x[[SN]]xf16> -> tensor<32x[[S]]x128xf16>
// FOLD-NEXT:    %[[C:[a-z_0-9]+]] = kn.customized(%[[MV]], %[[LV]], %[[OV]]) attributes {kn.template = "split_reduce"
// FOLD:           tb.reduce_max %{{.*}} {dim = 1 : i64}
// FOLD:         kn.reshape %[[C]] : tensor<32x1x128xf16> -> tensor<8x4x128xf16>
