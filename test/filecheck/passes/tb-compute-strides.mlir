// RUN: mirage-opt %s -p tb-decompose-accumulators,tb-fusion-chains,tb-resolve-layout,tb-compute-strides --split-input-file | filecheck %s

// rmsnorm_bs1.json graph 0 (mirage-notes 2.3 and 3.3): order [innermost, N-1, ..., 0], the
// first non-1 dim padded to 16 bytes.  Accumulators are stored in fp32 (passes/README.md):
// the nored tiles use 4-byte elements (16 B = 4 elements).  [2,1] with innermost 0 pads dim 0
// to 4 fp32 elements (the rms statistic's sum and mean, strides [1, 4]) or 8 fp16 elements
// (its rounded sqrt, strides [1, 8]).  Graph inputs/outputs keep their strides.
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
// CHECK-SAME:    (%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>, kn.innermost = 1 : i64}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>, kn.innermost = 1 : i64}) -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>})
// CHECK-NOT:   kn.strides = [
// CHECK:       %t1 = tb.input {{.*}}tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>
// CHECK-NEXT:  %t2 = tb.input {{.*}}tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 3072>
// CHECK-NEXT:  tb.square {{.*}}tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>
// CHECK-NEXT:  tb.forloop_accum nored {{.*}}tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>
// CHECK-NEXT:  tb.reduction {{.*}}tb.strides = [array<i64: 1, 4>], tb.num_phy_elems = array<i64: 4>
// CHECK-NEXT:  tb.mul_scalar {{.*}}tb.strides = [array<i64: 1, 4>], tb.num_phy_elems = array<i64: 4>
// CHECK-NEXT:  tb.sqrt {{.*}}tb.strides = [array<i64: 1, 8>], tb.num_phy_elems = array<i64: 8>
// CHECK-NEXT:  %t4 = tb.matmul {{.*}}tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 48>
// CHECK-NEXT:  %t5 = tb.forloop_accum {{.*}}tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 48>
// CHECK-NEXT:  %t6 = tb.div {{.*}}tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 48>
// CHECK-NEXT:  tb.output %t6 {{.*}}tb.strides = [], tb.num_phy_elems = array<i64>

// -----

// fp32 accumulator storage: a [2,12] fp16 tile pads rows to 16 elements (32 B), its fp32
// accumulator pads rows to a multiple of 4 elements (16 B): strides [12, 1], 24 elements.
func.func @accumulator_fp32(%X: tensor<2x48xf16> {kn.strides = array<i64: 48, 1>}) -> tensor<2x12xf16> {
  %O = kn.customized(%X) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<2x48xf16>) -> tensor<2x12xf16> {
  ^bb0(%x: tensor<2x48xf16>):
    %t = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x48xf16> -> !tb.stensor<2x12xf16>
    %a = tb.forloop_accum nored %t : !tb.stensor<2x12xf16> -> !tb.stensor<2x12xf16, after_accum>
    tb.output %a {output_map = array<i64: -1, -1, -1>} : !tb.stensor<2x12xf16, after_accum>
  }
  func.return %O : tensor<2x12xf16>
}

// The output had no strides: the compiler's choice is recorded as a result attribute.
// CHECK-LABEL: func.func @accumulator_fp32
// CHECK-SAME:    -> (tensor<2x12xf16> {kn.strides = array<i64: 16, 1>})
// CHECK:       %t = tb.input {{.*}}tb.strides = [array<i64: 16, 1>], tb.num_phy_elems = array<i64: 32>
// CHECK-NEXT:  %a = tb.forloop_accum nored {{.*}}tb.strides = [array<i64: 12, 1>], tb.num_phy_elems = array<i64: 24>

// -----

// Kernel-level tensors, the examples of mirage-notes 3.3: [15,15] inner 1 -> [16,1] (240
// elements), [2,1] inner 1 -> [1,1] (dim 0 is the first non-1 dim: padded to 8), [2,24] inner
// 1 -> [24,1].  Intermediates get kn.strides on their op; outputs without strides get the
// result attribute (padded too); the input without strides is recorded as row-major.
func.func @examples(%x: tensor<15x15xf16> {kn.strides = array<i64: 15, 1>}, %y: tensor<2x24xf16>) -> (tensor<15x15xf16>, tensor<2x1xf16> {kn.strides = array<i64: 1, 1>}, tensor<2x24xf16>) {
  %e = kn.exp %x : tensor<15x15xf16>
  %s = kn.sqrt %e : tensor<15x15xf16>
  %r = kn.reduction %y {dim = 1 : i64, size = 1 : i64} : tensor<2x24xf16> -> tensor<2x1xf16>
  %q = kn.sqrt %r : tensor<2x1xf16>
  %m = kn.exp %y : tensor<2x24xf16>
  %n = kn.relu %m : tensor<2x24xf16>
  func.return %s, %q, %n : tensor<15x15xf16>, tensor<2x1xf16>, tensor<2x24xf16>
}

// CHECK-LABEL: func.func @examples
// CHECK-SAME:    %y: tensor<2x24xf16> {kn.innermost = 1 : i64, kn.strides = array<i64: 24, 1>}
// CHECK-SAME:    -> (tensor<15x15xf16> {kn.strides = array<i64: 16, 1>}, tensor<2x1xf16> {kn.strides = array<i64: 1, 1>}, tensor<2x24xf16> {kn.strides = array<i64: 24, 1>})
// CHECK-NEXT:  %e = kn.exp %x {kn.innermost = array<i64: 1>, kn.strides = [array<i64: 16, 1>]}
// CHECK-NEXT:  %s = kn.sqrt %e {kn.innermost = array<i64: 1>} :
// CHECK-NEXT:  %r = kn.reduction %y {kn.innermost = array<i64: 1>, kn.strides = [array<i64: 1, 1>],
// CHECK-NEXT:  %q = kn.sqrt %r {kn.innermost = array<i64: 1>} :
// CHECK-NEXT:  %m = kn.exp %y {kn.innermost = array<i64: 1>, kn.strides = [array<i64: 24, 1>]}
