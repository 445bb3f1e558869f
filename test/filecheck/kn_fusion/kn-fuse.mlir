// kn-fuse (expand -> simplify -> recognize -> partition) on every example kernel graph, and the
// fused output through the transpiler pipeline.
// RUN: mirage-opt %S/../../../examples/rmsnorm_linear.mlir -p 'kn-fuse{always-split=false}' | filecheck %s --check-prefix=RMS
// RUN: mirage-opt %S/../../../examples/rmsnorm_linear.mlir -p kn-fuse | filecheck %s --check-prefix=GRIDSUM
// RUN: mirage-opt %S/../../../examples/gated_mlp.mlir -p 'kn-fuse{always-split=false}' | filecheck %s --check-prefix=MLP
// RUN: mirage-opt %S/../../../examples/lora.mlir -p kn-fuse | filecheck %s --check-prefix=LORA
// RUN: mirage-opt %S/../../../examples/ntrans.mlir -p kn-fuse | filecheck %s --check-prefix=NTRANS
// RUN: mirage-opt %S/../../../examples/gqa.mlir -p kn-fuse | filecheck %s --check-prefix=GQA
// RUN: mirage-opt %S/../../../examples/mha.mlir -p kn-fuse | filecheck %s --check-prefix=MHA
// RUN: mirage-opt %S/../../../examples/mqa.mlir -p kn-fuse | filecheck %s --check-prefix=MQA
// RUN: mirage-opt %S/../../../examples/rmsnorm_linear.mlir -p 'kn-fuse,mirage-transpile{to-cute=false}' | filecheck %s --check-prefix=PIPE

// rms_norm(X) @ W without split-K plans: one kernel, red_ld_rms beside matmul + nored, div
// after the loop (Mirage's plan).
// RMS-LABEL: func.func @rmsnorm_linear
// RMS-NEXT:    %o = kn.customized(%X, %W) attributes {kn.template = "matmul_row_stats", {{.*}}grid_dim = array<i64: 384, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 16 : i64
// RMS:           tb.input %x {input_map = array<i64: -1, -1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x256xf16>
// RMS-NEXT:      tb.input %w {input_map = array<i64: 1, -1, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<256x16xf16>
// RMS-NEXT:      tb.forloop_accum red_ld_rms
// RMS-NEXT:      tb.matmul
// RMS-NEXT:      tb.forloop_accum nored
// RMS-NEXT:      tb.div
// RMS-NEXT:      tb.output {{.*}} {output_map = array<i64: 1, -1, -1>}
// RMS-NOT:     kn.

// The default: split-K over 4 blocks per 64-column tile (64-row K tiles, 16 iterations: W is
// a kn.weight, and the estimate counts the deep ring tb-plan-pipeline gives it), combined in
// the kernel: the partial matmul and sum of squares meet in tb.grid_sum, the last block
// divides and stores.
// GRIDSUM-LABEL: func.func @rmsnorm_linear
// GRIDSUM-NEXT:    %o = kn.customized(%X, %W) attributes {kn.template = "split_k_grid_sum", {{.*}}grid_dim = array<i64: 96, 4, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 16 : i64
// GRIDSUM:           tb.input %x {input_map = array<i64: -1, 1, -1>, forloop_dim = 1 : i64} : tensor<2x4096xf16> -> !tb.stensor<2x64xf16>
// GRIDSUM-NEXT:      tb.input %w {input_map = array<i64: 1, 0, -1>, forloop_dim = 0 : i64} : tensor<4096x6144xf16> -> !tb.stensor<64x64xf16>
// GRIDSUM-DAG:       %[[SS:.*]] = tb.forloop_accum red_ld_sum
// GRIDSUM-DAG:       %[[MM:.*]] = tb.forloop_accum nored
// GRIDSUM-DAG:       tb.grid_sum %[[SS]] {dim = 1 : i64}
// GRIDSUM-DAG:       tb.grid_sum %[[MM]] {dim = 1 : i64}
// GRIDSUM:           tb.div
// GRIDSUM-NEXT:      tb.output {{.*}} {output_map = array<i64: 1, -1, -1>}
// GRIDSUM-NOT:     kn.

// silu(X @ W1) * (X @ W2) without split-K plans: two matmuls share the X tile; silu and mul
// after the loop; one lone 512-thread block per SM.
// MLP-LABEL: func.func @gated_mlp
// MLP-NEXT:    %o = kn.customized(%X, %W1, %W2) attributes {kn.template = "multi_matmul_shared_operand", {{.*}}grid_dim = array<i64: 128, 1, 1>, block_dim = array<i64: 512, 1, 1>, forloop_range = 16 : i64
// MLP:           %[[X:.*]] = tb.input %x {{.*}} -> !tb.stensor<8x256xf16>
// MLP:           tb.matmul %[[X]]
// MLP:           tb.silu
// MLP:           tb.matmul %[[X]]
// MLP:           tb.mul
// MLP-NOT:     kn.

// X @ W + (X @ A) @ B: 3 matmuls + add in one kernel with forloop 1, 128 blocks of 32 W
// columns (one pass: the MMA time is one K chain, so fewer blocks that load X and A half as
// often win).
// LORA-LABEL: func.func @lora
// LORA-NEXT:    %o = kn.customized(%X, %W, %A, %B) attributes {kn.template = "multi_matmul_shared_operand", {{.*}}grid_dim = array<i64: 128, 1, 1>, block_dim = array<i64: 128, 1, 1>, forloop_range = 1 : i64
// LORA-COUNT-3:  tb.matmul
// LORA-NEXT:     tb.add
// LORA-NOT:     kn.

// nTrans: a row-wise kernel, one row per 512-thread block (8 blocks leave most SMs idle, so
// each block gets more threads), tb.rms_norm twice.
// NTRANS-LABEL: func.func @ntrans
// NTRANS-NEXT:    %o = kn.customized(%H, %X, %alpha) attributes {kn.template = "rowwise", {{.*}}grid_dim = array<i64: 8, 1, 1>, block_dim = array<i64: 512, 1, 1>, forloop_range = 1 : i64
// NTRANS-COUNT-2:  tb.rms_norm
// NTRANS-NOT:     kn.

// Attention: flash decoding (32 query rows x 128 keys per iteration: P stays in registers,
// cute.mma_chain), partials along the last dim, then the split_reduce kernel.
// GQA-LABEL: func.func @gqa
// GQA-NEXT:    %o_part0, %o_part1 = kn.customized(%Q, %K, %V) attributes {kn.template = "flash_decoding", {{.*}}grid_dim = array<i64: 2, 8, 16>, {{.*}}forloop_range = 2 : i64
// GQA:           tb.output {{.*}}output_map = array<i64: 0, 1, 2>
// GQA-NEXT:      tb.output {{.*}}output_map = array<i64: 0, 1, 2>
// GQA:         %o = kn.customized(%o_part0, %o_part1) attributes {kn.template = "split_reduce"
// GQA:           tb.reduction_to_dimx
// GQA:           tb.div
// GQA:         func.return %o
// MHA-LABEL: func.func @mha
// MHA-NEXT:    kn.customized(%Q, %K, %V) attributes {kn.template = "flash_decoding", {{.*}}grid_dim = array<i64: 32, 4, 1>, {{.*}}forloop_range = 4 : i64
// MHA:         %o = kn.customized(%o_part0, %o_part1) attributes {kn.template = "split_reduce"
// MQA-LABEL: func.func @mqa
// MQA-NEXT:    kn.customized(%Q, %K, %V) attributes {kn.template = "flash_decoding", {{.*}}grid_dim = array<i64: 32, 8, 1>, {{.*}}forloop_range = 4 : i64
// MQA:         %o = kn.customized(%o_part0, %o_part1) attributes {kn.template = "split_reduce"

// The transpiler accepts the fused kernel (passes 1-9 of passes/README.md).
// PIPE-LABEL: func.func @rmsnorm_linear
// PIPE:         kn.customized(%X, %W)
// PIPE-SAME:      tb.smem_size =
// PIPE:           tb.forloop_accum nored {{.*}}tb.accum_in_reg
