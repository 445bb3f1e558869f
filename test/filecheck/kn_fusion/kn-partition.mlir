// RUN: mirage-opt %s -p 'kn-partition{always-split=false hopper-attention=false}' --split-input-file | filecheck %s
// RUN: mirage-opt %s -p 'kn-partition{allow-split=false}' --split-input-file | filecheck %s --check-prefix=NOSPLIT
// RUN: mirage-opt %s -p 'kn-partition{smem-limit=16384 always-split=false}' --split-input-file | filecheck %s --check-prefix=SMALL
// RUN: mirage-opt %s -p kn-partition --split-input-file | filecheck %s --check-prefix=GRIDSUM
// RUN: mirage-opt %s -p 'kn-partition{grid-sum=false}' --split-input-file | filecheck %s --check-prefix=NOGRIDSUM

// rmsnorm_linear after kn-expand-composites and kn-simplify: ONE kernel, Mirage's best graph
// shape (mirage-notes 2.3): grid over W's columns (384 blocks of 16 columns), for-loop over K
// with 256-wide tiles (16 iterations), the rms statistic of X (red_ld_rms) beside matmul +
// nored, the division after the loop; X replicated (imap -1), W split along dim 1, output along
// dim 1.
func.func @rmsnorm_linear(%X: tensor<2x4096xf16>, %W: tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
  %sq = kn.square %X : tensor<2x4096xf16>
  %ms = kn.mul_scalar %sq {scalar = 0.000244140625 : f64} : tensor<2x4096xf16>
  %r = kn.reduction %ms {dim = 1 : i64, size = 1 : i64} : tensor<2x4096xf16> -> tensor<2x1xf16>
  %q = kn.sqrt %r : tensor<2x1xf16>
  %mm = kn.matmul %X, %W : tensor<2x4096xf16>, tensor<4096x6144xf16> -> tensor<2x6144xf16>
  %o = kn.div %mm, %q : tensor<2x6144xf16>, tensor<2x1xf16> -> tensor<2x6144xf16>
  func.return %o : tensor<2x6144xf16>
}
// CHECK-LABEL: func.func @rmsnorm_linear
// CHECK-NEXT:    %o = kn.customized(%X, %W) attributes {kn.template = "matmul_row_stats", kn.smem_estimate = {{[0-9]+}} : i64, kn.cost_estimate_us = {{.*}}, grid_dim = array<i64: 384, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 16 : i64, reduction_dimx = 64 : i64} : (tensor<2x4096xf16>, tensor<4096x6144xf16>) -> tensor<2x6144xf16> {
// CHECK-NEXT:    ^bb0(%x: tensor<2x4096xf16>, %w: tensor<4096x6144xf16>):
// CHECK-NEXT:      %[[X:.*]] = tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x256xf16>
// CHECK-NEXT:      %[[W:.*]] = tb.input %w {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<256x16xf16>
// CHECK-NEXT:      %[[RMS:.*]] = tb.forloop_accum red_ld_rms %[[X]] : !tb.stensor<2x256xf16> -> !tb.stensor<2x1xf16, after_accum>
// CHECK-NEXT:      %[[MM:.*]] = tb.matmul %[[X]], %[[W]] : !tb.stensor<2x256xf16>, !tb.stensor<256x16xf16> -> !tb.stensor<2x16xf16>
// CHECK-NEXT:      %[[ACC:.*]] = tb.forloop_accum nored %[[MM]] : !tb.stensor<2x16xf16> -> !tb.stensor<2x16xf16, after_accum>
// CHECK-NEXT:      %[[D:.*]] = tb.div %[[ACC]], %[[RMS]] : !tb.stensor<2x16xf16, after_accum>, !tb.stensor<2x1xf16, after_accum> -> !tb.stensor<2x16xf16, after_accum>
// CHECK-NEXT:      tb.output %[[D]] {output_map = array<i64: 1, -1, -1>} : !tb.stensor<2x16xf16, after_accum>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %o : tensor<2x6144xf16>
// CHECK-NOT:     kn.matmul

// With every option at its default, split-K plans compete and combine in the kernel: the
// rmsnorm kernel's split blocks meet in tb.grid_sum (option grid-sum=false: a combine kernel).
// GRIDSUM-LABEL: func.func @rmsnorm_linear
// GRIDSUM-NEXT:    %o = kn.customized(%X, %W) attributes {kn.template = "split_k_grid_sum"
// GRIDSUM-COUNT-2:   tb.grid_sum
// GRIDSUM:           tb.output {{.*}} {output_map = array<i64: 1, -1, -1>}
// GRIDSUM-NEXT:    }
// GRIDSUM-NEXT:    func.return %o
// NOGRIDSUM-LABEL: func.func @rmsnorm_linear
// NOGRIDSUM-NOT:     tb.grid_sum
// NOGRIDSUM:         kn.template = "split_k"
// NOGRIDSUM:         kn.template = "split_reduce"
// NOGRIDSUM-NOT:     tb.grid_sum

// NOSPLIT-LABEL: func.func @rmsnorm_linear
// NOSPLIT:         grid_dim = array<i64: 384, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 16 : i64

// With 16 KiB of shared memory per block the K tile halves (forloop 32; 8-column W tiles
// would stream slowly).
// SMALL-LABEL: func.func @rmsnorm_linear
// SMALL:         kn.smem_estimate = {{.*}}grid_dim = array<i64: 384, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64

// -----

// GQA after kn-simplify (exp(QK) @ V / sum(exp(QK))): TWO kernels, flash decoding.
// Kernel 1: grid (batch 2, 8 row blocks of 32 queries, 16 KV splits of 256); K and V are
// split by grid z AND walked by the for-loop along the same dim (2 iterations of 128 keys:
// with P kept in registers, cute.mma_chain, these tiles are costed cheapest); it writes
// per-block partial denominators [.,32,1] and numerators [.,32,64] side by side along the
// last dim (omap z -> 2). Kernel 2 sums the 16 partials (the numerators with a strided sum
// down to 64 = sum_todimx) and divides.
func.func @gqa(%Q: tensor<2x256x64xf16>, %K: tensor<2x64x4096xf16>, %V: tensor<2x4096x64xf16>) -> tensor<2x256x64xf16> {
  %s = kn.matmul %Q, %K : tensor<2x256x64xf16>, tensor<2x64x4096xf16> -> tensor<2x256x4096xf16>
  %e = kn.exp %s : tensor<2x256x4096xf16>
  %z = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<2x256x4096xf16> -> tensor<2x256x1xf16>
  %n = kn.matmul %e, %V : tensor<2x256x4096xf16>, tensor<2x4096x64xf16> -> tensor<2x256x64xf16>
  %o = kn.div %n, %z : tensor<2x256x64xf16>, tensor<2x256x1xf16> -> tensor<2x256x64xf16>
  func.return %o : tensor<2x256x64xf16>
}
// CHECK-LABEL: func.func @gqa
// CHECK-NEXT:    %[[Z:.*]], %[[N:.*]] = kn.customized(%Q, %K, %V) attributes {kn.template = "flash_decoding", {{.*}}grid_dim = array<i64: 2, 8, 16>, block_dim = array<i64: 128, 1, 1>, forloop_range = 2 : i64, reduction_dimx = 64 : i64} : (tensor<2x256x64xf16>, tensor<2x64x4096xf16>, tensor<2x4096x64xf16>) -> (tensor<2x256x16xf16>, tensor<2x256x1024xf16>) {
// CHECK:           %[[TQ:.*]] = tb.input %q {input_map = array<i64: 0, 1, -1>, forloop_dim = -1 : i64} : tensor<2x256x64xf16> -> !tb.stensor<1x32x64xf16>
// CHECK-NEXT:      %[[TK:.*]] = tb.input %k {input_map = array<i64: 0, -1, 2>, forloop_dim = 2 : i64} : tensor<2x64x4096xf16> -> !tb.stensor<1x64x128xf16>
// CHECK-NEXT:      %[[TV:.*]] = tb.input %v {input_map = array<i64: 0, -1, 1>, forloop_dim = 1 : i64} : tensor<2x4096x64xf16> -> !tb.stensor<1x128x64xf16>
// CHECK-NEXT:      %[[S:.*]] = tb.matmul %[[TQ]], %[[TK]]
// CHECK-NEXT:      %[[E:.*]] = tb.exp %[[S]] : !tb.stensor<1x32x128xf16>
// CHECK-NEXT:      %[[DEN:.*]] = tb.forloop_accum red_ld_sum %[[E]] : !tb.stensor<1x32x128xf16> -> !tb.stensor<1x32x1xf16, after_accum>
// CHECK-NEXT:      %[[PV:.*]] = tb.matmul %[[E]], %[[TV]] : !tb.stensor<1x32x128xf16>, !tb.stensor<1x128x64xf16> -> !tb.stensor<1x32x64xf16>
// CHECK-NEXT:      %[[NUM:.*]] = tb.forloop_accum nored %[[PV]]
// CHECK-NEXT:      tb.output %[[DEN]] {output_map = array<i64: 0, 1, 2>} : !tb.stensor<1x32x1xf16, after_accum>
// CHECK-NEXT:      tb.output %[[NUM]] {output_map = array<i64: 0, 1, 2>} : !tb.stensor<1x32x64xf16, after_accum>
// CHECK-NEXT:    }
// CHECK-NEXT:    %o = kn.customized(%[[Z]], %[[N]]) attributes {kn.template = "split_reduce", {{.*}}forloop_range = 1 : i64, reduction_dimx = 64 : i64} : (tensor<2x256x16xf16>, tensor<2x256x1024xf16>) -> tensor<2x256x64xf16> {
// CHECK:           tb.reduction {{.*}} : !tb.stensor<{{.*}}x16xf16> -> !tb.stensor<{{.*}}x1xf16>
// CHECK-NEXT:      tb.reduction_to_dimx {{.*}} {dim = 2 : i64} : !tb.stensor<{{.*}}x1024xf16> -> !tb.stensor<{{.*}}x64xf16>
// CHECK-NEXT:      tb.div
// CHECK-NEXT:      tb.forloop_accum nored
// CHECK-NEXT:      tb.output
// CHECK:         func.return %o

// Without split-K: one kernel that also splits the head dim to fill the SMs (16-column V
// tiles; its 256-key tiles of P stay in registers).
// NOSPLIT-LABEL: func.func @gqa
// NOSPLIT:         kn.customized(%Q, %K, %V) attributes {kn.template = "attention", {{.*}}grid_dim = array<i64: 2, 16, 4>
// NOSPLIT-NOT:     kn.customized
// NOSPLIT:         func.return %o

// -----

// Unsimplified softmax: exp/sum/div cannot share a for-loop with the final matmul (the
// division needs the complete sum). The fallback partition still fuses what it can.
func.func @softmax_unsimplified(%Q: tensor<2x64x64xf32>, %K: tensor<2x64x512xf32>, %V: tensor<2x512x64xf32>) -> tensor<2x64x64xf32> {
  %s = kn.matmul %Q, %K : tensor<2x64x64xf32>, tensor<2x64x512xf32> -> tensor<2x64x512xf32>
  %e = kn.exp %s : tensor<2x64x512xf32>
  %z = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<2x64x512xf32> -> tensor<2x64x1xf32>
  %p = kn.div %e, %z : tensor<2x64x512xf32>, tensor<2x64x1xf32> -> tensor<2x64x512xf32>
  %o = kn.matmul %p, %V : tensor<2x64x512xf32>, tensor<2x512x64xf32> -> tensor<2x64x64xf32>
  func.return %o : tensor<2x64x64xf32>
}
// Kernel 1: scores, exp and the row sums; kernel 2: division and the second matmul.
// CHECK-LABEL: func.func @softmax_unsimplified
// CHECK:         %e, %z = kn.customized(%Q, %K)
// CHECK:           tb.exp
// CHECK:           tb.reduction
// CHECK:         %o = kn.customized(%e, %z, %V)
// CHECK:           tb.div
// CHECK-NEXT:      tb.matmul
// CHECK:         func.return %o

// -----

// A lone matmul this small becomes a generated kernel (a library GEMM only where it is
// estimated cheaper: kn_partition.library_gemm_us); ops the planner cannot place (concat)
// are barriers.
func.func @barriers(%a: tensor<16x64xf16>, %b: tensor<64x32xf16>, %c: tensor<16x32xf16>) -> tensor<16x64xf16> {
  %m = kn.matmul %a, %b : tensor<16x64xf16>, tensor<64x32xf16> -> tensor<16x32xf16>
  %j = kn.concat %m, %c {dim = 1 : i64} : tensor<16x32xf16>, tensor<16x32xf16> -> tensor<16x64xf16>
  %e = kn.exp %j : tensor<16x64xf16>
  %r = kn.relu %e : tensor<16x64xf16>
  func.return %r : tensor<16x64xf16>
}
// CHECK-LABEL: func.func @barriers
// CHECK-NEXT:    %m = kn.customized(%a, %b) attributes {kn.template = "matmul_epilogue"
// CHECK:         %j = kn.concat %m, %c
// CHECK-NEXT:    %r = kn.customized(%j) attributes {kn.template = "rowwise"
// CHECK:           tb.exp
// CHECK-NEXT:      tb.relu
// CHECK:         func.return %r

// -----

// gated_mlp: both matmuls share the X tile; silu and mul run after the loop; one lone block
// of 512 threads per SM on 32-column W tiles (DeviceModel.lone_matmul_block_threads). With a
// tight shared-memory limit and no split-K plans: 128-thread blocks on 8-column tiles, and
// the K tile halves (forloop 32).

func.func @gated(%X: tensor<8x4096xf16>, %W1: tensor<4096x4096xf16>, %W2: tensor<4096x4096xf16>) -> tensor<8x4096xf16> {
  %a = kn.matmul %X, %W1 : tensor<8x4096xf16>, tensor<4096x4096xf16> -> tensor<8x4096xf16>
  %s = kn.silu %a : tensor<8x4096xf16>
  %b = kn.matmul %X, %W2 : tensor<8x4096xf16>, tensor<4096x4096xf16> -> tensor<8x4096xf16>
  %o = kn.mul %s, %b : tensor<8x4096xf16>, tensor<8x4096xf16> -> tensor<8x4096xf16>
  func.return %o : tensor<8x4096xf16>
}
// CHECK-LABEL: func.func @gated
// CHECK-NEXT:    %o = kn.customized(%X, %W1, %W2) attributes {kn.template = "multi_matmul_shared_operand", {{.*}}grid_dim = array<i64: 128, 1, 1>, block_dim = array<i64: 512, 1, 1>, forloop_range = 16 : i64
// CHECK:           tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<8x4096xf16> -> !tb.stensor<8x256xf16>
// CHECK-NEXT:      tb.input %w1 {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x4096xf16> -> !tb.stensor<256x32xf16>
// CHECK-NEXT:      tb.input %w2 {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x4096xf16> -> !tb.stensor<256x32xf16>
// CHECK-NEXT:      tb.matmul
// CHECK-NEXT:      tb.forloop_accum nored
// CHECK-NEXT:      tb.silu
// CHECK-NEXT:      tb.matmul
// CHECK-NEXT:      tb.forloop_accum nored
// CHECK-NEXT:      tb.mul
// CHECK-NEXT:      tb.output {{.*}}output_map = array<i64: 1, -1, -1>
// SMALL-LABEL: func.func @gated
// SMALL:         kn.smem_estimate = {{([0-9]{1,4}|1[0-5][0-9]{3}|16[0-3][0-9]{2})}} : i64, {{.*}}grid_dim = array<i64: 512, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 32 : i64

// -----

// Stable prefill attention (8 heads, 1024 queries and keys, d = 64): nothing fuses it
// without a running max, and its 8 x 16 blocks of 64 query rows fill the SMs, so the planner
// keeps the online-softmax plan (DeviceModel.auto_online_softmax): ONE kernel of 4 warps,
// Mirage's running tb.reduction_max with rescaled accumulators over 64-key tiles, which
// convert-tb-to-cute lowers to a flash cute.mma_chain (test/filecheck/codegen/online-chain.mlir).
// Decode attention, whose grid over query rows leaves most SMs idle, keeps its partition
// (test_kn_fusion.py: mha_stable).

func.func @prefill(%Q: tensor<8x1024x64xf16>, %K: tensor<8x64x1024xf16> {kn.strides = array<i64: 65536, 1, 64>}, %V: tensor<8x1024x64xf16>) -> tensor<8x1024x64xf16> {
  %s = kn.matmul %Q, %K : tensor<8x1024x64xf16>, tensor<8x64x1024xf16> -> tensor<8x1024x1024xf16>
  %c = kn.mul_scalar %s {scalar = 0.125 : f64} : tensor<8x1024x1024xf16>
  %m = kn.reduction_max %c {dim = 2 : i64} : tensor<8x1024x1024xf16> -> tensor<8x1024x1xf16>
  %d = kn.sub %c, %m : tensor<8x1024x1024xf16>, tensor<8x1024x1xf16> -> tensor<8x1024x1024xf16>
  %e = kn.exp %d : tensor<8x1024x1024xf16>
  %l = kn.reduction %e {dim = 2 : i64, size = 1 : i64} : tensor<8x1024x1024xf16> -> tensor<8x1024x1xf16>
  %pv = kn.matmul %e, %V : tensor<8x1024x1024xf16>, tensor<8x1024x64xf16> -> tensor<8x1024x64xf16>
  %o = kn.div %pv, %l : tensor<8x1024x64xf16>, tensor<8x1024x1xf16> -> tensor<8x1024x64xf16>
  func.return %o : tensor<8x1024x64xf16>
}
// CHECK-LABEL: func.func @prefill
// CHECK-NEXT:    %o = kn.customized(%Q, %K, %V) attributes {kn.template = "attention", {{.*}}grid_dim = array<i64: 8, 16, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 16 : i64
// CHECK:           tb.input %k {{.*}}forloop_dim = 2 : i64} : tensor<8x64x1024xf16> -> !tb.stensor<1x64x64xf16>
// CHECK:           tb.reduction_max
// CHECK:           tb.forloop_accum red_ld_sum_rescale
// CHECK:           tb.forloop_accum nored_rescale
// CHECK-NOT:     kn.customized
