// RUN: mirage-opt %s -p tb-schedule,tb-plan-swizzle --split-input-file | filecheck %s
// RUN: mirage-opt %s -p 'tb-schedule,tb-plan-swizzle{hopper-gmma=true}' --split-input-file | filecheck %s --check-prefix=HOPPER

// rmsnorm_bs1 graph 0 (mirage-notes 2.3) after passes 1-5.
// X tile [2,128] fp16, rows of 16 chunks of 16 B (a power of two): XOR Swizzle<3,3,4>.
// W tile [128,24]: 3 chunks per row, odd, already coprime with the 8 chunks of 128 B:
// "shift" without padding (strides stay [24,1]).
// The register accumulator [2,24] is written back to shared memory in fp32 (our storage
// rule, passes/README.md), so its rows hold 6 chunks of 16 B, not 3: the shift pads them to
// 7 chunks (28 floats). Mirage's fp16 accumulator would need no padding (notes 2.3); we
// decide differently on purpose (fp32 accumulation). The fp32 smem accumulator of the rms
// chain is only read element-wise (4-B chunks, 128 per row): Swizzle<5,0,7>, as Mirage's
// rule gives for 4-byte chunks. Chain-internal results (%t3, %t3_1, %t4) are never stored.

// CHECK-LABEL: func.func @graph_0
// CHECK:         %t1 = tb.input %x {{{.*}}tb.swizzle = ["xor<3,3,4>"]
// CHECK-NEXT:    %t2 = tb.input %w {{{.*}}tb.strides = [array<i64: 24, 1>], tb.num_phy_elems = array<i64: 3072>, {{.*}}tb.swizzle = ["shift"]
// CHECK-NEXT:    %t3 = tb.square %t1 {{{.*}}tb.swizzle = ["none"]
// CHECK-NEXT:    %t3_1 = tb.mul_scalar %t3 {{{.*}}tb.swizzle = ["none"]
// CHECK-NEXT:    %t3_2 = tb.forloop_accum nored %t3_1 {{{.*}}tb.swizzle = ["xor<5,0,7>"]
// CHECK-NEXT:    %t4 = tb.matmul %t1, %t2 {{{.*}}tb.swizzle = ["none"]
// CHECK-NEXT:    %t5 = tb.forloop_accum nored %t4 {{{.*}}tb.strides = [array<i64: 28, 1>], tb.num_phy_elems = array<i64: 56>, {{.*}}tb.swizzle = ["shift"]
// CHECK-NEXT:    %t3_3 = tb.reduction %t3_2 {{{.*}}tb.swizzle = ["none"]
// CHECK-NEXT:    %t3_4 = tb.sqrt %t3_3 {{{.*}}tb.swizzle = ["none"]
// CHECK-NEXT:    %t6 = tb.div %t5, %t3_4 {{{.*}}tb.swizzle = ["none"]
// CHECK-NEXT:    tb.output %t6

// Hopper: GMMA canonical atoms over byte offsets, B by the row length in bytes.
// HOPPER-LABEL: func.func @graph_0
// HOPPER:         %t1 = tb.input %x {{{.*}}tb.swizzle = ["xor<3,4,3>"]
// HOPPER-NEXT:    %t2 = tb.input %w {{{.*}}tb.swizzle = ["xor<0,4,3>"]
// HOPPER:         %t3_2 = tb.forloop_accum nored %t3_1 {{{.*}}tb.swizzle = ["xor<3,4,3>"]
// HOPPER:         %t5 = tb.forloop_accum nored %t4 {{{.*}}tb.strides = [array<i64: 24, 1>], {{.*}}tb.swizzle = ["xor<1,4,3>"]

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

// A matmul operand [64,48] fp16: 6 chunks of 16 B per row, not a power of two and not
// coprime with 8: shift to 7 chunks, row stride 56 halves; the tile grows to 64*56 elements.
// The other operand [64,64]: 8 chunks -> Swizzle<3,3,3>.

// CHECK-LABEL: func.func @shift_padding
// CHECK:         %ta = tb.input %a {{{.*}}tb.swizzle = ["xor<3,3,3>"]
// CHECK-NEXT:    %tb = tb.input %b {{{.*}}tb.strides = [array<i64: 56, 1>], tb.num_phy_elems = array<i64: 3584>, {{.*}}tb.swizzle = ["shift"]
// HOPPER-LABEL: func.func @shift_padding
// HOPPER:         %ta = tb.input %a {{{.*}}tb.swizzle = ["xor<3,4,3>"]
// HOPPER-NEXT:    %tb = tb.input %b {{{.*}}tb.strides = [array<i64: 48, 1>], tb.num_phy_elems = array<i64: 3072>, {{.*}}tb.swizzle = ["xor<1,4,3>"]

func.func @shift_padding(%A: tensor<64x256xf16>, %B: tensor<256x48xf16>) -> tensor<64x48xf16> {
  %O = kn.customized(%A, %B) attributes {grid_dim = array<i64: 1, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 4 : i64, reduction_dimx = 64 : i64} : (tensor<64x256xf16>, tensor<256x48xf16>) -> tensor<64x48xf16> {
  ^bb0(%a: tensor<64x256xf16>, %b: tensor<256x48xf16>):
    %ta = tb.input %a {tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 64, 1>], tb.num_phy_elems = array<i64: 4096>, input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<64x256xf16> -> !tb.stensor<64x64xf16>
    %tb = tb.input %b {tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 48, 1>], tb.num_phy_elems = array<i64: 3072>, input_map = array<i64: -1, -1, -1>, forloop_dim = 0 : i64} : tensor<256x48xf16> -> !tb.stensor<64x48xf16>
    %m = tb.matmul %ta, %tb {tb.innermost = array<i64: 1>, tb.swizzled = array<i64: 0>, tb.strides = [array<i64: 48, 1>], tb.num_phy_elems = array<i64: 3072>} : !tb.stensor<64x64xf16>, !tb.stensor<64x48xf16> -> !tb.stensor<64x48xf16>
    %acc = tb.forloop_accum nored %m {tb.innermost = array<i64: 1>, tb.swizzled = array<i64: -1>, tb.strides = [array<i64: 48, 1>], tb.num_phy_elems = array<i64: 3072>} : !tb.stensor<64x48xf16> -> !tb.stensor<64x48xf16, after_accum>
    tb.output %acc {output_map = array<i64: -1, -1, -1>} : !tb.stensor<64x48xf16, after_accum>
  }
  func.return %O : tensor<64x48xf16>
}
