// RUN: mirage-opt %s -p tb-schedule,tb-plan-swizzle,tb-plan-pipeline --split-input-file | filecheck %s
// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-pipeline{inflight-bytes=16384 max-stages=8}' --split-input-file | filecheck %s --check-prefix=INFLIGHT
// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-pipeline{weight-max-stages=5}' --split-input-file | filecheck %s --check-prefix=WCAP
// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-pipeline{stages=20}' --split-input-file | filecheck %s --check-prefix=FORCED

// tb-plan-pipeline writes `tb.stages` (one depth per graph) on the cp.async-pipelined inputs
// that tb-schedule marked, and nothing else (shared memory is tb-plan-smem's). Without a
// weight it maximises min(bytes in flight per SM, inflight-bytes) up to max-stages (default
// 2); a graph streaming a kn.weight takes the deepest ring <= weight-max-stages (8) that keeps
// the grid in one wave, a wide lone block (>= 256 threads, <= one block per SM) the deepest
// <= lone-block-max-stages (4); stages=N forces N, clamped to 8 and the loop length. Checked: each rule on
// X [16, 1024] @ W [1024, 64], 2 blocks, 16 iterations, tiles X 2 KiB + W 4 KiB per stage.
// Input: after tb-decompose-accumulators .. tb-compute-strides.

func.func @stream(%X: tensor<16x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.innermost = 1 : i64}, %W: tensor<1024x64xf16> {kn.strides = array<i64: 64, 1>, kn.innermost = 1 : i64}) -> (tensor<16x64xf16> {kn.strides = array<i64: 64, 1>}) attributes {mirage.layout_cost = 11192 : i64, mirage.layout_status = "optimal"} {
  %O = kn.customized(%X, %W) attributes {kn.innermost = array<i64: 1>, grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 16 : i64, reduction_dimx = 64 : i64} : (tensor<16x1024xf16>, tensor<1024x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%x: tensor<16x1024xf16>, %w: tensor<1024x64xf16>):
    %tx = tb.input %x {tb.chain = 0 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 64, 1>], tb.num_phy_elems = array<i64: 1024>, input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<16x1024xf16> -> !tb.stensor<16x64xf16>
    %tw = tb.input %w {tb.chain = 1 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 2048>, input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<1024x64xf16> -> !tb.stensor<64x32xf16>
    %mm = tb.matmul %tx, %tw {tb.chain = 2 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>} : !tb.stensor<16x64xf16>, !tb.stensor<64x32xf16> -> !tb.stensor<16x32xf16>
    %acc = tb.forloop_accum nored %mm {tb.chain = 2 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>} : !tb.stensor<16x32xf16> -> !tb.stensor<16x32xf16, after_accum>
    tb.output %acc {tb.chain = 4 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64>, tb.swizzled = array<i64>, tb.strides = [], tb.num_phy_elems = array<i64>, output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x32xf16, after_accum>
  }
  func.return %O : tensor<16x64xf16>
}

// Default: double buffering. Only the two inputs get a depth; no shared-memory plan yet.
// CHECK-LABEL: func.func @stream
// CHECK:       %tx = tb.input %x {{{.*}}tb.pipelined, {{.*}}tb.stages = 2 : i64,
// CHECK-NEXT:  %tw = tb.input %w {{{.*}}tb.pipelined, {{.*}}tb.stages = 2 : i64,
// CHECK-NOT:   tb.stages
// CHECK-NOT:   tb.smem_offset
// CHECK:       func.return
// A 16 KiB target: (N - 1) * 6144 B >= 16384 B at N = 4 (one block per SM).
// INFLIGHT-LABEL: func.func @stream
// INFLIGHT:       %tx = tb.input %x {{{.*}}tb.stages = 4 : i64,
// INFLIGHT-NEXT:  %tw = tb.input %w {{{.*}}tb.stages = 4 : i64,
// WCAP-LABEL:  func.func @stream
// WCAP:        %tx = tb.input %x {{{.*}}tb.stages = 2 : i64,
// FORCED-LABEL:   func.func @stream
// FORCED:         %tx = tb.input %x {{{.*}}tb.stages = 8 : i64,
// FORCED-NEXT:    %tw = tb.input %w {{{.*}}tb.stages = 8 : i64,

// -----

// The same graph with W marked kn.weight.
func.func @weight(%X: tensor<16x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.innermost = 1 : i64}, %W: tensor<1024x64xf16> {kn.strides = array<i64: 64, 1>, kn.weight, kn.innermost = 1 : i64}) -> (tensor<16x64xf16> {kn.strides = array<i64: 64, 1>}) attributes {mirage.layout_cost = 11192 : i64, mirage.layout_status = "optimal"} {
  %O = kn.customized(%X, %W) attributes {kn.innermost = array<i64: 1>, grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 16 : i64, reduction_dimx = 64 : i64} : (tensor<16x1024xf16>, tensor<1024x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%x: tensor<16x1024xf16>, %w: tensor<1024x64xf16>):
    %tx = tb.input %x {tb.chain = 0 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 64, 1>], tb.num_phy_elems = array<i64: 1024>, input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<16x1024xf16> -> !tb.stensor<16x64xf16>
    %tw = tb.input %w {tb.chain = 1 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 2048>, input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<1024x64xf16> -> !tb.stensor<64x32xf16>
    %mm = tb.matmul %tx, %tw {tb.chain = 2 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>} : !tb.stensor<16x64xf16>, !tb.stensor<64x32xf16> -> !tb.stensor<16x32xf16>
    %acc = tb.forloop_accum nored %mm {tb.chain = 2 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>} : !tb.stensor<16x32xf16> -> !tb.stensor<16x32xf16, after_accum>
    tb.output %acc {tb.chain = 4 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64>, tb.swizzled = array<i64>, tb.strides = [], tb.num_phy_elems = array<i64>, output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x32xf16, after_accum>
  }
  func.return %O : tensor<16x64xf16>
}

// Two blocks always fit one wave: the deepest ring, weight-max-stages = 8.
// CHECK-LABEL: func.func @weight
// CHECK:       %tx = tb.input %x {{{.*}}tb.stages = 8 : i64,
// CHECK-NEXT:  %tw = tb.input %w {{{.*}}tb.stages = 8 : i64,
// CHECK-NOT:   tb.stages
// CHECK-NOT:   tb.smem_offset
// CHECK:       func.return
// max-stages and inflight-bytes do not touch a weight graph.
// INFLIGHT-LABEL: func.func @weight
// INFLIGHT:       %tx = tb.input %x {{{.*}}tb.stages = 8 : i64,
// WCAP-LABEL:  func.func @weight
// WCAP:        %tx = tb.input %x {{{.*}}tb.stages = 5 : i64,
// WCAP-NEXT:   %tw = tb.input %w {{{.*}}tb.stages = 5 : i64,
// FORCED-LABEL:   func.func @weight
// FORCED:         %tx = tb.input %x {{{.*}}tb.stages = 8 : i64,

// -----

// The weight graph as a wide lone block (512 threads, 2 blocks).
func.func @lone_weight(%X: tensor<16x1024xf16> {kn.strides = array<i64: 1024, 1>, kn.innermost = 1 : i64}, %W: tensor<1024x64xf16> {kn.strides = array<i64: 64, 1>, kn.weight, kn.innermost = 1 : i64}) -> (tensor<16x64xf16> {kn.strides = array<i64: 64, 1>}) attributes {mirage.layout_cost = 11192 : i64, mirage.layout_status = "optimal"} {
  %O = kn.customized(%X, %W) attributes {kn.innermost = array<i64: 1>, grid_dim = array<i64: 2, 1, 1>, block_dim = array<i64: 512, 1, 1>, forloop_range = 16 : i64, reduction_dimx = 64 : i64} : (tensor<16x1024xf16>, tensor<1024x64xf16>) -> tensor<16x64xf16> {
  ^bb0(%x: tensor<16x1024xf16>, %w: tensor<1024x64xf16>):
    %tx = tb.input %x {tb.chain = 0 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 64, 1>], tb.num_phy_elems = array<i64: 1024>, input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<16x1024xf16> -> !tb.stensor<16x64xf16>
    %tw = tb.input %w {tb.chain = 1 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 2048>, input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<1024x64xf16> -> !tb.stensor<64x32xf16>
    %mm = tb.matmul %tx, %tw {tb.chain = 2 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>} : !tb.stensor<16x64xf16>, !tb.stensor<64x32xf16> -> !tb.stensor<16x32xf16>
    %acc = tb.forloop_accum nored %mm {tb.chain = 2 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 32, 1>], tb.num_phy_elems = array<i64: 512>} : !tb.stensor<16x32xf16> -> !tb.stensor<16x32xf16, after_accum>
    tb.output %acc {tb.chain = 4 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64>, tb.swizzled = array<i64>, tb.strides = [], tb.num_phy_elems = array<i64>, output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x32xf16, after_accum>
  }
  func.return %O : tensor<16x64xf16>
}

// A wide lone block keeps the lone-block cap, 4, whatever weight-max-stages is.
// CHECK-LABEL: func.func @lone_weight
// CHECK:       %tx = tb.input %x {{{.*}}tb.stages = 4 : i64,
// CHECK-NEXT:  %tw = tb.input %w {{{.*}}tb.stages = 4 : i64,
// WCAP-LABEL:  func.func @lone_weight
// WCAP:        %tx = tb.input %x {{{.*}}tb.stages = 4 : i64,
