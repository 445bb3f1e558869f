// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-pipeline{max-stages=8},tb-plan-smem' | filecheck %s
// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-pipeline{stages=3},tb-plan-smem' | filecheck %s --check-prefix=FORCED
// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-pipeline{stages=8},tb-plan-smem{smem-limit=30000}' | filecheck %s --check-prefix=LIMIT
// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-pipeline{inflight-bytes=16384 max-stages=8},tb-plan-smem' | filecheck %s --check-prefix=SMALL

// rmsnorm_bs1 graph 0: grid 256 (2 blocks per SM on 132 SMs), for-loop 32; per stage the
// pipelined tiles X [2,128] (512 B) + W [128,24] (6144 B) = 6656 B. Two blocks keep
// (N-1) * 6656 * 2 B in flight per SM: 64 KiB needs N-1 >= 5, so 6 stages. Every stage
// buffer of an input is one contiguous ring (512 B / 6144 B apart); the plan grows by
// 4 * 6656 B over the double buffer: 13440 + 26624 = 40064 (the fp32 rms accumulator lives
// in registers through the loop and reuses the rings' space after it).

// CHECK:       tb.smem_size = 40064 : i64
// CHECK:       %t1 = tb.input %x {{{.*}}tb.stages = 6 : i64, tb.smem_offset = array<i64: 128>, tb.smem_offsets_pipeline = array<i64: 128, 640, 1152, 1664, 2176, 2688>
// CHECK-NEXT:  %t2 = tb.input %w {{{.*}}tb.stages = 6 : i64, tb.smem_offset = array<i64: 3200>, tb.smem_offsets_pipeline = array<i64: 3200, 9344, 15488, 21632, 27776, 33920>

// stages=3 forces the depth: 128 + 3 * 6656 = 20096.
// FORCED:      tb.smem_size = 20096 : i64
// FORCED:      %t1 = tb.input %x {{{.*}}tb.stages = 3 : i64, tb.smem_offset = array<i64: 128>, tb.smem_offsets_pipeline = array<i64: 128, 640, 1152>
// FORCED-NEXT: %t2 = tb.input %w {{{.*}}tb.stages = 3 : i64

// 8 stages do not fit 30000 B: tb-plan-smem removes stages (all inputs together) until the
// plan fits: 4 stages, 128 + 4 * 6656 = 26752.
// LIMIT:       tb.smem_size = 26752 : i64
// LIMIT:       %t1 = tb.input %x {{{.*}}tb.stages = 4 : i64, tb.smem_offset = array<i64: 128>, tb.smem_offsets_pipeline = array<i64: 128, 640, 1152, 1664>
// LIMIT-NEXT:  %t2 = tb.input %w {{{.*}}tb.stages = 4 : i64, tb.smem_offset = array<i64: 2176>, tb.smem_offsets_pipeline = array<i64: 2176, 8320, 14464, 20608>

// A 16 KiB target: 2 * 6656 * 2 >= 16384, so 3 stages.
// SMALL:       %t1 = tb.input %x {{{.*}}tb.stages = 3 : i64
// SMALL-NEXT:  %t2 = tb.input %w {{{.*}}tb.stages = 3 : i64






func.func @graph_0(%X: tensor<2x4096xf16> {kn.strides = array<i64: 4096, 1>}, %W: tensor<4096x6144xf16> {kn.strides = array<i64: 6144, 1>}) -> (tensor<2x6144xf16> {kn.strides = array<i64: 6144, 1>}) {
  %O = kn.customized(%X, %W) attributes {grid_dim = array<i64: 256, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64, reduction_dimx = 64 : i64} : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
  ^bb0(%x: tensor<2x4096xf16>, %w: tensor<4096x6144xf16>):
    %t1 = tb.input %x {tb.chain = 0 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>, input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x128xf16>
    %t2 = tb.input %w {tb.chain = 1 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 3072>, input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<128x24xf16>
    %t3 = tb.square %t1 {tb.chain = 2 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.iter_dim = 1 : i64, tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>} : !tb.stensor<2x128xf16>
    %t3_1 = tb.mul_scalar %t3 {tb.chain = 2 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>, scalar = 0.000244140625 : f64} : !tb.stensor<2x128xf16>
    %t3_2 = tb.forloop_accum nored %t3_1 {tb.chain = 2 : i64, tb.chain_pos = 2 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 128, 1>], tb.num_phy_elems = array<i64: 256>} : !tb.stensor<2x128xf16> -> !tb.stensor<2x128xf16, after_accum>
    %t3_3 = tb.reduction %t3_2 {tb.chain = 5 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 0>, tb.swizzled = array<i64: -1>, tb.iter_dim = 0 : i64, tb.strides = [array<i64: 1, 8>], tb.num_phy_elems = array<i64: 8>, dim = 1 : i64} : !tb.stensor<2x128xf16, after_accum> -> !tb.stensor<2x1xf16, after_accum>
    %t3_4 = tb.sqrt %t3_3 {tb.chain = 5 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 0>, tb.swizzled = array<i64: -1>, tb.strides = [array<i64: 1, 8>], tb.num_phy_elems = array<i64: 8>} : !tb.stensor<2x1xf16, after_accum>
    %t4 = tb.matmul %t1, %t2 {tb.chain = 7 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 48>} : !tb.stensor<2x128xf16>, !tb.stensor<128x24xf16> -> !tb.stensor<2x24xf16>
    %t5 = tb.forloop_accum nored %t4 {tb.chain = 7 : i64, tb.chain_pos = 1 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 48>} : !tb.stensor<2x24xf16> -> !tb.stensor<2x24xf16, after_accum>
    %t6 = tb.div %t5, %t3_4 {tb.chain = 9 : i64, tb.chain_pos = 0 : i64, tb.innermost = array<i64: 1>, tb.swizzled = array<i64: -1>, tb.iter_dim = 1 : i64, tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 48>} : !tb.stensor<2x24xf16, after_accum>, !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x24xf16, after_accum>
    tb.output %t6 {tb.chain = 10 : i64, tb.chain_pos = 0 : i64, output_map = array<i64: 1, -1, -1>} : !tb.stensor<2x24xf16, after_accum>
  }
  func.return %O : tensor<2x6144xf16>
}

