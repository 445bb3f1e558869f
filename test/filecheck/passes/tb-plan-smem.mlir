// RUN: mirage-opt %s -p tb-schedule,tb-plan-swizzle,tb-plan-smem --split-input-file | filecheck %s
// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-smem{smem-limit=10240}' --split-input-file | filecheck %s --check-prefix=SINGLE
// RUN: not mirage-opt %s -p 'tb-schedule,tb-plan-swizzle,tb-plan-smem{smem-limit=4096}' --split-input-file 2>&1 | filecheck %s --check-prefix=ERR

// rmsnorm_bs1 graph 0 (mirage-notes 2.3). 128-B header, then: both pipelined inputs with two
// buffers each (no tb-plan-pipeline ran: no tb.stages, so 2 stages) for the whole loop (X
// 2*512 B, W 2*6144 B). Chain-internal tiles get -1. Both accumulators live in registers
// through the loop (tb.accum_in_reg): after it, the fp32 rms accumulator [2,128] (1024 B),
// the matmul accumulator's write-back (2 x 28 floats after the shift swizzle), the rms [2,1]
// (16 B) and the quotient [2,24] reuse the freed input buffers (Mirage keeps the rms
// accumulator's 1024 B for the whole loop). 13440 = 128 + 13312, the lower bound: a
// heuristic reaches it, no CP-SAT needed.

// CHECK-LABEL: func.func @graph_0
// CHECK:         kn.customized
// CHECK-SAME:      tb.smem_size = 13440 : i64, tb.smem_planner = "first-fit"
// CHECK:         %t1 = tb.input %x {{{.*}}tb.smem_offset = array<i64: 128>, tb.smem_offsets_pipeline = array<i64: 128, 640>, tb.stages = 2 : i64
// CHECK-NEXT:    %t2 = tb.input %w {{{.*}}tb.smem_offset = array<i64: 1152>, tb.smem_offsets_pipeline = array<i64: 1152, 7296>, tb.stages = 2 : i64
// CHECK-NEXT:    %t3 = tb.square %t1 {{{.*}}tb.smem_offset = array<i64: -1>
// CHECK-NEXT:    %t3_1 = tb.mul_scalar %t3 {{{.*}}tb.smem_offset = array<i64: -1>
// CHECK-NEXT:    %t3_2 = tb.forloop_accum nored %t3_1 {{{.*}}tb.smem_offset = array<i64: 128>
// CHECK-NEXT:    %t4 = tb.matmul %t1, %t2 {{{.*}}tb.smem_offset = array<i64: -1>
// CHECK-NEXT:    %t5 = tb.forloop_accum nored %t4 {{{.*}}tb.smem_offset = array<i64: 1152>
// CHECK-NEXT:    %t3_3 = tb.reduction %t3_2 {{{.*}}tb.smem_offset = array<i64: -1>
// CHECK-NEXT:    %t3_4 = tb.sqrt %t3_3 {{{.*}}tb.smem_offset = array<i64: 1376>
// CHECK-NEXT:    %t6 = tb.div %t5, %t3_4 {{{.*}}tb.smem_offset = array<i64: 128>
// CHECK-NEXT:    tb.output %t6

// With 10 KiB the double buffers do not fit: the largest pipelined input (W) is loaded
// single-buffered, which is enough: 7296 = 128 + 2*512 + 6144.
// SINGLE-LABEL: func.func @graph_0
// SINGLE:         tb.smem_size = 7296 : i64
// SINGLE:         %t1 = tb.input %x {{{.*}}tb.chunked, tb.pipelined, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["xor<3,3,4>"], tb.smem_offset = array<i64: {{[0-9]+}}>, tb.smem_offsets_pipeline
// SINGLE-NEXT:    %t2 = tb.input %w {{{.*}}tb.chunked, tb.stage = "loop", tb.level = 0 : i64, tb.swizzle = ["shift"], tb.smem_offset = array<i64: {{[0-9]+}}>, input_map

// With 4 KiB nothing helps: a located error.
// ERR: error: tb-plan-smem: kn.customized #0 in @graph_0 needs 6784 bytes of shared memory per block (lower bound 6784 B incl. the header, already without double-buffered loads), more than the limit of 4096 bytes; use smaller tiles: a larger grid_dim or forloop_range

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

// -----

// A pre-loop input lives until the loop ends (it is read in every iteration); the
// pipelined input's two buffers too; the register accumulator [16,64] fp32 (4 KiB) and
// exp's result only exist after the loop and reuse that space.

// CHECK-LABEL: func.func @pre_loop
// 17536 = 128 + 16*64*2 (A, rows padded to 64) + 2 * 60*64*2.
// CHECK:         tb.smem_size = 17536 : i64
// CHECK:         %ta = tb.input %a {{{.*}}tb.smem_offset = array<i64: 128>
// CHECK-NEXT:    %tb = tb.input %b {{{.*}}tb.smem_offset = array<i64: 2176>, tb.smem_offsets_pipeline = array<i64: 2176, 9856>, tb.stages = 2 : i64
// CHECK-NEXT:    %m = tb.matmul %ta, %tb {{{.*}}tb.smem_offset = array<i64: -1>
// CHECK-NEXT:    %acc = tb.forloop_accum nored %m {{{.*}}tb.smem_offset = array<i64: 128>
// CHECK-NEXT:    %e = tb.exp %acc {{{.*}}tb.smem_offset = array<i64: 4224>

func.func @pre_loop(%A: tensor<16x60xf16> {kn.strides = array<i64: 60, 1>}, %B: tensor<60x4096xf16> {kn.strides = array<i64: 4096, 1>}) -> (tensor<16x1024xf16>) {
  %O = kn.customized(%A, %B) attributes {grid_dim = array<i64: 16, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<16x60xf16>, tensor<60x4096xf16>) -> (tensor<16x1024xf16>) {
  ^bb0(%a: tensor<16x60xf16>, %b: tensor<60x4096xf16>):
    %ta = tb.input %a {input_map = array<i64: -1, -1, -1>, forloop_dim = -1 : i64} : tensor<16x60xf16> -> !tb.stensor<16x60xf16>
    %tb = tb.input %b {input_map = array<i64: 1, -1, -1>, forloop_dim = 1 : i64} : tensor<60x4096xf16> -> !tb.stensor<60x64xf16>
    %m = tb.matmul %ta, %tb : !tb.stensor<16x60xf16>, !tb.stensor<60x64xf16> -> !tb.stensor<16x64xf16>
    %acc = tb.forloop_accum nored %m : !tb.stensor<16x64xf16> -> !tb.stensor<16x64xf16, after_accum>
    %e = tb.exp %acc : !tb.stensor<16x64xf16, after_accum>
    tb.output %e {output_map = array<i64: 1, -1, -1>} : !tb.stensor<16x64xf16, after_accum>
  }
  func.return %O : tensor<16x1024xf16>
}
